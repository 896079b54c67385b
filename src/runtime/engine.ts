/**
 * The running server: listening sockets, client connections and the current
 * configuration generation. A reload builds a new generation off to the side
 * (logs opened, certificates read, new sockets bound) and swaps it in only
 * when all of that succeeded; connections in flight finish on the generation
 * they started with.
 */
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { SecureContext, TLSSocket } from 'node:tls';
import type { CompiledConfig } from '../config/compile.js';
import type { ErrorLogTarget, ListenGroup, RouteTable, VirtualServer } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { AccessLogFiles } from '../log/access-log.js';
import { connectionContext, ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import { ConnectionNumbers } from './connection-numbers.js';
import type { RuntimeContext } from './context.js';
import { bindListener, createListener, handshakeRejected, listenKey, sentSni, tlsServerOf, TlsContexts, type Listener } from './listen.js';
import { logUnreadStream, serveClientRequest, type ClientRequestHead } from './phases.js';
import { logRequest } from './context.js';
import { resetConnection } from './exchange.js';
import { Http2Connection, type Http2Body } from './http2/connection.js';
import type { Http2Target } from './http2/response.js';
import { LimitReqZones } from './limit-req-zones.js';
import { CacheZones } from './cache/zone.js';
import { Http1Connection, type Http1Head } from './http1/connection.js';
import type { Http1Target } from './http1/response.js';
import { parseClientHello } from './client-hello.js';
import { findServer } from './server-names.js';
import type { ProxyProtocolRead } from './proxy-protocol.js';
import { prepareFiles } from './prepare-files.js';
import { HttpRequestState, type ClientConnection } from './request.js';
import { TlsDetails } from './tls-details.js';
import { systemErrorText } from '../os-errors.js';
import { UpstreamClients } from './upstream/clients.js';
import { sslErrorText } from './upstream/errors.js';
import { FastcgiConnections } from './upstream/fastcgi-connections.js';
import { NameResolver } from './upstream/resolver.js';
import { TempFiles } from './temp-files.js';

/** One configuration in service. */
interface Generation {
  readonly table: RouteTable;
  readonly cx: RuntimeContext;
  readonly tls: TlsContexts;
  readonly groups: ReadonlyMap<string, ListenGroup>;
}

/** A client connection and what it is doing. */
interface ConnectionState {
  info: ClientConnection;
  /** The accepted TCP socket. */
  readonly raw: Socket;
  /** The HTTP/2 connection on it, once there is one. */
  h2: Http2Connection | undefined;
  /** Requests in progress. */
  active: number;
  /** The HTTP/1.x connection on it, once there is one. */
  http1: Http1Connection | undefined;
  /** The first TLS record the client sent (its ClientHello), for the `$ssl_*` variables Node.js has no answer for. */
  clientHello: Buffer | undefined;
  /** The configuration in service when the connection was accepted: its HTTP/1.x requests are served by it. */
  readonly gen: Generation;
}

/** `TLS1_2_VERSION`, a ClientHello's `legacy_version` from TLS 1.2 and 1.3 clients. */
const TLS1_2_VERSION = 0x0303;

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/;
const plainAddr = (a: string | undefined): string => (a ? IPV4_MAPPED.exec(a)?.[1] ?? a : '');
/** Identifies a TCP connection across the raw socket and its TLS socket. */
const socketKey = (s: { remoteAddress?: string; remotePort?: number; localPort?: number }): string =>
  `${s.remoteAddress}|${s.remotePort}|${s.localPort}`;

/** Opens the logs and reads the certificates of a compiled configuration. @throws Error when a file cannot be opened */
function prepare(
  compiled: CompiledConfig, errorLog: ErrorLogFiles, tempFiles: TempFiles, numbers: ConnectionNumbers, admit: () => boolean,
  limitReq: LimitReqZones, cache: CacheZones,
): Generation {
  const table = compiled.table;
  prepareFiles(table);
  errorLog.open(table.errorLogTargets);
  const accessLog = new AccessLogFiles();
  accessLog.open(table.accessLogTargets);
  const tls = new TlsContexts(table);
  const upstreams = new UpstreamClients(numbers, admit, table.main.workerConnections);
  // nginx's resolver writes to the main error log (`cycle->new_log`)
  const resolver = new NameResolver((level, message) => errorLog.write(table.main.errorLogs, level, message));
  // the cache loader starts with the configuration, as nginx's does
  cache.start(table.cacheZones);
  const cx: RuntimeContext = { table, errorLog, accessLog, upstreams, fastcgi: new FastcgiConnections(), resolver, tempFiles, limitReq, cache };
  return { table, cx, tls, groups: new Map(table.listens.map((g) => [listenKey(g), g])) };
}

/**
 * OpenSSL's reasons (of the SSL library) that `ngx_ssl_connection_error`
 * (`src/event/ngx_event_openssl.c`) logs at info as a client's handshake
 * failure, besides the alerts (1000 and up); others are logged at crit.
 */
const HANDSHAKE_FAILURES = new Set([
  101, 103, 118, 129, 149, 151, 152, 155, 156, 159, 182, 183, 187, 193, 213, 226, 227, 234, 235, 244, 245, 246, 252, 253, 258, 266, 267, 281,
]);

export class Engine {
  private readonly listeners = new Map<string, Listener>();
  /** Client connections by accepted socket, oldest first (nginx's reusable-connections order). */
  private readonly connections = new Map<Socket, ConnectionState>();
  /** The same connections by `socketKey`, to find them from a TLS socket. */
  private readonly byKey = new Map<string, ConnectionState>();
  private readonly byHttpSocket = new WeakMap<Socket, ConnectionState>();
  /** Handshakes whose certificates could not be read, with the server they were read for. */
  private readonly certificateFailed = new WeakMap<TLSSocket, VirtualServer>();
  /** The second in which the last "reusing connections" warning was written. */
  private reuseWarnedSec = -1;
  private stopping = false;

  private constructor(
    private generation: Generation,
    private readonly tempFiles: TempFiles,
    /** Numbers of client and upstream connections, across reloads. */
    private readonly numbers: ConnectionNumbers,
    /** The `limit_req_zone` states, across reloads. */
    private readonly limitReq: LimitReqZones,
    /** The cache zones, across reloads. */
    private readonly cache: CacheZones,
  ) {}

  /** An error already written to the logs (the caller only exits). */
  static readonly ReportedError = class ReportedError extends Error {};

  /**
   * Opens the logs, reads certificates and binds every listening socket. A
   * busy address is retried five times, 500 ms apart, each failure logged
   * (`bind() to ADDR failed (98: Address already in use)`), then
   * `still could not bind()`, as `ngx_open_listening_sockets` does.
   * @throws ConfigError for files that cannot be opened (not yet logged),
   *   `Engine.ReportedError` when binding failed (logged)
   */
  static async start(compiled: CompiledConfig, startupLog: { readonly isStderr: boolean }): Promise<Engine> {
    const tempFiles = new TempFiles();
    const numbers = new ConnectionNumbers();
    // nginx logs a zone that is full to the cycle's log (the main error_log of the configuration in use)
    const limitReq = new LimitReqZones((message) => engine.log('alert', message));
    const cache = new CacheZones((level, message) => engine.log(level, message));
    const engine: Engine = new Engine(
      prepare(compiled, new ErrorLogFiles(), tempFiles, numbers, () => engine.admitUpstream(), limitReq, cache), tempFiles, numbers, limitReq, cache,
    );
    const targets = compiled.table.main.errorLogs;
    const mirror = !startupLog.isStderr || !targets.some((t) => t.path === 'stderr');
    const startupMessage = (level: LogLevel, message: string): void => {
      engine.log(level, message);
      if (mirror && !targets.some((t) => t.path === 'stderr')) process.stderr.write(Buffer.from(`nginx: [${level}] ${message}\n`, 'latin1'));
    };
    for (let attempt = 1; ; attempt++) {
      try {
        await engine.bindNew(engine.generation);
        return engine;
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        startupMessage('emerg', err.message);
        if (attempt === 5) {
          startupMessage('emerg', 'still could not bind()');
          await engine.closeListeners();
          await engine.finish();
          throw new Engine.ReportedError('still could not bind()');
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** The configuration being served. */
  get table(): RouteTable {
    return this.generation.table;
  }

  /** Writes a line without connection context to the main `error_log`. */
  log(level: LogLevel, message: string): void {
    this.generation.cx.errorLog.write(this.generation.table.main.errorLogs, level, message);
  }

  private async bindNew(gen: Generation): Promise<void> {
    for (const [key, group] of gen.groups) {
      if (this.listeners.has(key)) continue;
      const server = createListener(group, {
        group: (k) => this.generation.groups.get(k),
        tls: () => this.generation.tls,
        onAccept: (socket) => this.accept(socket, group.unixPath),
        onProxyProtocol: (socket, read) => this.proxyProtocolRead(socket, read, key),
        onNothingRead: (socket, why, proxyProtocol) => this.nothingRead(socket, why, key, proxyProtocol),
        firstByteTimeoutMs: () => (this.generation.groups.get(key) ?? group).servers.defaultServer.conf.clientHeaderTimeoutMs,
        onClientHello: (socket, bytes) => this.clientHello(socket, bytes, key),
        onHttp1: (socket, first) => this.http1(socket, first, key),
        onHttp2: (socket, first) => this.http2(socket, first, key),
        handshakeContext: (server, socket, serverName) => this.handshakeContext(server, socket, serverName, key),
        onTlsError: (err, socket) => this.handshakeFailed(err, socket, key),
      });
      await bindListener(server, group);
      this.listeners.set(key, server);
    }
  }

  /** The listening address as nginx prints it for connections without a request (`server: 127.0.0.1:80`). */
  private static listenText(group: ListenGroup): string {
    if (group.unixPath !== undefined) return group.addrText;
    return group.host.includes(':') ? `[${group.host}]:${group.port}` : `${group.host}:${group.port}`;
  }

  /**
   * A connection that sent nothing before it closed or `client_header_timeout`
   * passed, logged at info as `ngx_http_wait_request_handler` does (`client
   * closed connection while waiting for request`, `client timed out (110: …)
   * while waiting for request`) or, on a TLS address, `ngx_http_ssl_handshake`
   * (`… while SSL handshaking`), or `… while reading PROXY protocol` before
   * the header of a `proxy_protocol` address (on a TLS one, a connection
   * closed then is `broken header: ""`); a timed-out one is reset with
   * `reset_timedout_connection`.
   */
  private nothingRead(socket: Socket, why: 'closed' | 'timed out', groupKey: string, proxyProtocol: boolean): void {
    const st = this.connections.get(socket);
    const group = this.generation.groups.get(groupKey);
    if (!st || !group) return;
    if (proxyProtocol && group.ssl && why === 'closed') {
      // ngx_http_ssl_handshake reads the PROXY protocol header from what it peeked: nothing is a broken one
      this.logConnection(group, st.info, 'broken header: "" while reading PROXY protocol', 'error');
      return;
    }
    const phase = proxyProtocol ? 'reading PROXY protocol' : group.ssl ? 'SSL handshaking' : 'waiting for request';
    const what = why === 'closed' ? 'client closed connection' : `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`;
    this.logConnection(group, st.info, `${what} while ${phase}`);
    if (why === 'timed out' && (group.byLocalAddr.get(st.info.localAddr) ?? group.servers).defaultServer.conf.resetTimedoutConnection) {
      resetConnection(socket);
    }
  }

  /**
   * What a request needs to know about its connection; `id` is a new
   * connection number unless given. On a unix domain socket (`unixPath`),
   * the peer is `unix:` and the local address `unix:PATH`, both without a
   * port, as `ngx_sock_ntop` prints an `AF_UNIX` address.
   */
  private connectionInfo(socket: Socket, unixPath: string | undefined, id?: number, acceptedAtMs = Date.now(), clientHello?: Buffer): ClientConnection {
    const tls = (socket as TLSSocket).encrypted ? (socket as TLSSocket) : undefined;
    return {
      id: id ?? this.numbers.next(),
      peerAddr: unixPath === undefined ? plainAddr(socket.remoteAddress) : 'unix:',
      peerPort: unixPath === undefined ? socket.remotePort ?? 0 : 0,
      localAddr: unixPath === undefined ? plainAddr(socket.localAddress) : `unix:${unixPath}`,
      localPort: unixPath === undefined ? socket.localPort ?? 0 : 0,
      tls: tls && new TlsDetails(tls, clientHello),
      requests: 0,
      acceptedAtMs,
    };
  }

  /** The same connection's details again (for its TLS socket). */
  private refreshedInfo(st: ConnectionState, socket: Socket): ClientConnection {
    const unixPath = st.info.peerAddr === 'unix:' ? st.info.localAddr.slice('unix:'.length) : undefined;
    return { ...this.connectionInfo(socket, unixPath, st.info.id, st.info.acceptedAtMs, st.clientHello), proxyProtocol: st.info.proxyProtocol };
  }

  /**
   * Connections in use as an nginx worker counts them: listening sockets,
   * clients, upstreams, and with `master_process on` its channel to the master.
   */
  private connectionsInUse(): number {
    const channel = this.generation.table.main.masterProcess ? 1 : 0;
    return channel + this.listeners.size + this.connections.size + this.generation.cx.upstreams.connectionCount();
  }

  /**
   * Admits a new TCP connection within `worker_connections`
   * (`ngx_get_connection` and `ngx_drain_connections` in
   * `src/core/ngx_connection.c`): when no more than a sixteenth of the
   * connections are free, idle connections are closed, oldest first, with the
   * warning `N worker_connections are not enough, reusing connections` (at
   * most once a second); when none is free, the new one is closed with the
   * alert `N worker_connections are not enough`.
   */
  private accept(raw: Socket, unixPath: string | undefined): void {
    const limit = this.generation.table.main.workerConnections;
    if (limit - this.connectionsInUse() <= Math.floor(limit / 16)) this.drain(limit);
    if (this.connectionsInUse() >= limit) {
      this.log('alert', `${limit} worker_connections are not enough`);
      raw.destroy();
      return;
    }
    raw.setNoDelay(true);
    const st: ConnectionState = {
      info: this.connectionInfo(raw, unixPath), raw, h2: undefined, active: 0, http1: undefined, clientHello: undefined, gen: this.generation,
    };
    // unix domain sockets have no addresses to tell them apart: `stateOf` finds them by socket
    const key = unixPath === undefined ? socketKey(raw) : undefined;
    this.connections.set(raw, st);
    if (key !== undefined) this.byKey.set(key, st);
    this.byHttpSocket.set(raw, st);
    raw.once('close', () => {
      this.connections.delete(raw);
      if (key !== undefined) this.byKey.delete(key);
    });
  }

  /**
   * The PROXY protocol header of a connection (`listen … proxy_protocol`):
   * its addresses are kept for `$proxy_protocol_*` and the realip module; a
   * broken one is logged at error `while reading PROXY protocol`, as
   * `ngx_proxy_protocol_read` logs it, and the connection closes.
   */
  private proxyProtocolRead(socket: Socket, read: ProxyProtocolRead, groupKey: string): void {
    const st = this.connections.get(socket);
    const group = this.generation.groups.get(groupKey);
    if (!st || !group) return;
    if (read.ok) {
      if (read.header) st.info = { ...st.info, proxyProtocol: read.header };
      return;
    }
    if (read.error !== undefined) this.logConnection(group, st.info, `${read.error} while reading PROXY protocol`, 'error');
  }

  /** The error logs of the default server of the connection's address. */
  private defaultErrorLogs(group: ListenGroup, info: ClientConnection): readonly ErrorLogTarget[] {
    return (group.byLocalAddr.get(info.localAddr) ?? group.servers).defaultServer.conf.errorLogs;
  }

  /** Logs `message` at info with nginx's connection context (`client: ADDR, server: LISTEN_ADDR`), in the default server's logs. */
  private logConnection(
    group: ListenGroup, info: ClientConnection, message: string, level: LogLevel = 'info', logs = this.defaultErrorLogs(group, info),
  ): void {
    this.generation.cx.errorLog.write(logs, level, message, info.id, connectionContext(info.peerAddr, Engine.listenText(group)));
  }

  /** The connection of an accepted socket or of the TLS socket over it. */
  private stateOf(socket: Socket): ConnectionState | undefined {
    return this.byHttpSocket.get(socket) ?? this.handshaking(socket as TLSSocket) ?? this.byKey.get(socketKey(socket));
  }

  /** The connection of a TLS socket still handshaking: its accepted TCP socket (node:tls's `_parent`) finds it. */
  private handshaking(socket: TLSSocket): ConnectionState | undefined {
    const raw = (socket as TLSSocket & { _parent?: Socket })._parent;
    return raw && this.byHttpSocket.get(raw);
  }

  /**
   * `ngx_http_ssl_certificate`: the certificates of `server` (which have
   * variables) read for one handshake, the variables evaluated for a request
   * of the connection whose `$ssl_server_name` is `serverName`. When they
   * cannot be read, nginx's error line `cannot load certificate "…": … while
   * SSL handshaking` goes to the server's error_log, and the handshake gets
   * no certificate and fails (`handshakeFailed`).
   */
  private handshakeContext(server: VirtualServer, socket: TLSSocket, serverName: string, groupKey: string): SecureContext {
    const tls = this.generation.tls;
    const st = this.handshaking(socket);
    const group = this.generation.groups.get(groupKey);
    if (!st || !group) return tls.withoutCertificate(server);
    const conn = { ...st.info, tls: new TlsDetails(socket, st.clientHello, serverName) };
    const r = new HttpRequestState(conn, 'GET', '', 'HTTP/1.0', {}, [], 'https', this.generation.table.variableCount);
    r.server = server;
    r.loc = server.conf;
    r.headersRead = false;
    try {
      return tls.forHandshake(server, r);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      this.logConnection(group, conn, `${err.message} while SSL handshaking`, 'error', server.conf.errorLogs);
      this.certificateFailed.set(socket, server);
      return tls.withoutCertificate(server);
    }
  }

  /**
   * The ClientHello of a TLS connection, kept for the `$ssl_*` variables.
   * Returns true when the server its SNI name selects (the default server
   * without SNI) has `ssl_reject_handshake on`: nginx's refusal, logged at
   * info as `handshake rejected while SSL handshaking`
   * (`ngx_http_ssl_servername`), before OpenSSL answers. A client older than
   * TLS 1.2 is left to OpenSSL, which refuses its version first.
   */
  private clientHello(socket: Socket, bytes: Buffer, groupKey: string): boolean {
    const st = this.connections.get(socket);
    const group = this.generation.groups.get(groupKey);
    if (!st || !group) return false;
    st.clientHello = bytes;
    const hello = parseClientHello(bytes);
    if (!hello || hello.legacyVersion < TLS1_2_VERSION) return false;
    const set = group.byLocalAddr.get(st.info.localAddr) ?? group.servers;
    const server = hello.serverName ? findServer(set, hello.serverName.toLowerCase()) : set.defaultServer;
    if (!server.tls?.rejectHandshake) return false;
    this.logConnection(group, st.info, 'handshake rejected while SSL handshaking');
    return true;
  }

  /**
   * A TLS handshake that failed: `ssl_reject_handshake` is nginx's info line
   * `handshake rejected while SSL handshaking` (`ngx_http_ssl_servername`);
   * a client that closes the connection after its first bytes is `peer
   * closed connection in SSL handshake` (`ngx_ssl_handshake`); certificates
   * that could not be read for it (`handshakeContext`) end it with OpenSSL's
   * `cert cb error`; other OpenSSL failures are `SSL_do_handshake() failed
   * (SSL: …)`, at info for a client's (`ngx_ssl_connection_error`). A client without
   * SNI on an address whose default server reads its certificates per
   * handshake got no certificate from node:tls, which asks for none then:
   * they are read now for the error line nginx writes.
   */
  private handshakeFailed(err: Error, socket: TLSSocket, groupKey: string): void {
    const st = this.handshaking(socket);
    const group = this.generation.groups.get(groupKey);
    if (!st || !group) return;
    if (handshakeRejected(socket)) {
      this.logConnection(group, st.info, 'handshake rejected while SSL handshaking');
      return;
    }
    if ((err as NodeJS.ErrnoException).code === 'ECONNRESET' && (err as NodeJS.ErrnoException).syscall === undefined && st.raw.bytesRead > 0) {
      // node:tls's "Client network socket disconnected before secure TLS connection was established": an end of file
      this.logConnection(group, st.info, 'peer closed connection in SSL handshake while SSL handshaking');
      return;
    }
    const defaultServer = (group.byLocalAddr.get(st.info.localAddr) ?? group.servers).defaultServer;
    if (!sentSni(socket) && this.generation.tls.perHandshake(defaultServer)) this.handshakeContext(defaultServer, socket, '', groupKey);
    const server = this.certificateFailed.get(socket);
    if (server) {
      const certCbError = 'SSL_do_handshake() failed (SSL: error:0A000179:SSL routines::cert cb error) while SSL handshaking';
      this.logConnection(group, st.info, certCbError, 'info', server.conf.errorLogs);
      return;
    }
    const text = sslErrorText(err);
    const reasonHex = /error:0A([0-9A-F]{6}):/i.exec(err.message)?.[1];
    if (!text || !reasonHex) return;
    const reason = parseInt(reasonHex, 16);
    const level = HANDSHAKE_FAILURES.has(reason) || reason >= 1000 ? 'info' : 'crit';
    this.logConnection(group, st.info, `SSL_do_handshake() failed ${text} while SSL handshaking`, level);
  }

  private drain(limit: number): void {
    const idle = [...this.connections.values()].filter((c) => (c.http1 ? c.http1.idle : c.h2 ? c.h2.idle : c.active === 0));
    if (idle.length === 0) return;
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.reuseWarnedSec) {
      this.reuseWarnedSec = second;
      this.log('warn', `${limit} worker_connections are not enough, reusing connections`);
    }
    const n = Math.max(Math.min(32, Math.floor(idle.length / 8)), 1);
    for (const c of idle.slice(0, n)) {
      this.connections.delete(c.raw);
      c.h2?.destroy();
      c.raw.destroy();
    }
  }

  /**
   * Whether an upstream connection may be opened within `worker_connections`
   * (`ngx_get_connection` for `ngx_event_connect_peer`): idle client
   * connections are closed first when room is short, as for a client.
   */
  private admitUpstream(): boolean {
    const limit = this.generation.table.main.workerConnections;
    if (limit - this.connectionsInUse() <= Math.floor(limit / 16)) this.drain(limit);
    return this.connectionsInUse() < limit;
  }

  /**
   * A connection that speaks HTTP/1.x (a TLS one once its handshake is done:
   * it gets the TLS details): jinx's own HTTP/1.x connection reads its
   * requests and hands them to the phases.
   */
  private http1(socket: Socket, first: Buffer | undefined, groupKey: string): void {
    const st = this.stateOf(socket);
    if (!st) {
      socket.destroy();
      return;
    }
    if ((socket as TLSSocket).encrypted) {
      st.info = this.refreshedInfo(st, socket);
      this.byHttpSocket.set(socket, st);
    }
    // the connection is served by the configuration it was accepted in, as by the nginx worker that accepted it
    // (after a reload, a request that comes on it is answered by the old configuration, without keep-alive)
    const { gen } = st;
    const group = (): ListenGroup | undefined => gen.groups.get(groupKey);
    st.http1 = new Http1Connection(socket, {
      servers: () => {
        const g = group()!;
        return g.byLocalAddr.get(st.info.localAddr) ?? g.servers;
      },
      request: (head, body, out) => this.http1Request(st, gen, groupKey, head, body, out),
      requestLog: (message, head) => {
        const r = new HttpRequestState(st.info, '', '', '', head.headers, [], st.info.tls ? 'https' : 'http', gen.table.variableCount);
        r.rawRequestLine = head.requestLine;
        r.server = head.server;
        r.loc = head.server.conf;
        r.action = 'reading client request headers';
        logRequest(gen.cx, r, 'info', message);
      },
      log: (level, message, bare) => {
        const g = group();
        if (!g) return;
        if (bare) gen.cx.errorLog.write(this.defaultErrorLogs(g, st.info), level, message, st.info.id);
        else this.logConnection(g, st.info, message, level);
      },
    }, first, st.info.acceptedAtMs, st.info.peerAddr);
    if (this.stopping || gen !== this.generation) st.http1.stop();
  }

  /** Serves a request an HTTP/1.x connection read (or refused). */
  private http1Request(st: ConnectionState, gen: Generation, groupKey: string, head: Http1Head, body: Readable, out: Http1Target): void {
    const group = gen.groups.get(groupKey);
    if (!group) {
      out.abort();
      return;
    }
    st.active++;
    st.info.requests++;
    const clientHead = {
      ...head,
      // (a request read with the first bytes is served from the connection's constructor, before st.http1 is set)
      keepalive: head.keepalive && !(st.http1?.exiting ?? (this.stopping || gen !== this.generation)),
      parsed: { uri: head.uri, args: head.args, host: head.host, requestPort: head.requestPort },
    };
    serveClientRequest(gen.cx, clientHead, body, out, st.info, group, () => {
      st.active--;
    });
  }

  /**
   * The server a connection belongs to, as `ngx_http_init_connection` and,
   * for TLS, `ngx_http_ssl_servername` choose it: the default server of its
   * address, or the server its SNI name selects there.
   */
  private static connectionServer(group: ListenGroup, info: ClientConnection): VirtualServer {
    const set = group.byLocalAddr.get(info.localAddr) ?? group.servers;
    const name = info.tls?.serverName;
    return name ? findServer(set, name.toLowerCase()) : set.defaultServer;
  }

  /**
   * A connection that speaks HTTP/2 (h2c with prior knowledge, with the
   * bytes the front read; or TLS with ALPN `h2`): jinx's own HTTP/2
   * connection reads its streams, with the limits of the connection's server
   * (the default server of its address, or the one its SNI name selects:
   * `hc->conf_ctx`), and hands their requests to the phases.
   */
  private http2(socket: Socket, first: Buffer, groupKey: string): void {
    const st = this.stateOf(socket);
    const group = st?.gen.groups.get(groupKey);
    if (!st || !group) {
      socket.destroy();
      return;
    }
    st.info = this.refreshedInfo(st, socket);
    this.byHttpSocket.set(socket, st);
    const { gen } = st;
    const server = Engine.connectionServer(group, st.info);
    const engine = this;
    st.h2 = new Http2Connection(socket, {
      server,
      get exiting(): boolean {
        return engine.stopping || gen !== engine.generation;
      },
      request: (head, body, out) => this.http2Request(st, gen, group, head, body, out),
      log: (level, message) => this.logConnection(group, st.info, `${message} while processing HTTP/2 connection`, level, server.conf.errorLogs),
      requestLog: (r, level, message) => logRequest(gen.cx, r, level, message),
      headerLog: (level, message) => gen.cx.errorLog.write(
        server.conf.errorLogs, level, `${message} while reading client request headers`, st.info.id, `, client: ${st.info.peerAddr}, server: ${server.name}`,
      ),
      unreadStream: (rawHeaders, message, status) => logUnreadStream(gen.cx, st.info, server, rawHeaders, message, status),
    }, first, st.info.acceptedAtMs);
    if (this.stopping || gen !== this.generation) st.h2.stop();
  }

  /** Serves the request of an HTTP/2 stream. */
  private http2Request(st: ConnectionState, gen: Generation, group: ListenGroup, head: ClientRequestHead, body: Http2Body, out: Http2Target): HttpRequestState {
    st.active++;
    st.info.requests++;
    return serveClientRequest(gen.cx, head, body, out, st.info, group, () => {
      st.active--;
    });
  }

  /**
   * Serves a new configuration: opens its logs, reads its certificates, binds
   * its new sockets, then swaps it in and closes the sockets it no longer has.
   * @throws Error with nginx's wording; the running configuration is kept
   */
  async reload(compiled: CompiledConfig): Promise<void> {
    const errorLog = new ErrorLogFiles();
    const gen = prepare(compiled, errorLog, this.tempFiles, this.numbers, () => this.admitUpstream(), this.limitReq, this.cache);
    await this.bindNew(gen);
    const old = this.generation;
    this.generation = gen;
    // the connections of the old configuration end as an old worker's do (ngx_close_idle_connections): an HTTP/2
    // one with GOAWAY, once its streams are done; a kept-alive HTTP/1.x one now, a busy one once its response is sent
    for (const st of this.connections.values()) {
      if (st.h2) st.h2.stop();
      else st.http1?.stop();
    }
    this.closeAfterShutdownTimeout(old.table.main.workerShutdownTimeoutMs);
    for (const [key, server] of this.listeners) {
      if (gen.groups.has(key)) continue;
      server.close();
      this.listeners.delete(key);
    }
    for (const [key, server] of this.listeners) {
      const group = gen.groups.get(key)!;
      tlsServerOf(server)?.setSecureContext(gen.tls.optionsOf(group.servers.defaultServer));
    }
    setTimeout(() => {
      void old.cx.upstreams.close();
      old.cx.fastcgi.closeAll();
      old.cx.resolver.close();
      old.cx.accessLog.close();
      old.cx.errorLog.close();
    }, 60_000).unref();
  }

  /** Reopens every log file (SIGUSR1). */
  reopenLogs(): void {
    this.generation.cx.errorLog.reopen();
    this.generation.cx.accessLog.reopen();
  }

  private closeListeners(): Promise<void> {
    const closing = [...this.listeners.values()].map((s) => new Promise<void>((resolve) => s.close(() => resolve())));
    this.listeners.clear();
    return Promise.all(closing).then(() => undefined);
  }

  /**
   * Graceful shutdown (SIGQUIT): stops accepting, closes idle connections,
   * lets requests in flight finish, then closes upstream pools and logs.
   */
  async shutdown(): Promise<void> {
    this.stopping = true;
    const closed = this.closeListeners();
    for (const st of this.connections.values()) {
      if (st.h2) st.h2.stop();
      else if (st.http1) st.http1.stop();
      else st.raw.destroy();
    }
    this.closeAfterShutdownTimeout(this.generation.table.main.workerShutdownTimeoutMs);
    this.exitWhenNoTimersLeft();
    await closed;
    await this.finish();
  }

  /**
   * An exiting nginx worker ends once no timer is left
   * (`ngx_event_no_timers_left` in `ngx_worker_process_cycle`), closing the
   * connections still open: HTTP/2 streams that only wait for the client to
   * open its window have no timer. Checked every 100 ms while shutting down.
   */
  private exitWhenNoTimersLeft(): void {
    const check = setInterval(() => {
      const open = [...this.connections.values()];
      if (open.length === 0) {
        clearInterval(check);
        return;
      }
      if (!open.every((st) => st.h2?.waitsForWindowOnly)) return;
      clearInterval(check);
      for (const st of open) {
        st.h2!.destroy();
        st.raw.destroy();
      }
    }, 100);
    check.unref();
  }

  /**
   * `worker_shutdown_timeout` (`ngx_shutdown_timer_handler`): the
   * connections open now that are still open after `timeoutMs` are closed,
   * requests in progress cut; 0: they are left to end.
   */
  private closeAfterShutdownTimeout(timeoutMs: number): void {
    if (timeoutMs <= 0) return;
    const open = [...this.connections.values()];
    setTimeout(() => {
      for (const st of open) {
        st.h2?.destroy();
        st.raw.destroy();
      }
    }, timeoutMs).unref();
  }

  /** Fast shutdown (SIGTERM, SIGINT): every connection is closed at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    const closed = this.closeListeners();
    for (const st of this.connections.values()) {
      st.h2?.destroy();
      st.raw.destroy();
    }
    await closed;
    await this.finish();
  }

  private async finish(): Promise<void> {
    const { cx } = this.generation;
    await cx.upstreams.close();
    cx.fastcgi.closeAll();
    cx.resolver.close();
    cx.accessLog.close();
    cx.errorLog.close();
  }
}
