/**
 * What `nginx -t` does with listening sockets (`ngx_open_listening_sockets`
 * in `src/core/ngx_connection.c`, called by `ngx_init_cycle` in test mode
 * too): every address is bound and closed again. An address in use is not
 * an error with `-t` (the running server holds it); any other failure is
 * `bind() to ADDR failed (N: text)`, e.g. `(99: Cannot assign requested
 * address)` for an address the host does not have.
 */
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import type { RouteTable } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';

/** One socket nginx would open. */
interface BindTarget {
  /** An IP literal, or `unix:PATH`. */
  readonly host: string;
  readonly port: number;
  readonly addrText: string;
  readonly udp: boolean;
}

/** Binds one address and closes it; resolves to the error, if any. */
function tryBind(t: BindTarget): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    if (t.udp) {
      const socket = createSocket({ type: t.host.includes(':') ? 'udp6' : 'udp4', ipv6Only: t.host === '::' });
      socket.once('error', (err) => {
        socket.close();
        resolve(err);
      });
      socket.bind({ address: t.host, port: t.port, exclusive: true }, () => socket.close(() => resolve(undefined)));
      return;
    }
    const server = createServer();
    server.once('error', (err) => resolve(err));
    // a unix domain socket's file is removed again when the server closes, as nginx -t deletes it
    const address = t.host.startsWith('unix:') ? { path: t.host.slice('unix:'.length) } : { host: t.host, port: t.port, ipv6Only: t.host === '::' };
    server.listen({ ...address, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}

/**
 * Binds every listening address of a configuration, in nginx's order (http,
 * then stream). @throws ConfigError for the first failure other than EADDRINUSE.
 */
export async function checkListenSockets(table: RouteTable): Promise<void> {
  const targets: BindTarget[] = [...table.listens.map((g) => ({ host: g.host, port: g.port, addrText: g.addrText, udp: false })), ...table.streamListens];
  for (const t of targets) {
    const err = await tryBind(t);
    if (err && err.code !== 'EADDRINUSE') {
      throw new ConfigError('file', `bind() to ${t.addrText} failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
    }
  }
}
