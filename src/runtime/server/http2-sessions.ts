/**
 * HTTP/2 on client connections: jinx's own HTTP/2 connection reads the
 * streams, with the limits of the connection's server, and hands their
 * requests to the phases; its protections (`client sent too many streams at
 * once`, flood detection) live in `http2/connection.ts`.
 */
import type { Socket } from 'node:net';
import type { ListenGroup, VirtualServer } from '../../config/route-table.js';
import { logRequest } from '../context.js';
import { Http2Connection, type Http2Body } from '../http2/connection.js';
import type { Http2Target } from '../http2/response.js';
import { logUnreadStream, serveClientRequest, type ClientRequestHead } from '../phases.js';
import type { ClientConnection, HttpRequestState } from '../request.js';
import { findServer } from '../server-names.js';
import { addressServers, type LogConnection } from './connection-log.js';
import type { ClientConnections, OpenConnection } from './connections.js';
import type { Generation, Generations } from './generations.js';

/**
 * The server a connection belongs to, as `ngx_http_init_connection` and,
 * for TLS, `ngx_http_ssl_servername` choose it: the default server of its
 * address, or the server its SNI name selects there.
 */
function connectionServer(group: ListenGroup, info: ClientConnection): VirtualServer {
  const set = addressServers(group, info);
  const name = info.tls?.serverName;
  return name ? findServer(set, name.toLowerCase()) : set.defaultServer;
}

/** Starts HTTP/2 on the server's connections. */
export class Http2Sessions {
  constructor(
    private readonly connections: ClientConnections,
    private readonly generations: Generations,
    private readonly logConnection: LogConnection,
  ) {}

  /**
   * A connection on the listen group `groupKey` that speaks HTTP/2 (h2c
   * with prior knowledge, with the bytes the front read; or TLS with ALPN
   * `h2`), with the limits of the connection's server (the default server
   * of its address, or the one its SNI name selects: `hc->conf_ctx`).
   */
  start(socket: Socket, first: Buffer, groupKey: string): void {
    const conn = this.connections.of(socket);
    const group = conn?.gen.groups.get(groupKey);
    if (!conn || !group) {
      socket.destroy();
      return;
    }
    this.connections.secured(conn, socket);
    const { gen } = conn;
    const server = connectionServer(group, conn.info);
    const generations = this.generations;
    conn.h2 = new Http2Connection(socket, {
      server,
      stat: conn.stat,
      get exiting(): boolean {
        return generations.exiting(gen);
      },
      request: (head, body, out) => this.request(conn, gen, group, head, body, out),
      log: (level, message) => this.logConnection(group, conn.info, `${message} while processing HTTP/2 connection`, level, server.conf.errorLogs),
      requestLog: (r, level, message) => logRequest(gen.cx, r, level, message),
      headerLog: (level, message) => gen.cx.errorLog.write(
        server.conf.errorLogs, level, `${message} while reading client request headers`, conn.info.id, `, client: ${conn.info.peerAddr}, server: ${server.name}`,
      ),
      unreadStream: (rawHeaders, message, status) => logUnreadStream(gen.cx, conn.info, server, rawHeaders, message, status),
    }, first, conn.info.acceptedAtMs);
    if (this.generations.exiting(gen)) conn.h2.stop();
  }

  /** Serves the request of an HTTP/2 stream. */
  private request(conn: OpenConnection, gen: Generation, group: ListenGroup, head: ClientRequestHead, body: Http2Body, out: Http2Target): HttpRequestState {
    conn.active++;
    conn.info.requests++;
    return serveClientRequest(gen.cx, head, body, out, conn.info, group, () => {
      conn.active--;
    });
  }
}
