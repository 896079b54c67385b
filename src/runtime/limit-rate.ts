/**
 * `limit_rate`, `limit_rate_after`, `$limit_rate` and `X-Accel-Limit-Rate`
 * as nginx's write filter applies them (`ngx_http_write_filter` in
 * `src/http/ngx_http_write_filter_module.c`): the rate is taken once, when
 * the response's first bytes go out (the request's own when `$limit_rate`
 * or an upstream's `X-Accel-Limit-Rate` set it, else the location's
 * `limit_rate`); then at most `rate × (whole seconds since the request
 * began + 1)` bytes past `limit_rate_after` have gone out at any time, and
 * each send is followed by a pause as long as its bytes take at the rate.
 * The bytes counted are those of the response (the header as the
 * connection or stream had sent it when the rate was taken, then every
 * body byte handed on): one HTTP/1.x response, or one HTTP/2 stream. Data waiting for its turn is held here: the
 * writer is told to wait (`write` returns false) and hears `onDrain` once
 * it has gone; one timer at a time, no polling.
 */
import { logRequest, type RuntimeContext } from './context.js';
import type { ClientResponseTarget, ClientTunnel, SendTimeout } from './exchange.js';
import type { HttpRequestState } from './request.js';
import type { SizeValue } from '../config/modules/http-core.js';
import { parseSize } from '../config/spec.js';

/**
 * A size directive's value for a request (`ngx_http_complex_value_size`
 * with a default of 0): a value that is not a size logs `invalid size
 * "VALUE"` and counts as 0.
 */
export function requestSize(cx: RuntimeContext, r: HttpRequestState, v: SizeValue | undefined): number {
  if (!v) return 0;
  if ('bytes' in v) return v.bytes;
  const text = v.value.evaluate(r);
  const bytes = parseSize(text);
  if (bytes !== undefined) return bytes;
  logRequest(cx, r, 'error', `invalid size "${text}"`);
  return 0;
}

/** The queue of a response that has not taken a rate that is not 0: always empty. */
const NOTHING_QUEUED: Buffer[] = [];
const NOTHING_QUEUED_CB: (() => void)[] = [];

/** The client's response target with the request's rate limit in front of it. */
export class RateLimitedTarget implements ClientResponseTarget {
  /** Bytes per second, once taken (undefined before the first body bytes). */
  private rate: number | undefined;
  /** `limit_rate_after`, taken with a rate that is not 0. */
  private afterBytes = 0;
  /** Bytes of the response sent so far, as the write filter counts them (`c->sent`). */
  private sentBytes = 0;
  /** Body data waiting for its turn, in order (its own array once a rate that is not 0 is taken). */
  private queue: Buffer[] = NOTHING_QUEUED;
  private queuedBytes = 0;
  /** The pause after a send (nginx's delayed write event). */
  private timer: NodeJS.Timeout | undefined;
  /** The client's target asked the last send to wait for its drain. */
  private innerFull = false;
  /** `end` was called while data waited: the response ends once it has gone. */
  private ending = false;
  /** Writers waiting for the queue to go (its own array once a rate that is not 0 is taken). */
  private drainWaiters: (() => void)[] = NOTHING_QUEUED_CB;
  /** The handler listens for a client that leaves (`onAbort`); else a pause listens itself. */
  private handlerListens = false;
  private pauseListens = false;

  /**
   * Nothing is allocated nor listened to until a rate that is not 0 is
   * taken: a response without one (most) costs a few forwarded calls.
   */
  constructor(
    private readonly inner: ClientResponseTarget,
    private readonly r: HttpRequestState,
    private readonly cx: RuntimeContext,
  ) {}

  /** From the first rate that is not 0: the queue, its waiters, and the end of the pacing with the response. */
  private startPacing(): void {
    this.queue = [];
    this.drainWaiters = [];
    // a response over (ended, or its client gone) has nothing more to pace: the pause ends with it
    this.inner.whenClosed(() => {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.queue.length = 0;
      this.queuedBytes = 0;
      this.ending = false;
      for (const cb of this.drainWaiters.splice(0)) queueMicrotask(cb);
    });
  }

  get started(): boolean {
    return this.inner.started;
  }

  get headOnly(): boolean {
    return this.inner.headOnly;
  }

  get bytesSent(): number {
    return this.inner.bytesSent;
  }

  get requestBodyBytes(): number {
    return this.inner.requestBodyBytes;
  }

  get bufferedBytes(): number {
    return this.inner.bufferedBytes + this.queuedBytes;
  }

  tookWhole(): boolean {
    return this.queuedBytes === 0 && (this.inner.tookWhole?.() ?? false);
  }

  get gone(): boolean {
    return this.inner.gone;
  }

  get highWaterMark(): number {
    return this.inner.highWaterMark;
  }

