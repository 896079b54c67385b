/**
 * Compression: the gzip filter (`ngx_http_gzip_filter_module.c`), the
 * gzip_static handler (`ngx_http_gzip_static_module.c`), the gunzip filter
 * (`ngx_http_gunzip_filter_module.c`), and the core module's `gzip_*`
 * settings that `ngx_http_gzip_ok` (`ngx_http_core_module.c`) reads. The
 * filters run in `src/runtime/filters/`.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC, HTTP_SRV_LOC_LIF } from '../flags.js';
import { compileRegex } from '../regex.js';
import {
  bitmaskSetter, bufsSetter, DirectiveFailure, enumSetter, flagSetter, noEffect, numBounds, numSetter, rule, sizeSetter, slot, typesSetter,
  type DirectiveSpec, type MimeTypeSet, type SetContext, type Slot,
} from '../spec.js';
import type { ConfChain } from '../spec.js';

const GZIP = 'ngx_http_gzip_filter_module';
const GZIP_STATIC = 'ngx_http_gzip_static_module';
const GUNZIP = 'ngx_http_gunzip_filter_module';
const CORE = 'ngx_http_core_module';

/** `ngx_http_html_default_types`: what `gzip_types` lists unless told otherwise. */
export const GZIP_DEFAULT_TYPES: readonly string[] = ['text/html'];

export const gzipEnable = slot('gzip', false);
/** `gzip_buffers`: `(128 * 1024) / ngx_pagesize` buffers of a page by default. */
export const gzipBuffers = slot('gzip_buffers', { count: 32, sizeBytes: 4096 });
export const gzipCompLevel = slot('gzip_comp_level', 1);
/** `gzip_window` as zlib's window bits (`MAX_WBITS` by default). */
export const gzipWindowBits = slot('gzip_window', 15);
/** `gzip_hash` as zlib's memory level (`MAX_MEM_LEVEL - 1` by default). */
export const gzipMemLevel = slot('gzip_hash', 8);
export const gzipMinLength = slot('gzip_min_length', 20);
export const gzipTypes = slot<MimeTypeSet | undefined>('gzip_types', undefined);
export const gzipStatic = slot<'off' | 'on' | 'always'>('gzip_static', 'off');
export const gunzipEnable = slot('gunzip', false);
/** `gunzip_buffers`: the same default as `gzip_buffers`. */
export const gunzipBuffers = slot('gunzip_buffers', { count: 32, sizeBytes: 4096 });
export const gzipVary = slot('gzip_vary', false);
export const gzipHttpVersion = slot<'1.0' | '1.1'>('gzip_http_version', '1.1');
/** `gzip_proxied` flags; `off` alone by default. */
export const gzipProxied = slot<readonly string[]>('gzip_proxied', ['off']);
/**
 * The regexes of `gzip_disable` at a level (every `gzip_disable` there
 * appends, and a level with one replaces its parent's list, as nginx's
 * `ngx_conf_merge_ptr_value`), and `msie6`, which merges on its own.
 */
export const gzipDisableRegexes = slot<readonly RegExp[]>('gzip_disable', []);
export const gzipDisableMsie6 = slot('gzip_disable msie6', false);

/**
 * `ngx_http_gzip_window` and `ngx_http_gzip_hash`, the post handlers of
 * `gzip_window` and `gzip_hash`: a power of two from 512 bytes, turned into
 * zlib's window bits (15 for 32k) or memory level (9 for 128k).
 */
function log2Setter(s: Slot<number>, largestBytes: number, largestValue: number, message: string) {
  return (d: Directive, cx: SetContext): void => {
    sizeSetter(s)(d, cx);
    const bytes = cx.level.own(s)!.value;
    let value = largestValue;
    for (let size = largestBytes; size > 256; size >>= 1, value--) {
      if (size === bytes) {
        cx.level.replace(s, value, d.loc);
        return;
      }
    }
    throw new DirectiveFailure(message);
  };
}

/**
 * `ngx_http_gzip_disable`: `msie6`, `degradation` (no effect in jinx, which
 * does not watch the system load) or case-insensitive regexes matched
 * against `User-Agent`; may be repeated at a level.
 */
function setGzipDisable(d: Directive, cx: SetContext): void {
  const regexes = [...(cx.level.own(gzipDisableRegexes)?.value ?? [])];
  for (const p of d.args) {
    if (p === 'msie6') cx.level.replace(gzipDisableMsie6, true, d.loc);
    else if (p !== 'degradation') regexes.push(compileRegex(p, true).regex);
  }
  cx.level.replace(gzipDisableRegexes, regexes, d.loc);
}

const BUFFERING = 'jinx compresses what comes as it comes; the compressed bytes are the same';

