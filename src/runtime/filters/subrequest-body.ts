/**
 * Where a filter's subrequest answers (the addition filter's, the slice
 * filter's pieces): its status and headers to a callback, its body into a
 * stream of the main response, with that stream's backpressure.
 */
import type { ResponseTarget } from '../exchange.js';
import type { HttpRequestState } from '../request.js';

/** The stream of the main response a subrequest's body goes into. */
export interface BodySink {
  readonly destroyed: boolean;
  /** Takes body data; false once the stream's readable side is full. */
  takeBody(chunk: Buffer): boolean;
  /** Calls `cb` once a subrequest may write again. */
  waitForRoom(cb: () => void): void;
}

/**
 * A subrequest's response target: `onHead` sees its status and headers
 * (and may refuse the response: the body is then dropped), the body goes
 * into `into`.
 */
export class SubrequestBody implements ResponseTarget {
  started = false;
  readonly headOnly = false;
  readonly bufferedBytes = 0;
  readonly highWaterMark = 16 * 1024;
  readonly tunnelable = false;
  private ended = false;
  private refused = false;
  private readonly endWaiters: (() => void)[] = [];

  constructor(
    private readonly into: BodySink,
    private readonly onHead?: (r: HttpRequestState, status: number, headers: [string, string | string[]][]) => boolean,
  ) {}

  get gone(): boolean {
    return this.refused || this.into.destroyed;
  }

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
    this.started = true;
    if (this.onHead && !this.onHead(r, status, headers)) this.refused = true;
  }

  flushHead(): void {
    // nothing is sent before the body
  }

  earlyHints(): void {
    // a subrequest's early hints are not sent
  }

  write(chunk: Buffer | string): boolean {
    if (this.ended || this.gone || chunk.length === 0) return true;
    return this.into.takeBody(typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk);
  }

  onDrain(cb: () => void): void {
    this.into.waitForRoom(cb);
  }

  end(chunk?: Buffer | string): void {
    if (chunk !== undefined) this.write(chunk);
    this.finish();
  }

  abort(): void {
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    for (const resolve of this.endWaiters.splice(0)) resolve();
  }

  /** Resolves when the response has ended. */
  finished(): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  onAbort(): void {
    // a subrequest has no client of its own
  }

  tunnel(): undefined {
    return undefined;
  }
}
