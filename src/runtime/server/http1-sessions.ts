/**
 * HTTP/1.x on client connections: jinx's own HTTP/1.x connection reads the
 * requests and hands them to the phases, under the configuration the
 * connection was accepted in.
 */
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { ListenGroup } from '../../config/route-table.js';
import { logRequest } from '../context.js';
import { Http1Connection, type Http1Head } from '../http1/connection.js';
import type { Http1Target } from '../http1/response.js';
import { serveClientRequest, type ClientRequestHead } from '../phases.js';
import { HttpRequestState } from '../request.js';
import { addressServers, defaultErrorLogs, type LogConnection } from './connection-log.js';
import type { ClientConnections, OpenConnection } from './connections.js';
import type { Generation, Generations } from './generations.js';

/** Starts HTTP/1.x on the server's connections. */
export class Http1Sessions {
  constructor(
    private readonly connections: ClientConnections,
    private readonly generations: Generations,
    private readonly logConnection: LogConnection,
  ) {}

  /**
   * A connection on the listen group `groupKey` that speaks HTTP/1.x: a
   * plain one with the bytes the front read (`first`), or a TLS one once its
   * handshake is done (it gets the TLS details).
   */
  start(socket: Socket, first: Buffer | undefined, groupKey: string): void {
    const conn = this.connections.of(socket);
    if (!conn) {
      socket.destroy();
      return;
    }
    if ((socket as TLSSocket).encrypted) {
      this.connections.secured(conn, socket);
      // ngx_http_ssl_handshake_handler: idle again until the first request comes
      conn.stat.reusable(true);
    }
    // the connection is served by the configuration it was accepted in, as by the nginx worker that accepted it
    // (after a reload, a request that comes on it is answered by the old configuration, without keep-alive)
    const { gen } = conn;
    const group = (): ListenGroup | undefined => gen.groups.get(groupKey);
    conn.http1 = new Http1Connection(socket, {
      stat: conn.stat,
      servers: () => addressServers(group()!, conn.info),
      request: (head, body, out) => this.request(conn, gen, groupKey, head, body, out),
      requestLog: (message, head) => {
        const r = new HttpRequestState(conn.info, '', '', '', head.headers, [], conn.info.tls ? 'https' : 'http', gen.table.variableCount);
        r.rawRequestLine = head.requestLine;
        r.server = head.server;
        r.loc = head.server.conf;
        r.action = 'reading client request headers';
        logRequest(gen.cx, r, 'info', message);
      },
      log: (level, message, bare) => {
        const g = group();
        if (!g) return;
        if (bare) gen.cx.errorLog.write(defaultErrorLogs(g, conn.info), level, message, conn.info.id);
        else this.logConnection(g, conn.info, message, level);
      },
    }, first, conn.info.acceptedAtMs, conn.info.peerAddr);
    if (this.generations.exiting(gen)) conn.http1.stop();
  }

  /** Serves a request an HTTP/1.x connection read (or refused). */
  private request(conn: OpenConnection, gen: Generation, groupKey: string, head: Http1Head, body: Readable, out: Http1Target): void {
    const group = gen.groups.get(groupKey);
    if (!group) {
      out.abort();
      return;
    }
    conn.active++;
    conn.info.requests++;
    // named fields, not a spread of `head`: one object shape on the hot path
    const clientHead: ClientRequestHead = {
      method: head.method,
      requestUri: head.requestUri,
      requestLine: head.requestLine,
      protocol: head.protocol,
      headers: head.headers,
      rawHeaders: head.rawHeaders,
      headLength: head.headLength,
      refusal: head.refusal,
      // (a request read with the first bytes is served from the connection's constructor, before conn.http1 is set)
      keepalive: head.keepalive && !(conn.http1?.exiting ?? this.generations.exiting(gen)),
      parsed: { uri: head.uri, args: head.args, host: head.host, requestPort: head.requestPort },
    };
    serveClientRequest(gen.cx, clientHead, body, out, conn.info, group, () => {
      conn.active--;
    });
  }
}
