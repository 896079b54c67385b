/**
 * The running server: listening sockets, client connections and the current
 * configuration generation. A reload builds a new generation off to the side
 * (logs opened, certificates read, new sockets bound) and swaps it in only
 * when all of that succeeded; connections in flight finish on the generation
 * they started with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { constants as h2, type Http2ServerRequest, type Http2ServerResponse, type Http2Session, type Http2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { SecureContext, TLSSocket } from 'node:tls';
import type { CompiledConfig } from '../config/compile.js';
import type { ErrorLogTarget, ListenGroup, RouteTable, VirtualServer } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { AccessLogFiles } from '../log/access-log.js';
import { connectionContext, ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import { ConnectionNumbers } from './connection-numbers.js';
import type { RuntimeContext } from './context.js';
import {
  bindListener, createListener, H2_SESSION_OPTIONS, handshakeRejected, httpServers, listenKey, sentSni, TlsContexts, type Http2StartSettings, type Listener,
} from './listen.js';
import { logUnreadStream, serveClientRequest } from './phases.js';
import { logRequest } from './context.js';
import { parseClientHello } from './client-hello.js';
import { findServer } from './server-names.js';
import { prepareFiles } from './prepare-files.js';
import { resetConnection } from './exchange.js';
import { headerBlockError } from './h2-limits.js';
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
  /** The HTTP/2 session on it, once there is one. */
  session: Http2Session | undefined;
  /**
   * The server an HTTP/2 connection belongs to (the default server of its
   * address, or the one its SNI name chose): its limits apply to every
   * stream, whatever `:authority` says (`hc->conf_ctx` in nginx).
   */
  h2Server: VirtualServer | undefined;
  /** The last stream an HTTP/2 GOAWAY for `keepalive_requests` named: later ones are not served. */
  h2LastStream: number | undefined;
  /** Requests in progress. */
  active: number;
  /** Whether the connection stays open after its last response (HTTP/1.x keep-alive). */
  keptAlive: boolean;
  /**
   * Closes the connection `keepalive_timeout` after its last response; one
   * timer per connection, re-armed with `refresh()`, ignored while a request
   * is in progress.
   */
  idleTimer: NodeJS.Timeout | undefined;
  idleTimeoutMs: number;
  /** The HTTP/1.x request being served (or last served) and its state, for lingering close. */
  current: { readonly req: IncomingMessage; readonly r: HttpRequestState } | undefined;
  /** The first TLS record the client sent (its ClientHello), for the `$ssl_*` variables Node.js has no answer for. */
  clientHello: Buffer | undefined;
}

/**
 * What node:http answers to a request it cannot parse (its `socketOnError`
 * when no `clientError` listener takes over): the engine listens for header
 * time-outs and keeps node's replies for the rest.
 */
const NODE_CLIENT_ERROR_REPLIES: Readonly<Record<string, string>> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
};
const NODE_BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/** `TLS1_2_VERSION`, a ClientHello's `legacy_version` from TLS 1.2 and 1.3 clients. */
const TLS1_2_VERSION = 0x0303;
/**
 * `ngx_http_v2_lingering_close`: once an HTTP/2 connection has sent its
 * last frame and half-closed, what the client still sends is read and
 * dropped until it closes, nothing came for `lingering_timeout`, or
 * `lingering_time` passed (`lingering_close off` closes at once), so that
 * the client gets every frame rather than a reset.
 */
function lingerAfterGoaway(socket: Socket, lingering: { readonly close: string; readonly timeMs: number; readonly timeoutMs: number }): void {
  if (lingering.close === 'off') {
    socket.destroy();
    return;
  }
  socket.resume();
  const deadline = Date.now() + lingering.timeMs;
  let seen = socket.bytesRead;
  const check = (): void => {
    if (socket.destroyed) return;
    const now = Date.now();
    if (socket.bytesRead === seen || now >= deadline) {
      socket.destroy();
      return;
    }
    seen = socket.bytesRead;
    setTimeout(check, Math.min(lingering.timeoutMs, deadline - now)).unref();
  };
  setTimeout(check, Math.min(lingering.timeoutMs, lingering.timeMs)).unref();
}

