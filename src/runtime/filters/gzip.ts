/**
 * The gzip and gunzip filters (`ngx_http_gzip_filter_module.c`,
 * `ngx_http_gunzip_filter_module.c`) and `ngx_http_gzip_ok`
 * (`ngx_http_core_module.c`), on node's zlib: (de)compression runs in
 * libuv's thread pool, streaming, with backpressure. The gzip member is
 * framed as zlib frames nginx's (its 10-byte header, raw deflate, then the
 * CRC-32 and length), so the bytes and `$gzip_ratio` are nginx's.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { createDeflateRaw, createGunzip, crc32 } from 'node:zlib';
import type { HttpRequestState } from '../request.js';
import { browserOf } from '../../user-agent.js';
import type { HeaderFilter } from './types.js';
import { allHeaders, bodyChanged, contentLength, lastHeader, removeHeader, responseContentType, typeListed, type HeaderList } from './headers.js';

/**
 * The gzip header zlib writes for nginx (`deflateInit2` with `wbits + 16`,
 * `Z_DEFAULT_STRATEGY`): no name, no time, OS Unix, and in XFL what zlib's
 * `deflate.c` puts there for the level: 2 for 9, 4 for 1, else 0.
 */
function gzipHeader(level: number): Buffer {
  return Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, level === 9 ? 2 : level < 2 ? 4 : 0, 3]);
}

/**
 * An error of a body filter: its message is nginx's alert line; a `benign`
 * one ends the response as if the body had ended (nginx's gunzip takes
 * zlib's `Z_BUF_ERROR`, input that ends early, as the end); a `logged` one
 * only closes the connection.
 */
export interface FilterError extends Error {
  benign?: boolean;
  /** The filter logged the error itself: the response is only given up. */
  logged?: boolean;
}

/** The first value of a request header as received (nginx keeps the first `Accept-Encoding`, `User-Agent`). */
function firstRequestHeader(r: HttpRequestState, lower: string): string | undefined {
  for (let i = 0; i + 1 < r.rawHeaders.length; i += 2) if (r.rawHeaders[i]!.toLowerCase() === lower) return r.rawHeaders[i + 1]!;
  const v = r.headers[lower];
  return Array.isArray(v) ? v[0] : v;
}

/** nginx's `r->http_version`: 1000 for HTTP/1.0, 1001 for 1.1, 2000 for HTTP/2, 9 for 0.9. */
function httpVersion(r: HttpRequestState): number {
  const m = /^HTTP\/(\d)\.(\d)$/.exec(r.protocol);
  return m ? Number(m[1]) * 1000 + Number(m[2]) : 1000;
}

/**
 * `ngx_http_gzip_quantity`: the q-value after `q=`, times 1000 as nginx
 * adds it up (0 when invalid or above 1).
 */
function quantity(s: string, at: number): number {
  let p = at;
  let c = s[p++];
  if (c !== '0' && c !== '1') return 0;
  let q = (c.charCodeAt(0) - 48) * 100;
  if (p === s.length) return q;
  c = s[p++]!;
  if (c === ',' || c === ' ') return q;
  if (c !== '.') return 0;
  let n = 0;
  while (p < s.length) {
    c = s[p++]!;
    if (c === ',' || c === ' ') break;
    if (c >= '0' && c <= '9') {
      q += c.charCodeAt(0) - 48;
      n++;
      continue;
    }
    return 0;
  }
  return q > 100 || n > 3 ? 0 : q;
}

/**
 * `ngx_http_gzip_accept_encoding`: `gzip` at the start or after `,` or a
 * space (case-insensitive), followed by the end, `,`, or a `;q=` that is
 * not zero.
 */
function acceptsGzip(ae: string): boolean {
  const lower = ae.toLowerCase();
  let start = 0;
  let p: number;
  for (;;) {
    p = lower.indexOf('gzip', start);
    if (p === -1) return false;
    if (p === start || ae[p - 1] === ',' || ae[p - 1] === ' ') break;
    start = p + 4;
  }
  p += 4;
  while (p < ae.length) {
    const c = ae[p++];
    if (c === ',') return true;
    if (c === ';') {
      while (p < ae.length) {
        const d = ae[p++];
        if (d === 'q' || d === 'Q') return p + 2 <= ae.length && ae[p] === '=' && quantity(ae, p + 1) !== 0;
        if (d !== ' ') return false;
      }
      return true;
    }
    if (c !== ' ') return false;
  }
  return true;
}

