/**
 * Responses on an HTTP/1.x connection, written as nginx's header filter and
 * chunked filter write them (`ngx_http_header_filter_module.c`,
 * `ngx_http_chunked_filter_module.c`): the status line `HTTP/1.1 CODE
 * REASON`, then `Server`, `Date`, `Content-Type`, `Content-Length`,
 * `Last-Modified`, `Location`, `Transfer-Encoding: chunked`, `Connection`
 * and `Keep-Alive` in that order, then the other headers in the order they
 * were set. A body without a length goes chunked to an HTTP/1.1 client
 * (`chunked_transfer_encoding on`), otherwise the connection closes after
 * it. An HTTP/0.9 request gets the body alone.
 */
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { LocationConf } from '../../config/route-table.js';
import type { HttpRequestState } from '../request.js';
import { backgroundSettled, callDrainWaiters, resetConnection, SendTimer, type BackgroundHolder, type ClientResponseTarget, type ClientTunnel, type SendTimeout } from '../exchange.js';
import { InTransit } from '../in-transit.js';
import { writeReleasing } from '../write-copies.js';
import { responseHeaders, responseTrailers, STATUS_TEXT } from '../respond.js';
import { browserOf } from '../../user-agent.js';

/** What the target tells its connection. */
export interface Http1ResponseOwner {
  /**
   * The response ended (all of it handed to the socket); `keepalive` says
   * whether the connection may serve another request; `conf` is the
   * location it ended in (undefined when it had no head).
   */
  responseDone(keepalive: boolean, conf: LocationConf | undefined): void;
  /** The response was given up: the connection is closed (`how` as in `ResponseTarget.abort`). */
  responseAborted(how: 'flush' | 'reset' | undefined): void;
  /** A 101 response went out: the socket leaves HTTP for a tunnel. */
  upgraded(): Duplex;
  /** The response's head is about to go out: a pending `100 Continue` goes first. */
  continueIfExpected(): void;
  /** Bytes of the request body read so far, framing included. */
  readonly bodyBytesRead: number;
  /** The server is shutting down gracefully: a response sent now closes the connection (`ngx_exiting` in `ngx_http_header_filter`). */
  readonly exiting: boolean;
}

/** nginx's cached `Date` value (`ngx_cached_http_time`), made once per second. */
let dateSecond = -1;
let dateText = '';
export function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(second * 1000).toUTCString();
  }
  return dateText;
}

/** `keepalive_disable`: the client's browser is one the location keeps no connection for (its `User-Agent` read only then). */
function keepaliveDisabled(r: HttpRequestState, loc: LocationConf): boolean {
  const { msie6, safari } = loc.keepaliveDisable;
  if (!(msie6 && r.mainMethod === 'POST') && !safari) return false;
  const browser = browserOf(r.headers['user-agent']);
  return (msie6 && browser.msie6 && r.mainMethod === 'POST') || (safari && browser.safari);
}

/** The headers nginx's header filter writes first, in its order, before those set by modules. */
const LEADING = ['server', 'date', 'content-type', 'content-length', 'last-modified', 'location'];
const LEADING_NAMES: ReadonlySet<string> = new Set(LEADING);
/** The leading headers nginx writes from its own fields (`headers_out.content_type`, `content_length_n`), by their lowercase names. */
const CANONICAL: Readonly<Record<string, string>> = { 'content-type': 'Content-Type', 'content-length': 'Content-Length' };

/**
 * A head and the body's first bytes up to this size together are copied
 * into one buffer (taken from node's pool of small buffers) and written at
 * once: for a small response that costs less than node's corked write of
 * the two, which gathers them for `writev` with an array and a callback
 * for each. Larger bodies go as they are, after the head, in one `writev`.
 */
const ONE_WRITE_BYTES = 4095;

/** The response to one request on an HTTP/1.x connection. */
export class Http1Target implements ClientResponseTarget {
  private headBytes: string | undefined;
  /** The location the response was made in. */
  private conf: LocationConf | undefined;
  /** The request whose trailers (the upstream's, `add_trailer`'s) go in the last chunk, if any (`ngx_http_chunked_body_filter`). */
  private trailersOf: HttpRequestState | undefined;
  private headSent = false;
  /** The last `write`'s body went through `writeReleasing`, which said its buffer is free again (`tookWhole`). */
  private bodyTaken = false;
  private chunked = false;
  private keepalive = false;
  private ended = false;
  private abortListener: ((err: NodeJS.ErrnoException | undefined) => void) | undefined;
  /** `send_timeout`'s timer, made when a write first leaves data waiting. */
  private sendTimer: SendTimer | undefined;
  /** `onDrain`'s callbacks, called at the socket's next `drain` or `close`. */
  private drainWaiters: (() => void)[] | undefined;
  /** Whether `drained` listens to the socket (from a write that left data waiting, or `onDrain`, to the next `drain` or `close`). */
  private drainListened = false;
  private closeListeners: ((completed: boolean) => void)[] = [];
  private closedOnce = false;
  heldBy: BackgroundHolder | undefined;
  /** Bytes written for this response: status line and headers, body and chunk framing (`$bytes_sent`). */
  bytesSent = 0;
  /** Over TLS: what of `bytesSent` is in transit, made when first asked. */
  private inTransit: InTransit | undefined;

