/**
 * A real memcached (Debian's `memcached`) for memcached_pass tests: started
 * in the foreground on 127.0.0.1:PORT, stopped by pid at cleanup, with a
 * `set` that stores a value through memcached's own protocol.
 */
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { freePort, portOpen, startDaemon, waitFor } from './harness.js';

const MEMCACHED = '/usr/bin/memcached';

/** `skip` option for tests that need memcached. */
export const NO_MEMCACHED: string | false = existsSync(MEMCACHED) ? false : 'no memcached installed (test/prepare.sh installs it)';

/** A running memcached. */
export interface Memcached {
  readonly port: number;
  /** Stores `value` (bytes as latin1) under `key` with `flags`; resolves once memcached says STORED. */
  set(key: string, value: string | Buffer, flags?: number): Promise<void>;
}

/** Starts memcached on a free port and waits until it accepts connections. */
export async function startMemcached(): Promise<Memcached> {
  const port = await freePort();
  const args = ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-m', '16'];
  if (process.getuid?.() === 0) args.push('-u', 'nobody');
  const daemon = startDaemon(MEMCACHED, args, 'SIGTERM');
  await waitFor(async () => daemon.exited() || portOpen(port), 10_000, `memcached on ${port}`);
  if (daemon.exited()) throw new Error(`memcached exited during start:\n${daemon.stderr()}`);
  const set = (key: string, value: string | Buffer, flags = 0): Promise<void> => new Promise((resolve, reject) => {
    const data = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
    const sock = connect({ host: '127.0.0.1', port });
    let answer = '';
    sock.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      if (!answer.endsWith('\r\n')) return;
      sock.destroy();
      if (answer === 'STORED\r\n') resolve();
      else reject(new Error(`memcached answered ${JSON.stringify(answer)} to set ${key}`));
    });
    sock.on('error', reject);
    sock.write(Buffer.concat([Buffer.from(`set ${key} ${flags} 0 ${data.length}\r\n`, 'latin1'), data, Buffer.from('\r\n')]));
  });
  return { port, set };
}
