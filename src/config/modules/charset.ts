/**
 * The charset filter's directives (`src/http/modules/ngx_http_charset_filter_module.c`):
 * `charset`, `source_charset`, `override_charset`, `charset_types` and
 * `charset_map` blocks. The charsets a configuration names and the
 * recoding tables between them live in one `CharsetTables` per
 * configuration; the filter itself is `src/runtime/filters/charset.ts`.
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC, HTTP_SRV_LOC_LIF } from '../flags.js';
import { scopeRegistry, type ConfigScope } from '../scope.js';
import {
  DirectiveFailure, fail, flagSetter, slot, typesSetter, type ConfChain, type DirectiveSpec, type MimeTypeSet, type SetContext,
} from '../spec.js';
import { ConfigError } from '../../errors.js';
import { levelsInOrder, type CompileContext } from '../compile-context.js';
import type { LevelNode } from '../check.js';
import type { VariableGetter } from '../variables.js';

const CHARSET = 'ngx_http_charset_filter_module';

/** `ngx_http_charset_default_types`. */
export const CHARSET_DEFAULT_TYPES: readonly string[] = [
  'text/html', 'text/xml', 'text/plain', 'text/vnd.wap.wml', 'application/javascript', 'application/rss+xml',
];

/**
 * How one charset's bytes become another's (a table of `ngx_http_charset_tables_t`):
 * - `bytes`: one byte for one byte (`src2dst`, 256 entries);
 * - `to-utf8`: each byte becomes its UTF-8 sequence (1 to 3 bytes);
 * - `from-utf8`: each code point below U+10000 becomes a byte; one without
 *   an entry is sent as `&#N;`.
 */
export type Recoding =
  | { readonly kind: 'bytes'; readonly table: Uint8Array }
  | { readonly kind: 'to-utf8'; readonly table: readonly Buffer[] }
  | { readonly kind: 'from-utf8'; readonly table: ReadonlyMap<number, number> };

/** A charset the configuration names (`ngx_http_charset_t`): as first written, and its tables to other charsets by index. */
export interface CharsetEntry {
  readonly name: string;
  readonly utf8: boolean;
  readonly tables: Map<number, Recoding>;
}

/** A charset setting: `off`, a charset by index, or a variable whose value names one. */
export type CharsetRef =
  | { readonly kind: 'off' }
  | { readonly kind: 'name'; readonly index: number }
  | { readonly kind: 'variable'; readonly name: string; readonly loc: SourceLoc };

/** One `charset_map SRC DST` block being read. */
interface MapTable {
  readonly src: number;
  readonly dst: number;
  readonly src2dst: Recoding;
  readonly dst2src: Recoding;
}

/**
 * The charsets of a configuration (`ngx_http_charset_main_conf_t`): every
 * name `charset`, `source_charset` and `charset_map` use, in order of first
 * use, compared case-insensitively, and the tables of `charset_map`.
 */
export class CharsetTables {
  readonly charsets: CharsetEntry[] = [];
  private readonly maps: MapTable[] = [];
  /** The `source_charset` → `charset` pairs the merged levels recode between (`mcf->recodes`), in order of first use. */
  private readonly recodes: [number, number][] = [];

  /** `ngx_http_add_charset`: the index of a name, added when new. */
  add(name: string): number {
    const i = this.find(name);
    if (i !== undefined) return i;
    this.charsets.push({ name, utf8: name.toLowerCase() === 'utf-8', tables: new Map() });
    return this.charsets.length - 1;
  }

  /** `ngx_http_get_charset`: the index of a name, or undefined (`NGX_HTTP_NO_CHARSET`). */
  find(name: string): number | undefined {
    const lower = name.toLowerCase();
    const i = this.charsets.findIndex((c) => c.name.length === name.length && c.name.toLowerCase() === lower);
    return i === -1 ? undefined : i;
  }

