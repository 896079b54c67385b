/**
 * One request in flight: its state, where its body comes from and where its
 * response goes. The response side is either a client connection (an
 * HTTP/1.x connection of jinx's own, `http1/response.ts`, or an HTTP/2
 * stream of node:http2's compatibility API) or, for an `auth_request`
 * subrequest, a recorder that keeps the status and headers and drops the
 * body.
 */
import { constants as h2constants, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import type { RuntimeContext } from './context.js';
import type { HttpRequestState } from './request.js';
import { responseTrailers, writeHead } from './respond.js';

/** Where a response goes. */
export interface ResponseTarget {
  /** Whether status and headers were sent. */
  readonly started: boolean;
  /** No body is sent (HEAD, or a subrequest). */
  readonly headOnly: boolean;
  /** Sets status and headers; they go out with the first body data, or at `flushHead`. */
  head(r: HttpRequestState, status: number, headers: [string, string | string[]][], reason?: string): void;
  /** Sends status and headers now if no body data has gone out yet (nginx sends the header before reading the body). */
  flushHead(): void;
  /** Sends body data; false when the client cannot take more now (wait for `drain`). */
  write(chunk: Buffer | string): boolean;
  /** Bytes written but not yet taken by the client. */
  readonly bufferedBytes: number;
  /** The client connection is closed: nothing more can be sent. */
  readonly gone: boolean;
  /** Buffered bytes above which `write` returns false (and `drain` follows). */
  readonly highWaterMark: number;
  /** Calls `cb` once the client has taken what was written, or once the connection is gone. */
  onDrain(cb: () => void): void;
  /** Ends the response. */
  end(chunk?: Buffer | string): void;
  /**
   * Closes the connection without completing the response (nginx's 444, or
   * an upstream failure mid-body): with `flush`, what was written goes out
   * first; with `reset`, the connection is reset (`reset_timedout_connection`).
   */
  abort(how?: 'flush' | 'reset'): void;
  /**
   * Calls `cb` if the client goes away before the response is complete, with
   * the error the connection ended with (ECONNRESET for a reset), if any.
   */
  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void;
  /** Whether the client connection can become a tunnel: an HTTP/1.x request with `Upgrade`. */
  readonly tunnelable: boolean;
  /**
   * The client connection, for a tunnel after `101 Switching Protocols` has
   * been sent with `head` (undefined unless `tunnelable`).
   */
  tunnel(): ClientTunnel | undefined;
}

/** A client connection taken out of HTTP for a tunnel (`ngx_http_upstream_upgrade`). */
export interface ClientTunnel {
  readonly socket: Duplex;
  /** Counts bytes the tunnel wrote to the client in `$bytes_sent`, as nginx's `c->sent` does. */
  sent(bytes: number): void;
}

/** The response to a client's request: a `ResponseTarget` that also reports when it is over. */
export interface ClientResponseTarget extends ResponseTarget {
  /** Calls `cb` once the response is over (ended, aborted, or its tunnel closed); `completed` when it was sent whole. */
  whenClosed(cb: (completed: boolean) => void): void;
  /**
   * Gives up a response the client stopped taking (`send_timeout`): the
   * handler hears of it as of a client that left (with ETIMEDOUT), then the
   * connection (or stream) is closed, with a reset when `reset` is set.
   */
  timedOut(reset: boolean): void;
  /** Calls `timeout.expired()` when written data waits for the client longer than `timeout.ms()` (nginx's write timer, `send_timeout`). */
  watchSend(timeout: SendTimeout): void;
  /** Bytes sent to the client for this response, status line and headers included (`$bytes_sent`). */
  readonly bytesSent: number;
  /** Bytes of the request body read from the client, framing included (added to `$request_length`). */
  readonly requestBodyBytes: number;
}

/**
 * Closes a client connection with a TCP reset (nginx sets `SO_LINGER` to 0
 * before closing): on the TCP socket under TLS, if any.
 */
export function resetConnection(socket: Socket): void {
  const tcp = (socket as Socket & { _parent?: Socket | null })._parent ?? socket;
  try {
    tcp.resetAndDestroy();
  } catch {
    // not a TCP socket: closed normally
  }
  socket.destroy();
}

/** `send_timeout` of a response: its length now, and what to do when it passes. */
export interface SendTimeout {
  ms(): number;
  /** The client took nothing for `ms()`: the response is given up. */
  expired(): void;
}

/**
 * nginx's write timer (`send_timeout`) on a response whose data waits in
 * `output` (a socket or an HTTP/2 response): `timeout.expired()` runs when
 * `output` has not drained within `timeout.ms()`; a drain or close disarms
 * it, and `disarmed` hears of either end.
 */
export function armSendTimer(output: NodeJS.EventEmitter, timeout: SendTimeout, disarmed: () => void): NodeJS.Timeout {
  const disarm = (): void => {
    clearTimeout(timer);
    output.off('drain', disarm).off('close', disarm);
    disarmed();
  };
  const timer = setTimeout(() => {
    disarm();
    timeout.expired();
  }, timeout.ms());
  output.on('drain', disarm).on('close', disarm);
  return timer;
}

/** A response on an HTTP/2 stream (node:http2's compatibility API). */
export class Http2Target implements ClientResponseTarget {
  private abortListener: ((err: NodeJS.ErrnoException | undefined) => void) | undefined;
  private bodyStarted = false;
  /**
   * Runs while written data waits for the client: nginx's write timer,
   * `send_timeout` between two writes that make progress.
   */
  private sendTimer: NodeJS.Timeout | undefined;
  /**
   * The response stream closed: node:http2's compatibility response has no
   * `destroyed`, and takes no more writes once its stream is closed (a
   * client's RST_STREAM), without 'drain' or 'close' to follow.
   */
  private streamClosed = false;

  private sendTimeout: SendTimeout | undefined;
  /** node:http2 does not count a stream's bytes; `$bytes_sent` counts what jinx wrote of the body. */
  bytesSent = 0;
  /** node:http2 does not count a stream's bytes read: `$request_length` has the header part only. */
  readonly requestBodyBytes = 0;

  constructor(
    private readonly req: Http2ServerRequest,
    private readonly res: Http2ServerResponse,
  ) {
    res.once('close', () => {
      this.closed();
      for (const cb of this.closeListeners.splice(0)) cb(this.completed);
    });
  }

  /**
   * The whole response went out: the stream finished, or closed without a
   * reset after its end was written (a stream without trailers to wait for
   * closes as its last DATA frame goes, before it reports 'finish').
   */
  private get completed(): boolean {
    return this.res.writableFinished || (this.res.writableEnded && this.res.stream.rstCode === h2constants.NGHTTP2_NO_ERROR);
  }

  private readonly closeListeners: ((completed: boolean) => void)[] = [];

  whenClosed(cb: (completed: boolean) => void): void {
    this.closeListeners.push(cb);
  }

  watchSend(timeout: SendTimeout): void {
    this.sendTimeout = timeout;
  }

  get started(): boolean {
    return this.res.headersSent;
  }

  get headOnly(): boolean {
    return this.req.method === 'HEAD';
  }

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
    // a response whose HEADERS frame ended the stream (no body) gets no trailers either (ngx_http_v2_header_filter)
    const ended = writeHead(r, this.res, status, headers);
    if (r.expectTrailers && !ended) this.trailersOf = r;
  }

  /** The request whose `add_trailer` trailers end the response, if any. */
  private trailersOf: HttpRequestState | undefined;

  flushHead(): void {
    if (this.bodyStarted || this.res.writableEnded) return;
    this.bodyStarted = true;
    // node:http2's compatibility response has flushHeaders at run time (not in @types/node 20)
    (this.res as unknown as { flushHeaders(): void }).flushHeaders();
  }

  /**
   * Body bytes written in this turn of the event loop, not yet handed to
   * node:http2: node:http2 sends each write as DATA frames of its own, and
   * the end of the stream as an empty DATA frame unless the last bytes come
   * with it. Gathered, a small body goes out as nginx sends it: one DATA frame
   * carrying END_STREAM (`ngx_http_v2_send_chain`).
   */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private flushTimer: NodeJS.Immediate | undefined;

  write(chunk: Buffer | string): boolean {
    this.bodyStarted = true;
    this.bytesSent += chunk.length;
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.pending.push(data);
    this.pendingBytes += data.length;
    if (this.pendingBytes >= this.highWaterMark) return this.flush();
    this.flushTimer ??= setImmediate(() => this.flush());
    return true;
  }

  /** Hands the gathered body bytes to node:http2; false when its buffer is full. */
  private flush(): boolean {
    clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    const data = this.takePending();
    if (data === undefined) return true;
    const ok = (this.res as NodeJS.WritableStream).write(data);
    if (!ok && this.sendTimeout && !this.sendTimer && !this.gone) this.armSendTimer(this.sendTimeout);
    return ok;
  }

  private takePending(): Buffer | undefined {
    if (this.pendingBytes === 0) {
      this.pending.length = 0;
      return undefined;
    }
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    return data;
  }

  private armSendTimer(timeout: SendTimeout): void {
    this.sendTimer = armSendTimer(this.res as NodeJS.EventEmitter, timeout, () => {
      this.sendTimer = undefined;
    });
  }

  /**
   * Gives up a response the client stopped taking: the handler hears of it
   * as of a client that left (with ETIMEDOUT), then the connection is closed.
   */
  timedOut(): void {
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.(Object.assign(new Error('client timed out'), { code: 'ETIMEDOUT' }));
    this.abort();
  }

  get bufferedBytes(): number {
    return this.res.stream.writableLength + this.pendingBytes;
  }

  get gone(): boolean {
    return this.res.destroyed || this.streamClosed;
  }

  get highWaterMark(): number {
    return this.res.stream.writableHighWaterMark;
  }

  onDrain(cb: () => void): void {
    if (this.gone) {
      queueMicrotask(cb);
      return;
    }
    const res = this.res as NodeJS.EventEmitter;
    const fire = (): void => {
      res.off('drain', fire).off('close', fire);
      cb();
    };
    res.on('drain', fire).on('close', fire);
  }

  end(chunk?: Buffer | string): void {
    this.bodyStarted = true;
    if (chunk !== undefined) this.bytesSent += chunk.length;
    if (this.trailersOf) {
      // a name given more than once is sent as that many fields
      const trailers: Record<string, string[]> = {};
      for (const [name, value] of responseTrailers(this.trailersOf)) (trailers[name.toLowerCase()] ??= []).push(value);
      this.res.addTrailers(trailers);
    }
    clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    if (chunk !== undefined && chunk.length > 0) {
      const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      this.pending.push(data);
      this.pendingBytes += data.length;
    }
    // an empty last chunk is still written: node:http2 then ends a stream whose HEADERS frame ended it
    // without an RST_STREAM after it
    const data = this.takePending() ?? chunk;
    if (data === undefined) this.res.end();
    else (this.res as NodeJS.WritableStream).end(data);
  }

  /** Resets the stream (RST_STREAM INTERNAL_ERROR, as nginx resets a stream it gives up); the connection stays. */
  abort(): void {
    this.abortListener = undefined;
    clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    this.takePending();
    this.res.stream.close(2);
  }

  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void {
    this.abortListener = cb;
  }

  readonly tunnelable = false;

  tunnel(): undefined {
    return undefined;
  }

  /** The response stream closed: calls the `onAbort` callback unless the response was complete or jinx closed it. */
  private closed(): void {
    this.streamClosed = true;
    if (!this.abortListener || this.completed) return;
    const socket = this.req.socket as (Socket & { errored?: Error | null }) | null;
    this.abortListener((socket?.errored ?? undefined) as NodeJS.ErrnoException | undefined);
  }
}

