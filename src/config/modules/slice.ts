/**
 * The slice module (`src/http/modules/ngx_http_slice_filter_module.c`, in
 * Debian's nginx and nginx's own packages): `slice SIZE` splits a response
 * into SIZE-byte pieces, each fetched (and cached) as a range of its own
 * through `$slice_range`:
 *
 *     slice             1m;
 *     proxy_cache_key   $uri$is_args$args$slice_range;
 *     proxy_set_header  Range $slice_range;
 *
 * `$slice_range` is `bytes=START-END` of the piece a request asks for: the
 * main request's first is the piece that holds the start of the client's
 * `Range` (the first piece without one, with `If-Range`, several ranges or
 * a suffix range); evaluating it is what turns slicing on. The filter that
 * joins the pieces is `src/runtime/filters/slice.ts`.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import type { RequestView } from '../request-view.js';
import { sizeSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';
import type { VariableDef } from '../variables.js';

const sliceSize = slot('slice', 0);

export const sliceDirectives: readonly DirectiveSpec[] = [
  { name: 'slice', module: 'ngx_http_slice_filter_module', contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(sliceSize) },
];

/** A level's `slice` in bytes (0, the default: off). */
export function sliceConf(c: ConfChain): number {
  return c.get(sliceSize);
}

/**
 * A main request's slicing (`ngx_http_slice_ctx_t`), shared with the
 * subrequests that fetch the later pieces: made when `$slice_range` is
 * first evaluated, dropped by an internal redirect.
 */
export interface SliceState {
  /** The start of the next piece, in bytes. */
  start: number;
  /** Where the pieces end: the response's length, or the end of the client's range. */
  end: number;
  /** `$slice_range`: `bytes=START-END` of the piece being fetched. */
  range: string;
  /** The first piece's `ETag`: every later piece must have it. */
  etag: string | undefined;
  /** Whether the piece being fetched has answered with its range. */
  active: boolean;
}

/** The key of the slice state among a request's module states. */
export const SLICE = Symbol('slice');

/** The largest byte offset nginx's `off_t` holds. */
const MAX_OFFSET = Number.MAX_SAFE_INTEGER;

/**
 * `ngx_http_slice_get_start`: the first byte of the client's `Range`, 0
 * with `If-Range`, for a range that is not `bytes=N-…` (a suffix, several
 * ranges) or one past the largest offset.
 */
function rangeStart(r: RequestView): number {
  if (r.headers['if-range'] !== undefined) return 0;
  const range = r.headers.range;
  if (range === undefined || range.length < 7 || range.slice(0, 6).toLowerCase() !== 'bytes=') return 0;
  const spec = range.slice(6);
  if (spec.includes(',')) return 0;
  const m = /^ *(\d*)/.exec(spec)!;
  const start = Number(m[1] || '0');
  return start > MAX_OFFSET ? 0 : start;
}

/** `bytes=START-END` of the piece starting at `start`. */
export function sliceRange(start: number, sizeBytes: number): string {
  return `bytes=${start}-${start + sizeBytes - 1}`;
}

/**
 * `ngx_http_slice_range_variable`: the range of the piece the request
 * fetches; for a main request with `slice` whose response has not begun,
 * the first evaluation starts slicing. Not found otherwise.
 */
function sliceRangeOf(r: RequestView): string | undefined {
  const state = r.moduleCtx.get(SLICE) as SliceState | undefined;
  if (state) return state.range;
  if (r.parent || r.status) return undefined;
  const sizeBytes = r.loc.sliceBytes;
  if (sizeBytes === 0) return undefined;
  let start = sizeBytes * Math.floor(rangeStart(r) / sizeBytes);
  if (start > MAX_OFFSET - sizeBytes) start = 0;
  const made: SliceState = { start, end: 0, range: sliceRange(start, sizeBytes), etag: undefined, active: false };
  r.moduleCtx.set(SLICE, made);
  return made.range;
}

export const sliceVariables: readonly VariableDef[] = [{ name: 'slice_range', get: sliceRangeOf }];
