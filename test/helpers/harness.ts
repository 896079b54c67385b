/**
 * Test harness: temp prefixes, free ports, jinx started as a real process
 * (`bin/jinx -p PREFIX/ -c PREFIX/nginx.conf`, as nginx is started), plain
 * upstream servers on 127.0.0.1, and the reference nginx when installed.
 * Every process and server a test starts is stopped by `cleanup()`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { createServer as createTlsServer } from 'node:tls';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root (where bin/jinx is). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const JINX = join(ROOT, 'bin/jinx');
/** The shared corpus and scenario next to the checkout. */
export const SHARED = resolve(ROOT, '../shared');

const cleanups: (() => void | Promise<void>)[] = [];

/** Registers something to undo in `cleanup()`. */
export function onCleanup(fn: () => void | Promise<void>): void {
  cleanups.push(fn);
}

/** Runs every registered cleanup, newest first. Call from `after()`/`afterEach()`. */
export async function cleanup(): Promise<void> {
  while (cleanups.length > 0) await cleanups.pop()!();
}

/** A fresh directory, removed at cleanup. Ends without `/`. */
export function tempDir(prefix = 'jinx-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // started as root, nginx's workers and jinx's run as nobody: they must reach what is made here
  chmodSync(dir, 0o755);
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `files` (relative path → content) under `dir`, creating directories. */
export function writeFiles(dir: string, files: Readonly<Record<string, string | Buffer>>): void {
  for (const [rel, content] of Object.entries(files)) {
    const path = join(dir, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
}

/** The ports `freePort` gave this process: the kernel may offer one again once it is closed. */
const handedOut = new Set<number>();

/**
 * A TCP port free on 127.0.0.1 right now, and not given before in this
 * process (two ports of one configuration taken in a row were once the
 * same, making one server's `listen` another's).
 */
export async function freePort(): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = await anyFreePort();
    if (!handedOut.has(port) || tries >= 100) {
      handedOut.add(port);
      return port;
    }
  }
}

/** A TCP port free on 127.0.0.1 right now. */
function anyFreePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createNetServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolvePort(port));
    });
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      res(true);
    });
    s.once('error', () => res(false));
  });
}

