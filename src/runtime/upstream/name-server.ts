/**
 * The connections to one name server of a `resolver` directive
 * (`ngx_resolver_connection_t` in `src/core/ngx_resolver.c`): a connected
 * UDP socket, opened at the first query and kept, and a TCP connection for
 * queries whose UDP answer came truncated, closed 5 seconds after its last
 * write (nginx's `tcp_timeout` on the write event). A socket that fails is
 * closed and opened again by the next query. Failures are logged as nginx
 * logs them, `… while resolving, resolver: 127.0.0.1:53`.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { isIP, connect, type Socket } from 'node:net';
import type { LogLevel } from '../../log/levels.js';
import { systemErrorText } from '../../os-errors.js';

/** Writes a line to the main error log (nginx's `cycle->new_log`). */
export type ResolverLog = (level: LogLevel, message: string) => void;

/** nginx reads at most this much of a UDP answer (`NGX_RESOLVER_UDP_SIZE`). */
const UDP_SIZE = 4096;
/** The TCP write buffer (`NGX_RESOLVER_TCP_WSIZE`): a query that does not fit is dropped with `buffer overflow`. */
const TCP_WRITE_BYTES = 8192;
/** `r->tcp_timeout`: a TCP connection is closed this long after its last write. */
const TCP_TIMEOUT_MS = 5000;