/** The response of a subrequest: status and headers kept, body dropped. */
export class SubrequestTarget implements ResponseTarget {
  started = false;
  status = 0;
  headers: [string, string | string[]][] = [];
  readonly headOnly = true;
  readonly bufferedBytes = 0;
  readonly gone = false;
  readonly highWaterMark = 0;
  private done: () => void = () => undefined;
  /** Resolves when the subrequest's response has ended. */
  readonly finished = new Promise<void>((resolve) => {
    this.done = resolve;
  });

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
    this.started = true;
    this.status = status;
    r.status = status;
    this.headers = headers;
  }

  flushHead(): void {
    // the recorder has nothing to send
  }

  write(): boolean {
    return true;
  }

  onDrain(cb: () => void): void {
    cb();
  }

  end(): void {
    this.done();
  }

  abort(): void {
    this.done();
  }

  onAbort(): void {
    // a subrequest has no client of its own
  }

  readonly tunnelable = false;

  tunnel(): undefined {
    return undefined;
  }
}

/** A request with its context, body source and response target. */
export interface Exchange {
  readonly cx: RuntimeContext;
  readonly r: HttpRequestState;
  /** The request body, or undefined when there is none to read (subrequests). */
  readonly body: Readable | undefined;
  readonly out: ResponseTarget;
}
