/**
 * Response filters, nginx's header and body filter chains
 * (`ngx_http_top_header_filter`, `ngx_http_top_body_filter`) reduced to
 * what jinx has: slice, userid, gunzip, addition, sub, charset, SSI, postpone,
 * gzip, range (of a response being cached or sliced), run in nginx's order (a
 * subrequest's response passes the sub and SSI filters only, a `101` the
 * userid filter only). A handler
 * writes its response to a `FilteredTarget` as to any `ResponseTarget`:
 * `head` runs the header filters on the header list (after the headers
 * module, as in nginx); those that change the body give a Transform, and
 * the body then flows through them, in order, to the client's target, with
 * backpressure at every step (memory stays within the streams' buffers).
 * Without any, the target passes everything straight through.
 */
import { pipeline, Transform, Writable } from 'node:stream';
import { logRequest, type RuntimeContext } from '../context.js';
import type { ClientTunnel, ResponseTarget } from '../exchange.js';
import type { HttpRequestState } from '../request.js';
import { charsetHeaderFilter } from './charset.js';
import { gunzipHeaderFilter, gzipHeaderFilter, type FilterError } from './gzip.js';
import { ssiHeaderFilter } from './ssi.js';
import { subHeaderFilter } from './sub.js';
import { additionHeaderFilter, postponeHeaderFilter } from './addition.js';
import { rangeHeaderFilter } from './range.js';
import { sliceHeaderFilter } from './slice.js';
import { useridHeaderFilter } from './userid.js';
import type { FilterContext, HeaderFilter, SubrequestRunner } from './types.js';

/**
 * How long an aborted response waits, at most, for its filters to pass on
 * what they were given (one waiting on a subrequest, such as
 * `add_before_body`, waits for it), and how often it looks, in ms.
 */
const SETTLE_MS = 1000;
const SETTLE_POLL_MS = 5;

/** The header filters in the order nginx runs them. */
const HEADER_FILTERS: readonly HeaderFilter[] = [
  sliceHeaderFilter, useridHeaderFilter, gunzipHeaderFilter, additionHeaderFilter, subHeaderFilter, charsetHeaderFilter, ssiHeaderFilter, postponeHeaderFilter, gzipHeaderFilter,
  rangeHeaderFilter,
];
/** The filters of a subrequest's response: an included page has its own strings replaced and is itself parsed for SSI. */
const SUBREQUEST_FILTERS: readonly HeaderFilter[] = [subHeaderFilter, ssiHeaderFilter];
/** The filters of a `101 Switching Protocols`, whose body is no response body: those that only add headers. */
const UPGRADE_FILTERS: readonly HeaderFilter[] = [useridHeaderFilter];

/** A response target with jinx's response filters in front of another. */
export class FilteredTarget implements ResponseTarget {
  /** The first stream of the body's filters, once a header filter asked for any. */
  private first: Transform | undefined;
  private r: HttpRequestState | undefined;

  /** The handler's listener for a client that goes away (`onAbort`). */
  private abortListener: ((err: NodeJS.ErrnoException | undefined) => void) | undefined;
  /** The client went away (with the connection's error, if any), heard before or after a listener was set. */
  private clientGone: { readonly err: NodeJS.ErrnoException | undefined } | undefined;

  /** Whether this target listens to the client's connection (from the first `onAbort` on). */
  private watching = false;

  constructor(
    private readonly inner: ResponseTarget,
    private readonly cx: RuntimeContext,
    private readonly subrequest: SubrequestRunner,
  ) {}

  get started(): boolean {
    return this.inner.started;
  }

  get headOnly(): boolean {
    return this.inner.headOnly;
  }

  /**
   * Runs the header filters, adds `Vary: Accept-Encoding` when a filter
   * found that the response depends on it and `gzip_vary` is on (nginx's
   * header filter writes it right after `Connection`), then hands the
   * header on. A filter's `'error'` closes the connection instead; a
   * filter's status is left in `r.filterFinalizeStatus`, nothing sent.
   */
  head(r: HttpRequestState, status: number, headers: [string, string | string[]][], reason?: string): void {
    this.r = r;
    const transforms: (() => Transform[])[] = [];
    const f: FilterContext = { cx: this.cx, r, subrequest: this.subrequest };
    const filters = r.parent ? SUBREQUEST_FILTERS : status === 101 ? UPGRADE_FILTERS : HEADER_FILTERS;
    for (let i = 0; i < filters.length; i++) {
      const t = filters[i]!(f, r.errStatus || (f.status ?? status), headers);
      if (t === 'error') {
        this.inner.abort();
        return;
      }
      if (typeof t === 'number') {
        r.filterFinalizeStatus = t;
        return;
      }
      if (t) transforms.push(t);
    }
    if (status !== 101 && r.gzipVary && r.loc.gzip.vary && !r.parent) headers.unshift(['Vary', 'Accept-Encoding']);
    this.inner.head(r, f.status ?? status, headers, f.status === undefined ? reason : undefined);
    if (transforms.length > 0 && !this.inner.headOnly) this.first = this.pipe(r, transforms.flatMap((make) => make()));
  }

