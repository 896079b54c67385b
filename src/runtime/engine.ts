/**
 * The running server, wired from its parts in `server/`: listening sockets
 * (`listeners.ts`), client connections (`connections.ts`), TLS handshakes
 * (`tls-handshake.ts`), HTTP/1.x and HTTP/2 sessions (`http1-sessions.ts`,
 * `http2-sessions.ts`) and configuration generations (`generations.ts`). A
 * reload builds a new generation off to the side (logs opened, certificates
 * read, new sockets bound) and swaps it in only when all of that succeeded;
 * connections in flight finish on the generation they started with.
 */
import type { CompiledConfig } from '../config/compile.js';
import type { ListenGroup, RouteTable } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import { CacheZones } from './cache/zone.js';
import { ConnectionNumbers } from './connection-numbers.js';
import { LimitConnZones, type LimitConnStore } from './limit-conn-zones.js';
import { LimitReqZones, type LimitReqStore } from './limit-req-zones.js';
import type { EarlyListener, ListenHooks } from './listen.js';
import { connectionLogger } from './server/connection-log.js';
import { ClientConnections } from './server/connections.js';
import { Generations, prepareGeneration, type Lasting } from './server/generations.js';
import { Http1Sessions } from './server/http1-sessions.js';
import { Http2Sessions } from './server/http2-sessions.js';
import { ProcessStatus } from './stub-status.js';
import { Listeners } from './server/listeners.js';
import type { Generation } from './server/generations.js';
import { passListenMatches } from './stream/pass.js';
import { StreamServers } from './stream/server.js';
import type { StreamEnv } from './stream/session.js';
import { TlsHandshakes } from './server/tls-handshake.js';
import { LocalSessions, type SessionStore } from './session-cache.js';
import { TempFiles } from './temp-files.js';
import type { PeerEvent } from './upstream/round-robin.js';

/** How a worker process's engine differs from a single process's. */
export interface EngineOptions {
  /**
   * A worker other than a generation's first: it binds the same addresses at
   * the same time, so only the first logs the failures (all retry alike).
   */
  readonly quietBind?: boolean;
  /** Where the `limit_req_zone` states live (a worker's are the master's). Default: in this process. */
  readonly limitReq?: LimitReqStore;
  /** The stub_status figures of the process (a worker's answer for all workers through the master). Default: this process's own. */
  readonly status?: ProcessStatus;
  /** Where the `limit_conn_zone` states live (a worker's are the master's). Default: in this process. */
  readonly limitConn?: LimitConnStore;
  /** Where the sessions of `ssl_session_cache shared:` and `sticky learn` zones live (a worker's are the master's). Default: in this process. */
  readonly sslSessions?: SessionStore;
  /** Where the failures of peers in upstream groups with `zone` are told (a worker tells the others through the master; `applyPeerEvent`). */
  readonly sharePeerEvent?: (event: PeerEvent) => void;
  /**
   * This process is a worker of jinx's master: it logs nginx's worker
   * notices (`gracefully shutting down`, `exiting`, `exit`, `reopening
   * logs`), and a graceful stop leaves the connections that have sent
   * nothing yet to be served, as an exiting nginx worker closes only its
   * idle keep-alive connections (`ngx_close_idle_connections`).
   */
  readonly worker?: boolean;
  /** Addresses bound already (`listenEarly`), by `listenKey`, with the connections they accepted. */
  readonly early?: ReadonlyMap<string, EarlyListener>;
  /** Session ticket keys shared with the other workers (48 bytes); default: each TLS context its own. */
  readonly ticketKeys?: Buffer;
  /** A worker's place among `worker_processes`, for its connection and temp-file numbers (`ConnectionNumbers`, `TempFiles`). */
  readonly workerSlot?: { readonly index: number; readonly of: number };
  /** Told each start-up failure `start` logs (a worker tells its master). */
  readonly onStartupMessage?: (level: LogLevel, message: string) => void;
}

export class Engine {
  /** What lasts across reloads: temp-file and connection numbers, `limit_req` and cache zones. */
  private readonly lasting: Lasting;
  private readonly generations: Generations;
  private readonly connections: ClientConnections;
  private readonly listeners: Listeners;
  /** The stream module's sockets and sessions. */
  private readonly streams = new StreamServers((address) => {
    // ngx_stream_pass_handler: the http module's listening sockets
    for (const [key, group] of this.generations.current.groups) {
      const front = passListenMatches(group, address) ? this.listeners.front(key) : undefined;
      if (front) return (socket) => front.emit('connection', socket);
    }
    return undefined;
  });

