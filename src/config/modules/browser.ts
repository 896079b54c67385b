/**
 * The browser module (`src/http/modules/ngx_http_browser_module.c`, built
 * into nginx by default): `$modern_browser` and `$ancient_browser` sort a
 * request by its `User-Agent`, `$msie` is `1` for MSIE.
 *
 * - `modern_browser NAME VERSION`: NAME (`msie`, `gecko`, `opera`,
 *   `safari`, `konqueror`, any case) is modern from VERSION on (`X`, `X.X`,
 *   `X.X.X` or `X.X.X.X`, compared part by part as nginx's scaled number),
 *   ancient before; the first browser of the list (Opera, MSIE, Gecko,
 *   Safari, Konqueror) whose mark `User-Agent` has decides.
 *   `modern_browser unlisted`: a browser the list does not name (or a
 *   request without `User-Agent`) is modern, unless `ancient_browser` says
 *   otherwise.
 * - `ancient_browser WORD …`: a `User-Agent` containing WORD is ancient;
 *   `netscape4` stands for `Mozilla/1` to `Mozilla/4`.
 * - `modern_browser_value`, `ancient_browser_value`: the variables' value
 *   (`1` by default); the other variable is then empty.
 *
 * Merged as `ngx_http_browser_merge_conf` does: the modern list and
 * `unlisted` are taken from above together, by a level with neither; so
 * are the ancient list and `netscape4`; the values one by one. Without any
 * of the directives every browser is ancient.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import type { BrowserConf, ModernBrowser, RequestView } from '../request-view.js';
import { fail, listSlot, slot, type ConfChain, type DirectiveSpec, type LevelConf } from '../spec.js';
import type { VariableDef } from '../variables.js';
import { browserOf } from '../../user-agent.js';

const MODULE = 'ngx_http_browser_module';

/** Where `ngx_http_browser` looks for each browser name (`ngx_http_modern_browser_masks`). */
interface BrowserMask {
  /** Bytes of `User-Agent` the search for `mark` skips. */
  readonly skip: number;
  /** What is searched for. */
  readonly mark: string;
  /** Bytes from the mark to the version. */
  readonly add: number;
}

/** The masks by browser name, in nginx's order: a level's list is sorted by it (Opera first, as its `User-Agent` may say MSIE). */
const MASKS: ReadonlyMap<string, BrowserMask> = new Map([
  ['opera', { skip: 0, mark: 'Opera', add: 'Opera '.length }],
  ['msie', { skip: 'Mozilla/4.0 (compatible; '.length, mark: 'MSIE ', add: 'MSIE '.length }],
  ['gecko', { skip: 'Mozilla/5.0 ('.length, mark: 'rv:', add: 'rv:'.length }],
  ['safari', { skip: 'Mozilla/5.0 ('.length, mark: 'Safari/', add: 'Safari/'.length }],
  ['konqueror', { skip: 'Mozilla/5.0 (compatible; '.length, mark: 'Konqueror/', add: 'Konqueror/'.length }],
]);

const OPERA = MASKS.get('opera')!;
const MARK_ORDER: readonly string[] = [...MASKS.values()].map((m) => m.mark);

/**
 * The version nginx gives Opera when the list does not name it (Opera's
 * `User-Agent` may say MSIE): only an Opera past 4000.99.99.99 reaches it.
 */
const UNREACHABLE_OPERA = 4001000000n;

const modernBrowsers = listSlot<ModernBrowser>('modern_browser');
const ancientBrowsers = listSlot<string>('ancient_browser');
const modernUnlisted = slot('modern_browser unlisted', false, false);
const netscape4 = slot('ancient_browser netscape4', false, false);
const modernValue = slot('modern_browser_value', '1');
const ancientValue = slot('ancient_browser_value', '1');

/** `ngx_uint_t` arithmetic: nginx's version numbers wrap at 2^64. */
const u64 = (n: bigint): bigint => BigInt.asUintN(64, n);

/**
 * A `modern_browser` version as nginx scales it: each part a hundredth of
 * the one before, the first times 1,000,000 (`4000.99.99.99` is the most
 * that keeps apart); undefined for a character other than digits and dots.
 */
function parseVersion(text: string): bigint | undefined {
  let version = 0n;
  let part = 0n;
  let scale = 1000000n;
  for (const c of text) {
    if (c >= '0' && c <= '9') part = u64(part * 10n + BigInt(c.charCodeAt(0) - 48));
    else if (c === '.') {
      version = u64(version + part * scale);
      part = 0n;
      scale /= 100n;
    } else return undefined;
  }
  return u64(version + part * scale);
}

export const browserDirectives: readonly DirectiveSpec[] = [
  {
    name: 'modern_browser', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    set: (d, cx) => {
      const [name, version] = d.args as [string, string?];
      if (version === undefined) {
        // nginx fails here without a message (the handler's NGX_CONF_ERROR)
        if (name !== 'unlisted') fail(`invalid parameter "${name}" in "modern_browser" directive, it must be "unlisted" or a browser name and a version`);
        cx.level.replace(modernUnlisted, true, d.loc);
        return;
      }
      const mask = MASKS.get(name.toLowerCase());
      if (!mask) fail(`unknown browser name "${name}"`);
      const parsed = parseVersion(version);
      if (parsed === undefined) fail(`invalid browser version "${version}"`);
      cx.level.append(modernBrowsers, { ...mask, version: parsed }, d.loc);
    },
  },
  {
    name: 'ancient_browser', module: MODULE, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: (d, cx) => {
      for (const word of d.args) {
        if (word === 'netscape4') cx.level.replace(netscape4, true, d.loc);
        else cx.level.append(ancientBrowsers, word, d.loc);
      }
    },
  },
  {
    name: 'modern_browser_value', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.replace(modernValue, d.args[0]!, d.loc),
  },
  {
    name: 'ancient_browser_value', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.replace(ancientValue, d.args[0]!, d.loc),
  },
];