/** Waits until `check` is true, polling every 20 ms, for at most `timeoutMs`. */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Output of a finished command. */
export interface RunResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `bin/jinx ARGS` to completion (for `-t`, `-v`, `lint` …). */
export function runJinx(args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): RunResult {
  const r = spawnSync(JINX, args, { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...opts.env }, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A jinx (or nginx) server process started for a test. */
export interface ServerProcess {
  readonly child: ChildProcess;
  readonly prefix: string;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** The content of PREFIX/logs/error.log (empty when absent). */
  errorLog(): string;
  /** Sends a signal and waits for the exit; resolves to the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** How long a server may take to listen: node starting jinx on a loaded machine takes seconds. */
const START_TIMEOUT_MS = 60_000;

/**
 * Starts a server binary nginx-style on a config in `prefix` (which must say
 * `daemon off;`) and waits until every port in `ports` accepts connections.
 */
export async function startServer(binary: string, prefix: string, conf: string, ports: readonly number[]): Promise<ServerProcess> {
  const args = ['-p', `${prefix}/`, '-c', conf];
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  let exited: number | null | undefined;
  const exit = new Promise<number | null>((res) => child.once('exit', (code) => { exited = code; res(code); }));
  const proc: ServerProcess = {
    child,
    prefix,
    stderr: () => err,
    errorLog: () => {
      const p = join(prefix, 'logs/error.log');
      return existsSync(p) ? readFileSync(p, 'utf8') : '';
    },
    stop: async (signal = 'SIGQUIT') => {
      if (exited === undefined) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
  };
  onCleanup(async () => { await proc.stop('SIGKILL'); });
  for (const port of ports) {
    await waitFor(async () => exited !== undefined || (await portOpen(port)), START_TIMEOUT_MS, `port ${port}`);
    if (exited !== undefined) throw new Error(`server exited (${exited}) during start:\n${err}`);
  }
  return proc;
}

/** Starts jinx on `confText` written to PREFIX/nginx.conf (with PREFIX/logs created). */
export async function startJinx(confText: string, ports: readonly number[], files: Readonly<Record<string, string>> = {}): Promise<ServerProcess> {
  const prefix = tempDir('jinx-prefix-');
  mkdirSync(join(prefix, 'logs'));
  writeFiles(prefix, { 'nginx.conf': confText, ...files });
  return startServer(JINX, prefix, join(prefix, 'nginx.conf'), ports);
}

/** An HTTP server on 127.0.0.1 for a test; stopped at cleanup. */
export async function startUpstream(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => { server.closeAllConnections(); server.close(() => res()); }));
  return { server, port: (server.address() as { port: number }).port };
}

/**
 * The reference nginx: current nginx in /opt/nginx-oracle, else Debian's, else
 * undefined. `JINX_NO_NGINX=1` makes it undefined whatever is installed, so
 * tests compare with the recorded answers (recorded.ts).
 */
export function referenceNginx(): string | undefined {
  if (process.env.JINX_NO_NGINX === '1') return undefined;
  for (const p of ['/opt/nginx-oracle/nginx', '/usr/sbin/nginx']) if (existsSync(p)) return p;
  return undefined;
}

/** A response as a test sees it. */
export interface Response {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** Sends one HTTP/1.1 request to 127.0.0.1:port with node's client. */
export function request(port: number, path: string, opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Response> {
  return new Promise((res, rej) => {
    const r = httpRequest({ host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (resp) => {
      const chunks: Buffer[] = [];
      resp.on('data', (c: Buffer) => chunks.push(c));
      resp.on('end', () => res({ status: resp.statusCode ?? 0, headers: resp.headers, body: Buffer.concat(chunks).toString('latin1') }));
      resp.on('error', rej);
    });
    r.on('error', rej);
    r.end(opts.body);
  });
}

/**
 * Error-log lines without what varies between runs: the timestamp and
 * `pid#tid` are dropped and the connection number becomes `*CONN`, so a line
 * reads `[level] *CONN message, client: …`.
 */
export function logLines(text: string): string[] {
  return text.split('\n').filter(Boolean).map(comparableLine);
}

/**
 * The entries of an error-log file, as `logLines` prints lines, except that
 * a message with newlines in it (FastCGI stderr) stays one entry, its lines
 * joined by `\n`: an entry starts with a timestamp.
 */
export function logEntries(text: string): string[] {
  return text.split(/\n(?=\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[)/).map((l) => l.replace(/\n$/, '')).filter(Boolean).map(comparableLine);
}

const comparableLine = (l: string): string =>
  l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: /, '$1 ').replace(/^(\[\w+\]) \*\d+ /, '$1 *CONN ');

/** Whether a command is on PATH. */
export function hasCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
}

/**
 * Starts a TCP server on 127.0.0.1 that hands each connection to
 * `onConnection` (its errors ignored), over TLS with `tls`'s certificate and
 * key (PEM) when given; it and its connections are closed at cleanup.
 * Resolves to its port.
 */
export async function startTcpServer(onConnection: (socket: Socket) => void, tls?: { readonly cert: string; readonly key: string }): Promise<number> {
  const sockets = new Set<Socket>();
  const accept = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket);
  };
  const server = tls ? createTlsServer({ cert: tls.cert, key: tls.key }, accept) : createNetServer(accept);
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return (server.address() as AddressInfo).port;
}

/** A server program a test started (php-fpm, uWSGI, memcached). */
export interface Daemon {
  readonly child: ChildProcess;
  /** Whether it has exited. */
  exited(): boolean;
  /** What it wrote to stderr so far. */
  stderr(): string;
}

/**
 * Starts `binary` with `args` in the foreground; at cleanup it is sent
 * `stopSignal`, and SIGKILL after 5 s.
 */
export function startDaemon(binary: string, args: readonly string[], stopSignal: NodeJS.Signals, cwd?: string): Daemon {
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  let exited = false;
  const exit = new Promise<void>((res) => child.once('exit', () => { exited = true; res(); }));
  onCleanup(async () => {
    if (!exited) child.kill(stopSignal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exit;
    clearTimeout(timer);
  });
  return { child, exited: () => exited, stderr: () => err };
}