  /**
   * Chains the transforms to a sink that writes to the client's target,
   * waiting for it to drain. `$body_bytes_sent` counts what leaves the last
   * filter: handlers count what they write, `write` takes that back.
   */
  private pipe(r: HttpRequestState, transforms: Transform[]): Transform {
    const inner = this.inner;
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        r.bodyBytesSent += chunk.length;
        if (inner.gone || inner.write(chunk)) done();
        else inner.onDrain(() => done());
      },
      final(done) {
        inner.end();
        done();
      },
    });
    this.streams = [...transforms, sink];
    pipeline([...transforms, sink] as [Transform, ...Transform[], Writable], (err: FilterError | null) => {
      if (!err || this.aborted) return;
      if (err.benign) {
        inner.end();
        return;
      }
      if (!err.logged) logRequest(this.cx, r, 'alert', err.message);
      inner.abort();
    });
    return transforms[0]!;
  }

  /** Set once the response was given up: the pipeline's errors are then expected. */
  private aborted = false;
  /** The body's filters and the sink after them, once piped. */
  private streams: Writable[] = [];

  flushHead(): void {
    this.inner.flushHead();
  }

  earlyHints(headers: readonly (readonly [string, string])[]): void {
    this.inner.earlyHints(headers);
  }

  write(chunk: Buffer | string): boolean {
    if (!this.first) return this.inner.write(chunk);
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    this.r!.bodyBytesSent -= data.length;
    if (this.inner.gone || this.first.destroyed) return false;
    return this.first.write(data);
  }

  /** Bytes the filters have not taken yet (what they hold is bounded by their own buffers). */
  get bufferedBytes(): number {
    return this.first ? this.first.writableLength : this.inner.bufferedBytes;
  }

  /** Without body filters (they may keep part of a buffer, as sub_filter keeps a partial match), as the client's target says. */
  tookWhole(): boolean {
    return !this.first && (this.inner.tookWhole?.() ?? false);
  }

  get gone(): boolean {
    return this.inner.gone;
  }

  get highWaterMark(): number {
    return this.first ? this.first.writableHighWaterMark : this.inner.highWaterMark;
  }

  onDrain(cb: () => void): void {
    const first = this.first;
    if (!first) {
      this.inner.onDrain(cb);
      return;
    }
    if (this.inner.gone || first.destroyed || !first.writableNeedDrain) {
      queueMicrotask(cb);
      return;
    }
    const fire = (): void => {
      first.off('drain', fire).off('close', fire);
      cb();
    };
    first.on('drain', fire).on('close', fire);
  }

  end(chunk?: Buffer | string): void {
    if (!this.first) {
      this.inner.end(chunk);
      return;
    }
    if (chunk !== undefined) this.write(chunk);
    this.first.end();
  }

  /**
   * Gives the response up. With `flush` (an upstream's response cut short),
   * what the filters were given goes on through them to the client first,
   * as nginx's filters pass on at once what they can (bytes a filter holds
   * back, such as the start of a possible `sub_filter` match, are lost);
   * the filters are not ended, so that nothing marks the body complete.
   */
  abort(how?: 'flush' | 'reset'): void {
    this.aborted = true;
    if (this.first && how === 'flush') {
      this.settleThen(Date.now() + SETTLE_MS, () => {
        this.first?.destroy();
        this.inner.abort(how);
      });
      return;
    }
    this.first?.destroy();
    this.inner.abort(how);
  }

  /** Calls `done` once no filter holds data it was given and can pass on, or at `deadlineMs` (epoch ms). */
  private settleThen(deadlineMs: number, done: () => void): void {
    const busy = this.streams.some((s) => s.writableLength > 0 || (s instanceof Transform && s.readableLength > 0));
    if (!busy || Date.now() >= deadlineMs || this.inner.gone) done();
    else setTimeout(() => this.settleThen(deadlineMs, done), SETTLE_POLL_MS);
  }

  /**
   * Calls `cb` if the client goes away before the response is complete. From
   * the first call on, the connection is watched for good: a client that
   * leaves between two listeners (while a body is read or written to a temp
   * file, before a handler listens again) has the next listener called at
   * once, as nginx's check of a broken connection sees a close that happened
   * before the upstream was connected. A handler that is to hear of it
   * whenever it happens calls this when it starts.
   */
  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void {
    if (this.clientGone) {
      this.abortListener = undefined;
      cb(this.clientGone.err);
      return;
    }
    this.abortListener = cb;
    if (this.watching) return;
    this.watching = true;
    this.inner.onAbort((err) => {
      this.clientGone = { err };
      const listener = this.abortListener;
      this.abortListener = undefined;
      listener?.(err);
    });
  }

  get tunnelable(): boolean {
    return this.inner.tunnelable;
  }

  tunnel(): ClientTunnel | undefined {
    return this.inner.tunnel();
  }
}
