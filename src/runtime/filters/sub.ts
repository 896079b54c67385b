/**
 * The sub filter (`ngx_http_sub_filter_module.c`): in a response of a
 * `sub_filter_types` type, each `sub_filter` search string is replaced,
 * matched without regard to ASCII case, across the boundaries of the body's
 * chunks. At each place the earliest search string of the configuration
 * that matches there wins, and matching goes on after it; with
 * `sub_filter_once` each string is replaced once, and the rest of the body
 * passes untouched once all were. Bytes that may begin a match are held
 * until the next chunk tells (at most the longest string less one byte);
 * held bytes at the end of the body go out as they are, as in nginx.
 *
 * The search uses nginx's tables (`ngx_http_sub_init_tables`): the window
 * is as long as the shortest string, and moves on by the smallest distance
 * at which its last byte could line up with a string (Horspool's shift);
 * only the strings whose byte at that place is the window's last are tried.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { asciiLower } from '../../config/modules/sub.js';
import type { SubFilterConf } from '../../config/route-table.js';
import type { CompiledValue } from '../../config/variables.js';
import type { HttpRequestState } from '../request.js';
import type { HeaderFilter } from './types.js';
import { bodyChanged, contentLength, responseContentType, typeListed } from './headers.js';

/** `ngx_tolower` as a table: ASCII letters only. */
const LOWER = Uint8Array.from({ length: 256 }, (_, c) => (c >= 0x41 && c <= 0x5a ? c + 0x20 : c));

const EMPTY = Buffer.alloc(0);

/** The search strings of a response and nginx's tables over them (`ngx_http_sub_tables_t`). */
interface Matcher {
  /** Search strings (lowercase ASCII), in the configuration's order. */
  readonly patterns: readonly Buffer[];
  /** The replacement of each search string. */
  readonly values: readonly CompiledValue[];
  /** The shortest string's length, in bytes: the window's. */
  readonly minLen: number;
  /** `shift[c]`: how far the window may move when its last byte is `c` (0: try the strings of `buckets[c]`). */
  readonly shift: Uint16Array;
  /** `buckets[c]`: the strings whose byte at `minLen - 1` is `c`, by index, in order. */
  readonly buckets: readonly (readonly number[])[];
}

/** `ngx_http_sub_init_tables`: the shift and the buckets over `patterns` (none empty). */
function buildMatcher(patterns: readonly Buffer[], values: readonly CompiledValue[]): Matcher {
  const minLen = Math.min(...patterns.map((p) => p.length));
  const shift = new Uint16Array(256).fill(Math.min(minLen, 0xffff));
  const buckets: number[][] = Array.from({ length: 256 }, () => []);
  patterns.forEach((p, i) => {
    for (let j = 0; j < minLen; j++) {
      const c = p[minLen - 1 - j]!;
      if (j < shift[c]!) shift[c] = j;
    }
    buckets[p[minLen - 1]!]!.push(i);
  });
  return { patterns, values, minLen, shift, buckets };
}

/** Matchers of search strings without variables, made once per configuration. */
const staticMatchers = new WeakMap<SubFilterConf['pairs'], Matcher>();

/**
 * The matcher for `r`: the configuration's, or, with variables in the
 * search strings, one made of their values now (lowercased; empty ones
 * left out). Undefined when every search string is empty.
 */
function matcherFor(r: HttpRequestState, conf: SubFilterConf): Matcher | undefined {
  const pairs = conf.pairs;
  const dynamic = pairs.some((p) => p.match.constant === undefined);
  if (!dynamic) {
    let m = staticMatchers.get(pairs);
    if (!m) {
      m = buildMatcher(pairs.map((p) => Buffer.from(p.match.constant!, 'latin1')), pairs.map((p) => p.value));
      staticMatchers.set(pairs, m);
    }
    return m;
  }
  const patterns: Buffer[] = [];
  const values: CompiledValue[] = [];
  for (const p of pairs) {
    const text = p.match.evaluate(r);
    if (text === '') continue;
    patterns.push(Buffer.from(asciiLower(text), 'latin1'));
    values.push(p.value);
  }
  return patterns.length === 0 ? undefined : buildMatcher(patterns, values);
}

const enum Match {
  Declined,
  Again,
  Ok,
}

