/**
 * Location selection (`ngx_http_core_find_location` and
 * `ngx_http_core_find_static_location` in `src/http/ngx_http_core_module.c`):
 * an exact `=` match ends the search; else the longest prefix is remembered
 * and its nested locations searched; a `^~` prefix skips the regexes;
 * otherwise `~`/`~*` locations are tried in configuration order and the
 * first match wins (its nested locations are searched in turn); failing that,
 * the longest prefix is used. A URI that lacks only the final `/` of a
 * proxied prefix location is redirected there (nginx's auto_redirect).
 */
import type { CompiledLocation, LocationTree, PrefixNode } from '../config/route-table.js';
import type { HttpRequestState } from './request.js';

/** What the search found. */
export interface LocationMatch {
  readonly location: CompiledLocation | undefined;
  /** nginx answers 301 to `URI/` (the location is the one with the slash). */
  readonly autoRedirect: boolean;
  /** An exact or regex match, or a redirect: enclosing levels do not search further. */
  readonly final: boolean;
}

const NONE: LocationMatch = { location: undefined, autoRedirect: false, final: false };

/** The longest prefix location in a trie, and the trie node reached for the whole URI. */
function walk(root: PrefixNode, uri: string): { found: CompiledLocation | undefined; end: PrefixNode | undefined } {
  let node: PrefixNode | undefined = root;
  let found = node.location;
  for (let i = 0; i < uri.length && node; i++) {
    node = node.children.get(uri[i]!);
    if (node?.location) found = node.location;
  }
  return { found, end: node };
}

/**
 * Finds the location for `uri` in `tree`. Regex captures and named captures
 * of the matching location are stored in `r`.
 */
export function findLocation(tree: LocationTree | undefined, uri: string, r: HttpRequestState): LocationMatch {
  if (!tree) return NONE;
  const exact = tree.exact.get(uri);
  if (exact) return { location: exact, autoRedirect: false, final: true };
  const { found: prefix, end } = walk(tree.prefixes, uri);
  if (prefix?.name !== uri) {
    const slashed = end?.children.get('/')?.location ?? tree.exact.get(uri + '/');
    if (slashed?.autoRedirect && slashed.name === uri + '/') return { location: slashed, autoRedirect: true, final: true };
  }
  let result: LocationMatch = prefix ? { location: prefix, autoRedirect: false, final: false } : NONE;
  const noRegex = prefix?.match === 'prefix-no-regex';
  if (prefix?.nested) {
    const inner = findLocation(prefix.nested, uri, r);
    if (inner.final) return inner;
    if (inner.location) result = inner;
  }
  if (!noRegex) {
    for (const loc of tree.regexes) {
      const m = loc.regex!.exec(uri);
      if (!m) continue;
      r.captures = m;
      for (const c of loc.namedCaptures) r.vars[c.index] = m.groups?.[c.name] ?? '';
      const inner = loc.nested ? findLocation(loc.nested, uri, r) : NONE;
      return inner.location ? { ...inner, final: true } : { location: loc, autoRedirect: false, final: true };
    }
  }
  return result;
}