  /** @throws Error when a file of the configuration cannot be opened */
  private constructor(compiled: CompiledConfig, private readonly opts: EngineOptions) {
    const slot = opts.workerSlot;
    const numbers = slot ? new ConnectionNumbers(slot.index + 1, slot.of) : new ConnectionNumbers();
    this.lasting = {
      tempFiles: slot ? new TempFiles(slot.index + 1, slot.of) : new TempFiles(),
      numbers,
      // nginx logs a zone that is full to the cycle's log (the main error_log of the configuration in use)
      limitReq: opts.limitReq ?? new LimitReqZones((message) => this.log('alert', message)),
      limitConn: opts.limitConn ?? new LimitConnZones(),
      cache: new CacheZones((level, message) => this.log(level, message)),
      status: opts.status ?? new ProcessStatus(),
      admitUpstream: () => this.connections.admitUpstream(),
      ticketKeys: opts.ticketKeys,
      sharePeerEvent: opts.sharePeerEvent,
      sessions: opts.sslSessions ?? new LocalSessions(),
    };
    this.generations = new Generations(prepareGeneration(compiled, new ErrorLogFiles(), this.lasting));
    const generations = this.generations;
    const logConnection = connectionLogger(() => generations.current.cx.errorLog);
    this.connections = new ClientConnections(numbers, {
      limit: () => generations.current.table.main.workerConnections,
      othersInUse: () => {
        const { table, cx } = generations.current;
        return (table.main.masterProcess ? 1 : 0) + this.listeners.count + this.streams.count + this.streams.openCount + cx.upstreams.connectionCount();
      },
      log: (level, message) => this.log(level, message),
    }, logConnection, this.lasting.status.counters);
    const handshakes = new TlsHandshakes(this.connections, generations, logConnection);
    const http1 = new Http1Sessions(this.connections, generations, logConnection);
    const http2 = new Http2Sessions(this.connections, generations, logConnection);
    const groupNow = (key: string): ListenGroup | undefined => generations.current.groups.get(key);
    const sslSessions = this.lasting.sessions;
    this.listeners = new Listeners((key, group): ListenHooks => ({
      group: groupNow,
      tls: () => generations.current.tls,
      sslSessions,
      onAccept: (socket) => this.connections.accept(socket, group.unixPath, generations.current),
      onProxyProtocol: (socket, read) => this.connections.proxyProtocolRead(socket, read, groupNow(key)),
      onNothingRead: (socket, why, proxyProtocol) => this.connections.nothingRead(socket, why, groupNow(key), proxyProtocol),
      firstByteTimeoutMs: () => (groupNow(key) ?? group).servers.defaultServer.conf.clientHeaderTimeoutMs,
      onClientHello: (socket, bytes) => handshakes.clientHello(socket, bytes, key),
      onHttp1: (socket, first) => http1.start(socket, first, key),
      onHttp2: (socket, first) => http2.start(socket, first, key),
      handshakeContext: (server, socket, serverName) => handshakes.context(server, socket, serverName, key),
      onServerName: (socket, rejected) => handshakes.serverName(socket, rejected),
      onTlsError: (err, socket) => handshakes.failed(err, socket, key),
    }));
  }

  /** An error already written to the logs (the caller only exits). */
  static readonly ReportedError = class ReportedError extends Error {};

