/**
 * The stream module's listening sockets and sessions across reloads
 * (`ngx_stream_init_connection`, `ngx_stream_proxy_protocol_handler`,
 * `ngx_stream_core_run_phases`): a TCP server or a UDP socket per address
 * of the configuration in service, bound beside the http ones; a session
 * is served by the configuration it was accepted in, and a reload lets it
 * end by itself (or at `worker_shutdown_timeout`), as an old nginx worker's.
 */
import { createSocket, type RemoteInfo, type Socket as DgramSocket } from 'node:dgram';
import { chmodSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { PassAddress } from '../../config/modules/stream-pass.js';
import type { StreamContent, StreamListenGroup, StreamProxyConf, StreamServer } from '../../config/route-table.js';
import { ConfigError } from '../../errors.js';
import { systemErrorText } from '../../os-errors.js';
import { readProxyProtocol } from '../proxy-protocol.js';
import { passListenMatches, passSession, type PassTargets } from './pass.js';
import { StreamProxy } from './proxy.js';
import { streamLimitConnections } from './limit-conn.js';
import { prereadPhase } from './preread.js';
import { streamHandshake } from './tls.js';
import { closeConnection, plainAddr, StreamSession, type StreamClient, type StreamEnv } from './session.js';

const OK = 200;
const BAD_REQUEST = 400;
const FORBIDDEN = 403;
const INTERNAL_SERVER_ERROR = 500;

/** The key of a stream socket: protocol, address, port. */
const keyOf = (g: StreamListenGroup): string => `${g.udp ? 'udp' : 'tcp'}|${g.host}|${g.port}`;

/** A bound stream socket. */
type Bound = { readonly tcp: Server; readonly udp?: undefined } | { readonly udp: DgramSocket; readonly tcp?: undefined };

/** The local address and port of a connection (`ngx_connection_local_sockaddr`), without the `::ffff:` of an IPv4-mapped one. */
interface LocalAddress {
  readonly addr: string;
  readonly port: number;
}

/** The stream sockets and sessions of the server. */
export class StreamServers {
  private readonly bound = new Map<string, Bound>();
  /** Open sessions, each with the means to close it at once. */
  private readonly sessions = new Map<StreamSession, () => void>();
  private env: StreamEnv | undefined;
  /** The listen groups of the configuration in service, by `keyOf`. */
  private groups = new Map<string, StreamListenGroup>();

  /** @param passTargets the listening sockets of the rest of the process (http's) that `pass` may hand a connection to */
  constructor(private readonly passTargets: PassTargets = () => undefined) {}

  /**
   * `pass`'s search of the process's listening sockets: this one's TCP
   * sockets, then the others (`passTargets`).
   */
  private passTarget(address: PassAddress): ((socket: Socket) => void) | undefined {
    for (const [key, b] of this.bound) {
      if (!b.tcp) continue;
      const group = this.groups.get(key);
      if (group && passListenMatches(group, address)) return (socket) => this.accept(key, group, socket, undefined);
    }
    return this.passTargets(address);
  }

  /** Sessions open now (a stopping worker exits once none is left). */
  get openCount(): number {
    return this.sessions.size;
  }

  /** Listening sockets open (each counts among `worker_connections`). */
  get count(): number {
    return this.bound.size;
  }

  /**
   * Binds a socket for each address of `env`'s configuration not bound yet.
   * @throws ConfigError `bind() to ADDR failed (…)` for the first that cannot be bound
   */
  async bindNew(env: StreamEnv): Promise<void> {
    for (const group of env.table.listens) {
      const key = keyOf(group);
      if (this.bound.has(key)) continue;
      this.bound.set(key, await this.bind(group));
    }
  }

  /** Puts `env`'s configuration in service and closes the sockets it no longer has. */
  use(env: StreamEnv): void {
    this.env = env;
    this.groups = new Map(env.table.listens.map((g) => [keyOf(g), g]));
    for (const [key, b] of this.bound) {
      if (this.groups.has(key)) continue;
      if (b.tcp) b.tcp.close();
      else b.udp.close();
      this.bound.delete(key);
    }
  }

  /** Closes every listening socket. */
  async closeAll(): Promise<void> {
    const closing = [...this.bound.values()].map((b) => new Promise<void>((resolve) => {
      if (b.tcp) b.tcp.close(() => resolve());
      else b.udp.close(() => resolve());
    }));
    this.bound.clear();
    await Promise.all(closing);
  }

  /** Closes every session at once (fast stop). */
  destroyAll(): void {
    for (const destroy of [...this.sessions.values()]) destroy();
  }

  /** `worker_shutdown_timeout`: the sessions open now that are still open after `timeoutMs` are closed; 0 leaves them. */
  closeAfter(timeoutMs: number): void {
    if (timeoutMs <= 0) return;
    const open = [...this.sessions.keys()];
    setTimeout(() => {
      for (const s of open) this.sessions.get(s)?.();
    }, timeoutMs).unref();
  }

  /** The group of `key` in the configuration in service, or `fallback` (the one the socket was bound for). */
  private groupNow(key: string, fallback: StreamListenGroup): StreamListenGroup {
    return this.groups.get(key) ?? fallback;
  }

  private bind(group: StreamListenGroup): Promise<Bound> {
    const key = keyOf(group);
    const failed = (err: unknown): ConfigError => new ConfigError('file', `bind() to ${group.addrText} failed (${systemErrorText(err)})`);
    if (group.udp) {
      return new Promise((resolve, reject) => {
        const sock = createSocket({ type: group.host.includes(':') ? 'udp6' : 'udp4', ipv6Only: group.ipv6only && group.host === '::' });
        sock.once('error', (err) => reject(failed(err)));
        sock.bind({ address: group.host, port: group.port }, () => {
          sock.removeAllListeners('error');
          sock.on('error', () => undefined);
          const clients = new Map<string, UdpClientSession>();
          sock.on('message', (msg, rinfo) => this.datagram(key, group, sock, clients, msg, rinfo));
          resolve({ udp: sock });
        });
      });
    }
    return new Promise((resolve, reject) => {
      // the local address of every connection accepted here, unless the socket is bound to a wildcard address
      let local: LocalAddress | undefined;
      const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => this.accept(key, group, socket, local));
      server.once('error', (err) => reject(failed(err)));
      const options = group.unixPath !== undefined
        ? { path: group.unixPath, backlog: group.backlog }
        : { host: group.host, port: group.port, backlog: group.backlog, ipv6Only: group.host === '::' && group.ipv6only };
      server.listen(options, () => {
        server.removeAllListeners('error');
        if (group.unixPath !== undefined) chmodSync(group.unixPath, 0o666);
        else local = specificAddress(server);
        resolve({ tcp: server });
      });
    });
  }

  /** The server of the address a client came to, and that address's text. */
  private serverOf(group: StreamListenGroup, localAddr: string): { server: StreamServer; addrText: string } {
    return group.byLocalAddr.get(localAddr) ?? { server: group.server, addrText: group.addrText };
  }

  /**
   * `ngx_stream_init_connection` for a TCP connection.
   * @param key the listening socket's `keyOf`
   * @param local the connection's local address when the listening socket's tells it (not a wildcard): no getsockname()
   */
  private accept(key: string, bound: StreamListenGroup, socket: Socket, local: LocalAddress | undefined): void {
    const env = this.env;
    if (!env) {
      socket.destroy();
      return;
    }
    const group = this.groupNow(key, bound);
    const unix = group.unixPath !== undefined;
    const localAddr = unix ? `unix:${group.unixPath}` : local?.addr ?? plainAddr(socket.localAddress);
    const { server, addrText } = this.serverOf(group, localAddr);
    if (group.soKeepalive) socket.setKeepAlive(true);
    let proxy: StreamProxy | undefined;
    let ended = false;
    // the client's bytes: the TCP socket, or the TLS socket over it once its handshake completed
    let io: Socket = socket;
    const client: StreamClient = {
      write: (bytes, done) => io.write(bytes, done),
      holding: () => io.writableLength > 0,
      pause: () => io.pause(),
      resume: () => {
        if (!ended) io.resume();
      },
      close: () => {
        this.sessions.delete(session);
        io.removeAllListeners('data');
        closeConnection(io);
      },
      shutdown: () => io.end(),
      destroy: () => io.destroy(),
    };
    const session = new StreamSession(
      env, group, server, addrText, client, false,
      unix ? 'unix:' : plainAddr(socket.remoteAddress), unix ? 0 : socket.remotePort ?? 0, localAddr, unix ? 0 : local?.port ?? socket.localPort ?? 0,
    );
    this.sessions.set(session, () => {
      if (!session.finalized) session.finalize(OK);
      socket.destroy();
    });
    session.logConnected();
    const onSocketError = (err: Error): void => {
      if (proxy) proxy.clientEnd(err);
      else if (!session.finalized) {
        session.connectionError(err, 'recv() failed', false);
        session.finalize(OK);
      }
    };
    const onSocketClose = (): void => {
      if (!session.finalized && !proxy) session.finalize(OK);
      this.sessions.delete(session);
    };
    socket.on('error', onSocketError);
    socket.on('close', onSocketClose);
    // the TLS socket's handlers, once its handshake completed
    const onSecuredError = (err: Error): void => {
      if (proxy) proxy.clientEnd(err);
      else if (!session.finalized) session.finalize(OK);
    };
    const onSecuredClose = (): void => {
      if (!session.finalized && !proxy) session.finalize(OK);
    };
    const begin = (): void => {
      session.action = 'initializing session';
      session.applyRealIp();
      session.runSets();
      preaccess(session, access);
    };
    const access = (): void => {
      if (!session.checkAccess()) {
        session.finalize(FORBIDDEN);
        return;
      }
      if (server.tcpNodelay) socket.setNoDelay(true);
      if (group.ssl && server.tls) {
        streamHandshake(session, socket, (secured) => {
          io = secured;
          secured.on('error', onSecuredError);
          secured.on('close', onSecuredClose);
          prereadThenContent();
        });
        return;
      }
      prereadThenContent();
    };
    const prereadThenContent = (): void => {
      const preread = session.server.preread;
      if (!preread) {
        contentPhase();
        return;
      }
      // ngx_stream_core_preread_phase: no action in its lines
      session.action = undefined;
      prereadPhase(session, io, preread, contentPhase);
    };
    const contentPhase = (): void => {
      // the server an SNI name chose, if it chose one
      const conf = proxyConfOf(session, (text, done) => io.write(text, done), (pass) => passSession(session, io, pass, (a) => this.passTarget(a), () => {
        this.sessions.delete(session);
        // the listening socket's handlers take the errors that matter (a TCP socket's under a TLS one reach the TLS socket's)
        socket.off('close', onSocketClose).off('error', onSocketError).on('error', () => undefined);
        io.off('error', onSecuredError).off('close', onSecuredClose);
      }));
      if (!conf) return;
      proxy = new StreamProxy(session, conf);
      io.on('data', (chunk: Buffer) => proxy!.clientData(chunk));
      io.on('end', () => {
        ended = true;
        proxy!.clientEnd();
      });
      proxy.start().catch((err: unknown) => failed(session, err));
    };
    if (!group.proxyProtocol) {
      begin();
      return;
    }
    session.action = 'reading PROXY protocol';
    const timer = setTimeout(() => {
      socket.off('data', onHeader);
      session.log('info', `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
      session.finalize(OK);
    }, server.proxyProtocolTimeoutMs);
    const onHeader = (chunk: Buffer): void => {
      clearTimeout(timer);
      socket.off('data', onHeader);
      socket.pause();
      const read = readProxyProtocol(chunk);
      if (!read.ok) {
        if (read.error) session.log('error', read.error);
        // nginx peeked at the header: its bytes, left unread, make the close a reset (before the
        // session's close ends the socket: a reset after end() leaves node's handle spinning)
        socket.resetAndDestroy();
        session.finalize(BAD_REQUEST);
        return;
      }
      session.proxyProtocol = read.header;
      const rest = chunk.subarray(read.length);
      if (rest.length > 0) socket.unshift(rest);
      begin();
    };
    socket.on('data', onHeader);
    socket.resume();
  }

  /** A datagram: to its client's session, or the first of a new one (`ngx_stream_init_connection` for UDP). */
  private datagram(listenKey: string, bound: StreamListenGroup, sock: DgramSocket, clients: Map<string, UdpClientSession>, msg: Buffer, rinfo: RemoteInfo): void {
    const key = `${rinfo.address}|${rinfo.port}`;
    const known = clients.get(key);
    if (known) {
      known.proxy?.clientDatagram(msg);
      return;
    }
    const env = this.env;
    if (!env) return;
    const group = this.groupNow(listenKey, bound);
    const address = sock.address();
    const localAddr = plainAddr(address.address);
    const { server, addrText } = this.serverOf(group, localAddr);
    const entry: UdpClientSession = { proxy: undefined };
    // datagrams being sent (node:dgram holds their bytes until its callback)
    let sending = 0;
    const client: StreamClient = {
      write: (bytes, done) => {
        sending++;
        try {
          sock.send(bytes, rinfo.port, rinfo.address, (err) => {
            sending--;
            done?.(err);
          });
        } catch (err) {
          // the listening socket closed (the server stops)
          sending--;
          done?.(err as Error);
        }
        return true;
      },
      holding: () => sending > 0,
      pause: () => undefined,
      resume: () => undefined,
      close: () => {
        this.sessions.delete(session);
        if (clients.get(key) === entry) clients.delete(key);
      },
      shutdown: () => undefined,
      destroy: () => undefined,
    };
    const session = new StreamSession(env, group, server, addrText, client, true, plainAddr(rinfo.address), rinfo.port, localAddr, address.port);
    clients.set(key, entry);
    this.sessions.set(session, () => {
      if (!session.finalized) {
        session.log('info', 'disconnected on shutdown', true);
        session.finalize(OK);
      }
    });
    session.logConnected();
    let payload = msg;
    if (group.proxyProtocol) {
      const read = readProxyProtocol(msg);
      if (!read.ok) {
        session.action = 'reading PROXY protocol';
        if (read.error) session.log('error', read.error);
        session.finalize(BAD_REQUEST);
        return;
      }
      session.proxyProtocol = read.header;
      payload = msg.subarray(read.length);
    }
    session.action = 'initializing session';
    session.applyRealIp();
    session.runSets();
    preaccess(session, () => this.udpContent(session, sock, rinfo, clients, key, entry, payload));
  }

  /** A new UDP session's access and content phases. */
  private udpContent(
    session: StreamSession, sock: DgramSocket, rinfo: RemoteInfo, clients: Map<string, UdpClientSession>, key: string, entry: UdpClientSession,
    payload: Buffer,
  ): void {
    if (!session.checkAccess()) {
      session.finalize(FORBIDDEN);
      return;
    }
    const conf = proxyConfOf(session, (text, done) => sock.send(text, rinfo.port, rinfo.address, done), () => {
      // ngx_stream_pass_handler
      session.action = 'passing connection to port';
      session.log('error', 'cannot pass udp connection');
      session.finalize(INTERNAL_SERVER_ERROR);
    });
    if (!conf) return;
    const proxy = new StreamProxy(session, conf);
    entry.proxy = proxy;
    proxy.onRequestsDone = () => {
      if (clients.get(key) === entry) clients.delete(key);
    };
    proxy.clientDatagram(payload);
    proxy.start().catch((err: unknown) => failed(session, err));
  }
}

/**
 * The address of a listening TCP socket bound to a specific address (the
 * local address of every connection it accepts, as nginx takes it from the
 * listening socket when it is not a wildcard), or undefined for a wildcard.
 */
function specificAddress(server: Server): LocalAddress | undefined {
  const a = server.address();
  if (a === null || typeof a === 'string' || a.address === '0.0.0.0' || a.address === '::') return undefined;
  return { addr: plainAddr(a.address), port: a.port };
}

/**
 * The content phase (`ngx_stream_core_content_phase`) of a TCP or UDP
 * session up to its proxy: a server without a handler ends the session
 * with 500 (nginx logs `no handler for server` at debug level only),
 * `return` (`ngx_stream_return_handler`) sends its value through `send`
 * and ends the session once it is sent, `pass` goes to `pass`; otherwise
 * the proxy's settings. The content handler's lines have no action.
 */
function proxyConfOf(
  session: StreamSession, send: (text: Buffer, done: () => void) => void, pass: (content: Extract<StreamContent, { kind: 'pass' }>) => void,
): StreamProxyConf | undefined {
  session.action = undefined;
  const content = session.server.content;
  if (!content) {
    session.finalize(INTERNAL_SERVER_ERROR);
    return undefined;
  }
  if (content.kind === 'return') {
    const text = Buffer.from(content.value.evaluate(session), 'latin1');
    session.bytesSent += text.length;
    send(text, () => session.finalize(OK));
    return undefined;
  }
  if (content.kind === 'pass') {
    pass(content);
    return undefined;
  }
  return content.proxy;
}

/**
 * The preaccess phase (`limit_conn`), then `next` unless it ended the
 * session (503 for a refused one).
 */
function preaccess(session: StreamSession, next: () => void): void {
  const after = (status: number | undefined): void => {
    if (session.finalized) return;
    if (status !== undefined) session.finalize(status);
    else next();
  };
  const decided = streamLimitConnections(session);
  if (decided instanceof Promise) decided.then(after, (err: unknown) => failed(session, err));
  else after(decided);
}

/** A fault of jinx in a session's proxy: an `[alert]` line and 500, the process serving on. */
function failed(session: StreamSession, err: unknown): void {
  session.log('alert', String((err as Error)?.stack ?? err));
  session.finalize(INTERNAL_SERVER_ERROR);
}

/** The session of one UDP client, by its address. */
interface UdpClientSession {
  proxy: StreamProxy | undefined;
}