  get requestBodyBytes(): number {
    return this.owner.bodyBytesRead;
  }

  constructor(
    private readonly socket: Socket,
    private readonly owner: Http1ResponseOwner,
    /** `HEAD`: the header alone. */
    private readonly head0: { readonly method: string; readonly httpVersion: number },
    /** The request asked to upgrade (`Upgrade`): a 101 may turn the connection into a tunnel. */
    readonly tunnelable: boolean,
  ) {}

  private sendTimeout: SendTimeout | undefined;

  watchSend(timeout: SendTimeout): void {
    this.sendTimeout = timeout;
  }

  get started(): boolean {
    return this.headBytes !== undefined;
  }

  get headOnly(): boolean {
    return this.head0.method === 'HEAD';
  }

  /**
   * Builds the status line and headers (sent with the first body bytes, or
   * at `flushHead`/`end`): the connection is kept alive when the request
   * allows it (`r.keepalive`), the location's `keepalive_timeout`,
   * `keepalive_requests` and `keepalive_time` do, and the body's end is
   * known to the client (a length, or chunks).
   */
  head(r: HttpRequestState, status: number, headers: [string, string | string[]][], reason?: string): void {
    const { wire, list, lowers } = responseHeaders(r, status, headers);
    const sent = r.sentHeaders;
    if (this.head0.httpVersion < 1000) {
      // HTTP/0.9: no status line and no headers (ngx_http_header_filter)
      this.headBytes = '';
      this.keepalive = false;
      return;
    }
    const { loc } = r;
    // ngx_http_update_location_config
    let keepalive = r.keepalive && !this.owner.exiting && loc.keepaliveTimeoutMs > 0 && r.conn.requests < loc.keepaliveRequests
      && Date.now() - r.conn.acceptedAtMs <= loc.keepaliveTimeMs && !keepaliveDisabled(r, loc);
    const bodyless = this.headOnly || status === 204 || status === 304 || status < 200;
    const lengthKnown = lowers.includes('content-length');
    if (!bodyless && !lengthKnown && status !== 101) {
      if (this.head0.httpVersion >= 1001 && loc.chunkedTransferEncoding) this.chunked = true;
      else keepalive = false;
    }
    // an upstream's status line without a reason phrase goes as it came, "HTTP/1.1 200" (nginx's headers_out.status_line)
    let text = reason === '' ? `HTTP/1.1 ${wire}\r\n` : `HTTP/1.1 ${wire} ${reason ?? STATUS_TEXT[wire] ?? ''}\r\n`;
    const line = (name: string, value: string | string[]): void => {
      if (Array.isArray(value)) for (const v of value) text += `${name}: ${v}\r\n`;
      else text += `${name}: ${value}\r\n`;
    };
    for (const lower of LEADING) {
      if (lower === 'date' && !lowers.includes('date')) {
        const date = httpDate();
        line('Date', date);
        sent.set('date', date);
        continue;
      }
      // ngx_http_header_filter writes the type and the length under its own names, whatever case they came in
      const name = CANONICAL[lower];
      for (let i = 0; i < list.length; i++) if (lowers[i] === lower) line(name ?? list[i]![0], list[i]![1]);
    }
    if (this.chunked) {
      line('Transfer-Encoding', 'chunked');
      sent.set('transfer-encoding', 'chunked');
    }
    if (status === 101) {
      line('Connection', 'upgrade');
      sent.set('connection', 'upgrade');
      keepalive = false;
    } else if (keepalive) {
      line('Connection', 'keep-alive');
      sent.set('connection', 'keep-alive');
      if (loc.keepaliveHeaderSec !== undefined) line('Keep-Alive', `timeout=${loc.keepaliveHeaderSec}`);
    } else {
      line('Connection', 'close');
      sent.set('connection', 'close');
    }
    for (let i = 0; i < list.length; i++) {
      const lower = lowers[i]!;
      if (LEADING_NAMES.has(lower) || lower === 'connection' || lower === 'keep-alive' || lower === 'transfer-encoding') continue;
      line(list[i]![0], list[i]![1]);
    }
    this.headBytes = text + '\r\n';
    this.keepalive = keepalive;
    this.conf = loc;
    if (this.chunked && (r.expectTrailers || r.upstreamTrailers)) this.trailersOf = r;
  }

