/**
 * A real php-fpm for FastCGI tests: Debian's `php-fpm` (any version, found by
 * glob) started in the foreground with its own global and pool
 * configuration (`-n`: no php.ini), listening on 127.0.0.1:PORT or on a unix
 * socket in a temp directory, stopped by pid at cleanup. Also a counting TCP
 * relay, to see how many connections a server opens to php-fpm.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { freePort, onCleanup, portOpen, startDaemon, tempDir, waitFor } from './harness.js';

/** The php-fpm binary (`/usr/sbin/php-fpm*`), or undefined when none is installed. */
export function phpFpmBinary(): string | undefined {
  const dir = '/usr/sbin';
  if (!existsSync(dir)) return undefined;
  const found = readdirSync(dir).filter((f) => /^php-fpm[\d.]*$/.test(f)).sort();
  return found.length > 0 ? join(dir, found[found.length - 1]!) : undefined;
}

/** `skip` option for tests that need php-fpm. */
export const NO_PHP_FPM: string | false = phpFpmBinary() ? false : 'no php-fpm installed (test/prepare.sh installs it)';

/** A running php-fpm. */
export interface PhpFpm {
  /** Its TCP port on 127.0.0.1, when it listens on TCP. */
  readonly port: number | undefined;
  /** Its socket path, when it listens on a unix socket. */
  readonly socket: string | undefined;
  /** What php-fpm wrote to its own error log so far. */
  log(): string;
}

/**
 * Starts php-fpm with a static pool of `children` workers on a free TCP port
 * (or a unix socket with `unix: true`), and waits until it accepts
 * connections. `poolExtra` lines are appended to the pool section.
 */
export async function startPhpFpm(opts: { unix?: boolean; children?: number; poolExtra?: string } = {}): Promise<PhpFpm> {
  const binary = phpFpmBinary();
  if (!binary) throw new Error('no php-fpm installed');
  const dir = tempDir('jinx-php-fpm-');
  const port = opts.unix ? undefined : await freePort();
  const socket = opts.unix ? join(dir, 'php-fpm.sock') : undefined;
  const logFile = join(dir, 'php-fpm.log');
  writeFileSync(join(dir, 'php-fpm.conf'), `[global]
pid = ${dir}/php-fpm.pid
error_log = ${logFile}
daemonize = no
[test]
listen = ${socket ?? `127.0.0.1:${port}`}
listen.mode = 0666
pm = static
pm.max_children = ${opts.children ?? 4}
${opts.poolExtra ?? ''}
`);
  const args = ['-F', '-n', '-y', join(dir, 'php-fpm.conf'), '-p', dir];
  if (process.getuid?.() === 0) args.push('-R');
  const daemon = startDaemon(binary, args, 'SIGQUIT');
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  const ready = async (): Promise<boolean> => daemon.exited() || (socket ? existsSync(socket) && (await unixOpen(socket)) : portOpen(port!));
  await waitFor(ready, 10_000, `php-fpm on ${socket ?? port}`);
  if (daemon.exited()) throw new Error(`php-fpm exited during start:\n${daemon.stderr()}${log()}`);
  return { port, socket, log };
}

function unixOpen(path: string): Promise<boolean> {
  return new Promise((res) => {
    const s = connect({ path });
    s.once('connect', () => {
      s.destroy();
      res(true);
    });
    s.once('error', () => res(false));
  });
}

/** A TCP relay on 127.0.0.1 to another local port, counting the connections it accepted. */
export interface CountingRelay {
  readonly port: number;
  connections(): number;
}

/** Starts a relay to 127.0.0.1:`target`; stopped with its sockets at cleanup. */
export async function countingRelay(target: number): Promise<CountingRelay> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const track = (s: Socket): void => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  };
  const server = createServer((client) => {
    connections++;
    const upstream = connect({ host: '127.0.0.1', port: target });
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}