/** `NGX_HTTP_V2_MAX_WINDOW`: the connection window `ngx_http_v2_init` opens. */
const MAX_WINDOW_BYTES = 2 ** 31 - 1;
/** The smallest initial stream window jinx advertises (RFC 9113's default, node:http2's). */
const NODE_DEFAULT_WINDOW_BYTES = 65_535;

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/;
const plainAddr = (a: string | undefined): string => (a ? IPV4_MAPPED.exec(a)?.[1] ?? a : '');
/** Identifies a TCP connection across the raw socket, its TLS socket and its HTTP/2 session. */
const socketKey = (s: { remoteAddress?: string; remotePort?: number; localPort?: number }): string =>
  `${s.remoteAddress}|${s.remotePort}|${s.localPort}`;

/** Opens the logs and reads the certificates of a compiled configuration. @throws Error when a file cannot be opened */
function prepare(
  compiled: CompiledConfig, errorLog: ErrorLogFiles, tempFiles: TempFiles, numbers: ConnectionNumbers, admit: () => boolean,
): Generation {
  const table = compiled.table;
  prepareFiles(table);
  errorLog.open(table.errorLogTargets);
  const accessLog = new AccessLogFiles();
  accessLog.open(table.accessLogTargets);
  const tls = new TlsContexts(table);
  const upstreams = new UpstreamClients(numbers, admit, table.main.workerConnections);
  const cx: RuntimeContext = { table, errorLog, accessLog, upstreams, fastcgi: new FastcgiConnections(), resolver: new NameResolver(), tempFiles };
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
  /** The same connections by `socketKey`, to find them from a TLS socket or an HTTP/2 session. */
  private readonly byKey = new Map<string, ConnectionState>();
  private readonly byHttpSocket = new WeakMap<Socket, ConnectionState>();
  private readonly bySession = new WeakMap<Http2Session, ConnectionState>();
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
    const engine: Engine = new Engine(prepare(compiled, new ErrorLogFiles(), tempFiles, numbers, () => engine.admitUpstream()), tempFiles, numbers);
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
        onAccept: (socket) => this.accept(socket, key),
        onClientHello: (socket, bytes) => this.clientHello(socket, bytes, key),
        onConnection: (socket) => this.secured(socket, key),
        handshakeContext: (server, socket, serverName) => this.handshakeContext(server, socket, serverName, key),
        onTlsError: (err, socket) => this.handshakeFailed(err, socket, key),
        sessionSettings: (socket) => this.sessionSettings(socket, key),
        onSession: (session, socket) => this.acceptSession(session, socket, key),
        onRequest: (req, res) => this.request(key, req, res),
      });
      this.headerTimeout(server, group);
      for (const http of httpServers(server)) {
        http.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.clientError(err, socket, key));
      }
      await bindListener(server, group);
      this.listeners.set(key, server);
    }
  }

  /** `client_header_timeout` of a listening address's default server, for node:http's header check. */
  private headerTimeout(server: Listener, group: ListenGroup): void {
    for (const http of httpServers(server)) {
      (http as { headersTimeout?: number }).headersTimeout = group.servers.defaultServer.conf.clientHeaderTimeoutMs;
    }
  }

  /** The listening address as nginx prints it for connections without a request (`server: 127.0.0.1:80`). */
  private static listenText(group: ListenGroup): string {
    return group.host.includes(':') ? `[${group.host}]:${group.port}` : `${group.host}:${group.port}`;
  }

  /**
   * A client error node:http reports on a connection. A request header not
   * complete within `client_header_timeout` closes the connection without a
   * response, as `ngx_http_wait_request_handler` and
   * `ngx_http_read_request_header` do, logging at info `client timed out
   * (110: …) while waiting for request` (nothing received yet) or `while
   * reading client request headers` (node keeps no partial request, so the
   * line has no `request:` field and no access-log entry is written, where
   * nginx has both); reset with `reset_timedout_connection`. Other errors get
   * node's own reply.
   */
  private clientError(err: NodeJS.ErrnoException, socket: Socket, key: string): void {
    const st = this.byHttpSocket.get(socket);
    const group = this.generation.groups.get(key);
    if (err.code !== 'ERR_HTTP_REQUEST_TIMEOUT' || !st || !group) {
      const message = (socket as Socket & { _httpMessage?: { headersSent: boolean } | null })._httpMessage;
      if (socket.writable && !message?.headersSent) socket.write(NODE_CLIENT_ERROR_REPLIES[err.code ?? ''] ?? NODE_BAD_REQUEST);
      socket.destroy(err);
      return;
    }
    const { info } = st;
    const server = (group.byLocalAddr.get(info.localAddr) ?? group.servers).defaultServer;
    const timedOut = `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`;
    const errorLog = this.generation.cx.errorLog;
    if (info.requests === 0 && socket.bytesRead === 0) {
      this.logConnection(group, info, `${timedOut} while waiting for request`, 'info', server.conf.errorLogs);
    } else {
      errorLog.write(server.conf.errorLogs, 'info', `${timedOut} while reading client request headers`, info.id, connectionContext(info.peerAddr, server.name));
    }
    if (server.conf.resetTimedoutConnection) resetConnection(socket);
    else socket.destroy();
  }

  /**
   * Closing a connection that is not kept alive (node calls `destroySoon()`)
   * as nginx does. A request body the response did not wait for (a refused
   * upload) is still read and dropped before closing, as
   * `ngx_http_discarded_request_body_handler` does, until it ends, nothing
   * came for `lingering_timeout`, or `lingering_time` has passed, so that the
   * client gets the response rather than a reset. With `lingering_close
   * always` the connection is half-closed after the response and read until
   * the client closes it, within the same limits (`ngx_http_set_lingering_close`).
   * `lingering_close off` closes at once.
   */
  private lingerOnClose(socket: Socket, st: ConnectionState): void {
    const destroySoon = socket.destroySoon.bind(socket);
    socket.destroySoon = () => {
      const current = st.current;
      const lingering = current?.r.loc.lingering;
      const discarding = current !== undefined && !current.req.complete;
      if (!lingering || lingering.close === 'off' || (lingering.close === 'on' && !discarding)) {
        destroySoon();
        return;
      }
      if (discarding) current.req.once('end', () => destroySoon());
      else socket.once('finish', () => socket.once('end', () => socket.destroy())).end();
      const deadline = Date.now() + lingering.timeMs;
      let seen = socket.bytesRead;
      const check = (): void => {
        if (socket.destroyed) return;
        const now = Date.now();
        if (socket.bytesRead === seen || now >= deadline) {
          socket.destroy();
          return;
        }
        seen = socket.bytesRead;
        setTimeout(check, Math.min(lingering.timeoutMs, deadline - now)).unref();
      };
      setTimeout(check, Math.min(lingering.timeoutMs, lingering.timeMs)).unref();
    };
  }

  /** What a request needs to know about its connection; `id` is a new connection number unless given. */
  private connectionInfo(socket: Socket, id?: number, acceptedAtMs = Date.now(), clientHello?: Buffer): ClientConnection {
    const tls = (socket as TLSSocket).encrypted ? (socket as TLSSocket) : undefined;
    return {
      id: id ?? this.numbers.next(),
      peerAddr: plainAddr(socket.remoteAddress),
      peerPort: socket.remotePort ?? 0,
      localAddr: plainAddr(socket.localAddress),
      localPort: socket.localPort ?? 0,
      tls: tls && new TlsDetails(tls, clientHello),
      requests: 0,
      acceptedAtMs,
    };
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
  private accept(raw: Socket, groupKey: string): void {
    const limit = this.generation.table.main.workerConnections;
    if (limit - this.connectionsInUse() <= Math.floor(limit / 16)) this.drain(limit);
    if (this.connectionsInUse() >= limit) {
      this.log('alert', `${limit} worker_connections are not enough`);
      raw.destroy();
      return;
    }
    raw.setNoDelay(true);
    const st: ConnectionState = {
      info: this.connectionInfo(raw), raw, session: undefined, h2Server: undefined, h2LastStream: undefined, active: 0, keptAlive: false, idleTimer: undefined, idleTimeoutMs: 0,
      current: undefined, clientHello: undefined,
    };
    this.lingerOnClose(raw, st);
    const key = socketKey(raw);
    this.connections.set(raw, st);
    this.byKey.set(key, st);
    this.byHttpSocket.set(raw, st);
    raw.once('end', () => this.clientClosed(st, groupKey));
    raw.once('close', () => {
      if (st.idleTimer) clearTimeout(st.idleTimer);
      this.connections.delete(raw);
      this.byKey.delete(key);
    });
  }

  /**
   * Logs, at info, a client that closed an idle connection, as
   * `ngx_http_wait_request_handler` (`client closed connection while waiting
   * for request, client: ADDR, server: LISTEN_ADDR`, in the default server's
   * `error_log`) and `ngx_http_keepalive_handler` (`client ADDR closed
   * keepalive connection`, no context) do. HTTP/2 sessions log nothing here,
   * as in nginx; a TLS connection closed before its first byte is `client
   * closed connection while SSL handshaking`.
   */
  private clientClosed(st: ConnectionState, groupKey: string): void {
    if (st.session || st.active > 0) return;
    const group = this.generation.groups.get(groupKey);
    if (!group) return;
    const { info } = st;
    if (info.requests > 0) {
      if (!st.keptAlive) return;
      this.generation.cx.errorLog.write(this.defaultErrorLogs(group, info), 'info', `client ${info.peerAddr} closed keepalive connection`, info.id);
    } else if (group.ssl ? info.tls !== undefined : st.raw.bytesRead === 0) {
      this.logConnection(group, info, 'client closed connection while waiting for request');
    } else if (st.raw.bytesRead === 0) {
      // ngx_http_ssl_handshake: the connection closed before its first byte
      this.logConnection(group, info, 'client closed connection while SSL handshaking');
    }
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
    const idle = [...this.connections.values()].filter((c) => c.active === 0);
    if (idle.length === 0) return;
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.reuseWarnedSec) {
      this.reuseWarnedSec = second;
      this.log('warn', `${limit} worker_connections are not enough, reusing connections`);
    }
    const n = Math.max(Math.min(32, Math.floor(idle.length / 8)), 1);
    for (const c of idle.slice(0, n)) {
      this.connections.delete(c.raw);
      if (c.session) c.session.destroy();
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
   * A TLS socket carrying HTTP/1.x: its connection gets the TLS details; the
   * client's end of it is read from the TLS socket (the TCP socket below
   * sees none).
   */
  private secured(socket: Socket, groupKey: string): void {
    const st = this.byKey.get(socketKey(socket));
    if (!st) return;
    st.info = this.connectionInfo(socket, st.info.id, st.info.acceptedAtMs, st.clientHello);
    this.byHttpSocket.set(socket, st);
    socket.once('end', () => this.clientClosed(st, groupKey));
    this.lingerOnClose(socket, st);
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
   * The SETTINGS an HTTP/2 connection on `socket` starts with: its server's
   * `http2_max_concurrent_streams` and `http2_body_preread_size`, as
   * `ngx_http_v2_init` sends them. A preread size under node's 65535 is sent
   * as 65535: nginx opens a stream's window once its body is read,
   * node:http2 cannot, and a smaller window would slow or stall uploads.
   */
  private sessionSettings(socket: Socket, key: string): Http2StartSettings {
    const st = this.byKey.get(socketKey(socket));
    const group = this.generation.groups.get(key);
    if (!st || !group) return H2_SESSION_OPTIONS.settings;
    const { conf } = Engine.connectionServer(group, this.connectionInfo(socket, st.info.id, st.info.acceptedAtMs, st.clientHello));
    return {
      maxConcurrentStreams: conf.http2MaxConcurrentStreams,
      initialWindowSize: Math.max(conf.http2BodyPrereadSizeBytes, NODE_DEFAULT_WINDOW_BYTES),
    };
  }

  /**
   * An HTTP/2 session: its connection gets the session, the TLS details and
   * its server (which chose the SETTINGS it started with); the connection's
   * window opens to the largest, as `ngx_http_v2_init` opens it.
   */
  private acceptSession(session: Http2Session, socket: Socket, key: string): void {
    const st = this.byKey.get(socketKey(socket));
    const group = this.generation.groups.get(key);
    if (!st || !group) {
      session.destroy();
      return;
    }
    st.info = this.connectionInfo(socket, st.info.id, st.info.acceptedAtMs, st.clientHello);
    st.session = session;
    st.h2Server = Engine.connectionServer(group, st.info);
    this.bySession.set(session, st);
    session.setLocalWindowSize(MAX_WINDOW_BYTES);
    const { conf } = st.h2Server;
    socket.once('finish', () => lingerAfterGoaway(socket, conf.lingering));
    // until its first stream, the timer ngx_http_init_connection set runs: client_header_timeout
    this.armSessionIdle(st, conf.clientHeaderTimeoutMs);
    if (this.stopping) this.closeSession(st);
  }

  /**
   * `ngx_http_v2_handle_connection`: a connection without streams in
   * progress is closed after its server's `keepalive_timeout` (`timeoutMs`), with GOAWAY.
   */
  private armSessionIdle(st: ConnectionState, timeoutMs = st.h2Server!.conf.keepaliveTimeoutMs): void {
    if (st.idleTimer && st.idleTimeoutMs === timeoutMs) {
      st.idleTimer.refresh();
      return;
    }
    if (st.idleTimer) clearTimeout(st.idleTimer);
    st.idleTimeoutMs = timeoutMs;
    st.idleTimer = setTimeout(() => {
      if (st.active === 0) this.closeSession(st);
    }, timeoutMs);
    st.idleTimer.unref();
  }

  /**
   * Ends an HTTP/2 connection as nginx does once it sent GOAWAY
   * (`keepalive_requests`, `keepalive_timeout`, a reload or graceful
   * shutdown): one GOAWAY NO_ERROR naming the last stream processed
   * (node:http2's `close()`), streams in progress finish, what was written
   * is sent, then the connection is half-closed and lingers
   * (`ngx_http_v2_handle_connection`, `lingerAfterGoaway`), an idle one
   * too where nginx closes it at once (`ngx_http_v2_finalize_connection`):
   * node:http2 may still hold frames of a finished stream, which closing at
   * once would lose. node:http2 sends its GOAWAY a second time as it
   * closes the connection (the same code and last stream).
   */
  private closeSession(st: ConnectionState): void {
    const session = st.session!;
    if (!session.closed && !session.destroyed) session.close();
  }

  /**
   * What nginx does with a new HTTP/2 stream before its request runs
   * (`ngx_http_v2_state_headers`, `ngx_http_v2_state_field_len`,
   * `ngx_http_v2_state_process_header`), with the limits of the connection's
   * server. A header block over `large_client_header_buffers` ends the
   * connection with GOAWAY ENHANCE_YOUR_CALM and an info line (`client sent
   * too large header field while processing HTTP/2 connection, client: …,
   * server: LISTEN_ADDR`); the stream is not served, its access-log entry
   * has no request line and status 000. The stream that reaches
   * `keepalive_requests` (or any stream with `keepalive_timeout 0`, or once
   * the connection is older than `keepalive_time`) gets GOAWAY NO_ERROR
   * naming it as the last stream, before its response: it and the streams
   * before it finish, then the connection closes (`request` does). Streams
   * after it that node:http2 had already read are not served: node:http2
   * closes them without a frame once the GOAWAY is out, as nginx skips them.
   * @returns false when the stream is not to be served
   */
  private admitStream(st: ConnectionState, group: ListenGroup, req: Http2ServerRequest, session: Http2Session): boolean {
    const id = req.stream.id ?? 0;
    if (st.h2LastStream !== undefined && id > st.h2LastStream) return false;
    const server = st.h2Server ?? Engine.connectionServer(group, st.info);
    const { conf } = server;
    const tooLarge = headerBlockError(req.rawHeaders, conf.largeClientHeaderBuffers);
    if (tooLarge) {
      this.logConnection(group, st.info, `${tooLarge.message} while processing HTTP/2 connection`, 'info', conf.errorLogs);
      logUnreadStream(this.generation.cx, st.info, server, req.rawHeaders.slice(0, 2 * tooLarge.fieldsBefore));
      session.destroy(new Error(tooLarge.message), h2.NGHTTP2_ENHANCE_YOUR_CALM);
      return false;
    }
    if (conf.keepaliveTimeoutMs === 0 || st.info.requests + 1 >= conf.keepaliveRequests || Date.now() - st.info.acceptedAtMs > conf.keepaliveTimeMs) {
      st.h2LastStream = id;
    }
    return true;
  }

  private request(key: string, req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void {
    const session = (req as Http2ServerRequest).stream?.session;
    const socket = req.socket;
    const st = session ? this.bySession.get(session) : this.byHttpSocket.get(socket);
    const gen = this.generation;
    const group = gen.groups.get(key);
    if (!st || !group) {
      socket.destroy();
      return;
    }
    if (session && !this.admitStream(st, group, req as Http2ServerRequest, session)) return;
    if (session && st.idleTimer) {
      clearTimeout(st.idleTimer);
      st.idleTimer = undefined;
    }
    st.active++;
    st.info.requests++;
    // the stream that reached keepalive_requests is answered after the GOAWAY naming it (streams node:http2
    // read after it are not served); the connection closes once the streams up to it are done
    if (session && st.h2LastStream === (req as Http2ServerRequest).stream.id) session.goaway(h2.NGHTTP2_NO_ERROR, st.h2LastStream);
    if (this.stopping && !session) (res as ServerResponse).shouldKeepAlive = false;
    const r = serveClientRequest(gen.cx, req, res, st.info, group, (r) => {
      st.active--;
      if (session) {
        if (st.active > 0 || session.closed || session.destroyed) return;
        if (st.h2LastStream !== undefined) this.closeSession(st);
        else this.armSessionIdle(st);
        return;
      }
      st.keptAlive = (res as ServerResponse).shouldKeepAlive && r.sentHeaders['connection'] !== 'close';
      if (st.active > 0 || socket.destroyed || !st.keptAlive) return;
      if (this.stopping) {
        socket.destroySoon();
        return;
      }
      const timeoutMs = r.loc.keepaliveTimeoutMs;
      if (st.idleTimer && st.idleTimeoutMs === timeoutMs) {
        st.idleTimer.refresh();
        return;
      }
      if (st.idleTimer) clearTimeout(st.idleTimer);
      st.idleTimeoutMs = timeoutMs;
      st.idleTimer = setTimeout(() => {
        if (st.active === 0) socket.destroy();
      }, timeoutMs);
      st.idleTimer.unref();
    });
    if (!session) st.current = { req: req as IncomingMessage, r };
    else (req as Http2ServerRequest).stream.once('aborted', () => this.streamReset(r, (req as Http2ServerRequest).stream, session));
  }

  /**
   * A stream the client reset (RST_STREAM) before its response was complete,
   * logged at info as `ngx_http_v2_state_rst_stream` does; a stream ended
   * by the connection's end is not.
   */
  private streamReset(r: HttpRequestState, stream: Http2Stream, session: Http2Session): void {
    if (session.destroyed) return;
    const id = stream.id ?? 0;
    const code = stream.rstCode ?? h2.NGHTTP2_NO_ERROR;
    const message = code === h2.NGHTTP2_CANCEL ? `client canceled stream ${id}`
      : code === h2.NGHTTP2_REFUSED_STREAM ? `client refused stream ${id}`
        : code === h2.NGHTTP2_INTERNAL_ERROR ? `client terminated stream ${id} due to internal error`
          : `client terminated stream ${id} with status ${code}`;
    r.action ??= r.upstream ? 'sending to client' : 'sending response to client';
    logRequest(this.generation.cx, r, 'info', message);
  }

  /**
   * Serves a new configuration: opens its logs, reads its certificates, binds
   * its new sockets, then swaps it in and closes the sockets it no longer has.
   * @throws Error with nginx's wording; the running configuration is kept
   */
  async reload(compiled: CompiledConfig): Promise<void> {
    const errorLog = new ErrorLogFiles();
    const gen = prepare(compiled, errorLog, this.tempFiles, this.numbers, () => this.admitUpstream());
    await this.bindNew(gen);
    const old = this.generation;
    this.generation = gen;
    // the connections of the old configuration end as an old worker's HTTP/2 connections do (GOAWAY, then close)
    for (const st of this.connections.values()) if (st.session) this.closeSession(st);
    for (const [key, server] of this.listeners) {
      if (gen.groups.has(key)) continue;
      server.close();
      this.listeners.delete(key);
    }
    for (const [key, server] of this.listeners) {
      const group = gen.groups.get(key)!;
      this.headerTimeout(server, group);
      for (const http of httpServers(server)) {
        if (group.ssl && 'setSecureContext' in http) {
          (http as unknown as { setSecureContext(o: object): void }).setSecureContext(gen.tls.optionsOf(group.servers.defaultServer));
        }
      }
    }
    setTimeout(() => {
      void old.cx.upstreams.close();
      old.cx.fastcgi.closeAll();
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
      if (st.session) this.closeSession(st);
      else if (st.active === 0) st.raw.destroy();
    }
    await closed;
    await this.finish();
  }

  /** Fast shutdown (SIGTERM, SIGINT): every connection is closed at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    const closed = this.closeListeners();
    for (const st of this.connections.values()) {
      st.session?.destroy();
      st.raw.destroy();
    }
    await closed;
    await this.finish();
  }

  private async finish(): Promise<void> {
    const { cx } = this.generation;
    await cx.upstreams.close();
    cx.fastcgi.closeAll();
    cx.accessLog.close();
    cx.errorLog.close();
  }
}
