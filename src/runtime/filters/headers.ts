/**
 * The response header list as the filters see it (nginx's `headers_out`):
 * names as set, in order; for a header nginx keeps in one field
 * (`Content-Type`, `Content-Length`, `Content-Encoding`, `ETag` …) the last
 * one set is the one that counts.
 */
import type { MimeTypeSet } from '../../config/spec.js';
import type { HttpRequestState } from '../request.js';

/** Response headers: name and value(s), in order. */
export type HeaderList = [string, string | string[]][];

/** The value of the last header named `lower` (a lowercase name), or undefined. */
export function lastHeader(headers: HeaderList, lower: string): string | undefined {
  for (let i = headers.length - 1; i >= 0; i--) {
    const [name, value] = headers[i]!;
    if (name.length === lower.length && name.toLowerCase() === lower) return Array.isArray(value) ? value[value.length - 1] : value;
  }
  return undefined;
}

/** Every value of the headers named `lower`. */
export function allHeaders(headers: HeaderList, lower: string): string[] {
  const out: string[] = [];
  for (const [name, value] of headers) if (name.toLowerCase() === lower) out.push(...(Array.isArray(value) ? value : [value]));
  return out;
}

/** Removes every header named `lower` (`ngx_http_clear_content_length` and friends). */
export function removeHeader(headers: HeaderList, lower: string): void {
  for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === lower) headers.splice(i, 1);
}

/** Replaces the value of the last header named `lower`; false when there is none. */
export function replaceHeader(headers: HeaderList, lower: string, value: string): boolean {
  for (let i = headers.length - 1; i >= 0; i--) {
    if (headers[i]![0].toLowerCase() === lower) {
      headers[i]![1] = value;
      return true;
    }
  }
  return false;
}

/**
 * A `Content-Type` as nginx keeps it: the value, the part the types are
 * matched against (nginx's `content_type_len`), and the response's charset
 * (`headers_out.charset`). Only an upstream's header is split at a
 * `; charset=` parameter (`ngx_http_upstream_copy_content_type`); a type
 * jinx sets itself (`types`, `default_type`) is taken whole.
 */
export interface ContentType {
  readonly value: string;
  readonly type: string;
  readonly charset: string | undefined;
}

/** Splits a `Content-Type` value (see `ContentType`). */
export function parseContentType(value: string): ContentType {
  for (let i = value.indexOf(';'); i !== -1; i = value.indexOf(';', i + 1)) {
    let p = i + 1;
    while (value[p] === ' ') p++;
    if (p >= value.length) break;
    if (value.slice(p, p + 8).toLowerCase() !== 'charset=') continue;
    let start = p + 8;
    let end = value.length;
    if (value[start] === '"') start++;
    if (end > start && value[end - 1] === '"') end--;
    return { value, type: value.slice(0, i), charset: value.slice(start, end) };
  }
  return { value, type: value, charset: undefined };
}

/**
 * `ngx_http_test_content_type`: whether the response's type (the part
 * before `; charset=`, lowercased) is in `types`; `*` takes every
 * response, with a type or not.
 */
export function typeListed(types: MimeTypeSet, ct: ContentType | undefined): boolean {
  if (types === '*') return true;
  if (!ct || ct.value === '') return false;
  return types.has(ct.type.toLowerCase());
}

/**
 * The response's `Content-Type`, or undefined when it has none; split at
 * its charset when the response is an upstream's (`r.upstream` is set).
 */
export function responseContentType(r: HttpRequestState, headers: HeaderList): ContentType | undefined {
  const v = lastHeader(headers, 'content-type');
  if (v === undefined) return undefined;
  return r.upstream ? parseContentType(v) : { value: v, type: v, charset: undefined };
}

/** `content_length_n`: the response's `Content-Length`, or -1. */
export function contentLength(headers: HeaderList): number {
  const v = lastHeader(headers, 'content-length');
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : -1;
}

/**
 * What a filter that changes the body does to the header: no
 * `Content-Length`, nor the `Accept-Ranges` nginx's range filter adds only
 * with one (`ngx_http_clear_content_length`, `ngx_http_clear_accept_ranges`),
 * and the validators `weak`ened (`ngx_http_weak_etag`), `clear`ed
 * (`ngx_http_clear_last_modified`, `ngx_http_clear_etag`) or kept.
 */
export function bodyChanged(headers: HeaderList, validators: 'weak' | 'clear' | 'keep'): void {
  removeHeader(headers, 'content-length');
  removeHeader(headers, 'accept-ranges');
  if (validators === 'weak') weakenEtag(headers);
  else if (validators === 'clear') {
    removeHeader(headers, 'last-modified');
    removeHeader(headers, 'etag');
  }
}

/** `ngx_http_weak_etag`: a strong ETag becomes weak; one that is not a quoted string is dropped. */
export function weakenEtag(headers: HeaderList): void {
  const etag = lastHeader(headers, 'etag');
  if (etag === undefined || (etag.length > 2 && etag.startsWith('W/'))) return;
  if (!etag.startsWith('"')) removeHeader(headers, 'etag');
  else replaceHeader(headers, 'etag', `W/${etag}`);
}
