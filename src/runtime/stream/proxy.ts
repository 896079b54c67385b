/**
 * `proxy_pass` of the stream module (`src/stream/ngx_stream_proxy_module.c`):
 * the upstream chosen by round robin or `least_conn` (the http upstream's
 * `PeerAttempts`), `proxy_connect_timeout`, `proxy_next_upstream[_tries|
 * _timeout]`, the PROXY protocol header (v1) before the client's bytes,
 * then the bytes copied both ways with backpressure, `proxy_buffer_size`
 * bytes at a time, `proxy_upload_rate`/`proxy_download_rate`,
 * `proxy_timeout` (reset by traffic either way), `proxy_half_close`; for
 * UDP, one datagram socket per session, `proxy_requests` and
 * `proxy_responses`. Log lines and levels are nginx's.
 */
import { createSocket, type Socket as DgramSocket } from 'node:dgram';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import type { StreamProxyConf, UpstreamGroup, UpstreamPeer } from '../../config/route-table.js';
import type { StreamUpstreamState } from '../../config/stream-view.js';
import { parseSize } from '../../config/spec.js';
import { streamGroup, streamPeer } from '../../config/modules/stream.js';
import { splitHostPort } from '../../config/modules/upstream.js';
import { systemErrorText } from '../../os-errors.js';
import { PeerAttempts } from '../upstream/round-robin.js';
import { ResolveError } from '../upstream/resolver.js';
import { upstreamHandshake } from './upstream-tls.js';
import { addrWithPort, closeConnection, plainAddr, type StreamSession } from './session.js';

/** Marks a queued chunk whose bytes were counted as received when read (before the upstream was connected). */
const COUNTED = Symbol('counted');
type CountedChunk = Buffer & { [COUNTED]?: true };

/** nginx's statuses of a stream session. */
const OK = 200;
const INTERNAL_SERVER_ERROR = 500;
const BAD_GATEWAY = 502;

/**
 * Free read buffers of plain upstream connections, by size
 * (`proxy_buffer_size`): a session takes one when it first connects and
 * gives it back when it ends, unless a write or a read may still use it.
 */
const freeReadBuffers = new Map<number, Buffer[]>();
/** Free read buffers kept of one size. */
const FREE_READ_BUFFERS = 64;

/** A free read buffer of `sizeBytes`, or a new one. */
function takeReadBuffer(sizeBytes: number): Buffer {
  return freeReadBuffers.get(sizeBytes)?.pop() ?? Buffer.allocUnsafeSlow(sizeBytes);
}

/** Keeps `buf` for another session, within `FREE_READ_BUFFERS`. */
function giveReadBuffer(buf: Buffer): void {
  let free = freeReadBuffers.get(buf.length);
  if (!free) freeReadBuffers.set(buf.length, (free = []));
  if (free.length < FREE_READ_BUFFERS) free.push(buf);
}

/** One direction of a TCP session: bytes read from `src`, written to `dst`, at most `rate` bytes a second. */
interface Direction {
  readonly fromUpstream: boolean;
  /** Bytes read and not yet written (over the rate). */
  readonly queue: Buffer[];
  eof: boolean;
  /** Bytes the rate allows from the session's start (nginx's `limit`). */
  rate: number;
  /** A rate's timer runs. */
  delayed: NodeJS.Timeout | undefined;
  /** Writes not yet flushed to the other side. */
  pendingWrites: number;
  /** `proxy_half_close`: the other side was shut for writing. */
  shut: boolean;
}

