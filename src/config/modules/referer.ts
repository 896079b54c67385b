/**
 * The referer module (`src/http/modules/ngx_http_referer_module.c`):
 * `valid_referers` lists the Referer headers a level accepts, and
 * `$invalid_referer` is `1` for a request whose Referer is not among them,
 * empty otherwise.
 *
 * - `none`: no Referer header; `blocked`: a Referer that does not start with
 *   `http://` or `https://` (a firewall or proxy removed the scheme);
 * - `server_names`: the names of the enclosing server block (its regex names
 *   as regexes; the empty name for a server without `server_name`);
 * - a host name, `*.example.com`, `.example.com` or `www.example.*`, with an
 *   optional URI prefix (`example.com/galleries/`), compared with the host
 *   of the Referer (lowercased, up to `:` or `/`);
 * - `~REGEX`: matched, case-insensitively, against the Referer after its
 *   scheme; the regex names of `server_names` are matched against the
 *   lowercased host (as nginx 1.30 does: checked side by side).
 *
 * Merged as `ngx_http_referer_merge_conf` does: a level without
 * `valid_referers` takes everything from above; a level with it keeps its
 * own names and flags, and the regexes from above when it has none.
 */
import { ConfigError } from '../../errors.js';
import { SRV_LOC } from '../flags.js';
import { compileRegex } from '../regex.js';
import type { RefererConf, RefererRegex, RefererUriPart, RequestView } from '../request-view.js';
import type { VariableDef } from '../variables.js';
import { fail, slot, type ConfChain, type DirectiveSpec, type LevelConf } from '../spec.js';
import { serverNames } from './http-core.js';

const MODULE = 'ngx_http_referer_module';

/** What the `valid_referers` directives of one level listed (`ngx_http_referer_conf_t` before merging). */
interface RefererKeys {
  noReferer: boolean;
  blockedReferer: boolean;
  readonly exact: Map<string, RefererUriPart>;
  readonly heads: [string, RefererUriPart][];
  readonly tails: [string, RefererUriPart][];
  readonly regexes: RefererRegex[];
  /** `server_names`: the server block whose names are added as the level is merged. */
  serverNamesOf: LevelConf | undefined;
}

/** The level's own `valid_referers` entries, gathered over its directives. */
const refererKeys = slot<RefererKeys | undefined>('valid_referers', undefined, false);

/**
 * Adds a host name or wildcard as `ngx_hash_add_key` with
 * `NGX_HASH_WILDCARD_KEY` does: lowercased; `.example.com` also adds
 * `example.com`; one `*` only, as the first or last label.
 * @throws DirectiveFailure `invalid hostname or wildcard "NAME"`, `conflicting parameter "NAME"`
 */
function addHost(keys: RefererKeys, name: string, uri: RefererUriPart): void {
  const stars = name.split('*').length - 1;
  if (stars > 1 || name.includes('..') || name.includes('\0')) fail(`invalid hostname or wildcard "${name}"`);
  const low = name.toLowerCase();
  const conflict = (): never => fail(`conflicting parameter "${low}"`);
  const addWildcard = (list: [string, RefererUriPart][], key: string): void => {
    if (list.some(([k]) => k === key)) conflict();
    list.push([key, uri]);
  };
  if (low.length > 1 && low.startsWith('.')) {
    if (keys.exact.has(low.slice(1)) || keys.heads.some(([k]) => k === low)) conflict();
    keys.exact.set(low.slice(1), uri);
    keys.heads.push([low, uri]);
    return;
  }
  if (low.length > 2 && low.startsWith('*.')) return addWildcard(keys.heads, low.slice(1));
  if (low.length > 2 && low.endsWith('.*')) return addWildcard(keys.tails, low.slice(0, -1));
  if (stars > 0) fail(`invalid hostname or wildcard "${name}"`);
  if (keys.exact.has(low)) conflict();
  keys.exact.set(low, uri);
}

/** Adds a `~REGEX` entry (`ngx_http_add_regex_referer`), always caseless. */
function addRegex(keys: RefererKeys, word: string): void {
  if (word.length === 1) fail(`empty regex in "${word}"`);
  keys.regexes.push({ regex: compileRegex(word.slice(1), true).regex, subject: 'referer' });
}

export const refererDirectives: readonly DirectiveSpec[] = [
  {
    name: 'valid_referers', module: MODULE, contexts: SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: (d, cx) => {
      let keys = cx.level.own(refererKeys)?.value;
      if (!keys) {
        keys = { noReferer: false, blockedReferer: false, exact: new Map(), heads: [], tails: [], regexes: [], serverNamesOf: undefined };
        cx.level.set(refererKeys, keys, d.loc);
      }
      for (const word of d.args) {
        if (word === '') fail('invalid referer ""');
        if (word === 'none') keys.noReferer = true;
        else if (word === 'blocked') keys.blockedReferer = true;
        else if (word === 'server_names') keys.serverNamesOf = cx.enclosing('server');
        else if (word.startsWith('~')) addRegex(keys, word);
        else {
          const slash = word.indexOf('/');
          addHost(keys, slash === -1 ? word : word.slice(0, slash), slash === -1 ? null : word.slice(slash));
        }
      }
    },
  },
];