  /**
   * Reads a `charset_map` block (`ngx_http_charset_map_block`,
   * `ngx_http_charset_map`): `XX YY;` entries in hexadecimal, the second a
   * UTF-8 sequence of up to 3 bytes when the destination is `utf-8`.
   * @throws DirectiveFailure nginx's messages, placed at the entry
   */
  readMap(d: Directive): void {
    const [srcName, dstName] = d.args as [string, string];
    const src = this.add(srcName);
    const dst = this.add(dstName);
    if (src === dst) fail(`"charset_map" between the same charsets "${srcName}" and "${dstName}"`);
    if (this.maps.some((t) => (t.src === src && t.dst === dst) || (t.src === dst && t.dst === src))) {
      fail(`duplicate "charset_map" between "${srcName}" and "${dstName}"`);
    }
    const utf8 = dstName.toLowerCase() === 'utf-8';
    const src2dst = new Uint8Array(256);
    const dst2src = new Uint8Array(256);
    const toUtf8: Buffer[] = [];
    const fromUtf8 = new Map<number, number>();
    for (let i = 0; i < 256; i++) {
      src2dst[i] = dst2src[i] = i < 128 ? i : 0x3f;
      toUtf8.push(Buffer.from([i < 128 ? i : 0x3f]));
      if (i < 128) fromUtf8.set(i, i);
    }
    for (const e of d.block ?? []) {
      if (e.kind === 'error') throw e.error;
      if (e.block !== null || e.args.length !== 1) fail('invalid parameters number', e.loc);
      const from = hexToInt(e.name);
      if (from === undefined || from > 255) fail(`invalid value "${e.name}"`, e.loc);
      const to = e.args[0]!;
      if (!utf8) {
        const v = hexToInt(to);
        if (v === undefined || v > 255) fail(`invalid value "${to}"`, e.loc);
        src2dst[from] = v;
        dst2src[v] = from;
        continue;
      }
      const bytes: number[] = [];
      for (let i = 0; i < to.length; i += 2) bytes.push(hexToInt(to.slice(i, i + 2).padEnd(2, '\0')) ?? -1);
      if (Math.floor(to.length / 2) > 3 || bytes.some((b) => b < 0 || b > 255)) fail(`invalid value "${to}"`, e.loc);
      const seq = Buffer.from(bytes);
      const decoded = decodeUtf8(seq, 0);
      if (decoded.code > 0xffff) fail(`invalid value "${to}"`, e.loc);
      toUtf8[from] = seq;
      fromUtf8.set(decoded.code, from);
    }
    this.maps.push(utf8
      ? { src, dst, src2dst: { kind: 'to-utf8', table: toUtf8 }, dst2src: { kind: 'from-utf8', table: fromUtf8 } }
      : { src, dst, src2dst: { kind: 'bytes', table: src2dst }, dst2src: { kind: 'bytes', table: dst2src } });
  }

  /** A merged level recodes `source` to `charset` (`ngx_http_charset_merge_loc_conf`). */
  needRecode(source: number, charset: number): void {
    if (!this.recodes.some(([s, c]) => s === source && c === charset)) this.recodes.push([source, charset]);
  }

  /**
   * `ngx_http_charset_postconfiguration`: every recoding a level needs has a
   * `charset_map` (either way), then each charset gets its tables.
   * @returns nginx's message for the first pair without one, or undefined
   */
  link(): string | undefined {
    for (const [s, c] of this.recodes) {
      if (!this.maps.some((t) => (t.src === s && t.dst === c) || (t.src === c && t.dst === s))) {
        return `no "charset_map" between the charsets "${this.charsets[s]!.name}" and "${this.charsets[c]!.name}"`;
      }
    }
    for (const t of this.maps) {
      this.charsets[t.src]!.tables.set(t.dst, t.src2dst);
      this.charsets[t.dst]!.tables.set(t.src, t.dst2src);
    }
    return undefined;
  }
}

/** The charsets and recoding tables of a configuration. */
const charsetTables = scopeRegistry(() => new CharsetTables());

/** `ngx_hextoi`: a whole string of hexadecimal digits, or undefined. */
function hexToInt(text: string): number | undefined {
  return /^[0-9a-fA-F]+$/.test(text) ? parseInt(text, 16) : undefined;
}

/**
 * `ngx_utf8_decode` (`src/core/ngx_string.c`): the code point of the
 * sequence at `at` and the index after it. A byte below 0xC2 or from 0xF8
 * up is invalid (0xFFFFFFFF, one byte taken); a sequence cut short by the end is
 * 0xFFFFFFFE (nothing taken); a continuation byte below 0x80 makes it
 * invalid, taken with the bytes before it; an overlong form is invalid.
 */
export function decodeUtf8(buf: Uint8Array, at: number): { code: number; next: number } {
  let u = buf[at]!;
  let len: number;
  let valid: number;
  if (u >= 0xf8) return { code: 0xffffffff, next: at + 1 };
  if (u >= 0xf0) [u, valid, len] = [u & 0x07, 0xffff, 3];
  else if (u >= 0xe0) [u, valid, len] = [u & 0x0f, 0x7ff, 2];
  else if (u >= 0xc2) [u, valid, len] = [u & 0x1f, 0x7f, 1];
  else return { code: 0xffffffff, next: at + 1 };
  if (buf.length - at - 1 < len) return { code: 0xfffffffe, next: at };
  let p = at + 1;
  while (len > 0) {
    const i = buf[p++]!;
    if (i < 0x80) return { code: 0xffffffff, next: p };
    u = (u << 6) | (i & 0x3f);
    len--;
  }
  return { code: u > valid ? u : 0xffffffff, next: p };
}

