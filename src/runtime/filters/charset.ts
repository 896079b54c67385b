/**
 * The charset filter (`ngx_http_charset_filter_module.c`): the response's
 * `Content-Type` gets `; charset=NAME` for `charset`, and the body is
 * recoded from `source_charset` (or the upstream's charset) with the
 * configuration's `charset_map` tables: byte for byte between two 8-bit
 * charsets, to UTF-8 sequences, or from UTF-8 to bytes, with `&#N;` for a
 * character the table lacks and `?` for invalid UTF-8.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { decodeUtf8, type Recoding } from '../../config/modules/charset.js';
import type { CharsetSetting } from '../../config/route-table.js';
import { logRequest } from '../context.js';
import type { HttpRequestState } from '../request.js';
import type { FilterContext, HeaderFilter } from './types.js';
import { bodyChanged, lastHeader, replaceHeader, responseContentType, typeListed, type ContentType } from './headers.js';

/** A charset decided for a response: its name and index (undefined: a name the configuration does not know). */
interface Decided {
  readonly name: string;
  readonly index: number | undefined;
}

/** A `charset`/`source_charset` setting for this request; `'error'` when its variable is not found. */
function decide(r: HttpRequestState, setting: Exclude<CharsetSetting, { kind: 'off' }>): Decided | 'error' {
  const tables = r.loc.charset.tables;
  if (setting.kind === 'name') return { name: tables.charsets[setting.index]!.name, index: setting.index };
  const name = setting.get(r);
  if (name === undefined) return 'error';
  return { name, index: tables.find(name) };
}

/**
 * An upstream's `X-Accel-Charset` (`ngx_http_upstream_process_charset`): the
 * last one becomes the request's `overrideCharset`. `received` lists the
 * response's headers as name, value, name, value …
 */
export function takeAccelCharset(r: HttpRequestState, received: readonly string[]): void {
  for (let i = 0; i + 1 < received.length; i += 2) {
    const name = received[i]!;
    if (name.length === 15 && name.toLowerCase() === 'x-accel-charset') r.overrideCharset = received[i + 1]!;
  }
}

/**
 * The destination charset (`ngx_http_destination_charset`): the upstream's
 * `X-Accel-Charset` when it sent one (an unknown name is an `[error]` and
 * leaves the response as it is), else `charset`, for a response of
 * `charset_types` without a charset of its own or, with `override_charset`,
 * any; `undefined` when the response keeps its charset.
 */
function destination(f: FilterContext, ct: ContentType): Decided | 'error' | undefined {
  const { cx, r } = f;
  const conf = r.loc.charset;
  // a subrequest's own X-Accel-Charset is not looked at (ngx_http_main_request_charset)
  const override = r.parent ? undefined : r.overrideCharset;
  if (override) {
    const index = conf.tables.find(override);
    if (index !== undefined) return { name: override, index };
    logRequest(cx, r, 'error', `unknown charset "${override}" to override`);
    return undefined;
  }
  if (conf.charset.kind === 'off') return undefined;
  if (ct.charset !== undefined ? !conf.override : !typeListed(conf.types, ct)) return undefined;
  return decide(r, conf.charset);
}

/**
 * The charset header filter (`ngx_http_charset_header_filter` with
 * `ngx_http_destination_charset` and `ngx_http_source_charset`).
 */