/** `ngx_http_sub_match`: whether `pattern` is at `start` of `data`, is not, or may be (`data` ends first). */
function matchAt(data: Buffer, start: number, pattern: Buffer): Match {
  const n = Math.min(pattern.length, data.length - start);
  for (let k = 0; k < n; k++) if (LOWER[data[start + k]!] !== pattern[k]) return Match.Declined;
  return n === pattern.length ? Match.Ok : Match.Again;
}

/** The sub body filter of one response. */
class SubFilter extends Transform {
  /** Bytes that may begin a match, from the end of the last chunk. */
  private held: Buffer = EMPTY;
  /** Replacements computed so far, by string (`ctx->sub`): each is evaluated at its first match. */
  private readonly subs: (Buffer | undefined)[];
  private applied = 0;
  /** `ctx->once`: every string was replaced once; the rest passes. */
  private finished = false;

  constructor(
    private readonly r: HttpRequestState,
    private readonly m: Matcher,
    private readonly onlyOnce: boolean,
  ) {
    super();
    this.subs = new Array<Buffer | undefined>(m.patterns.length);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.finished) {
      done(null, chunk);
      return;
    }
    const data = this.held.length > 0 ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = EMPTY;
    const out = this.scan(data);
    if (out.length > 0) this.push(out.length === 1 ? out[0] : Buffer.concat(out));
    done();
  }

  override _flush(done: TransformCallback): void {
    done(null, this.held.length > 0 ? this.held : undefined);
  }

  /** `ngx_http_sub_parse` over `data`: what to pass on; what may begin a match is kept in `held`. */
  private scan(data: Buffer): Buffer[] {
    const { patterns, minLen, shift, buckets } = this.m;
    const out: Buffer[] = [];
    let copy = 0;
    let p = 0;
    const lastStart = data.length - minLen;
    while (p <= lastStart) {
      const c = LOWER[data[p + minLen - 1]!]!;
      const s = shift[c]!;
      if (s > 0) {
        p += s;
        continue;
      }
      let found = -1;
      for (const i of buckets[c]!) {
        if (this.onlyOnce && this.subs[i]) continue;
        const rc = matchAt(data, p, patterns[i]!);
        if (rc === Match.Declined) continue;
        if (rc === Match.Again) {
          if (p > copy) out.push(data.subarray(copy, p));
          this.held = Buffer.from(data.subarray(p));
          return out;
        }
        found = i;
        break;
      }
      if (found === -1) {
        p++;
        continue;
      }
      if (p > copy) out.push(data.subarray(copy, p));
      const sub = this.replacement(found);
      if (sub.length > 0) out.push(sub);
      p += patterns[found]!.length;
      copy = p;
      if (this.onlyOnce && ++this.applied === patterns.length) {
        this.finished = true;
        if (copy < data.length) out.push(data.subarray(copy));
        return out;
      }
    }
    // the window no longer fits: hold from the first place a string may begin
    for (let start = p; start < data.length; start++) {
      if (patterns.some((pattern) => matchAt(data, start, pattern) === Match.Again)) {
        if (start > copy) out.push(data.subarray(copy, start));
        this.held = Buffer.from(data.subarray(start));
        return out;
      }
    }
    if (copy < data.length) out.push(data.subarray(copy));
    return out;
  }

  private replacement(i: number): Buffer {
    let sub = this.subs[i];
    if (!sub) {
      sub = Buffer.from(this.m.values[i]!.evaluate(this.r), 'latin1');
      this.subs[i] = sub;
    }
    return sub;
  }
}

/**
 * The sub header filter (`ngx_http_sub_header_filter`): with search
 * strings, a response of a `sub_filter_types` type that is not known to be
 * empty is filtered; a main request's response loses `Content-Length` (and
 * so `Accept-Ranges`), and `Last-Modified` and `ETag` unless `sub_filter_last_modified` (then the
 * ETag is weak). Subrequests (`add_before_body`, SSI includes) are filtered
 * with their own location's strings.
 */
export const subHeaderFilter: HeaderFilter = (f, _status, headers) => {
  const { r } = f;
  const conf = r.loc.sub;
  if (conf.pairs.length === 0 || contentLength(headers) === 0) return undefined;
  if (!typeListed(conf.types, f.contentType ?? responseContentType(r, headers))) return undefined;
  const m = matcherFor(r, conf);
  if (!m) return undefined;
  if (!r.parent) bodyChanged(headers, conf.lastModified ? 'weak' : 'clear');
  return () => [new SubFilter(r, m, conf.once)];
};
