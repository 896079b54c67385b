/**
 * One request in flight: its state, where its body comes from and where its
 * response goes. The response side is either a client connection (an
 * HTTP/1.x connection of jinx's own, `http1/response.ts`, or an HTTP/2
 * stream of its own, `http2/response.ts`) or, for an `auth_request`
 * subrequest, a recorder that keeps the status and headers and drops the
 * body.
 */
import type { Socket } from 'node:net';
import type { Duplex, Readable } from 'node:stream';
import type { RuntimeContext } from './context.js';
import type { HttpRequestState } from './request.js';
import { tcpSocketOf } from './server/tcp-socket.js';
import { turnNowMs } from './turn-clock.js';

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
  /**
   * Sends a `103 Early Hints` with `headers` now, ahead of the response's
   * head (`ngx_http_send_early_hints`): to an HTTP/1.1 or HTTP/2 client;
   * nothing for HTTP/1.0, a subrequest, or once the head was set.
   */
  earlyHints(headers: readonly (readonly [string, string])[]): void;
  /** Sends body data; false when the client cannot take more now (wait for `drain`). */
  write(chunk: Buffer | string): boolean;
  /** Bytes written but not yet taken by the client. */
  readonly bufferedBytes: number;
  /**
   * Whether every buffer written so far has left jinx (the kernel took its
   * bytes, or TLS copied them), so that the writer may fill it again;
   * absent on a target that may read a written buffer later (body
   * filters, HTTP/2's flow control, a subrequest's body).
   */
  tookWhole?(): boolean;
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
  /**
   * The request whose background subrequests (mirrors) the connection waits
   * for once the response has ended, before it goes on to its next request
   * (a reference, not a closure: a closure made per request would keep its
   * whole scope alive with the target, which promoted every request's
   * objects to V8's old generation). An HTTP/2 stream ends without waiting.
   */
  heldBy?: BackgroundHolder;
}

/** What a response waits for after its end: a request's background subrequests, settled when each ends. */
export interface BackgroundHolder {
  readonly backgroundRuns: readonly Promise<void>[] | undefined;
}

/** Resolves once every background subrequest of `holder` has ended; undefined when there are none to wait for. */
export function backgroundSettled(holder: BackgroundHolder | undefined): Promise<unknown> | undefined {
  const runs = holder?.backgroundRuns;
  return runs && Promise.allSettled(runs);
}

/**
 * Closes a client connection with a TCP reset (nginx sets `SO_LINGER` to 0
 * before closing): on the TCP socket under TLS, if any.
 */
export function resetConnection(socket: Socket): void {
  const tcp = tcpSocketOf(socket);
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
 * nginx's write timer (`send_timeout`) of one response: `blocked()` when a
 * write leaves data waiting for the client (the timer runs from then, as
 * `ngx_http_writer` adds the write event's timer), `unblocked()` when the
 * output drained; when data has waited `timeout.ms()` without a drain,
 * `timeout.expired()` runs. One node timer serves every wait of the
 * response: a drain leaves it armed, and when it fires it checks whether
 * data still waits and since when (re-armed for the rest), as the upstream
 * read timer does (upstream/peer-connections.ts): a 1 MiB response to a
 * slower client waits dozens of times, and a node timer with two listeners
 * per wait was a tenth of what such a response allocated. `stop()` when
 * the response is over and nothing waits (the timer would keep the
 * response alive until it fires).
 */
export class SendTimer {
  private timer: NodeJS.Timeout | undefined;
  /** When data began to wait (turn clock, ms); -1: nothing waits. */
  private blockedSinceMs = -1;

  constructor(private readonly timeout: SendTimeout) {}

  /** Whether written data waits for the client. */
  get isBlocked(): boolean {
    return this.blockedSinceMs >= 0;
  }

  /** A write left data waiting: the timer runs from now, unless data already waited. */
  blocked(): void {
    if (this.blockedSinceMs >= 0) return;
    this.blockedSinceMs = turnNowMs();
    this.timer ??= setTimeout(this.fired, this.timeout.ms());
  }

  /** The output drained: nothing waits. */
  unblocked(): void {
    this.blockedSinceMs = -1;
  }

  /** The response is over: no timer is left. */
  stop(): void {
    this.blockedSinceMs = -1;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly fired = (): void => {
    this.timer = undefined;
    if (this.blockedSinceMs < 0) return;
    const leftMs = this.blockedSinceMs + this.timeout.ms() - turnNowMs();
    if (leftMs >= 1) {
      this.timer = setTimeout(this.fired, leftMs);
      return;
    }
    this.blockedSinceMs = -1;
    this.timeout.expired();
  };
}

/**
 * Calls the callbacks waiting for a target's drain (`onDrain`) and takes
 * them out of `waiters`; those a callback adds wait for the next drain. The
 * list is kept (no array per drain).
 */
export function callDrainWaiters(waiters: (() => void)[] | undefined): void {
  if (waiters === undefined || waiters.length === 0) return;
  const n = waiters.length;
  for (let i = 0; i < n; i++) waiters[i]!();
  waiters.copyWithin(0, n);
  waiters.length -= n;
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

  earlyHints(): void {
    // a subrequest's early hints are not sent (ngx_http_early_hints_filter: the main request's only)
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

/** A subrequest: an exchange whose request has a parent (`r.parent`), its response recorded. */
export type Subrequest = Exchange & { readonly out: SubrequestTarget };

/**
 * What a content handler leaves to the phase runner (phases.ts), which alone
 * finalizes, redirects internally and runs `error_page` (nginx's handlers
 * return a code to `ngx_http_finalize_request` the same way): `done`, the
 * response was sent or its connection closed; `close`, the connection is to
 * be closed without a response; `status`, a special response (error_page or
 * nginx's page, 444/408/499 close), with a redirect's `Location`;
 * `redirect`, an internal redirect; `named`, a named location; `accel`, an
 * upstream's `X-Accel-Redirect` value. With `thenClose`, the connection is
 * closed once the outcome is followed (a client that left while the
 * upstream was read to its end).
 */
export type Outcome = (
  | { readonly kind: 'done' }
  | { readonly kind: 'close' }
  | { readonly kind: 'status'; readonly status: number; readonly location?: string }
  | { readonly kind: 'redirect'; readonly uri: string; readonly args: string }
  | { readonly kind: 'named'; readonly name: string }
  | { readonly kind: 'accel'; readonly value: string }
) & { readonly thenClose?: boolean };

/** The response was sent, or its connection closed. */
export const DONE: Outcome = { kind: 'done' };

/** A special response with `status` (and a redirect's `location`), for the phase runner to finalize. */
export function statusOutcome(status: number, location?: string): Outcome {
  return location === undefined ? { kind: 'status', status } : { kind: 'status', status, location };
}

/** A content handler: serves `ex` and says how the request goes on. */
export type ContentHandler = (ex: Exchange) => Promise<Outcome>;