/** Errors `ngx_connection_error` logs at `error`; any other at `alert`. */
const ERROR_LEVEL_CODES = new Set(['ECONNRESET', 'EPIPE', 'ENOTCONN', 'ETIMEDOUT', 'ECONNREFUSED', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH']);

/** One name server: where it is and the sockets to it. */
export class NameServer {
  /** `IP:port` as nginx prints it (`rec->server`), `[::1]:53` for IPv6. */
  readonly text: string;
  private udp: UdpSocket | undefined;
  /** Queries written while the UDP socket connects; undefined once it is connected. */
  private udpWaiting: { readonly query: Buffer; readonly failed: (() => void) | undefined }[] | undefined;
  private tcp: Socket | undefined;
  private tcpConnected = false;
  private tcpRead = Buffer.alloc(0);
  private tcpTimer: NodeJS.Timeout | undefined;

  /**
   * @param host an IP address
   * @param onAnswer called with each message received and whether it came over TCP
   */
  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly onAnswer: (message: Buffer, tcp: boolean) => void,
    private readonly log: ResolverLog,
  ) {
    this.text = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  }

  private logSystem(what: string, err: NodeJS.ErrnoException): void {
    const level: LogLevel = ERROR_LEVEL_CODES.has(err.code ?? '') ? 'error' : 'alert';
    this.log(level, `${what} (${systemErrorText(err)}) while resolving, resolver: ${this.text}`);
  }

  /**
   * `ngx_resolver_send_udp_query`: sends `query` over UDP, connecting first
   * if need be. `failed` is called if it could not be sent (the socket is
   * then closed), as nginx's send returns an error.
   */
  sendUdp(query: Buffer, failed?: () => void): void {
    if (!this.udp) this.openUdp();
    if (this.udpWaiting) this.udpWaiting.push({ query, failed });
    else this.udpSend(this.udp!, query, failed);
  }

  private udpSend(sock: UdpSocket, query: Buffer, failed: (() => void) | undefined): void {
    sock.send(query, (err) => {
      if (!err) return;
      if (this.udp === sock) this.udpFailed(err, 'send() failed');
      failed?.();
    });
  }

  private openUdp(): void {
    const sock = createSocket(isIP(this.host) === 6 ? 'udp6' : 'udp4');
    this.udp = sock;
    this.udpWaiting = [];
    sock.unref();
    sock.on('message', (msg: Buffer) => this.onAnswer(msg.length > UDP_SIZE ? msg.subarray(0, UDP_SIZE) : msg, false));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      const what = err.syscall === 'connect' ? 'connect() failed' : err.syscall?.startsWith('send') ? 'send() failed' : 'recv() failed';
      this.udpFailed(err, what);
    });
    sock.connect(this.port, this.host, () => {
      if (this.udp !== sock) return;
      const waiting = this.udpWaiting ?? [];
      this.udpWaiting = undefined;
      for (const w of waiting) this.udpSend(sock, w.query, w.failed);
    });
  }

  /** A UDP socket error: logged, and the socket closed (`rec->udp = NULL`). */
  private udpFailed(err: NodeJS.ErrnoException, what: string): void {
    if (!this.udp) return;
    this.logSystem(what, err);
    this.closeUdp();
  }

  private closeUdp(): void {
    const sock = this.udp;
    const unsent = this.udpWaiting ?? [];
    this.udp = undefined;
    this.udpWaiting = undefined;
    for (const w of unsent) w.failed?.();
    if (sock) {
      sock.removeAllListeners('message');
      sock.on('error', () => undefined);
      try {
        sock.close();
      } catch {
        // already closed
      }
    }
  }

  /**
   * `ngx_resolver_send_tcp_query`: sends `query` over TCP, prefixed with its
   * length, connecting first if need be. A query that does not fit in what
   * is not yet written is dropped (`[crit] buffer overflow`).
   */
  sendTcp(query: Buffer): void {
    if (!this.tcp) this.openTcp();
    const sock = this.tcp!;
    if (sock.writableLength + 2 + query.length > TCP_WRITE_BYTES) {
      this.log('crit', `buffer overflow while resolving, resolver: ${this.text}`);
      return;
    }
    const framed = Buffer.alloc(2 + query.length);
    framed.writeUInt16BE(query.length, 0);
    query.copy(framed, 2);
    sock.write(framed);
    this.armTcpTimer();
  }

  private openTcp(): void {
    const sock = connect({ host: this.host, port: this.port });
    this.tcp = sock;
    this.tcpConnected = false;
    this.tcpRead = Buffer.alloc(0);
    sock.unref();
    sock.setNoDelay(true);
    sock.on('connect', () => { this.tcpConnected = true; });
    sock.on('data', (chunk: Buffer) => this.tcpData(sock, chunk));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      if (this.tcp !== sock) return;
      this.logSystem(this.tcpConnected ? (err.syscall === 'write' ? 'send() failed' : 'recv() failed') : 'connect() failed', err);
      this.closeTcp();
    });
    sock.on('end', () => { if (this.tcp === sock) this.closeTcp(); });
    sock.on('close', () => { if (this.tcp === sock) this.closeTcp(); });
  }

  /** `ngx_resolver_tcp_read`: each complete message (2-byte length, then the message) is handed on. */
  private tcpData(sock: Socket, chunk: Buffer): void {
    if (this.tcp !== sock) return;
    let buf = this.tcpRead.length ? Buffer.concat([this.tcpRead, chunk]) : chunk;
    while (buf.length >= 2) {
      const len = buf.readUInt16BE(0);
      if (buf.length < 2 + len) break;
      this.onAnswer(buf.subarray(2, 2 + len), true);
      if (this.tcp !== sock) return;
      buf = buf.subarray(2 + len);
    }
    this.tcpRead = Buffer.from(buf);
  }

  private armTcpTimer(): void {
    clearTimeout(this.tcpTimer);
    this.tcpTimer = setTimeout(() => this.closeTcp(), TCP_TIMEOUT_MS);
    this.tcpTimer.unref();
  }

  private closeTcp(): void {
    clearTimeout(this.tcpTimer);
    this.tcpTimer = undefined;
    const sock = this.tcp;
    this.tcp = undefined;
    this.tcpRead = Buffer.alloc(0);
    if (sock) {
      sock.removeAllListeners('data');
      sock.on('error', () => undefined);
      sock.destroy();
    }
  }

  /** Closes both sockets (a configuration is retired). */
  close(): void {
    this.closeUdp();
    this.closeTcp();
  }
}