  get tunnelable(): boolean {
    return this.inner.tunnelable;
  }

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][], reason?: string): void {
    this.inner.head(r, status, headers, reason);
  }

  flushHead(): void {
    this.inner.flushHead();
  }

  earlyHints(headers: readonly (readonly [string, string])[]): void {
    this.inner.earlyHints(headers);
  }

  /** The rate, taken when the first body bytes go out (`r->limit_rate_set`, `r->limit_rate_after_set`). */
  private takeRate(): number {
    if (this.rate !== undefined) return this.rate;
    const { r } = this;
    if (!r.limitRateSet) {
      r.limitRate = requestSize(this.cx, r, r.loc.limitRate);
      r.limitRateSet = true;
    }
    this.rate = r.limitRate;
    if (this.rate > 0) {
      this.startPacing();
      this.afterBytes = requestSize(this.cx, r, r.loc.limitRateAfter);
      // the header goes out first: nginx counts it in what was sent
      this.inner.flushHead();
      this.sentBytes = this.inner.bytesSent;
    }
    return this.rate;
  }

  write(chunk: Buffer | string): boolean {
    if (this.rate === 0) return this.inner.write(chunk);
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    if (data.length === 0 || this.headOnly || this.inner.gone) return this.inner.write(data);
    if (this.queue.length === 0 && this.timer === undefined && this.takeRate() === 0) return this.inner.write(data);
    this.queue.push(data);
    this.queuedBytes += data.length;
    this.pump();
    return this.queue.length === 0 && !this.innerFull;
  }

  /** Sends what the rate allows now, then waits: for the pause after it, or for the client to drain. */
  private pump(): void {
    if (this.timer !== undefined || this.innerFull) return;
    const rate = this.rate!;
    while (this.queue.length > 0) {
      if (this.inner.gone) {
        this.queue.length = 0;
        this.queuedBytes = 0;
        break;
      }
      const before = this.sentBytes;
      const elapsedSec = Math.floor(Date.now() / 1000) - Math.floor(this.r.startMs / 1000);
      const limit = rate * (elapsedSec + 1) - (before - this.afterBytes);
      if (limit <= 0) {
        this.pause(Math.floor((-limit * 1000) / rate) + 1);
        return;
      }
      const ok = this.send(limit);
      const sent = Math.max(before - this.afterBytes, 0);
      const nsent = Math.max(this.sentBytes - this.afterBytes, 0);
      const delayMs = Math.floor(((nsent - sent) * 1000) / rate);
      if (!ok) this.waitForInner();
      if (delayMs > 0) this.pause(delayMs);
      if (!ok || delayMs > 0) break;
    }
    this.settle();
  }

  /**
   * Once nothing waits here: the response ends if `end` came (at once: the
   * pause after the last bytes holds only what would be written next), and
   * the writer may go on once the client's target has room.
   */
  private settle(): void {
    if (this.queue.length > 0) return;
    if (this.ending) {
      this.ending = false;
      this.inner.end();
    }
    if (!this.innerFull) for (const cb of this.drainWaiters.splice(0)) queueMicrotask(cb);
  }

  /** Hands up to `limit` bytes of the queue to the client's target; false when it asks to wait for a drain. */
  private send(limit: number): boolean {
    let left = limit;
    let ok = true;
    while (left > 0 && this.queue.length > 0) {
      const head = this.queue[0]!;
      const part = head.length <= left ? head : head.subarray(0, left);
      if (part === head) this.queue.shift();
      else this.queue[0] = head.subarray(left);
      this.queuedBytes -= part.length;
      this.sentBytes += part.length;
      left -= part.length;
      ok = this.inner.write(part);
    }
    return ok;
  }

  private pause(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pump();
    }, ms);
    this.listenWhilePaused();
  }

  /**
   * A client that leaves during a pause ends the response
   * (`ngx_http_test_reading`, the read handler of a request whose write is
   * delayed): `client prematurely closed connection` (info), the
   * connection closed. A handler that listens itself hears of it instead.
   */
  private listenWhilePaused(): void {
    if (this.handlerListens || this.pauseListens) return;
    this.pauseListens = true;
    this.inner.onAbort(() => {
      this.pauseListens = false;
      if (this.timer === undefined || this.handlerListens) return;
      logRequest(this.cx, this.r, 'info', 'client prematurely closed connection');
      this.abort();
    });
  }

  private waitForInner(): void {
    this.innerFull = true;
    this.inner.onDrain(() => {
      this.innerFull = false;
      if (this.timer === undefined) this.pump();
      else this.settle();
    });
  }

  onDrain(cb: () => void): void {
    if (this.queue.length > 0 || this.innerFull) this.drainWaiters.push(cb);
    else if (this.rate) queueMicrotask(cb);
    else this.inner.onDrain(cb);
  }

  end(chunk?: Buffer | string): void {
    if (chunk !== undefined) this.write(chunk);
    if (this.queue.length === 0) {
      this.inner.end();
      return;
    }
    this.ending = true;
  }

  /** Gives the response up; with `flush`, what waits for its turn goes out first. */
  abort(how?: 'flush' | 'reset'): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.ending = false;
    if (how === 'flush') for (const data of this.queue) this.inner.write(data);
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.inner.abort(how);
    for (const cb of this.drainWaiters.splice(0)) queueMicrotask(cb);
  }

  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void {
    this.handlerListens = true;
    this.inner.onAbort(cb);
  }

  tunnel(): ClientTunnel | undefined {
    return this.inner.tunnel();
  }

  whenClosed(cb: (completed: boolean) => void): void {
    this.inner.whenClosed(cb);
  }

  timedOut(reset: boolean): void {
    this.inner.timedOut(reset);
  }

  watchSend(timeout: SendTimeout): void {
    this.inner.watchSend(timeout);
  }
}

/**
 * An upstream's `X-Accel-Limit-Rate` (`ngx_http_upstream_process_limit_rate`):
 * the first one, a number of bytes per second, becomes the request's rate
 * (`$limit_rate`) whatever `limit_rate` says. `received` lists the
 * response's headers as name, value, name, value …
 */
export function takeAccelLimitRate(r: HttpRequestState, received: readonly string[]): void {
  for (let i = 0; i + 1 < received.length; i += 2) {
    const name = received[i]!;
    if (name.length !== 18 || name.toLowerCase() !== 'x-accel-limit-rate') continue;
    const value = received[i + 1]!;
    // ngx_atoi: digits only
    if (/^\d+$/.test(value)) {
      r.limitRate = Number(value);
      r.limitRateSet = true;
    }
    return;
  }
}