/** The lists and flags of a level once merged (`ngx_http_browser_conf_t` after `ngx_http_browser_merge_conf`). */
interface BrowserLists {
  readonly modern: readonly ModernBrowser[];
  readonly unlisted: boolean;
  readonly ancient: readonly string[];
  readonly netscape4: boolean;
}

const NO_LISTS: BrowserLists = { modern: [], unlisted: false, ancient: [], netscape4: false };

/** `mergedLists` of each level, made once (each level's merge reads its parent's). */
const mergedByLevel = new WeakMap<LevelConf, BrowserLists>();

/**
 * `ngx_http_browser_merge_conf`: a level with neither `modern_browser NAME
 * VERSION` nor `unlisted` takes both from above, a level with either keeps
 * its own (no list with `unlisted` alone); the same for `ancient_browser`
 * and `netscape4`. An own modern list is sorted by browser, Opera first
 * (the first browser whose mark `User-Agent` has decides), Opera added
 * with an unreachable version when not listed.
 */
function mergedLists(c: ConfChain): BrowserLists {
  const known = mergedByLevel.get(c.level);
  if (known) return known;
  const prev = c.parent ? mergedLists(c.parent) : NO_LISTS;
  const ownModern = c.level.ownList(modernBrowsers)?.map((e) => e.value);
  const ownUnlisted = c.level.own(modernUnlisted) !== undefined;
  const ownAncient = c.level.ownList(ancientBrowsers)?.map((e) => e.value);
  const ownNetscape4 = c.level.own(netscape4) !== undefined;
  let modern = prev.modern;
  let unlisted = prev.unlisted;
  if (ownModern || ownUnlisted) {
    unlisted = ownUnlisted;
    modern = [];
    if (ownModern) {
      const listed = ownModern.some((b) => b.mark === OPERA.mark) ? ownModern : [...ownModern, { ...OPERA, version: UNREACHABLE_OPERA }];
      modern = listed.sort((a, b) => MARK_ORDER.indexOf(a.mark) - MARK_ORDER.indexOf(b.mark));
    }
  }
  const keepAncient = !ownAncient && !ownNetscape4;
  const merged: BrowserLists = {
    modern,
    unlisted,
    ancient: keepAncient ? prev.ancient : ownAncient ?? [],
    netscape4: keepAncient ? prev.netscape4 : ownNetscape4,
  };
  mergedByLevel.set(c.level, merged);
  return merged;
}

/** A level's browser settings: its merged lists and the values (`modern_browser_value`, `ancient_browser_value`, `1` by default). */
export function browserConf(c: ConfChain): BrowserConf {
  return { ...mergedLists(c), modernValue: c.get(modernValue), ancientValue: c.get(ancientValue) };
}

/**
 * Whether `ua` has the version a listed browser needs (`ngx_http_browser`'s
 * loop over `modern_browsers`); undefined when `ua` does not name it.
 */
function listedModern(ua: string, b: ModernBrowser): boolean | undefined {
  if (b.skip >= ua.length) return undefined;
  const at = ua.indexOf(b.mark, b.skip);
  if (at === -1) return undefined;
  let i = at + b.add;
  if (i >= ua.length) return undefined;
  let version = 0n;
  let part = 0n;
  let scale = 1000000n;
  for (; i < ua.length; i++) {
    const c = ua.charCodeAt(i);
    if (c >= 48 && c <= 57) part = u64(part * 10n + BigInt(c - 48));
    else if (c === 46) {
      version = u64(version + part * scale);
      if (version > b.version) return true;
      part = 0n;
      scale /= 100n;
    } else break;
  }
  return u64(version + part * scale) >= b.version;
}

/**
 * `ngx_http_browser`: whether the request's browser is modern (else
 * ancient) for the level's settings. The first listed browser whose mark
 * `User-Agent` has (with a version after it) decides.
 */
function isModern(conf: BrowserConf, ua: string | undefined): boolean {
  if (ua === undefined) return conf.unlisted;
  if (conf.modern.length > 0) {
    for (const b of conf.modern) {
      const modern = listedModern(ua, b);
      if (modern !== undefined) return modern;
    }
    if (!conf.unlisted) return false;
  }
  if (conf.netscape4 && ua.length > 'Mozilla/4.72 '.length && ua.startsWith('Mozilla/') && ua[8]! > '0' && ua[8]! < '5') return false;
  if (conf.ancient.some((word) => ua.includes(word))) return false;
  return conf.unlisted;
}

const userAgent = (r: RequestView): string | undefined => {
  const ua = r.headers['user-agent'];
  return Array.isArray(ua) ? ua[0] : ua;
};

export const browserVariables: readonly VariableDef[] = [
  { name: 'msie', changeable: true, get: (r) => (browserOf(userAgent(r)).msie ? '1' : '') },
  { name: 'modern_browser', changeable: true, get: (r) => (isModern(r.loc.browser, userAgent(r)) ? r.loc.browser.modernValue : '') },
  { name: 'ancient_browser', changeable: true, get: (r) => (isModern(r.loc.browser, userAgent(r)) ? '' : r.loc.browser.ancientValue) },
];
