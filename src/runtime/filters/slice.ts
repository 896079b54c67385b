/**
 * The slice filter (`ngx_http_slice_header_filter`,
 * `ngx_http_slice_body_filter`): a main request that evaluated
 * `$slice_range` (config/modules/slice.ts) and got a `206` for its piece
 * answers `200` with the whole length (or, through the range filter, the
 * client's one range), then fetches each later piece with a subrequest
 * that clones it (same location, from the content phase) and joins the
 * bodies, cropped to what the client asked for. A piece that is not a
 * `206` of the expected range (`unexpected status code …`, `unexpected
 * range in slice response: …`), lacks its length, or whose `ETag` differs
 * from the first (`etag mismatch in slice response`) is logged at error and
 * the connection closed, as nginx does. A main request answered otherwise
 * (a 200 whole) is passed as it is.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { SLICE, sliceRange, type SliceState } from '../../config/modules/slice.js';
import { logRequest } from '../context.js';
import type { HttpRequestState } from '../request.js';
import { lastHeader, removeHeader, type HeaderList } from './headers.js';
import type { FilterError } from './gzip.js';
import { SubrequestBody, type BodySink } from './subrequest-body.js';
import type { FilterContext, HeaderFilter } from './types.js';

/** A piece's `Content-Range`: its first byte, the byte after its last, the whole length (-1 for `*`). */
interface PieceRange {
  readonly start: number;
  readonly end: number;
  readonly complete: number;
}

/** Digits from `at`, undefined past the largest offset nginx's `off_t` holds. */
function digits(text: string, at: number): { value: number; next: number } | undefined {
  let i = at;
  while (i < text.length && text[i]! >= '0' && text[i]! <= '9') i++;
  if (i === at) return undefined;
  const value = Number(text.slice(at, i));
  return value > Number.MAX_SAFE_INTEGER ? undefined : { value, next: i };
}

/** `ngx_http_slice_parse_content_range`: `bytes START-END/LENGTH` (or `/*`), spaces allowed between the parts. */
function parseContentRange(value: string | undefined): PieceRange | undefined {
  if (value === undefined || value.length < 7 || !value.startsWith('bytes ')) return undefined;
  let i = 6;
  const spaces = (): void => {
    while (value[i] === ' ') i++;
  };
  /** Digits between spaces. */
  const number = (): number | undefined => {
    spaces();
    const found = digits(value, i);
    if (!found) return undefined;
    i = found.next;
    spaces();
    return found.value;
  };
  const start = number();
  if (start === undefined || value[i++] !== '-') return undefined;
  const end = number();
  if (end === undefined || value[i++] !== '/') return undefined;
  spaces();
  let complete = -1;
  if (value[i] === '*') i++;
  else {
    const length = digits(value, i);
    if (!length) return undefined;
    complete = length.value;
    i = length.next;
  }
  spaces();
  return i === value.length ? { start, end: end + 1, complete } : undefined;
}

/**
 * Takes a piece's response header (`ngx_http_slice_header_filter` for a
 * 206): checks its `ETag` against the first piece's, its range against the
 * one asked for, and moves `state` past it. Returns the range, or the
 * message to log.
 */
function takePiece(state: SliceState, sizeBytes: number, status: number, headers: HeaderList): PieceRange | string {
  if (status !== 206) return `unexpected status code ${status} in slice response`;
  const etag = lastHeader(headers, 'etag');
  if (state.etag !== undefined && etag !== state.etag) return 'etag mismatch in slice response';
  if (etag !== undefined) state.etag = etag;
  const range = parseContentRange(lastHeader(headers, 'content-range'));
  if (!range) return 'invalid range in slice response';
  if (range.complete === -1) return 'no complete length in slice response';
  const end = Math.min(range.start + sizeBytes, range.complete);
  if (range.start !== state.start || range.end !== end) {
    return `unexpected range in slice response: ${range.start}-${range.end}, expected: ${state.start}-${end}`;
  }
  state.start = end;
  state.active = true;
  return range;
}

/** A failure already logged: the response is given up, its connection closed. */
function loggedFailure(message: string): FilterError {
  return Object.assign(new Error(message), { logged: true });
}

/**
 * The part of the slice header filter that nginx runs before the headers
 * module: a main request that was slicing and answers other than 206 stops
 * (its `$slice_range` is then not found).
 */
export function endSliceUnless206(r: HttpRequestState, status: number): void {
  if (status !== 206 && !r.parent) r.moduleCtx.delete(SLICE);
}

