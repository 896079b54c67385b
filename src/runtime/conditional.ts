/**
 * Conditional and range requests on a response of known validators, as
 * nginx's not-modified and range filters decide them
 * (`ngx_http_not_modified_filter_module.c`, `ngx_http_range_filter_module.c`),
 * and nginx's date parser (`ngx_parse_http_time` in `src/core/ngx_parse_time.c`).
 */
import type { HttpRequestState } from './request.js';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Seconds since the epoch of an HTTP date in RFC 1123 (`Sun, 06 Nov 1994
 * 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime
 * (`Sun Nov  6 08:49:37 1994`) form, read as strictly as nginx reads it
 * (what follows the time is ignored); -1 when it cannot be read.
 */
export function parseHttpTime(value: string): number {
  let p = 0;
  const end = value.length;
  let fmt: 'rfc822' | 'rfc850' | 'isoc' | undefined;
  for (; p < end; p++) {
    if (value[p] === ',') break;
    if (value[p] === ' ') {
      fmt = 'isoc';
      break;
    }
  }
  for (p++; p < end && value[p] === ' '; p++);
  if (end - p < 18) return -1;
  const digit = (i: number): number => {
    const c = value.charCodeAt(i);
    return c >= 0x30 && c <= 0x39 ? c - 0x30 : -1;
  };
  const two = (i: number): number => (digit(i) < 0 || digit(i + 1) < 0 ? -1 : digit(i) * 10 + digit(i + 1));
  let day = 0;
  if (fmt !== 'isoc') {
    day = two(p);
    if (day < 0) return -1;
    p += 2;
    if (value[p] === ' ') {
      if (end - p < 18) return -1;
      fmt = 'rfc822';
    } else if (value[p] === '-') fmt = 'rfc850';
    else return -1;
    p++;
  }
  const month = MONTHS.indexOf(value.slice(p, p + 3));
  if (month === -1) return -1;
  p += 3;
  if ((fmt === 'rfc822' && value[p] !== ' ') || (fmt === 'rfc850' && value[p] !== '-')) return -1;
  p++;
  let year = 0;
  if (fmt === 'rfc822') {
    const hi = two(p);
    const lo = two(p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
    p += 4;
  } else if (fmt === 'rfc850') {
    year = two(p);
    if (year < 0) return -1;
    year += year < 70 ? 2000 : 1900;
    p += 2;
  }
  if (fmt === 'isoc') {
    if (value[p] === ' ') p++;
    if (digit(p) < 0) return -1;
    day = digit(p++);
    if (value[p] !== ' ') {
      if (digit(p) < 0) return -1;
      day = day * 10 + digit(p++);
    }
    if (end - p < 14) return -1;
  }
  if (value[p++] !== ' ') return -1;
  const hour = two(p);
  if (hour < 0 || value[p + 2] !== ':') return -1;
  const min = two(p + 3);
  if (min < 0 || value[p + 5] !== ':') return -1;
  const sec = two(p + 6);
  if (sec < 0) return -1;
  p += 8;
  if (fmt === 'isoc') {
    if (value[p++] !== ' ') return -1;
    const hi = two(p);
    const lo = two(p + 2);
    if (hi < 0 || lo < 0) return -1;
    year = hi * 100 + lo;
  }
  if (hour > 23 || min > 59 || sec > 59) return -1;
  if (day === 29 && month === 1) {
    if ((year & 3) !== 0 || (year % 100 === 0 && year % 400 !== 0)) return -1;
  } else if (day > MONTH_DAYS[month]!) return -1;
  return Date.UTC(year, month, day, hour, min, sec) / 1000;
}

/**
 * Whether an `If-Match`/`If-None-Match` list names the response's ETag
 * (`ngx_http_test_if_match`): `*` always; with `weak` (If-None-Match) a
 * `W/` on either side is ignored.
 */
function etagListed(list: string, etag: string | undefined, weak: boolean): boolean {
  if (list === '*') return true;
  if (etag === undefined) return false;
  let tag = etag;
  if (weak && tag.length > 2 && tag.startsWith('W/')) tag = tag.slice(2);
  let i = 0;
  while (i < list.length) {
    if (weak && list.length - i > 2 && list.startsWith('W/', i)) i += 2;
    if (tag.length > list.length - i) return false;
    if (list.startsWith(tag, i)) {
      let j = i + tag.length;
      while (j < list.length && (list[j] === ' ' || list[j] === '\t')) j++;
      if (j === list.length || list[j] === ',') return true;
    }
    while (i < list.length && list[i] !== ',') i++;
    while (i < list.length && (list[i] === ' ' || list[i] === '\t' || list[i] === ',')) i++;
  }
  return false;
}

/** The value of a request header that may come several times: the first, as nginx keeps it. */
const header = (r: HttpRequestState, name: string): string | undefined => {
  const v = r.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/**
 * What the not-modified filter makes of a 200 response to a main request
 * with `Last-Modified` (seconds, undefined when it has none) and `ETag`:
 * 412 for a failed `If-Unmodified-Since` or `If-Match`, 304 for a matching
 * `If-Modified-Since` (per `if_modified_since`) or `If-None-Match`, else 200.
 */
export function preconditionStatus(r: HttpRequestState, lastModifiedSec: number | undefined, etag: string | undefined): 200 | 304 | 412 {
  const ius = header(r, 'if-unmodified-since');
  if (ius !== undefined && (lastModifiedSec === undefined || parseHttpTime(ius) < lastModifiedSec)) return 412;
  const im = header(r, 'if-match');
  if (im !== undefined && !etagListed(im, etag, false)) return 412;
  const ims = header(r, 'if-modified-since');
  const inm = header(r, 'if-none-match');
  if (ims === undefined && inm === undefined) return 200;
  if (ims !== undefined && modifiedSince(r, ims, lastModifiedSec)) return 200;
  if (inm !== undefined && !etagListed(inm, etag, true)) return 200;
  return 304;
}

/** `ngx_http_test_if_modified`: whether the response counts as modified since `ims`. */
function modifiedSince(r: HttpRequestState, ims: string, lastModifiedSec: number | undefined): boolean {
  if (lastModifiedSec === undefined || r.loc.ifModifiedSince === 'off') return true;
  const t = parseHttpTime(ims);
  if (t === lastModifiedSec) return false;
  return r.loc.ifModifiedSince === 'exact' || t < lastModifiedSec;
}

/** One byte range of a response: `start` to `end` (exclusive). */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

/**
 * What the range filter makes of a 200 response of `size` bytes to a main
 * request (`ngx_http_range_header_filter`): the ranges to send (206), 416,
 * or undefined to send the whole response with `Accept-Ranges: bytes`;
 * `skip` when `max_ranges 0` or HTTP/0.9 leave the response alone (no
 * `Accept-Ranges` either). With `single` (`r->single_range`) a request for
 * more than one range gets the whole response.
 */
export function rangesFor(
  r: HttpRequestState, size: number, lastModifiedSec: number | undefined, etag: string | undefined, single = false,
): ByteRange[] | 416 | 'skip' | undefined {
  if (r.protocol === '' || r.parent || r.loc.maxRanges === 0) return 'skip';
  const range = header(r, 'range');
  if (range === undefined || range.length < 7 || range.slice(0, 6).toLowerCase() !== 'bytes=') return undefined;
  const ifRange = header(r, 'if-range');
  if (ifRange !== undefined) {
    if (ifRange.length >= 2 && ifRange.endsWith('"')) {
      if (etag === undefined || etag !== ifRange) return undefined;
    } else if (lastModifiedSec === undefined || parseHttpTime(ifRange) !== lastModifiedSec) return undefined;
  }
  // r->single_range: one range at most, more leave the response whole
  return parseRanges(range.slice(6), size, single ? 1 : r.loc.maxRanges ?? Number.MAX_SAFE_INTEGER);
}

/** `ngx_http_range_parse`: the ranges of `spec` (after `bytes=`) within `size` bytes, at most `max`. */
function parseRanges(spec: string, size: number, max: number): ByteRange[] | 416 | undefined {
  const ranges: ByteRange[] = [];
  let total = 0;
  let left = max;
  let p = 0;
  const isDigit = (i: number): boolean => spec.charCodeAt(i) >= 0x30 && spec.charCodeAt(i) <= 0x39;
  const skipSpaces = (): void => {
    while (spec[p] === ' ') p++;
  };
  const number = (): number | undefined => {
    let v = 0;
    while (isDigit(p)) {
      v = v * 10 + (spec.charCodeAt(p++) - 0x30);
      if (v > Number.MAX_SAFE_INTEGER) return undefined;
    }
    return v;
  };
  for (;;) {
    let start = 0;
    let end = 0;
    let suffix = false;
    let open = false;
    skipSpaces();
    if (spec[p] !== '-') {
      if (!isDigit(p)) return 416;
      const s = number();
      if (s === undefined) return 416;
      start = s;
      skipSpaces();
      if (spec[p++] !== '-') return 416;
      skipSpaces();
      if (p >= spec.length || spec[p] === ',') {
        end = size;
        open = true;
      }
    } else {
      suffix = true;
      p++;
    }
    if (!open) {
      if (!isDigit(p)) return 416;
      const e = number();
      if (e === undefined) return 416;
      end = e;
      skipSpaces();
      if (p < spec.length && spec[p] !== ',') return 416;
      if (suffix) {
        start = end < size ? size - end : 0;
        end = size - 1;
      }
      end = end >= size ? size : end + 1;
    }
    if (start < end) {
      ranges.push({ start, end });
      total += end - start;
      if (left-- === 0) return undefined;
    } else if (start === 0) return undefined;
    if (spec[p++] !== ',') break;
  }
  if (ranges.length === 0) return 416;
  if (total > size) return undefined;
  return ranges;
}
