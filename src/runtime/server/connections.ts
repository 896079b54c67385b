/**
 * Client connections: admission within `worker_connections`, the one
 * registry of open connections with what jinx keeps per connection, and the
 * ways they end (reload, graceful and fast stop, `worker_shutdown_timeout`).
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { ListenGroup, VirtualServer } from '../../config/route-table.js';
import type { LogLevel } from '../../log/levels.js';
import { systemErrorText } from '../../os-errors.js';
import type { ConnectionNumbers } from '../connection-numbers.js';
import { acceptedAtMs } from '../listen.js';
import { resetConnection } from '../exchange.js';
import type { Http1Connection } from '../http1/connection.js';
import type { Http2Connection } from '../http2/connection.js';
import type { ProxyProtocolRead } from '../proxy-protocol.js';
import type { ClientConnection } from '../request.js';
import { ConnectionStat, type StatusCounters } from '../stub-status.js';
import { TlsDetails } from '../tls-details.js';
import { addressServers, type LogConnection } from './connection-log.js';
import type { Generation } from './generations.js';
import { tcpSocketOf } from './tcp-socket.js';

/** A client connection and what it is doing. */
export interface OpenConnection {
  info: ClientConnection;
  /** The accepted TCP socket. */
  readonly raw: Socket;
  /** The configuration in service when the connection was accepted: its requests are served by it. */
  readonly gen: Generation;
  /** The HTTP/1.x connection on it, once there is one. */
  http1: Http1Connection | undefined;
  /** The HTTP/2 connection on it, once there is one. */
  h2: Http2Connection | undefined;
  /** Requests in progress. */
  active: number;
  /** Its part in the stub_status counters. */
  readonly stat: ConnectionStat;
  /** The first TLS record the client sent (its ClientHello), for the `$ssl_*` variables Node.js has no answer for. */
  clientHello: Buffer | undefined;
  /** Whether the client sent a server name (SNI) in its TLS handshake. */
  sentSni: boolean;
  /** Whether `ssl_reject_handshake` refused the TLS handshake. */
  handshakeRejected: boolean;
  /** The server whose certificates could not be read for the TLS handshake (`cert cb error`). */
  certificateFailed: VirtualServer | undefined;
}

/** What admission needs from the rest of the server. */
export interface ConnectionRoom {
  /** `worker_connections` of the configuration in service. */
  limit(): number;
  /** Connections in use besides clients: listening sockets, upstream connections and the master's channel. */
  othersInUse(): number;
  /** Writes a line without connection context to the main `error_log`. */
  log(level: LogLevel, message: string): void;
}

const IPV4_MAPPED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/;
const plainAddr = (a: string | undefined): string => (a ? IPV4_MAPPED.exec(a)?.[1] ?? a : '');

/**
 * What a request needs to know about its connection. On a unix domain
 * socket (`unixPath`), the peer is `unix:` and the local address
 * `unix:PATH`, both without a port, as `ngx_sock_ntop` prints an `AF_UNIX`
 * address.
 */
function connectionInfo(
  socket: Socket, unixPath: string | undefined, id: number, acceptedAtMs: number, counters: StatusCounters, clientHello?: Buffer,
): ClientConnection {
  const tls = (socket as TLSSocket).encrypted ? (socket as TLSSocket) : undefined;
  return {
    id,
    peerAddr: unixPath === undefined ? plainAddr(socket.remoteAddress) : 'unix:',
    peerPort: unixPath === undefined ? socket.remotePort ?? 0 : 0,
    localAddr: unixPath === undefined ? plainAddr(socket.localAddress) : `unix:${unixPath}`,
    localPort: unixPath === undefined ? socket.localPort ?? 0 : 0,
    tls: tls && new TlsDetails(tls, clientHello),
    requests: 0,
    acceptedAtMs,
    counters,
  };
}

/** The client connections of the server, across reloads. */
export class ClientConnections {
  /** Open connections, oldest first (nginx's reusable-connections order). */
  private readonly open = new Set<OpenConnection>();

  /** Client connections open now. */
  get openCount(): number {
    return this.open.size;
  }
  /**
   * Every accepted connection by its TCP socket, open or not: node:tls
   * reports a failed handshake after the TCP socket closed.
   */
  private readonly bySocket = new WeakMap<Socket, OpenConnection>();
  /** The second in which the last "reusing connections" warning was written. */
  private reuseWarnedSec = -1;

