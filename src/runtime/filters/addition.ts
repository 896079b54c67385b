/**
 * The addition filter (`ngx_http_addition_filter_module.c`): a main
 * request's 200 response of an `addition_types` type gets the body of a
 * subrequest to `add_before_body` in front of its own and that of one to
 * `add_after_body` behind it. The before-body subrequest runs when the body
 * begins, the after-body one once the body has passed the filters.
 *
 * The header filter sits where nginx's does (before the sub filter); the
 * bodies are joined where nginx's postpone filter joins a subrequest's
 * output to its main request's (after the SSI filter, before gzip): the
 * response's own body passes the main request's sub, charset and SSI
 * filters, a subrequest's body those of its own location.
 */
import { Transform, type TransformCallback } from 'node:stream';
import type { RuntimeContext } from '../context.js';
import type { HttpRequestState } from '../request.js';
import type { HeaderFilter, SubrequestRunner } from './types.js';
import { bodyChanged, responseContentType, typeListed } from './headers.js';
import { SubrequestBody, type BodySink } from './subrequest-body.js';

/**
 * The addition header filter (`ngx_http_addition_header_filter`): for a
 * main request's 200 response of an `addition_types` type, with a URI to
 * add, the response loses `Content-Length` and `Accept-Ranges`, its ETag
 * becomes weak, and the subrequests are planned for the postpone point.
 */
export const additionHeaderFilter: HeaderFilter = (f, status, headers) => {
  const { r } = f;
  if (status !== 200 || r.parent) return undefined;
  const conf = r.loc.addition;
  if (conf.beforeBody === '' && conf.afterBody === '') return undefined;
  if (!typeListed(conf.types, f.contentType ?? responseContentType(r, headers))) return undefined;
  bodyChanged(headers, 'weak');
  f.additions = { beforeUri: conf.beforeBody, afterUri: conf.afterBody };
  return undefined;
};

/**
 * nginx's postpone filter, for the addition filter's subrequests: when the
 * addition header filter planned any, the body passes a stream that puts
 * their bodies around it.
 */
export const postponeHeaderFilter: HeaderFilter = (f) => {
  const additions = f.additions;
  if (!additions) return undefined;
  return () => [new AdditionFilter(f.cx, f.subrequest, f.r, additions.beforeUri, additions.afterUri)];
};

/**
 * The body of a response with additions: the before-body subrequest's
 * body, once the first data comes (or at the end of an empty body), then
 * the response's own, then the after-body subrequest's. A subrequest's body
 * is pushed as it comes, with backpressure: its handler waits while the
 * stream's readable side is full.
 */
class AdditionFilter extends Transform implements BodySink {
  private before: Promise<void> | undefined;
  private readonly drainWaiters: (() => void)[] = [];

  constructor(
    private readonly cx: RuntimeContext,
    private readonly subrequest: SubrequestRunner,
    private readonly r: HttpRequestState,
    private readonly beforeUri: string,
    private readonly afterUri: string,
  ) {
    super();
    this.once('close', () => this.drained());
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.runBefore().then(() => done(null, chunk), done);
  }

  override _flush(done: TransformCallback): void {
    this.runBefore()
      .then(() => (this.afterUri === '' ? undefined : this.include(this.afterUri)))
      .then(() => done(), done);
  }

  override _read(size: number): void {
    super._read(size);
    this.drained();
  }

  /** The readable side has room (or the stream is gone): a waiting subrequest may go on. */
  private drained(): void {
    for (const cb of this.drainWaiters.splice(0)) cb();
  }

  /** Takes a subrequest's body data. */
  takeBody(chunk: Buffer): boolean {
    return this.push(chunk);
  }

  /** Calls `cb` once a subrequest may write again. */
  waitForRoom(cb: () => void): void {
    if (this.destroyed || this.readableLength < this.readableHighWaterMark) queueMicrotask(cb);
    else this.drainWaiters.push(cb);
  }

  private runBefore(): Promise<void> {
    this.before ??= this.beforeUri === '' ? Promise.resolve() : this.include(this.beforeUri);
    return this.before;
  }

  /** Runs a subrequest to `uri` (`ngx_http_subrequest` without arguments) and resolves once its body is in. */
  private async include(uri: string): Promise<void> {
    const sr = this.r.subrequest(uri, '', this.cx.table.variableCount);
    const body = new SubrequestBody(this);
    await this.subrequest(this.cx, sr, body, true);
    await body.finished();
  }
}