/**
 * The slice header filter, the first of the chain: for a main request that
 * is slicing, a 206 of its first piece becomes the `200` of the whole
 * (`Content-Length` the whole length, no `Content-Range` nor
 * `Accept-Ranges`), open to the range filter's one range; another status
 * ends the slicing.
 */
export const sliceHeaderFilter: HeaderFilter = (f, status, headers) => {
  const { r } = f;
  endSliceUnless206(r, status);
  const state = r.moduleCtx.get(SLICE) as SliceState | undefined;
  if (!state || r.parent) return undefined;
  const piece = takePiece(state, r.loc.sliceBytes, status, headers);
  if (typeof piece === 'string') {
    logRequest(f.cx, r, 'error', piece);
    return 'error';
  }
  f.status = 200;
  removeHeader(headers, 'content-range');
  removeHeader(headers, 'accept-ranges');
  const length = headers.findIndex(([name]) => name.toLowerCase() === 'content-length');
  if (length === -1) headers.push(['Content-Length', String(piece.complete)]);
  else headers[length] = [headers[length]![0], String(piece.complete)];
  r.singleRangeAllowed = true;
  f.sliceOffset = piece.start;
  return () => [new SliceFilter(f, state, piece)];
};

/**
 * The body of a sliced response: the first piece's, then each later
 * piece's from a clone subrequest, every byte outside what the client gets
 * (the whole, or its one range) dropped.
 */
class SliceFilter extends Transform implements BodySink {
  /** The offset of the next byte that comes in. */
  private offset: number;
  /** The bytes the client gets: from `from` up to `to`. */
  private readonly from: number;
  private readonly to: number;
  private readonly drainWaiters: (() => void)[] = [];

  constructor(private readonly f: FilterContext, private readonly state: SliceState, first: PieceRange) {
    super();
    this.offset = first.start;
    const sent = f.sentRange;
    const sizeBytes = f.r.loc.sliceBytes;
    if (sent) {
      // the client's range starts past the next piece (the first was taken for If-Range): skip to it
      if (state.start + sizeBytes <= sent.start) state.start = sizeBytes * Math.floor(sent.start / sizeBytes);
      this.from = sent.start;
      this.to = sent.end;
    } else {
      this.from = 0;
      this.to = first.complete;
    }
    state.end = this.to;
    this.once('close', () => this.drained());
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.takeBody(chunk);
    done();
  }

  override _flush(done: TransformCallback): void {
    this.rest().then(() => done(), done);
  }

  override _read(size: number): void {
    super._read(size);
    this.drained();
  }

  /** Passes on the part of `chunk` the client gets. */
  takeBody(chunk: Buffer): boolean {
    const at = this.offset;
    this.offset += chunk.length;
    const from = Math.max(this.from - at, 0);
    const to = Math.min(this.to - at, chunk.length);
    return to > from ? this.push(chunk.subarray(from, to)) : this.readableLength < this.readableHighWaterMark;
  }

  /** The readable side has room (or the stream is gone): a waiting piece may go on. */
  private drained(): void {
    for (const cb of this.drainWaiters.splice(0)) cb();
  }

  waitForRoom(cb: () => void): void {
    if (this.destroyed || this.readableLength < this.readableHighWaterMark) queueMicrotask(cb);
    else this.drainWaiters.push(cb);
  }

  /** Fetches the later pieces, one after the other, until the end of what the client gets. */
  private async rest(): Promise<void> {
    const { r, cx } = this.f;
    const sizeBytes = r.loc.sliceBytes;
    const { state } = this;
    while (state.start < state.end) {
      if (this.destroyed) return;
      state.range = sliceRange(state.start, sizeBytes);
      state.active = false;
      const sr = r.cloneSubrequest(cx.table.variableCount);
      sr.moduleCtx.set(SLICE, state);
      let failure: string | undefined;
      const body = new SubrequestBody(this, (piece, status, headers) => {
        const taken = takePiece(state, sizeBytes, status, headers);
        if (typeof taken !== 'string') {
          this.offset = taken.start;
          return true;
        }
        failure = taken;
        logRequest(cx, piece, 'error', taken);
        return false;
      });
      await this.f.subrequest(cx, sr, body, false, true);
      await body.finished();
      if (failure !== undefined) throw loggedFailure(failure);
      if (!state.active) {
        logRequest(cx, r, 'error', 'missing slice response');
        throw loggedFailure('missing slice response');
      }
    }
    r.moduleCtx.delete(SLICE);
  }
}