  /**
   * Opens the logs, reads certificates and binds every listening socket. A
   * busy address is retried five times, 500 ms apart, each failure logged
   * (`bind() to ADDR failed (98: Address already in use)`), then
   * `still could not bind()`, as `ngx_open_listening_sockets` does (in a
   * worker, through its master: node:cluster binds each address once and
   * shares it).
   * @throws ConfigError for files that cannot be opened (not yet logged),
   *   `Engine.ReportedError` when binding failed (logged)
   */
  static async start(compiled: CompiledConfig, startupLog: { readonly isStderr: boolean }, opts: EngineOptions = {}): Promise<Engine> {
    const engine = new Engine(compiled, opts);
    const targets = compiled.table.main.errorLogs;
    const mirror = !startupLog.isStderr || !targets.some((t) => t.path === 'stderr');
    const startupMessage = (level: LogLevel, message: string): void => {
      if (opts.quietBind) return;
      engine.log(level, message);
      opts.onStartupMessage?.(level, message);
      if (mirror && !targets.some((t) => t.path === 'stderr')) process.stderr.write(Buffer.from(`nginx: [${level}] ${message}\n`, 'latin1'));
    };
    for (let attempt = 1; ; attempt++) {
      try {
        await engine.listeners.bindNew(engine.generations.current, opts.early);
        const env = engine.streamEnv(engine.generations.current);
        if (env) await engine.streams.bindNew(env);
        engine.useStreams(engine.generations.current);
        return engine;
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        startupMessage('emerg', err.message);
        if (attempt === 5) {
          startupMessage('emerg', 'still could not bind()');
          await engine.listeners.closeAll();
          await engine.streams.closeAll();
          await engine.generations.finish();
          throw new Engine.ReportedError('still could not bind()');
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** What the stream sessions of a generation use; undefined without a `stream` block. */
  private streamEnv(gen: Generation): StreamEnv | undefined {
    const table = gen.table.stream;
    if (!table) return undefined;
    const { cx } = gen;
    return {
      table, errorLog: cx.errorLog, accessLog: cx.accessLog, resolver: cx.resolver, roundRobin: cx.upstreams.roundRobin,
      numbers: this.lasting.numbers, limitConn: cx.limitConn, exiting: () => this.generations.exiting(gen),
    };
  }

  /** Puts a generation's stream servers in service (none: every stream socket closes). */
  private useStreams(gen: Generation): void {
    const env = this.streamEnv(gen);
    if (env) this.streams.use(env);
    else void this.streams.closeAll();
  }

  /** The configuration being served. */
  get table(): RouteTable {
    return this.generations.current.table;
  }

  /** Client connections open now (a stopping worker exits when none is left). */
  get openConnections(): number {
    return this.connections.openCount + this.streams.openCount;
  }

  /** Writes a line without connection context to the main `error_log`. */
  log(level: LogLevel, message: string): void {
    this.generations.log(level, message);
  }

  /**
   * Serves a new configuration (SIGHUP): opens its logs, reads its
   * certificates, binds its new sockets, then swaps it in; the connections
   * of the old one end as an old worker's do (`ClientConnections.stopSessions`,
   * `worker_shutdown_timeout`), and the sockets it no longer has close.
   * @throws Error with nginx's wording; the running configuration is kept
   */
  async reload(compiled: CompiledConfig): Promise<void> {
    const gen = prepareGeneration(compiled, new ErrorLogFiles(), this.lasting);
    await this.listeners.bindNew(gen);
    const env = this.streamEnv(gen);
    if (env) await this.streams.bindNew(env);
    const old = this.generations.swap(gen);
    this.connections.stopSessions();
    this.connections.closeAfter(old.table.main.workerShutdownTimeoutMs);
    this.streams.closeAfter(old.table.main.workerShutdownTimeoutMs);
    this.listeners.keepOnly(gen);
    this.useStreams(gen);
    this.generations.retire(old);
  }

  /**
   * A worker whose master is reloading: the connections it has end as in a
   * graceful shutdown (HTTP/2 GOAWAY, keep-alive connections closed after
   * their response), as nginx's old workers end theirs at once; it goes on
   * accepting, and serving what it accepts as before, until the new workers
   * serve (then `shutdown`), so no connection is refused meanwhile.
   */
  retire(): void {
    this.connections.stopSessions();
  }

  /** Applies another worker's failure or recovery of a peer in an upstream group (http's or stream's) with `zone` to the configuration served. */
  applyPeerEvent(event: PeerEvent): void {
    const { cx, table } = this.generations.current;
    // a stream group with `zone` shares its peers the same way (nginx's zones are one namespace)
    const groups = !table.upstreams.has(event.group.toLowerCase()) && table.stream ? table.stream.upstreams : table.upstreams;
    cx.upstreams.roundRobin.applyShared(event, groups);
  }

  /** Reopens every log file (SIGUSR1). */
  reopenLogs(): void {
    if (this.opts.worker) this.log('notice', 'reopening logs');
    const { cx } = this.generations.current;
    cx.errorLog.reopen();
    cx.accessLog.reopen();
  }

  /**
   * Graceful shutdown (SIGQUIT): stops accepting, closes idle connections,
   * lets requests in flight finish (within `worker_shutdown_timeout`), then
   * closes upstream pools and logs.
   */
  async shutdown(): Promise<void> {
    if (this.opts.worker) this.log('notice', 'gracefully shutting down');
    this.generations.stop();
    const closed = Promise.all([this.listeners.closeAll(), this.streams.closeAll()]);
    if (this.opts.worker) this.connections.stopSessions();
    else this.connections.stopAll();
    this.connections.closeAfter(this.generations.current.table.main.workerShutdownTimeoutMs);
    this.streams.closeAfter(this.generations.current.table.main.workerShutdownTimeoutMs);
    this.connections.closeWhenNoTimersLeft();
    await closed;
    await this.finish();
  }

  /** `ngx_worker_process_exit`: a worker's last lines, then the generation in service is closed. */
  private async finish(): Promise<void> {
    if (this.opts.worker) {
      this.log('notice', 'exiting');
      this.log('notice', 'exit');
    }
    await this.generations.finish();
  }

  /** Fast shutdown (SIGTERM, SIGINT): every connection is closed at once. */
  async stop(): Promise<void> {
    this.generations.stop();
    const closed = Promise.all([this.listeners.closeAll(), this.streams.closeAll()]);
    this.connections.destroyAll();
    this.streams.destroyAll();
    await closed;
    await this.finish();
  }
}
