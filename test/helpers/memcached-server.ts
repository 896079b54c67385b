/**
 * A real memcached (Debian's `memcached`) for memcached_pass tests: started
 * in the foreground on 127.0.0.1:PORT, stopped by pid at cleanup, with a
 * `set` that stores a value through memcached's own protocol and a count of
 * the connections it accepted.
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
  /** The connections memcached has accepted so far (its `total_connections`, this question's own among them). */
  connections(): Promise<number>;
}

/** Starts memcached on a free port and waits until it accepts connections. */
export async function startMemcached(): Promise<Memcached> {
  const port = await freePort();
  const args = ['-l', '127.0.0.1', '-p', String(port), '-U', '0', '-m', '16'];
  if (process.getuid?.() === 0) args.push('-u', 'nobody');
  const daemon = startDaemon(MEMCACHED, args, 'SIGTERM');
  await waitFor(async () => daemon.exited() || portOpen(port), 10_000, `memcached on ${port}`);
  if (daemon.exited()) throw new Error(`memcached exited during start:\n${daemon.stderr()}`);
  /** Sends `command` and resolves with the answer once it ends with `end`. */
  const ask = (command: Buffer, end: string): Promise<string> => new Promise((resolve, reject) => {
    const sock = connect({ host: '127.0.0.1', port });
    let answer = '';
    sock.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      if (!answer.endsWith(end)) return;
      sock.destroy();
      resolve(answer);
    });
    sock.on('error', reject);
    sock.write(command);
  });
  const set = async (key: string, value: string | Buffer, flags = 0): Promise<void> => {
    const data = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
    const answer = await ask(Buffer.concat([Buffer.from(`set ${key} ${flags} 0 ${data.length}\r\n`, 'latin1'), data, Buffer.from('\r\n')]), '\r\n');
    if (answer !== 'STORED\r\n') throw new Error(`memcached answered ${JSON.stringify(answer)} to set ${key}`);
  };
  const connections = async (): Promise<number> => {
    const stats = await ask(Buffer.from('stats\r\n'), 'END\r\n');
    return Number(/^STAT total_connections (\d+)\r$/m.exec(stats)![1]);
  };
  return { port, set, connections };
}
