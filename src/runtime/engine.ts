/**
 * The running server: listening sockets, client connections and the current
 * configuration generation. A reload builds a new generation off to the side
 * (logs opened, certificates read, new sockets bound) and swaps it in only
 * when all of that succeeded; connections in flight finish on the generation
 * they started with.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse, Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { CompiledConfig } from '../config/compile.js';
import type { ListenGroup, RouteTable } from '../config/route-table.js';
import { AccessLogFiles } from '../log/access-log.js';
import { ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import type { RuntimeContext } from './context.js';
import { bindListener, createListener, listenKey, TlsContexts, type Listener } from './listen.js';
import { serveClientRequest } from './phases.js';
import type { ClientConnection } from './request.js';
import { UpstreamClients } from './upstream/clients.js';
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
  readonly info: ClientConnection;
  active: number;
  idleTimer: NodeJS.Timeout | undefined;
}

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/;
const plainAddr = (a: string | undefined): string => (a ? IPV4_MAPPED.exec(a)?.[1] ?? a : '');

/** Opens the logs and reads the certificates of a compiled configuration. @throws Error when a file cannot be opened */
function prepare(compiled: CompiledConfig, errorLog: ErrorLogFiles, tempFiles: TempFiles): Generation {
  const table = compiled.table;
  errorLog.open(table.errorLogTargets);
  const accessLog = new AccessLogFiles();
  accessLog.open(table.accessLogTargets);
  const tls = new TlsContexts(table);
  const cx: RuntimeContext = { table, errorLog, accessLog, upstreams: new UpstreamClients(), resolver: new NameResolver(), tempFiles };
  return { table, cx, tls, groups: new Map(table.listens.map((g) => [listenKey(g), g])) };
}

export class Engine {
  private readonly listeners = new Map<string, Listener>();
  /** HTTP/1.x client connections. */
  private readonly sockets = new Map<Socket, ConnectionState>();
  /** HTTP/2 client connections. */
  private readonly sessions = new Map<Http2Session, ConnectionState>();
  private nextConnectionId = 1;
  private stopping = false;

  private constructor(
    private generation: Generation,
    private readonly tempFiles: TempFiles,
  ) {}

  /**
   * Opens the logs, reads certificates and binds every listening socket.
   * @throws ConfigError or a system error, with nginx's wording
   */
  static async start(compiled: CompiledConfig): Promise<Engine> {
    const tempFiles = new TempFiles();
    const engine = new Engine(prepare(compiled, new ErrorLogFiles(), tempFiles), tempFiles);
    try {
      await engine.bindNew(engine.generation);
    } catch (err) {
      await engine.closeListeners();
      throw err;
    }
    return engine;
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
        onConnection: (socket) => this.accept(socket),
        onSession: (session) => this.acceptSession(session),
        onRequest: (req, res) => this.request(key, req, res),
      });
      await bindListener(server, group);
      this.listeners.set(key, server);
    }
  }

  private connectionInfo(socket: Socket): ClientConnection {
    const tls = (socket as TLSSocket).encrypted ? (socket as TLSSocket) : undefined;
    return {
      id: this.nextConnectionId++,
      peerAddr: plainAddr(socket.remoteAddress),
      peerPort: socket.remotePort ?? 0,
      localAddr: plainAddr(socket.localAddress),
      localPort: socket.localPort ?? 0,
      tls: tls && {
        serverName: (tls as TLSSocket & { servername?: string | false }).servername || undefined,
        protocol: tls.getProtocol() ?? undefined,
        cipher: tls.getCipher()?.name,
      },
      requests: 0,
      acceptedAtMs: Date.now(),
    };
  }

  private accept(socket: Socket): void {
    socket.setNoDelay(true);
    this.sockets.set(socket, { info: this.connectionInfo(socket), active: 0, idleTimer: undefined });
    socket.once('close', () => {
      const st = this.sockets.get(socket);
      if (st?.idleTimer) clearTimeout(st.idleTimer);
      this.sockets.delete(socket);
    });
  }

  private acceptSession(session: Http2Session): void {
    this.sessions.set(session, { info: this.connectionInfo(session.socket as Socket), active: 0, idleTimer: undefined });
    session.once('close', () => this.sessions.delete(session));
  }

  private request(key: string, req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void {
    const session = (req as Http2ServerRequest).stream?.session;
    const socket = req.socket;
    const st = session ? this.sessions.get(session) : this.sockets.get(socket);
    const gen = this.generation;
    const group = gen.groups.get(key);
    if (!st || !group) {
      socket.destroy();
      return;
    }
    st.active++;
    st.info.requests++;
    if (st.idleTimer) {
      clearTimeout(st.idleTimer);
      st.idleTimer = undefined;
    }
    if (this.stopping && !session) (res as ServerResponse).shouldKeepAlive = false;
    const r = serveClientRequest(gen.cx, req, res, st.info, group);
    res.once('close', () => {
      st.active--;
      if (session) {
        if (this.stopping && st.active === 0) session.close();
        return;
      }
      if (st.active > 0 || socket.destroyed) return;
      if (this.stopping) {
        socket.destroySoon();
        return;
      }
      st.idleTimer = setTimeout(() => socket.destroy(), r.loc.keepaliveTimeoutMs);
      st.idleTimer.unref();
    });
  }

  /**
   * Serves a new configuration: opens its logs, reads its certificates, binds
   * its new sockets, then swaps it in and closes the sockets it no longer has.
   * @throws Error with nginx's wording; the running configuration is kept
   */
  async reload(compiled: CompiledConfig): Promise<void> {
    const errorLog = new ErrorLogFiles();
    const gen = prepare(compiled, errorLog, this.tempFiles);
    await this.bindNew(gen);
    const old = this.generation;
    this.generation = gen;
    for (const [key, server] of this.listeners) {
      if (gen.groups.has(key)) continue;
      server.close();
      this.listeners.delete(key);
    }
    for (const [key, server] of this.listeners) {
      const group = gen.groups.get(key)!;
      if (group.ssl && 'setSecureContext' in server) {
        (server as unknown as { setSecureContext(o: object): void }).setSecureContext(gen.tls.optionsOf(group.servers.defaultServer));
      }
    }
    setTimeout(() => {
      void old.cx.upstreams.close();
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
    for (const session of this.sessions.keys()) session.close();
    for (const [socket, st] of this.sockets) if (st.active === 0) socket.destroy();
    await closed;
    await this.finish();
  }

  /** Fast shutdown (SIGTERM, SIGINT): every connection is closed at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    const closed = this.closeListeners();
    for (const session of this.sessions.keys()) session.destroy();
    for (const socket of this.sockets.keys()) socket.destroy();
    await closed;
    await this.finish();
  }

  private async finish(): Promise<void> {
    const { cx } = this.generation;
    await cx.upstreams.close();
    cx.accessLog.close();
    cx.errorLog.close();
  }
}