/**
 * The level's entries with those of `server_names`: every name of the
 * server block, wherever its `server_name` stands, or the empty name of a
 * server without one (nginx 1.30 adds them as it merges, after the server's
 * own merge gave it its default name).
 */
function withServerNames(keys: RefererKeys): RefererKeys {
  if (!keys.serverNamesOf) return keys;
  const out: RefererKeys = {
    ...keys, exact: new Map(keys.exact), heads: [...keys.heads], tails: [...keys.tails], regexes: [...keys.regexes], serverNamesOf: undefined,
  };
  const names = keys.serverNamesOf.ownList(serverNames)?.map((e) => e.value) ?? [{ name: '', regex: undefined }];
  for (const { name, regex } of names) {
    if (regex) out.regexes.push({ regex: regex.regex, subject: 'host' });
    else if (!hasHost(out, name)) addHost(out, name, null);
  }
  return out;
}

/** Whether a name, or the wildcard it is, is among the entries already. */
function hasHost(keys: RefererKeys, name: string): boolean {
  if (name.startsWith('*.')) return keys.heads.some(([k]) => k === name.slice(1));
  if (name.startsWith('.')) return keys.exact.has(name.slice(1)) || keys.heads.some(([k]) => k === name);
  if (name.endsWith('.*')) return keys.tails.some(([k]) => k === name.slice(0, -1));
  return keys.exact.has(name);
}

/** Merged settings by level: every location below a level reads the same. */
const mergedByLevel = new WeakMap<LevelConf, RefererConf | undefined>();

/**
 * The `valid_referers` settings of a level, merged; undefined when no level
 * of the chain has any.
 * @throws ConfigError `the "none" or "blocked" referers are specified in the
 *   "valid_referers" directive without any valid referer` (without a place:
 *   nginx finds it as it merges)
 */
export function refererConf(c: ConfChain): RefererConf | undefined {
  if (mergedByLevel.has(c.level)) return mergedByLevel.get(c.level);
  const prev = c.parent ? refererConf(c.parent) : undefined;
  const ownKeys = c.level.own(refererKeys)?.value;
  const own = ownKeys && withServerNames(ownKeys);
  let merged = prev;
  if (own) {
    if ((own.noReferer || own.blockedReferer) && own.exact.size === 0 && own.heads.length === 0 && own.tails.length === 0) {
      throw new ConfigError(
        'invalid-value',
        'the "none" or "blocked" referers are specified in the "valid_referers" directive without any valid referer',
      );
    }
    merged = {
      noReferer: own.noReferer,
      blockedReferer: own.blockedReferer,
      exact: own.exact,
      heads: [...own.heads].sort((a, b) => b[0].length - a[0].length),
      tails: [...own.tails].sort((a, b) => b[0].length - a[0].length),
      regexes: own.regexes.length > 0 ? own.regexes : prev?.regexes ?? [],
    };
  }
  mergedByLevel.set(c.level, merged);
  return merged;
}

/** The host's URI part, found in the exact names, then `*.`/`.` heads, then `.*` tails (`ngx_hash_find_combined`). */
function findHost(c: RefererConf, host: string): RefererUriPart | undefined {
  const hit = c.exact.get(host);
  if (hit !== undefined) return hit;
  for (const [suffix, uri] of c.heads) if (host.length > suffix.length && host.endsWith(suffix)) return uri;
  for (const [prefix, uri] of c.tails) if (host.length > prefix.length && host.startsWith(prefix)) return uri;
  return undefined;
}

/** `$invalid_referer` (`ngx_http_referer_variable`): `1` when invalid, empty when valid. */
function invalidReferer(r: RequestView): string {
  const c = r.loc.referers;
  if (!c || (c.exact.size === 0 && c.heads.length === 0 && c.tails.length === 0 && c.regexes.length === 0)) return '';
  const referer = r.headers.referer;
  if (referer === undefined) return c.noReferer ? '' : '1';
  const lower = referer.slice(0, 8).toLowerCase();
  const skip = referer.length < 'http://i.ru'.length ? 0 : lower.startsWith('http://') ? 7 : lower.startsWith('https://') ? 8 : 0;
  if (skip === 0) return c.blockedReferer ? '' : '1';
  let end = skip;
  while (end < referer.length && referer[end] !== '/' && referer[end] !== ':') end++;
  if (end - skip >= 256) return '1';
  const host = referer.slice(skip, end).toLowerCase();
  const uri = findHost(c, host);
  if (uri !== undefined) {
    if (uri === null) return '';
    const slash = referer.indexOf('/', end);
    return slash !== -1 && referer.startsWith(uri, slash) ? '' : '1';
  }
  const rest = referer.slice(skip);
  for (const { regex, subject } of c.regexes) {
    regex.lastIndex = 0;
    if (regex.test(subject === 'host' ? host : rest)) return '';
  }
  return '1';
}

/** `$invalid_referer`: known in every configuration (empty where no level has `valid_referers`), and changeable. */
export const refererVariables: readonly VariableDef[] = [{ name: 'invalid_referer', changeable: true, get: invalidReferer }];