/** Whether a `Cache-Control` list has `token` as an item (`ngx_http_parse_multi_header_lines`). */
function hasToken(values: readonly string[], token: string): boolean {
  return values.some((v) => v.split(',').some((item) => {
    const t = item.trim().toLowerCase();
    return t === token || t.startsWith(`${token}=`);
  }));
}

/** `ngx_parse_http_time`, in seconds, or undefined. */
function httpTimeSec(text: string): number | undefined {
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

/**
 * `gzip_proxied` for a request that came through a proxy (`Via`): whether
 * the response may be compressed, by `Authorization`, `Expires`,
 * `Cache-Control`, `Last-Modified` and `ETag`. Of `Last-Modified`, nginx
 * sees an upstream's header only (a file's time is not a header yet).
 */
function proxiedOk(r: HttpRequestState, headers: HeaderList): boolean {
  const p = r.loc.gzip.proxied;
  if (p.has('off')) return false;
  if (p.has('any')) return true;
  if (r.headers.authorization !== undefined && p.has('auth')) return true;
  const expiresText = lastHeader(headers, 'expires');
  if (expiresText !== undefined) {
    if (!p.has('expired')) return false;
    const expires = httpTimeSec(expiresText);
    const dateText = lastHeader(headers, 'date');
    const date = dateText === undefined ? Math.floor(Date.now() / 1000) : httpTimeSec(dateText);
    return expires !== undefined && date !== undefined && expires < date;
  }
  const cc = allHeaders(headers, 'cache-control');
  if (cc.length > 0) {
    return (p.has('no-cache') && hasToken(cc, 'no-cache')) || (p.has('no-store') && hasToken(cc, 'no-store'))
      || (p.has('private') && hasToken(cc, 'private'));
  }
  if (p.has('no_last_modified') && r.upstream !== undefined && lastHeader(headers, 'last-modified') !== undefined) return false;
  return !(p.has('no_etag') && lastHeader(headers, 'etag') !== undefined);
}

/**
 * `ngx_http_gzip_ok`: whether the client takes a gzip response, by its
 * `Accept-Encoding`, `gzip_disable`, `gzip_http_version` and, through a
 * proxy, `gzip_proxied`. The answer is kept for the request
 * (`r->gzip_tested`, `r->gzip_ok`). `headers`: the response's, so far.
 */
export function gzipOk(r: HttpRequestState, headers: HeaderList): boolean {
  r.gzipTested = true;
  r.gzipOk = false;
  if (r.parent) return false;
  const ae = firstRequestHeader(r, 'accept-encoding');
  if (ae === undefined || ae.length < 4) return false;
  if (!ae.startsWith('gzip,') && !acceptsGzip(ae)) return false;
  const g = r.loc.gzip;
  const ua = firstRequestHeader(r, 'user-agent');
  if (g.disableMsie6 && browserOf(ua).msie6) return false;
  if (httpVersion(r) < g.httpVersion) return false;
  if (r.headers.via !== undefined && !proxiedOk(r, headers)) return false;
  if (ua !== undefined && g.disable.some((re) => re.test(ua))) return false;
  r.gzipOk = true;
  return true;
}

/** `r->gzip_tested ? r->gzip_ok : ngx_http_gzip_ok(r)`. */
function clientTakesGzip(r: HttpRequestState, headers: HeaderList): boolean {
  return r.gzipTested ? r.gzipOk : gzipOk(r, headers);
}

/** Passes data on, adding up its CRC-32 and length for the gzip trailer. */
class Crc32Counter extends Transform {
  crc = 0;
  bytes = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.crc = crc32(chunk, this.crc);
    this.bytes += chunk.length;
    done(null, chunk);
  }
}

/**
 * Frames deflated data as a gzip member: the header before the first
 * bytes, the trailer (`ngx_http_gzip_filter_deflate_end`) at the end, then
 * the counts go to the request for `$gzip_ratio`. What zlib gives within
 * one turn of the event loop goes on as one buffer, the trailer with the
 * last bytes, as nginx's filter fills its output buffers: a small body
 * leaves as one piece (one chunk of a chunked response), header, data and
 * trailer together.
 */
class GzipFramer extends Transform {
  private headerSent = false;
  private out = 0;
  /** Output not passed on yet, and whether a later turn passes it on. */
  private pending: Buffer[] = [];
  private scheduled = false;