/** The proxy of one session. */
export class StreamProxy {
  private attempts: PeerAttempts | undefined;
  private state: StreamUpstreamState | undefined;
  private attemptStartMs = 0;
  private readonly startSec = Math.floor(Date.now() / 1000);
  private peerName: string | undefined;
  private tcp: Socket | undefined;
  private udp: DgramSocket | undefined;
  private connected = false;
  /** Bytes the upstream sent and was sent, on the current connection. */
  private upReceived = 0;
  private upSent = 0;
  private connectTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** UDP: the upstream did not answer in time, or refused (nginx's `pc->read->error`): its peer failed. */
  private udpFailed = false;
  /** UDP: datagrams from the client and from the upstream. */
  private requests = 0;
  private responses = 0;
  /** Client bytes read before the upstream was connected. */
  private readonly early: Buffer[] = [];
  private readonly up: Direction = { fromUpstream: false, queue: [], eof: false, rate: 0, delayed: undefined, pendingWrites: 0, shut: false };
  private readonly down: Direction = { fromUpstream: true, queue: [], eof: false, rate: 0, delayed: undefined, pendingWrites: 0, shut: false };
  /**
   * The upstream's read buffer (nginx's `u->upstream_buf`, `proxy_buffer_size`
   * bytes) of a plain connection: Node reads into it (`onread`), no buffer
   * allocated per read; a chunk read stays in it until written.
   */
  private readBuffer: Buffer | undefined;

  constructor(private readonly s: StreamSession, private readonly conf: StreamProxyConf) {
    s.upstreamContext = () => this.logContext();
    s.onFinalize = () => this.close();
  }

  /** `ngx_stream_proxy_log_error`. */
  private logContext(): string {
    const name = this.peerName === undefined ? '' : `, upstream: "${this.peerName}"`;
    return `${name}, bytes from/to client:${this.s.bytesReceived}/${this.s.bytesSent}, bytes from/to upstream:${this.upReceived}/${this.upSent}`;
  }

  /** `ngx_stream_proxy_handler`: the upstream from `proxy_pass`, then the first connection. */
  async start(): Promise<void> {
    const s = this.s;
    s.client.pause();
    const rate = (v: StreamProxyConf['uploadRate']): number => (v ? parseSize(v.evaluate(s)) ?? 0 : 0);
    this.up.rate = rate(this.conf.uploadRate);
    this.down.rate = rate(this.conf.downloadRate);
    const target = this.conf.target;
    let group: UpstreamGroup | undefined;
    if ('group' in target) group = target.group;
    else if ('unixPath' in target) group = implicitGroup(`unix:${target.unixPath}`, [{ host: `unix:${target.unixPath}`, port: 0, unixPath: target.unixPath }]);
    else {
      group = await this.evaluate(target.value.evaluate(s));
      if (!group) return;
    }
    this.attempts = new PeerAttempts(s.env.roundRobin, group, {
      nextUpstream: new Set(this.conf.nextUpstream ? ['error', 'timeout'] : []),
      nextUpstreamTries: this.conf.nextUpstreamTries,
      nextUpstreamTimeoutMs: this.conf.nextUpstreamTimeoutMs,
    }, s.env.table.hashKeys.get(group)?.evaluate(s) ?? s.remoteAddr);
    this.connect();
  }

  /**
   * `ngx_stream_proxy_eval` and the rest of the handler for a value with
   * variables: an `upstream` of that name, an address, or a name the
   * server's `resolver` resolves.
   */
  private async evaluate(value: string): Promise<UpstreamGroup | undefined> {
    const s = this.s;
    // an `upstream` block of that name, or a `proxy_pass` address of the configuration (`host:port`)
    const known = s.env.table.upstreams.get(value.toLowerCase());
    if (known) return known;
    if (value.startsWith('unix:')) return implicitGroup(value, [{ host: value, port: 0, unixPath: value.slice(5) }]);
    const hp = splitHostPort(value);
    if (!hp) {
      s.log('error', `invalid host in upstream "${value}"`);
      s.finalize(INTERNAL_SERVER_ERROR);
      return undefined;
    }
    if (hp.port === undefined) {
      s.log('error', `no port in upstream "${hp.host}"`);
      s.finalize(INTERNAL_SERVER_ERROR);
      return undefined;
    }
    if (isIP(hp.host)) return implicitGroup(value, [{ host: hp.host, port: hp.port, unixPath: undefined }]);
    const resolver = s.server.resolver;
    if (!resolver) {
      s.log('error', `no resolver defined to resolve ${hp.host}`);
      s.finalize(INTERNAL_SERVER_ERROR);
      return undefined;
    }
    try {
      const addrs = await s.env.resolver.resolve(hp.host, resolver, s.server.resolverTimeoutMs);
      if (s.finalized) return undefined;
      return implicitGroup(hp.host, addrs.map((a) => ({ host: a, port: hp.port!, unixPath: undefined })));
    } catch (err) {
      if (s.finalized) return undefined;
      s.log('error', err instanceof ResolveError ? err.message : `${hp.host} could not be resolved`);
      s.finalize(INTERNAL_SERVER_ERROR);
      return undefined;
    }
  }

  /** `ngx_stream_proxy_connect`: the next peer, its connection opened within `proxy_connect_timeout`. */
  private connect(): void {
    const s = this.s;
    s.action = 'connecting to upstream';
    this.connected = false;
    const now = Date.now();
    if (this.state) this.state.sessionMs = now - this.attemptStartMs;
    const peer = this.attempts!.pick();
    this.state = { peer: peer?.name ?? this.attempts!.group.name, connectMs: undefined, firstByteMs: undefined, sessionMs: undefined, bytesSent: 0, bytesReceived: 0 };
    s.upstreams.push(this.state);
    this.attemptStartMs = now;
    this.upReceived = 0;
    this.upSent = 0;
    this.peerName = this.state.peer;
    if (!peer) {
      s.log('error', 'no live upstreams');
      s.finalize(BAD_GATEWAY);
      return;
    }
    // ngx_event_connect_peer: an upstream connection takes a number too
    s.env.numbers.next();
    if (s.udp) this.connectUdp(peer);
    else this.connectTcp(peer);
  }

  private connectTcp(peer: UpstreamPeer): void {
    const s = this.s;
    const local = this.conf.bind?.evaluate(s);
    const address = peer.unixPath !== undefined
      ? { path: peer.unixPath }
      : { host: peer.host, port: peer.port, ...(local ? { localAddress: local.replace(/^\[|\]$/g, '') } : {}) };
    // a plain connection reads into the session's buffer; a TLS one through its TLS socket, into Node's
    const onread = this.conf.tls
      ? undefined
      : { buffer: (this.readBuffer ??= takeReadBuffer(this.conf.bufferBytes)), callback: (n: number, buf: Uint8Array) => this.upstreamRead(sock, n, buf as Buffer) };
    // its events (connect, error) come after the handlers below are set: Node emits them on a later tick
    const sock: Socket = netConnect({ ...address, allowHalfOpen: true, ...(onread ? { onread } : {}) });
    this.tcp = sock;
    const onError = (err: Error): void => {
      if (sock !== this.tcp) return;
      this.clearConnectTimer();
      if (peer.unixPath === undefined) s.connectionError(err, 'connect() failed', true);
      else {
        // ngx_event_connect_peer: a unix domain socket fails at once, at crit unless refused
        const refused = (err as NodeJS.ErrnoException).code === 'ECONNREFUSED';
        s.log(refused ? 'error' : 'crit', `connect() to ${peer.name} failed (${systemErrorText(err)})`);
      }
      this.nextUpstream('error');
    };
    sock.once('error', onError);
    this.connectTimer = setTimeout(() => {
      if (sock !== this.tcp) return;
      s.log('error', `upstream timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
      this.nextUpstream('timeout');
    }, this.conf.connectTimeoutMs);
    sock.once('connect', () => {
      const tls = this.conf.tls;
      if (!tls) {
        this.clearConnectTimer();
        sock.off('error', onError);
        this.initUpstream(sock);
        return;
      }
      // ngx_stream_proxy_init_upstream: the PROXY protocol header goes before the handshake, in the clear;
      // ngx_stream_proxy_ssl_init_connection: the handshake within what is left of proxy_connect_timeout
      if (this.conf.proxyProtocol) {
        const header = Buffer.from(proxyProtocolV1(s), 'latin1');
        this.upSent += header.length;
        sock.write(header);
      }
      sock.off('error', onError);
      s.action = 'SSL handshaking to upstream';
      upstreamHandshake(s, sock, tls, peer.name, this.attempts!.group.name, (r) => {
        if (sock !== this.tcp || s.finalized) return;
        if ('message' in r) {
          s.log(r.level, r.message);
          this.nextUpstream('error');
          return;
        }
        this.clearConnectTimer();
        this.tcp = r.socket;
        this.initUpstream(r.socket);
      });
    });
  }

  private clearConnectTimer(): void {
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
  }

  /** `ngx_stream_proxy_next_upstream`: the failed peer counted, then another one, or 502. */
  private nextUpstream(condition: 'error' | 'timeout'): void {
    const s = this.s;
    if (s.finalized) return;
    this.clearConnectTimer();
    const attempts = this.attempts!;
    if (attempts.release(condition)) s.log('warn', 'upstream server temporarily disabled');
    if (this.state) {
      this.state.bytesReceived = this.upReceived;
      this.state.bytesSent = this.upSent;
    }
    if (!attempts.mayRetry(condition, 'GET', false, false)) {
      s.finalize(BAD_GATEWAY);
      return;
    }
    this.dropUpstream();
    this.connect();
  }

  /** Closes the upstream connection of the attempt. */
  private dropUpstream(): void {
    this.tcp?.removeAllListeners();
    this.tcp?.on('error', () => undefined);
    this.tcp?.destroy();
    this.tcp = undefined;
    this.udp?.removeAllListeners();
    this.udp?.on('error', () => undefined);
    try {
      this.udp?.close();
    } catch {
      // closed already
    }
    this.udp = undefined;
  }

  /** `ngx_stream_proxy_init_upstream`: `proxy PEER connected`, the PROXY protocol header and the early bytes, then both ways. */
  private initUpstream(sock: Socket): void {
    const s = this.s;
    if (s.server.tcpNodelay) sock.setNoDelay(true);
    if (this.conf.socketKeepalive) sock.setKeepAlive(true);
    if (s.logs('info')) s.log('info', `proxy ${addrWithPort(plainAddr(sock.localAddress) || 'unix:', sock.localPort ?? 0)} connected to ${this.peerName}`, true);
    this.state!.connectMs = Date.now() - this.attemptStartMs;
    this.attempts!.done();
    this.connected = true;
    if (this.conf.proxyProtocol && !this.conf.tls) this.writeUpstream(Buffer.from(proxyProtocolV1(s), 'latin1'));
    if (this.conf.tls) sock.on('data', (chunk: Buffer) => this.onData(this.down, chunk));
    sock.on('end', () => this.onEof(this.down));
    sock.on('error', (err) => {
      if (s.finalized) return;
      s.action = 'proxying and reading from upstream';
      s.connectionError(err, 'recv() failed', true);
      s.action = 'proxying connection';
      this.onEof(this.down);
    });
    for (const chunk of this.early.splice(0)) this.pass(this.up, chunk, true);
    if (this.up.eof) this.onEof(this.up);
    s.action = 'proxying connection';
    this.armIdle();
    if (!this.up.delayed) s.client.resume();
  }

  /** Bytes from the client (TCP): before the upstream is connected they wait, as in nginx's downstream buffer. */
  clientData(chunk: Buffer): void {
    if (this.s.finalized) return;
    if (!this.connected) {
      // read into the downstream buffer before the upstream is connected: received now
      this.s.bytesReceived += chunk.length;
      this.early.push(chunk);
      if (this.early.reduce((n, b) => n + b.length, 0) >= this.conf.bufferBytes) this.s.client.pause();
      return;
    }
    this.pass(this.up, chunk);
  }

  /** The client shut its side (TCP), or its connection broke (`recv() failed` at info). */
  clientEnd(err?: Error): void {
    const s = this.s;
    if (s.finalized) return;
    if (err) {
      s.action = 'proxying and reading from client';
      s.connectionError(err, 'recv() failed', false);
    }
    if (!this.connected) {
      this.up.eof = true;
      return;
    }
    this.onEof(this.up);
  }

  /**
   * `n` bytes of a plain upstream connection read into `buf` (its read
   * buffer). Returns whether to read on: not while a write of them is
   * not done (the next read would overwrite them) or the reader is paused.
   */
  private upstreamRead(sock: Socket, n: number, buf: Buffer): boolean {
    if (sock !== this.tcp || this.s.finalized) return false;
    const d = this.down;
    // bytes kept for later (a rate, or bytes waiting before them) are copied out of the buffer
    const chunk = d.rate > 0 || d.queue.length > 0 ? Buffer.from(buf.subarray(0, n)) : buf.subarray(0, n);
    this.onData(d, chunk);
    return !this.s.finalized && !sock.isPaused() && !this.s.client.holding();
  }

  private onData(d: Direction, chunk: Buffer): void {
    if (this.s.finalized) return;
    if (this.state!.firstByteMs === undefined) this.state!.firstByteMs = Date.now() - this.attemptStartMs;
    this.pass(d, chunk);
  }

  /**
   * Forwards bytes read, within the direction's rate, pausing the reader on
   * backpressure. They count as received (`s->received`, `u->received`) once
   * taken within the rate, as nginx reads no more than the rate allows;
   * `counted`: already counted (read before the upstream was connected).
   */
  private pass(d: Direction, chunk: Buffer, counted = false): void {
    const src = d.fromUpstream ? this.tcp : undefined;
    if (d.rate > 0 || d.queue.length > 0) {
      d.queue.push(counted ? Object.assign(chunk, { [COUNTED]: true }) : chunk);
      this.pauseSrc(d, src);
      this.drainQueue(d);
      return;
    }
    if (!counted) this.countReceived(d, chunk.length);
    this.forward(d, chunk);
  }

  private countReceived(d: Direction, n: number): void {
    if (d.fromUpstream) this.upReceived += n;
    else this.s.bytesReceived += n;
  }

  private pauseSrc(d: Direction, src: Socket | undefined): void {
    if (d.fromUpstream) src?.pause();
    else this.s.client.pause();
  }

  private resumeSrc(d: Direction): void {
    if (d.fromUpstream) this.tcp?.resume();
    else this.s.client.resume();
  }

  /**
   * `ngx_stream_proxy_process`'s rate: from the session's start, `rate`
   * bytes a second (`limit = rate * (now - start + 1) - received`), the
   * reader delayed `n * 1000 / rate` ms after `n` bytes.
   */
  private drainQueue(d: Direction): void {
    if (d.delayed || this.s.finalized) return;
    const received = d.fromUpstream ? this.upReceived : this.s.bytesReceived;
    let size = this.conf.bufferBytes;
    if (d.rate > 0) {
      const limit = d.rate * (Math.floor(Date.now() / 1000) - this.startSec + 1) - received;
      if (limit <= 0) {
        d.delayed = setTimeout(() => {
          d.delayed = undefined;
          this.drainQueue(d);
        }, Math.floor((-limit * 1000) / d.rate) + 1);
        return;
      }
      size = Math.min(size, limit);
    }
    const head = d.queue[0];
    if (!head) {
      this.resumeSrc(d);
      if (d.eof) this.onEof(d);
      return;
    }
    const n = Math.min(size, head.length);
    const part = head.subarray(0, n);
    const counted = (head as CountedChunk)[COUNTED] === true;
    if (n === head.length) d.queue.shift();
    else d.queue[0] = counted ? Object.assign(head.subarray(n), { [COUNTED]: true }) : head.subarray(n);
    if (!counted) this.countReceived(d, n);
    this.forward(d, part);
    const delayMs = d.rate > 0 ? Math.floor((n * 1000) / d.rate) : 0;
    d.delayed = setTimeout(() => {
      d.delayed = undefined;
      this.drainQueue(d);
    }, delayMs);
  }

  /** Writes to the other side; a full buffer there pauses this side's reader until it drains. */
  private forward(d: Direction, chunk: Buffer): void {
    const s = this.s;
    if (d.fromUpstream) {
      s.bytesSent += chunk.length;
      d.pendingWrites++;
      const ok = s.client.write(chunk, (err) => {
        d.pendingWrites--;
        if (err) {
          if (s.finalized) return;
          s.action = 'proxying and sending to client';
          s.connectionError(err, 'send() failed', false);
          s.finalize(OK);
          return;
        }
        this.afterWrite(d);
      });
      if (!ok && d.queue.length === 0 && !d.rate) {
        this.tcp?.pause();
      }
    } else {
      this.writeUpstream(chunk);
    }
    this.armIdle();
  }

  private writeUpstream(chunk: Buffer): void {
    const sock = this.tcp;
    if (!sock) return;
    const d = this.up;
    this.upSent += chunk.length;
    d.pendingWrites++;
    const ok = sock.write(chunk, (err) => {
      d.pendingWrites--;
      if (err) {
        if (this.s.finalized || sock !== this.tcp) return;
        this.s.action = 'proxying and sending to upstream';
        this.s.connectionError(err, 'send() failed', true);
        this.s.finalize(OK);
        return;
      }
      this.afterWrite(d);
    });
    if (!ok && d.queue.length === 0 && !d.rate) this.s.client.pause();
  }

  /** A write was flushed: a paused reader reads on; at EOF the session may end. */
  private afterWrite(d: Direction): void {
    if (this.s.finalized) return;
    if (d.pendingWrites === 0 && d.queue.length === 0 && !d.delayed) {
      if (!d.eof) this.resumeSrc(d);
      else this.onEof(d);
    }
  }

  /** A side's EOF: with `proxy_half_close`, the other side is shut for writing; then `ngx_stream_proxy_test_finalize`. */
  private onEof(d: Direction): void {
    if (this.s.finalized) return;
    d.eof = true;
    if (d.queue.length > 0 || d.delayed || d.pendingWrites > 0) return;
    if (this.conf.halfClose && !d.shut) {
      d.shut = true;
      if (d.fromUpstream) this.s.client.shutdown();
      else this.tcp?.end();
    }
    this.testFinalize(d);
  }

  /**
   * `ngx_stream_proxy_test_finalize` (TCP): once a side's EOF was read and
   * what it sent is written (both sides with `proxy_half_close`), the
   * session ends: `client disconnected` or `upstream disconnected`.
   */
  private testFinalize(d: Direction): void {
    const s = this.s;
    if (s.finalized || !this.connected) return;
    const up = this.up;
    const down = this.down;
    if (!up.eof && !down.eof) return;
    const flushed = (x: Direction): boolean => x.pendingWrites === 0 && x.queue.length === 0 && !x.delayed;
    if (up.eof && !flushed(up)) return;
    if (down.eof && !flushed(down)) return;
    if (this.conf.halfClose && !(up.eof && down.eof)) return;
    s.action = 'proxying connection';
    if (s.logs('info')) s.log('info', `${d.fromUpstream ? 'upstream' : 'client'} disconnected, bytes from/to client:${s.bytesReceived}/${s.bytesSent}, bytes from/to upstream:${this.upReceived}/${this.upSent}`, true);
    s.finalize(OK);
  }

  /** `proxy_timeout`: armed on traffic either way (`ngx_add_timer(c->write, pscf->timeout)`). */
  private armIdle(): void {
    if (this.idleTimer) this.idleTimer.refresh();
    else this.idleTimer = setTimeout(() => this.idleTimeout(), this.conf.timeoutMs);
  }

  /** `ngx_stream_proxy_process_connection` on a timed-out event. */
  private idleTimeout(): void {
    const s = this.s;
    if (s.finalized) return;
    if (s.udp) {
      if (this.endedOnShutdown()) return;
      if (this.conf.responses === undefined || this.responses >= this.conf.responses * this.requests) {
        s.log('info', `udp timed out${this.packets()}`, true);
        s.finalize(OK);
        return;
      }
      s.log('error', `upstream timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
      this.udpFailed = true;
      s.finalize(BAD_GATEWAY);
      return;
    }
    s.log('info', `connection timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
    s.finalize(OK);
  }

  private packets(): string {
    const s = this.s;
    return `, packets from/to client:${this.requests}/${this.responses}, bytes from/to client:${s.bytesReceived}/${s.bytesSent}, bytes from/to upstream:${this.upReceived}/${this.upSent}`;
  }

  // ---- UDP

  private connectUdp(peer: UpstreamPeer): void {
    const s = this.s;
    const sock = createSocket(isIP(peer.host) === 6 ? 'udp6' : 'udp4');
    this.udp = sock;
    sock.on('error', (err) => {
      if (sock !== this.udp || s.finalized) return;
      if (!this.connected) {
        s.connectionError(err, 'connect() failed', true);
        this.nextUpstream('error');
        return;
      }
      // ngx_stream_proxy_process: a failed read (the upstream's port unreachable) counts as an empty response
      s.action = 'proxying and reading from upstream';
      s.connectionError(err, 'recv() failed', true);
      s.action = 'proxying connection';
      this.udpFailed = true;
      this.responses++;
      this.testFinalizeUdp();
    });
    const local = this.conf.bind?.evaluate(s);
    const onBound = (): void => {
      sock.connect(peer.port, peer.host, () => {
        if (sock !== this.udp || s.finalized) return;
        if (s.logs('info')) {
          const addr = sock.address();
          s.log('info', `udp proxy ${addrWithPort(plainAddr(addr.address), addr.port)} connected to ${this.peerName}`, true);
        }
        this.state!.connectMs = Date.now() - this.attemptStartMs;
        this.connected = true;
        sock.on('message', (msg) => this.udpResponse(msg));
        for (const d of this.early.splice(0)) this.udpSend(d);
        s.action = 'proxying connection';
        this.armIdle();
      });
    };
    if (local) sock.bind({ address: local, port: 0 }, onBound);
    else onBound();
  }

  /**
   * `ngx_stream_proxy_process` on a UDP session once its worker is exiting
   * (a reload or a stop): its listening socket is closed, so the session
   * ends at its next event. Returns whether it ended.
   */
  private endedOnShutdown(): boolean {
    const s = this.s;
    if (!s.udp || !s.env.exiting()) return false;
    s.log('info', 'disconnected on shutdown', true);
    s.finalize(OK);
    return true;
  }

  /** A datagram of the client (the first one included). */
  clientDatagram(msg: Buffer): void {
    const s = this.s;
    if (s.finalized || (this.connected && this.endedOnShutdown())) return;
    s.bytesReceived += msg.length;
    this.requests++;
    if (!this.connected) {
      this.early.push(msg);
      return;
    }
    this.udpSend(msg);
  }

  private udpSend(msg: Buffer): void {
    const sock = this.udp;
    if (!sock) return;
    this.upSent += msg.length;
    sock.send(msg, (err) => {
      if (err && sock === this.udp && !this.s.finalized) {
        this.s.action = 'proxying and sending to upstream';
        this.s.connectionError(err, 'send() failed', true);
        this.s.action = 'proxying connection';
      }
    });
    this.armIdle();
    this.testFinalizeUdp();
  }

  private udpResponse(msg: Buffer): void {
    const s = this.s;
    if (s.finalized || this.endedOnShutdown()) return;
    this.upReceived += msg.length;
    if (this.state!.firstByteMs === undefined) this.state!.firstByteMs = Date.now() - this.attemptStartMs;
    this.responses++;
    s.bytesSent += msg.length;
    s.client.write(msg);
    this.armIdle();
    this.testFinalizeUdp();
  }

  /** `ngx_stream_proxy_test_finalize` (UDP): `proxy_requests` datagrams, each answered by `proxy_responses`. */
  private testFinalizeUdp(): void {
    const s = this.s;
    const { requests, responses } = this.conf;
    if (requests > 0 && this.requests < requests) return;
    if (requests > 0) this.onRequestsDone?.();
    if (responses === undefined || this.responses < responses * this.requests) return;
    s.log('info', `udp done${this.packets()}`, true);
    s.finalize(OK);
  }

  /** Called once `proxy_requests` datagrams came: later ones of the client start a new session (`ngx_delete_udp_connection`). */
  onRequestsDone: (() => void) | undefined;

  /** The session ended: the upstream's numbers kept, its connection closed, its peer released. */
  private close(): void {
    this.clearConnectTimer();
    if (this.idleTimer) clearTimeout(this.idleTimer);
    for (const d of [this.up, this.down]) if (d.delayed) clearTimeout(d.delayed);
    if (this.state) {
      if (this.state.sessionMs === undefined) this.state.sessionMs = Date.now() - this.attemptStartMs;
      if (this.tcp || this.udp) {
        this.state.bytesReceived = this.upReceived;
        this.state.bytesSent = this.upSent;
      }
    }
    // ngx_stream_proxy_finalize: a UDP peer is released now, failed or not (a TCP one was when it connected)
    if (this.s.udp && this.connected) {
      if (!this.udpFailed) this.attempts?.done();
      else if (this.attempts?.release('error')) this.s.log('warn', 'upstream server temporarily disabled');
    }
    this.attempts?.finish();
    if (this.tcp) {
      const sock = this.tcp;
      sock.removeAllListeners();
      sock.on('error', () => undefined);
      closeConnection(sock);
      this.tcp = undefined;
      // the buffer is free once its socket reads no more and no write to the client holds it
      if (this.readBuffer && sock.destroyed && this.down.pendingWrites === 0 && !this.s.client.holding()) giveReadBuffer(this.readBuffer);
      this.readBuffer = undefined;
    }
    this.dropUpstream();
  }
}

/** The round-robin group nginx makes for an address (`ngx_stream_upstream_create_round_robin_peer`). */
function implicitGroup(name: string, addrs: readonly { host: string; port: number; unixPath: string | undefined }[]): UpstreamGroup {
  return streamGroup(name, addrs.map((a) => streamPeer(a.host, a.port, a.unixPath)));
}

/**
 * `ngx_proxy_protocol_write`: `PROXY TCP4 CLIENT SERVER CPORT SPORT\r\n`
 * (after `set_real_ip_from`, the client the header named), `PROXY UNKNOWN\r\n`
 * for a unix domain socket.
 */
function proxyProtocolV1(s: StreamSession): string {
  const family = isIP(s.remoteAddr);
  const serverFamily = isIP(s.serverAddr);
  if (family === 0 || serverFamily === 0) return 'PROXY UNKNOWN\r\n';
  const v = family === 6 || serverFamily === 6 ? '6' : '4';
  return `PROXY TCP${v} ${s.remoteAddr} ${s.serverAddr} ${s.remotePort} ${s.serverPort}\r\n`;
}
