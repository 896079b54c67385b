/**
 * What the response filters share with their chain (chain.ts): a header
 * filter's shape, what it is given for one response, and how it runs a
 * subrequest without knowing the request phases.
 */
import type { Transform } from 'node:stream';
import type { RuntimeContext } from '../context.js';
import type { ResponseTarget } from '../exchange.js';
import type { HttpRequestState } from '../request.js';
import type { ByteRange } from '../conditional.js';
import type { ContentType, HeaderList } from './headers.js';

/**
 * Runs subrequest `sr` through the request phases from server rewrite (a
 * `clone`, from the content phase), its response to `out`: through the
 * subrequest filters (sub, SSI) with `filtered`, else as the handler
 * writes it. Resolves once the phases are through; a failure of jinx's own
 * is logged at crit and the response aborted (a subrequest as
 * `ngx_http_subrequest` makes one).
 */
export type SubrequestRunner = (cx: RuntimeContext, sr: HttpRequestState, out: ResponseTarget, filtered: boolean, clone?: boolean) => Promise<void>;

/** What a header filter needs besides the headers, for one response. */
export interface FilterContext {
  readonly cx: RuntimeContext;
  readonly r: HttpRequestState;
  /** Runs the SSI and addition filters' subrequests (the phase runner's). */
  readonly subrequest: SubrequestRunner;
  /**
   * The response's type once a filter set its charset: the `Content-Type`
   * header then has `; charset=`, and the filters after it match their
   * types against the type alone (nginx composes the header only at the
   * end, from `content_type` and `charset`).
   */
  contentType?: ContentType;
  /** The status the response goes out with when a filter changed it (the range filter's 206). */
  status?: number;
  /** The subrequests the addition filter puts around the body, for the postpone filter. */
  additions?: { readonly beforeUri: string; readonly afterUri: string };
  /** The slice filter joins pieces: the offset of the body's first byte (nginx's `content_offset`). */
  sliceOffset?: number;
  /** The one range the range filter sends of a sliced response (the slice filter crops the pieces to it). */
  sentRange?: ByteRange;
}

/**
 * A header filter: it may change `headers` (in place) for a response of
 * `status`; it returns a factory of the Transforms the body is to pass
 * through (made only when there is a body to send), `'error'` when the
 * response cannot be sent (nginx's `NGX_ERROR` from a header filter: the
 * connection is closed), or a status the request is to end with instead,
 * nothing sent (a header filter's HTTP status, such as the range filter's
 * 416: the handler finalizes the request with it, `r.filterFinalizeStatus`).
 */
export type HeaderFilter = (f: FilterContext, status: number, headers: HeaderList) => (() => Transform[]) | 'error' | number | undefined;