  constructor(
    private readonly numbers: ConnectionNumbers,
    private readonly room: ConnectionRoom,
    private readonly logConnection: LogConnection,
    /** The stub_status counters of the process. */
    private readonly counters: StatusCounters,
  ) {}

  /** The connection of an accepted socket, or of the TLS socket over it. */
  of(socket: Socket): OpenConnection | undefined {
    return this.bySocket.get(tcpSocketOf(socket));
  }

  /** The connection of an accepted socket while it is open. */
  openOf(raw: Socket): OpenConnection | undefined {
    const conn = this.bySocket.get(raw);
    return conn && this.open.has(conn) ? conn : undefined;
  }

  /**
   * Connections in use as an nginx worker counts them: listening sockets,
   * clients, upstreams, and with `master_process on` its channel to the master.
   */
  private inUse(): number {
    return this.room.othersInUse() + this.open.size;
  }

  /**
   * Admits a new TCP connection within `worker_connections`
   * (`ngx_get_connection` and `ngx_drain_connections` in
   * `src/core/ngx_connection.c`), accepted in `gen`: when no more than a
   * sixteenth of the connections are free, idle connections are closed,
   * oldest first, with the warning `N worker_connections are not enough,
   * reusing connections` (at most once a second); when none is free, the new
   * one is closed with the alert `N worker_connections are not enough`.
   */
  accept(raw: Socket, unixPath: string | undefined, gen: Generation): void {
    this.counters.accepted++;
    const limit = this.room.limit();
    if (limit - this.inUse() <= Math.floor(limit / 16)) this.drain(limit);
    if (this.inUse() >= limit) {
      this.room.log('alert', `${limit} worker_connections are not enough`);
      raw.destroy();
      return;
    }
    raw.setNoDelay(true);
    const stat = new ConnectionStat(this.counters);
    // ngx_http_init_connection: idle until the first bytes come
    stat.reusable(true);
    const conn: OpenConnection = {
      info: connectionInfo(raw, unixPath, this.numbers.accepted(raw), acceptedAtMs(raw), this.counters),
      raw, gen, http1: undefined, h2: undefined, active: 0, stat, clientHello: undefined, sentSni: false, handshakeRejected: false, certificateFailed: undefined,
    };
    this.open.add(conn);
    this.bySocket.set(raw, conn);
    // a TLS socket the stream module's `pass` hands over (its handshake done there) is found by its TCP socket too
    if (tcpSocketOf(raw) !== raw) this.bySocket.set(tcpSocketOf(raw), conn);
    raw.once('close', () => {
      this.open.delete(conn);
      stat.closed();
    });
  }

  /**
   * Whether an upstream connection may be opened within `worker_connections`
   * (`ngx_get_connection` for `ngx_event_connect_peer`): idle client
   * connections are closed first when room is short, as for a client.
   */
  admitUpstream(): boolean {
    const limit = this.room.limit();
    if (limit - this.inUse() <= Math.floor(limit / 16)) this.drain(limit);
    return this.inUse() < limit;
  }

  private drain(limit: number): void {
    const idle = [...this.open].filter((c) => (c.http1 ? c.http1.idle : c.h2 ? c.h2.idle : c.active === 0));
    if (idle.length === 0) return;
    const second = Math.floor(Date.now() / 1000);
    if (second !== this.reuseWarnedSec) {
      this.reuseWarnedSec = second;
      this.room.log('warn', `${limit} worker_connections are not enough, reusing connections`);
    }
    const n = Math.max(Math.min(32, Math.floor(idle.length / 8)), 1);
    for (const c of idle.slice(0, n)) {
      this.open.delete(c);
      c.h2?.destroy();
      c.raw.destroy();
    }
  }

  /** The connection's details again, for the TLS socket over it once its handshake is done. */
  secured(conn: OpenConnection, socket: Socket): void {
    const { info } = conn;
    const unixPath = info.peerAddr === 'unix:' ? info.localAddr.slice('unix:'.length) : undefined;
    // the local address is the accepted one's (the one the stream module's `pass` gave a connection it handed over)
    conn.info = {
      ...connectionInfo(socket, unixPath, info.id, info.acceptedAtMs, this.counters, conn.clientHello),
      localAddr: info.localAddr, localPort: info.localPort, proxyProtocol: info.proxyProtocol,
    };
  }