export const charsetHeaderFilter: HeaderFilter = (f, status, headers) => {
  const { cx, r } = f;
  const conf = r.loc.charset;
  const ct = responseContentType(r, headers);
  if (!ct || ct.value === '') return undefined;
  const dst = destination(f, ct);
  if (dst === undefined || dst === 'error') return dst;
  let src: Decided | 'off';
  if (ct.charset !== undefined) src = { name: ct.charset, index: conf.tables.find(ct.charset) };
  else if (conf.source.kind === 'off') src = 'off';
  else {
    const decided = decide(r, conf.source);
    if (decided === 'error') return 'error';
    src = decided;
  }
  // ngx_http_set_charset: the type gets `; charset=` unless it has one of its own; never on a 301 or 302
  const setCharset = (truncate: boolean): void => {
    const type = truncate ? ct.type : ct.value;
    const append = status !== 301 && status !== 302 && (truncate || ct.charset === undefined);
    const value = append ? `${type}; charset=${dst.name}` : type;
    replaceHeader(headers, 'content-type', value);
    f.contentType = { value, type: ct.type, charset: append ? dst.name : ct.charset };
  };
  const noMap = (from: string): undefined => {
    logRequest(cx, r, 'error', `no "charset_map" between the charsets "${from}" and "${dst.name}"`);
    return undefined;
  };
  if (src === 'off') {
    setCharset(false);
    return undefined;
  }
  if (dst.index === undefined || src.index === undefined) {
    if (src.index !== dst.index || src.name.slice(0, dst.name.length).toLowerCase() !== dst.name.toLowerCase()) return noMap(src.name);
    setCharset(false);
    return undefined;
  }
  if (src.index === dst.index) {
    setCharset(true);
    return undefined;
  }
  if (lastHeader(headers, 'content-encoding')) return undefined;
  const from = conf.tables.charsets[src.index]!;
  const recoding = from.tables.get(dst.index);
  if (!recoding) return noMap(src.name);
  setCharset(true);
  if (recoding.kind !== 'bytes') {
    bodyChanged(headers, 'keep');
  }
  return () => [new Recoder(recoding)];
};

/** `&#N;`, nginx's form for a character the destination charset lacks. */
const entity = (code: number): Buffer => Buffer.from(`&#${code};`, 'latin1');
const QUESTION = 0x3f;

/**
 * Recodes a body (`ngx_http_charset_body_filter`): a UTF-8 sequence cut by
 * the end of a chunk waits for the next one; one left at the end of the
 * body is dropped, as nginx drops it.
 */
class Recoder extends Transform {
  private saved: Buffer | undefined;

  constructor(private readonly recoding: Recoding) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const rc = this.recoding;
    if (rc.kind === 'bytes') {
      const out = Buffer.allocUnsafe(chunk.length);
      for (let i = 0; i < chunk.length; i++) out[i] = rc.table[chunk[i]!]!;
      done(null, out);
      return;
    }
    if (rc.kind === 'to-utf8') {
      let length = 0;
      for (const b of chunk) length += rc.table[b]!.length;
      const out = Buffer.allocUnsafe(length);
      let at = 0;
      for (const b of chunk) at += rc.table[b]!.copy(out, at);
      done(null, out);
      return;
    }
    done(null, this.fromUtf8(rc.table, chunk));
  }

  /** `ngx_http_charset_recode_from_utf8`. */
  private fromUtf8(table: ReadonlyMap<number, number>, chunk: Buffer): Buffer {
    const buf = this.saved ? Buffer.concat([this.saved, chunk]) : chunk;
    this.saved = undefined;
    const parts: Buffer[] = [];
    let run = 0;
    const out: number[] = [];
    const flushBytes = (): void => {
      if (out.length > 0) parts.push(Buffer.from(out.splice(0)));
    };
    for (let i = 0; i < buf.length;) {
      const b = buf[i]!;
      if (b < 0x80) {
        out.push(b);
        i++;
        run++;
        continue;
      }
      const { code, next } = decodeUtf8(buf, i);
      if (code === 0xfffffffe) {
        this.saved = Buffer.from(buf.subarray(i));
        break;
      }
      i = next;
      const c = code < 0x10000 ? table.get(code) : undefined;
      if (c) out.push(c);
      else if (code > 0x10ffff) out.push(QUESTION);
      else {
        flushBytes();
        parts.push(entity(code));
      }
    }
    flushBytes();
    return run === buf.length ? buf : Buffer.concat(parts);
  }
}