export const charsetSlot = slot<CharsetRef | undefined>('charset', undefined);
export const sourceCharsetSlot = slot<CharsetRef | undefined>('source_charset', undefined);
export const overrideCharset = slot('override_charset', false);
export const charsetTypes = slot<MimeTypeSet | undefined>('charset_types', undefined);

/**
 * `ngx_http_set_charset_slot`: `off` (for `charset` only), `$variable`
 * (the rest of the word names it), or a charset name.
 */
function charsetSetter(s: typeof charsetSlot, offAllowed: boolean) {
  return (d: Directive, cx: SetContext): void => {
    if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
    const v = d.args[0]!;
    let ref: CharsetRef;
    if (offAllowed && v === 'off') ref = { kind: 'off' };
    else if (v.startsWith('$')) {
      cx.scope.variables.reference(v.slice(1), d.loc);
      ref = { kind: 'variable', name: v.slice(1), loc: d.loc };
    } else ref = { kind: 'name', index: cx.scope.registry(charsetTables).add(v) };
    cx.level.set(s, ref, d.loc);
  };
}

export const charsetDirectives: readonly DirectiveSpec[] = [
  { name: 'charset', module: CHARSET, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime', set: charsetSetter(charsetSlot, true) },
  {
    name: 'source_charset', module: CHARSET, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime',
    set: charsetSetter(sourceCharsetSlot, false),
  },
  { name: 'override_charset', module: CHARSET, contexts: HTTP_SRV_LOC_LIF, args: ['FLAG'], effect: 'runtime', set: flagSetter(overrideCharset) },
  {
    name: 'charset_types', module: CHARSET, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: typesSetter(charsetTypes, CHARSET_DEFAULT_TYPES),
  },
  {
    name: 'charset_map', module: CHARSET, contexts: ['http'], args: ['TAKE2'], block: 'raw', effect: 'runtime',
    set: (d, cx) => cx.scope.registry(charsetTables).readMap(d),
  },
];

/** A charset setting bound: `off`, a charset by its index in `CharsetTables`, or a variable naming one. */
export type CharsetSetting =
  | { readonly kind: 'off' }
  | { readonly kind: 'name'; readonly index: number }
  | { readonly kind: 'variable'; readonly get: VariableGetter };

/** The charset filter's settings of a location. */
export interface CharsetConf {
  readonly charset: CharsetSetting;
  readonly source: CharsetSetting;
  readonly override: boolean;
  readonly types: MimeTypeSet;
  /** The configuration's charsets and `charset_map` tables, shared by every location. */
  readonly tables: CharsetTables;
}

/** The charset filter's settings of a level (`ngx_http_charset_merge_loc_conf`); unset charsets are `off`. */
export function charsetConf(c: ConfChain, scope: ConfigScope): CharsetConf {
  const bind = (ref: CharsetRef | undefined): CharsetSetting => {
    if (!ref || ref.kind === 'off') return { kind: 'off' };
    if (ref.kind === 'name') return ref;
    return { kind: 'variable', get: scope.variables.getter(ref.name)! };
  };
  return {
    charset: bind(c.get(charsetSlot)),
    source: bind(c.get(sourceCharsetSlot)),
    override: c.get(overrideCharset),
    types: c.get(charsetTypes) ?? new Set(CHARSET_DEFAULT_TYPES),
    tables: scope.registry(charsetTables),
  };
}

/**
 * What `ngx_http_charset_merge_loc_conf` notes on every server and
 * location (in configuration order), then `ngx_http_charset_postconfiguration`:
 * a level that recodes between two named charsets needs a `charset_map`
 * between them. nginx reports it without a place.
 * @throws ConfigError the missing `charset_map`
 */
export function linkCharsets(cx: CompileContext, servers: readonly LevelNode[]): void {
  const tables = cx.scope.registry(charsetTables);
  for (const node of levelsInOrder(servers)) {
    const c = cx.chain(node);
    const dst = c.get(charsetSlot);
    const src = c.get(sourceCharsetSlot);
    if (dst?.kind === 'name' && src?.kind === 'name' && dst.index !== src.index) tables.needRecode(src.index, dst.index);
  }
  const missing = tables.link();
  if (missing) throw new ConfigError('invalid-value', missing);
}