  constructor(
    private readonly input: Crc32Counter,
    private readonly r: HttpRequestState,
    /** `gzip_comp_level`, for the header's XFL. */
    private readonly level: number,
  ) {
    super();
  }

  private header(): void {
    if (this.headerSent) return;
    this.headerSent = true;
    const header = gzipHeader(this.level);
    this.out += header.length;
    this.pending.push(header);
  }

  /** The output gathered so far, as one buffer (undefined when there is none). */
  private gathered(): Buffer | undefined {
    const pending = this.pending;
    this.pending = [];
    return pending.length === 0 ? undefined : pending.length === 1 ? pending[0] : Buffer.concat(pending);
  }

  private readonly passOn = (): void => {
    this.scheduled = false;
    const out = this.gathered();
    if (out) this.push(out);
  };

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.header();
    this.out += chunk.length;
    this.pending.push(chunk);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.passOn);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    this.header();
    const trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(this.input.crc >>> 0, 0);
    trailer.writeUInt32LE(this.input.bytes % 2 ** 32, 4);
    this.out += 8;
    this.r.gzipCounts = { zin: this.input.bytes, zout: this.out };
    this.pending.push(trailer);
    done(null, this.gathered());
  }
}

/**
 * The gzip header filter (`ngx_http_gzip_header_filter`): with `gzip on`, a
 * 200, 403 or 404 response without `Content-Encoding`, at least
 * `gzip_min_length` long (when its length is known), of a `gzip_types`
 * type, is compressed for a client that takes it: `Content-Encoding: gzip`,
 * no `Content-Length` nor `Accept-Ranges`, a weak `ETag`. The window and
 * hash shrink for a short body (`ngx_http_gzip_filter_memory`).
 */
export const gzipHeaderFilter: HeaderFilter = (f, status, headers) => {
  const { r } = f;
  const g = r.loc.gzip;
  if (!g.enable || (status !== 200 && status !== 403 && status !== 404)) return undefined;
  if (lastHeader(headers, 'content-encoding')) return undefined;
  const length = contentLength(headers);
  if (length !== -1 && length < g.minLengthBytes) return undefined;
  if (!typeListed(g.types, f.contentType ?? responseContentType(r, headers))) return undefined;
  r.gzipVary = true;
  if (!clientTakesGzip(r, headers)) return undefined;
  headers.push(['Content-Encoding', 'gzip']);
  bodyChanged(headers, 'weak');
  let windowBits = g.windowBits;
  let memLevel = g.memLevel;
  if (length > 0) {
    // the actual zlib window size is smaller by 262 bytes
    while (length < (1 << (windowBits - 1)) - 262) {
      windowBits--;
      memLevel--;
    }
  }
  return () => {
    const counter = new Crc32Counter();
    const deflate = createDeflateRaw({ level: g.level, windowBits, memLevel: Math.max(memLevel, 1), chunkSize: Math.max(g.bufferBytes, 64) });
    deflate.on('error', (err: FilterError & { errno?: number }) => {
      err.message = `deflate() failed: 0, ${err.errno ?? -2}`;
    });
    return [counter, deflate, new GzipFramer(counter, r, g.level)];
  };
};

/**
 * The gunzip header filter (`ngx_http_gunzip_header_filter`): with `gunzip
 * on`, a `Content-Encoding: gzip` response to a client that does not take
 * gzip is decompressed (several members, one after the other): no
 * `Content-Encoding`, `Content-Length` nor `Accept-Ranges`, a weak `ETag`. Either
 * way the response now depends on `Accept-Encoding`.
 */
export const gunzipHeaderFilter: HeaderFilter = ({ r }, _status, headers) => {
  const g = r.loc.gzip;
  if (!g.gunzip) return undefined;
  const ce = lastHeader(headers, 'content-encoding');
  if (ce === undefined || ce.toLowerCase() !== 'gzip') return undefined;
  r.gzipVary = true;
  if (clientTakesGzip(r, headers)) return undefined;
  removeHeader(headers, 'content-encoding');
  bodyChanged(headers, 'weak');
  return () => {
    const gunzip = createGunzip({ chunkSize: Math.max(g.gunzipBufferBytes, 64) });
    gunzip.on('error', (err: FilterError & { errno?: number; code?: string }) => {
      err.benign = err.code === 'Z_BUF_ERROR';
      err.message = `inflate() failed: 0, ${err.errno ?? -2}`;
    });
    return [gunzip];
  };
};
