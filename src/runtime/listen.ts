/**
 * Listening sockets: one node:http or node:https server per address:port of
 * the route table, all sharing the engine's request handler. TLS servers pick
 * the certificate by SNI with nginx's server-name rules, and refuse the
 * handshake for a server with `ssl_reject_handshake on`.
 */
import { createServer as createHttpServer, ServerResponse, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse, type Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import { createSecureContext, type SecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import type { ListenGroup, RouteTable, VirtualServer } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import { allowTunnel } from './exchange.js';
import { findServer } from './server-names.js';

/** TLS contexts of one configuration, by server. */
export class TlsContexts {
  private readonly contexts = new Map<VirtualServer, SecureContext>();
  private readonly options = new Map<VirtualServer, SecureContextOptions>();

  /** Builds a TLS context for every server on a TLS address. */
  constructor(table: RouteTable) {
    for (const group of table.listens) {
      if (!group.ssl) continue;
      const sets = [group.servers, ...group.byLocalAddr.values()];
      for (const set of sets) {
        const servers = new Set<VirtualServer>([set.defaultServer, ...set.exact.values(), ...set.headWildcards.map((x) => x[1]),
          ...set.tailWildcards.map((x) => x[1]), ...set.regexes.map((x) => x.server)]);
        for (const server of servers) this.load(server);
      }
    }
  }

  private load(server: VirtualServer): void {
    if (this.contexts.has(server) || !server.tls || server.tls.certificates.length === 0) return;
    const tls = server.tls;
    const minVersion = tls.protocols.includes('TLSv1') ? 'TLSv1' : tls.protocols.includes('TLSv1.1') ? 'TLSv1.1'
      : tls.protocols.includes('TLSv1.2') ? 'TLSv1.2' : 'TLSv1.3';
    const maxVersion = tls.protocols.includes('TLSv1.3') ? 'TLSv1.3' : tls.protocols.includes('TLSv1.2') ? 'TLSv1.2'
      : tls.protocols.includes('TLSv1.1') ? 'TLSv1.1' : 'TLSv1';
    const options: SecureContextOptions = {
      cert: tls.certificates.map((c) => c.cert),
      key: tls.certificates.map((c) => c.key),
      ciphers: tls.ciphers,
      honorCipherOrder: tls.preferServerCiphers,
      minVersion,
      maxVersion,
      sessionTimeout: tls.sessionTimeoutSec,
    };
    this.options.set(server, options);
    this.contexts.set(server, createSecureContext(options));
  }

  /** Options of a server's context, for the socket's default (clients without SNI). */
  optionsOf(server: VirtualServer): SecureContextOptions {
    return this.options.get(server) ?? {};
  }

  /** The context for a server, or undefined when it has no certificate. */
  get(server: VirtualServer): SecureContext | undefined {
    return this.contexts.get(server);
  }
}

/** A listening server: HTTP/1.x (plain or TLS), or TLS with HTTP/2 and HTTP/1.1 by ALPN. */
export type Listener = HttpServer | ReturnType<typeof createSecureServer>;

/** How a listening server reaches the current configuration. */
export interface ListenHooks {
  /** The group this socket serves in the current configuration. */
  group(key: string): ListenGroup | undefined;
  tls(): TlsContexts;
  /** A TCP connection was accepted (before any TLS handshake); it may be refused or may make room. */
  onAccept(socket: Socket): void;
  /** A TLS connection that speaks HTTP/1.x completed its handshake. */
  onConnection(socket: Socket): void;
  /** A new HTTP/2 connection. */
  onSession(session: Http2Session): void;
  onRequest(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void;
}

/** The key of a listen group: address and port. */
export const listenKey = (g: { host: string; port: number }): string => `${g.host}|${g.port}`;

/**
 * Creates (but does not bind) the server for a listen group: node:http for
 * plain HTTP, node:https for TLS, node:http2's secure server (HTTP/2 and
 * HTTP/1.1 chosen by ALPN) for TLS with `http2 on`.
 */
export function createListener(group: ListenGroup, hooks: ListenHooks): Listener {
  const key = listenKey(group);
  // headersTimeout is the default server's client_header_timeout (set by the engine), checked every 100 ms
  const common = {
    keepAliveTimeout: 0, requestTimeout: 0, headersTimeout: 60_000, connectionsCheckingInterval: 100, maxHeaderSize: 16 * 1024, requireHostHeader: false,
  };
  const onRequest = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => hooks.onRequest(req, res);
  const onUpgrade = (req: IncomingMessage, socket: Socket, head: Buffer): void => onRequest(req, upgradeResponse(req, socket, head));
  if (!group.ssl) {
    const server = createHttpServer(common, onRequest);
    server.on('connection', (socket: Socket) => hooks.onAccept(socket));
    server.on('upgrade', onUpgrade);
    return server;
  }
  const tlsOptions = {
    ...hooks.tls().optionsOf(group.servers.defaultServer),
    SNICallback: (name: string, cb: (err: Error | null, ctx?: SecureContext) => void) => {
      const g = hooks.group(key) ?? group;
      const vs = findServer(g.servers, name.toLowerCase());
      if (vs.tls?.rejectHandshake) return cb(new Error('ssl_reject_handshake'));
      cb(null, hooks.tls().get(vs) ?? hooks.tls().get(g.servers.defaultServer));
    },
  };
  if (group.http2) {
    const server = createSecureServer({ ...tlsOptions, allowHTTP1: true, settings: { maxConcurrentStreams: 128 } }, onRequest);
    server.on('secureConnection', (socket: TLSSocket) => {
      if (socket.alpnProtocol !== 'h2') hooks.onConnection(socket);
    });
    server.on('session', (session: Http2Session) => hooks.onSession(session));
    server.on('connection', (socket: Socket) => hooks.onAccept(socket));
    server.on('upgrade', onUpgrade);
    return server;
  }
  const server = createHttpsServer({ ...common, ...tlsOptions }, onRequest);
  server.on('secureConnection', (socket: TLSSocket) => hooks.onConnection(socket));
  server.on('connection', (socket: Socket) => hooks.onAccept(socket));
  server.on('upgrade', onUpgrade);
  return server;
}

/**
 * The response to an HTTP/1.1 request with `Upgrade`, which node:http hands
 * over with its socket and no response: one on that socket, so that the
 * request goes through the phases like any other. A proxied WebSocket
 * handshake the upstream accepts becomes a tunnel (`ResponseTarget.tunnel`);
 * any other response closes the connection after it (`Connection: close`),
 * node:http no longer reading requests from it.
 */
function upgradeResponse(req: IncomingMessage, socket: Socket, head: Buffer): ServerResponse {
  // nothing is read until a tunnel takes the socket; bytes read past the header go back
  socket.pause();
  if (head.length > 0) socket.unshift(head);
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket);
  res.once('finish', () => socket.end());
  allowTunnel(res);
  return res;
}

/**
 * Binds a server, with nginx's message on failure:
 * `bind() to 127.0.0.1:80 failed (98: Address already in use)`.
 */
export function bindListener(server: Listener, group: ListenGroup): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(new ConfigError('file', `bind() to ${group.addrText.replace(/^\*/, '0.0.0.0')} failed (${systemErrorText(err)})`));
    };
    server.once('error', onError);
    server.listen({ host: group.host, port: group.port, ipv6Only: group.host === '::' }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
