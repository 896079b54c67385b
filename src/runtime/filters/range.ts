/**
 * The range filter for a response from the upstream that is being cached
 * (`ngx_http_range_header_filter_module`, `ngx_http_range_body_filter`,
 * with `r->allow_ranges` and `r->single_range` that
 * `ngx_http_upstream_copy_allow_ranges` sets when the upstream said
 * `Accept-Ranges`), or sliced (the slice filter sets them, and crops): a 200 of known length to a request with one byte range
 * goes out as a 206 of that range, the upstream's `Content-Range` cleared,
 * while the whole body goes on into the cache. Without a `Range`, or with
 * more than one, the whole response goes out with `Accept-Ranges: bytes`.
 * Static files and cached entries have their ranges sent by their
 * handlers (send-file.ts, cache/upstream-cache.ts).
 *
 * A range that cannot be satisfied ends the request with 416 instead
 * (`ngx_http_range_not_satisfiable`; `ngx_http_upstream_send_response`
 * finalizes with the filter's status and frees the entry: nothing is
 * cached), the response's headers kept for it as nginx keeps them.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { rangesFor, type ByteRange } from '../conditional.js';
import { keepForRangeNotSatisfiable, lastModifiedSec } from '../respond.js';
import { contentLength, lastHeader, removeHeader } from './headers.js';
import type { HeaderFilter } from './types.js';

/** Passes on the bytes of one range of the body, drops the others. */
class RangeSlicer extends Transform {
  /** Bytes of the body seen so far. */
  private seen = 0;

  constructor(private readonly range: ByteRange) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const from = Math.max(this.range.start - this.seen, 0);
    const to = Math.min(this.range.end - this.seen, chunk.length);
    this.seen += chunk.length;
    done(null, to > from ? chunk.subarray(from, to) : undefined);
  }
}

/**
 * The range header filter: with `r.singleRangeAllowed`, a 200 whose
 * `Content-Length` is known becomes a 206 of the one range asked for
 * (`Content-Range`, `Content-Length` of the range), or ends the request
 * with 416 when the range cannot be satisfied, else it gets
 * `Accept-Ranges: bytes`.
 */
export const rangeHeaderFilter: HeaderFilter = (f, status, headers) => {
  const { r } = f;
  if (!r.singleRangeAllowed || status !== 200) return undefined;
  const size = contentLength(headers);
  if (size === -1) return undefined;
  const etag = lastHeader(headers, 'etag');
  const ranges = rangesFor(r, size, lastModifiedSec(headers), etag, true);
  if (ranges === 'skip') return undefined;
  if (ranges === 416) {
    keepForRangeNotSatisfiable(r, [...r.pendingHeaders, ...headers], size);
    return 416;
  }
  if (!Array.isArray(ranges) || ranges.length !== 1) {
    headers.push(['Accept-Ranges', 'bytes']);
    return undefined;
  }
  const range = ranges[0]!;
  removeHeader(headers, 'content-range');
  removeHeader(headers, 'content-length');
  headers.push(['Content-Range', `bytes ${range.start}-${range.end - 1}/${size}`], ['Content-Length', String(range.end - range.start)]);
  f.status = 206;
  // a sliced response's pieces are cropped by the slice filter, which knows where each starts
  if (f.sliceOffset !== undefined) {
    f.sentRange = range;
    return undefined;
  }
  return () => [new RangeSlicer(range)];
};