  flushHead(): void {
    if (this.headSent || this.headBytes === undefined || this.ended) return;
    this.sendHead();
  }

  /** `ngx_http_early_hints_filter`: `HTTP/1.1 103 Early Hints` and the headers, to an HTTP/1.1 client. */
  earlyHints(headers: readonly (readonly [string, string])[]): void {
    if (this.headBytes !== undefined || this.head0.httpVersion < 1001 || this.socket.destroyed) return;
    let text = 'HTTP/1.1 103 Early Hints\r\n';
    for (const [name, value] of headers) text += `${name}: ${value}\r\n`;
    text += '\r\n';
    this.owner.continueIfExpected();
    this.bytesSent += text.length;
    this.socket.write(text, 'latin1');
  }

  /** Writes the head; with `body`, the body's first bytes with it in one buffer (see `ONE_WRITE_BYTES`). */
  private sendHead(body?: Buffer): boolean {
    this.headSent = true;
    const text = this.headBytes!;
    if (text === '' && body === undefined) return true;
    if (text !== '') this.owner.continueIfExpected();
    this.bytesSent += text.length;
    if (body === undefined) return this.socket.write(text, 'latin1');
    this.bytesSent += body.length;
    if (text === '') return this.socket.write(body);
    const both = Buffer.allocUnsafe(text.length + body.length);
    both.write(text, 0, 'latin1');
    body.copy(both, text.length);
    return this.socket.write(both);
  }

  write(chunk: Buffer | string): boolean {
    this.bodyTaken = false;
    if (this.socket.destroyed) return false;
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    if (this.headOnly || data.length === 0) return this.headSent ? !this.socket.writableNeedDrain : this.sendHead();
    if (!this.headSent && !this.chunked && this.headBytes!.length + data.length <= ONE_WRITE_BYTES) {
      const sent = this.sendHead(data);
      if (!sent) this.blocked();
      return sent;
    }
    if (this.headSent && !this.chunked) {
      // one write: corking it would only queue it in the stream first
      this.bodyTaken = writeReleasing(this.socket, [data]);
      const sent = this.socket.writableLength < this.socket.writableHighWaterMark;
      this.bytesSent += data.length;
      if (!sent) this.blocked();
      return sent;
    }
    this.socket.cork();
    if (!this.headSent) this.sendHead();
    let ok: boolean;
    if (this.chunked) {
      const size = `${data.length.toString(16)}\r\n`;
      this.socket.write(size, 'latin1');
      this.socket.write(data);
      ok = this.socket.write('\r\n', 'latin1');
      this.bytesSent += size.length + data.length + 2;
    } else {
      ok = this.socket.write(data);
      this.bytesSent += data.length;
    }
    this.socket.uncork();
    if (!ok) this.blocked();
    return ok;
  }

  /** A write left data waiting in the socket: `send_timeout` runs until it drains. */
  private blocked(): void {
    if (this.sendTimeout === undefined) return;
    (this.sendTimer ??= new SendTimer(this.sendTimeout)).blocked();
    this.listenForDrain();
  }

  private listenForDrain(): void {
    if (this.drainListened) return;
    this.drainListened = true;
    this.socket.on('drain', this.drained).on('close', this.drained);
  }

  /** The socket drained or closed: the send timer stops waiting (or, the response over, stops), `onDrain`'s callbacks run. */
  private readonly drained = (): void => {
    this.drainListened = false;
    this.socket.off('drain', this.drained).off('close', this.drained);
    if (this.ended) this.sendTimer?.stop();
    else this.sendTimer?.unblocked();
    callDrainWaiters(this.drainWaiters);
  };

  /**
   * Gives up a response the client stopped taking: the handler hears of it
   * as of a client that left (with ETIMEDOUT), then the connection is closed.
   */
  timedOut(reset: boolean): void {
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.(Object.assign(new Error('client timed out'), { code: 'ETIMEDOUT' }));
    this.abort(reset ? 'reset' : undefined);
  }