  /**
   * The PROXY protocol header of a connection (`listen … proxy_protocol`) on
   * `group` (its address in the configuration in service): its addresses are
   * kept for `$proxy_protocol_*` and the realip module; a broken one is
   * logged at error `while reading PROXY protocol`, as
   * `ngx_proxy_protocol_read` logs it, and the connection closes.
   */
  proxyProtocolRead(raw: Socket, read: ProxyProtocolRead, group: ListenGroup | undefined): void {
    const conn = this.openOf(raw);
    if (!conn || !group) return;
    if (read.ok) {
      if (read.header) conn.info = { ...conn.info, proxyProtocol: read.header };
      return;
    }
    if (read.error !== undefined) this.logConnection(group, conn.info, `${read.error} while reading PROXY protocol`, 'error');
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
  nothingRead(raw: Socket, why: 'closed' | 'timed out', group: ListenGroup | undefined, proxyProtocol: boolean): void {
    const conn = this.openOf(raw);
    if (!conn || !group) return;
    if (proxyProtocol && group.ssl && why === 'closed') {
      // ngx_http_ssl_handshake reads the PROXY protocol header from what it peeked: nothing is a broken one
      this.logConnection(group, conn.info, 'broken header: "" while reading PROXY protocol', 'error');
      return;
    }
    const phase = proxyProtocol ? 'reading PROXY protocol' : group.ssl ? 'SSL handshaking' : 'waiting for request';
    const what = why === 'closed' ? 'client closed connection' : `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`;
    this.logConnection(group, conn.info, `${what} while ${phase}`);
    if (why === 'timed out' && addressServers(group, conn.info).defaultServer.conf.resetTimedoutConnection) resetConnection(raw);
  }

  /**
   * Reload (`ngx_close_idle_connections` in an old worker): an HTTP/2
   * connection ends with GOAWAY once its streams are done, a kept-alive
   * HTTP/1.x one now, a busy one once its response is sent. One that speaks
   * no HTTP yet is left: it starts exiting (`Generations.exiting`).
   */
  stopSessions(): void {
    for (const conn of this.open) {
      if (conn.h2) conn.h2.stop();
      else conn.http1?.stop();
    }
  }

  /** Graceful stop (SIGQUIT): as on reload, and a connection that speaks no HTTP yet is closed. */
  stopAll(): void {
    for (const conn of this.open) {
      if (conn.h2) conn.h2.stop();
      else if (conn.http1) conn.http1.stop();
      else conn.raw.destroy();
    }
  }

  /** Fast stop (SIGTERM, SIGINT): every connection is closed at once. */
  destroyAll(): void {
    for (const conn of this.open) {
      conn.h2?.destroy();
      conn.raw.destroy();
    }
  }

  /**
   * `worker_shutdown_timeout` (`ngx_shutdown_timer_handler`): the
   * connections open now that are still open after `timeoutMs` are closed,
   * requests in progress cut; 0: they are left to end.
   */
  closeAfter(timeoutMs: number): void {
    if (timeoutMs <= 0) return;
    const open = [...this.open];
    setTimeout(() => {
      for (const conn of open) {
        conn.h2?.destroy();
        conn.raw.destroy();
      }
    }, timeoutMs).unref();
  }

  /**
   * An exiting nginx worker ends once no timer is left
   * (`ngx_event_no_timers_left` in `ngx_worker_process_cycle`), closing the
   * connections still open: HTTP/2 streams that only wait for the client to
   * open its window have no timer. Checked every 100 ms while shutting down.
   */
  closeWhenNoTimersLeft(): void {
    const check = setInterval(() => {
      const open = [...this.open];
      if (open.length === 0) {
        clearInterval(check);
        return;
      }
      if (!open.every((conn) => conn.h2?.waitsForWindowOnly)) return;
      clearInterval(check);
      for (const conn of open) {
        conn.h2!.destroy();
        conn.raw.destroy();
      }
    }, 100);
    check.unref();
  }
}