export const gzipDirectives: readonly DirectiveSpec[] = [
  { name: 'gzip', module: GZIP, contexts: HTTP_SRV_LOC_LIF, args: ['FLAG'], effect: 'runtime', set: flagSetter(gzipEnable) },
  { name: 'gzip_buffers', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime', set: bufsSetter(gzipBuffers) },
  {
    name: 'gzip_types', module: GZIP, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: typesSetter(gzipTypes, GZIP_DEFAULT_TYPES),
  },
  {
    name: 'gzip_comp_level', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      numSetter(gzipCompLevel)(d, cx);
      numBounds(1, 9)(cx.level.own(gzipCompLevel)!.value, d, cx);
    },
  },
  {
    name: 'gzip_window', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: log2Setter(gzipWindowBits, 32 * 1024, 15, 'must be 512, 1k, 2k, 4k, 8k, 16k, or 32k'),
  },
  {
    name: 'gzip_hash', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: log2Setter(gzipMemLevel, 128 * 1024, 9, 'must be 512, 1k, 2k, 4k, 8k, 16k, 32k, 64k, or 128k'),
  },
  noEffect({ name: 'postpone_gzipping', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], note: BUFFERING }, rule.size()),
  noEffect({ name: 'gzip_no_buffer', module: GZIP, contexts: HTTP_SRV_LOC, args: ['FLAG'], note: BUFFERING }, rule.flag),
  { name: 'gzip_min_length', module: GZIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(gzipMinLength) },
  {
    name: 'gzip_static', module: GZIP_STATIC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(gzipStatic, ['off', 'on', 'always']),
  },
  { name: 'gunzip', module: GUNZIP, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(gunzipEnable) },
  { name: 'gunzip_buffers', module: GUNZIP, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime', set: bufsSetter(gunzipBuffers) },
  { name: 'gzip_vary', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(gzipVary) },
  {
    name: 'gzip_http_version', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(gzipHttpVersion, ['1.0', '1.1']),
  },
  {
    name: 'gzip_proxied', module: CORE, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: bitmaskSetter(gzipProxied, ['off', 'expired', 'no-cache', 'no-store', 'private', 'no_last_modified', 'no_etag', 'auth', 'any']),
  },
  { name: 'gzip_disable', module: CORE, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: setGzipDisable },
];

/**
 * Compression settings of a location: the gzip filter's, `gzip_static`,
 * `gunzip`, and the core module's `gzip_*` that `ngx_http_gzip_ok` reads.
 */
export interface GzipConf {
  readonly enable: boolean;
  /** `gzip_comp_level`, 1..9. */
  readonly level: number;
  /** `gzip_window` and `gzip_hash` as zlib's window bits and memory level. */
  readonly windowBits: number;
  readonly memLevel: number;
  readonly minLengthBytes: number;
  readonly types: MimeTypeSet;
  /** Size of one of `gzip_buffers`: compressed data leaves in pieces of at most this. */
  readonly bufferBytes: number;
  readonly static: 'off' | 'on' | 'always';
  readonly gunzip: boolean;
  /** Size of one of `gunzip_buffers`. */
  readonly gunzipBufferBytes: number;
  readonly vary: boolean;
  /** `gzip_http_version` as nginx's `http_version` (1000 for 1.0, 1001 for 1.1). */
  readonly httpVersion: number;
  /** `gzip_proxied` flags (`off`, `expired`, `no-cache`, …, `any`). */
  readonly proxied: ReadonlySet<string>;
  /** `gzip_disable msie6`. */
  readonly disableMsie6: boolean;
  /** `gzip_disable` regexes, matched against `User-Agent`. */
  readonly disable: readonly RegExp[];
}

/** The compression settings of a level (`ngx_http_gzip_merge_conf`, the core module's `gzip_*`). */
export function gzipConf(c: ConfChain): GzipConf {
  return {
    enable: c.get(gzipEnable),
    level: c.get(gzipCompLevel),
    windowBits: c.get(gzipWindowBits),
    memLevel: c.get(gzipMemLevel),
    minLengthBytes: c.get(gzipMinLength),
    types: c.get(gzipTypes) ?? new Set(GZIP_DEFAULT_TYPES),
    bufferBytes: c.get(gzipBuffers).sizeBytes,
    static: c.get(gzipStatic),
    gunzip: c.get(gunzipEnable),
    gunzipBufferBytes: c.get(gunzipBuffers).sizeBytes,
    vary: c.get(gzipVary),
    httpVersion: c.get(gzipHttpVersion) === '1.0' ? 1000 : 1001,
    proxied: new Set(c.get(gzipProxied)),
    disableMsie6: c.get(gzipDisableMsie6),
    disable: c.get(gzipDisableRegexes),
  };
}