  /**
   * Bytes written and not yet taken by the client; over TLS, less those
   * written in this turn and the one before (see `InTransit`).
   */
  get bufferedBytes(): number {
    const held = this.socket.writableLength;
    if (!(this.socket as TLSSocket).encrypted) return held;
    return (this.inTransit ??= new InTransit()).busy(held, this.bytesSent);
  }

  /**
   * The last write's buffer is free again: nothing waits in the socket's
   * queue, or the write went through `writeReleasing`, which said so (TLS
   * encrypted it at once, or a copy went).
   */
  tookWhole(): boolean {
    return this.bodyTaken || this.socket.writableLength === 0;
  }

  get gone(): boolean {
    return this.socket.destroyed;
  }

  get highWaterMark(): number {
    return this.socket.writableHighWaterMark;
  }

  onDrain(cb: () => void): void {
    if (this.socket.destroyed) {
      queueMicrotask(cb);
      return;
    }
    (this.drainWaiters ??= []).push(cb);
    this.listenForDrain();
  }

  end(chunk?: Buffer | string): void {
    if (this.ended) return;
    if (chunk !== undefined) this.write(chunk);
    this.ended = true;
    this.abortListener = undefined;
    // the timer of data still waiting runs on (to the drain); one left from an earlier wait goes
    if (!this.sendTimer?.isBlocked) this.sendTimer?.stop();
    if (this.socket.destroyed) {
      this.closed(false);
      return;
    }
    this.socket.cork();
    if (!this.headSent) this.sendHead();
    if (this.chunked && !this.headOnly) {
      let last = '0\r\n';
      if (this.trailersOf) for (const [name, value] of responseTrailers(this.trailersOf)) last += `${name}: ${value}\r\n`;
      last += '\r\n';
      this.socket.write(last, 'latin1');
      this.bytesSent += last.length;
    }
    this.socket.uncork();
    this.closed(true);
    // the next request waits for the request's background subrequests (mirrors), as nginx's does
    const hold = backgroundSettled(this.heldBy);
    if (hold) void hold.then(() => this.owner.responseDone(this.keepalive, this.conf));
    else this.owner.responseDone(this.keepalive, this.conf);
  }

  abort(how?: 'flush' | 'reset'): void {
    if (this.ended) return;
    // a head given but not yet written goes out first: nginx sends a response's header before its body
    if (how === 'flush' && !this.headSent && this.headBytes !== undefined) this.sendHead();
    this.ended = true;
    this.abortListener = undefined;
    this.sendTimer?.stop();
    this.closed(false);
    this.owner.responseAborted(how);
  }

  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void {
    this.abortListener = cb;
  }

  /**
   * The connection went away before the response ended: the handler hears
   * of it (`onAbort`) with the socket's error (ECONNRESET for a reset).
   */
  clientGone(err: NodeJS.ErrnoException | undefined): void {
    if (this.ended) return;
    this.ended = true;
    const listener = this.abortListener;
    this.abortListener = undefined;
    this.sendTimer?.stop();
    listener?.(err);
    this.closed(false);
  }

  /**
   * The client shut down its side (FIN): the handler hears of it as of a
   * client that left (nginx's `ngx_http_upstream_check_broken_connection`
   * sees the end of file), but what it still sends is sent.
   */
  clientHalfClosed(): void {
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.(undefined);
  }

  /**
   * Takes the socket out of HTTP for a tunnel (the caller sends the 101
   * head with `head` and `flushHead`); the response is over when the socket
   * closes.
   */
  tunnel(): ClientTunnel | undefined {
    if (this.ended || !this.tunnelable) return undefined;
    const socket = this.owner.upgraded();
    socket.once('close', () => this.closed(true));
    return {
      socket,
      sent: (bytes) => {
        this.bytesSent += bytes;
      },
    };
  }

  /** Calls `cb` once, when the response is over: `completed` when it was sent whole. */
  whenClosed(cb: (completed: boolean) => void): void {
    this.closeListeners.push(cb);
  }

  /** The response is over (or the tunnel that replaced it is). */
  closed(completed: boolean): void {
    if (this.closedOnce) return;
    this.closedOnce = true;
    const listeners = this.closeListeners;
    this.closeListeners = [];
    for (let i = 0; i < listeners.length; i++) listeners[i]!(completed);
  }

  /** Closes the connection at once, with a reset when asked (`reset_timedout_connection`). */
  static destroy(socket: Socket, how: 'flush' | 'reset' | undefined): void {
    if (how === 'flush') socket.destroySoon();
    else if (how === 'reset') resetConnection(socket);
    else socket.destroy();
  }
}
