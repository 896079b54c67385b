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

/** One level of the search: a tree being searched, and where its search stands. */
interface Level {
  readonly tree: LocationTree;
  /** `prefix`: its longest prefix's nested locations are being searched; `regex`: a matching regex location's. */
  step: 'start' | 'prefix' | 'regex';
  result: LocationMatch;
  noRegex: boolean;
  regexLoc: CompiledLocation | undefined;
}

/**
 * Finds the location for `uri` in `tree`. Regex captures and named captures
 * of the matching location are stored in `r`. nginx recurses into nested
 * locations; this keeps the levels on an explicit stack, so any nesting
 * depth the configuration accepts is searched without recursion.
 */
export function findLocation(tree: LocationTree | undefined, uri: string, r: HttpRequestState): LocationMatch {
  if (!tree) return NONE;
  const stack: Level[] = [{ tree, step: 'start', result: NONE, noRegex: false, regexLoc: undefined }];
  // what the level just left returned to the one below it
  let returned: LocationMatch = NONE;
  for (;;) {
    const level = stack[stack.length - 1]!;
    const answer = searchLevel(level, uri, r, returned);
    if ('enter' in answer) {
      stack.push({ tree: answer.enter, step: 'start', result: NONE, noRegex: false, regexLoc: undefined });
      continue;
    }
    stack.pop();
    if (stack.length === 0) return answer;
    returned = answer;
  }
}

/**
 * Runs one level of the search until it has an answer or must search a
 * nested tree first (`enter`); `inner` is what that nested search found.
 */
function searchLevel(level: Level, uri: string, r: HttpRequestState, inner: LocationMatch): LocationMatch | { readonly enter: LocationTree } {
  const tree = level.tree;
  if (level.step === 'regex') {
    return inner.location ? { ...inner, final: true } : { location: level.regexLoc, autoRedirect: false, final: true };
  }
  if (level.step === 'start') {
    const exact = tree.exact.get(uri);
    if (exact) return { location: exact, autoRedirect: false, final: true };
    const { found: prefix, end } = walk(tree.prefixes, uri);
    if (prefix?.name !== uri) {
      const slashed = end?.children.get('/')?.location ?? tree.exact.get(uri + '/');
      if (slashed?.autoRedirect && slashed.name === uri + '/') return { location: slashed, autoRedirect: true, final: true };
    }
    level.result = prefix ? { location: prefix, autoRedirect: false, final: false } : NONE;
    level.noRegex = prefix?.match === 'prefix-no-regex';
    if (prefix?.nested) {
      level.step = 'prefix';
      return { enter: prefix.nested };
    }
  } else {
    if (inner.final) return inner;
    if (inner.location) level.result = inner;
  }
  if (!level.noRegex) {
    for (const loc of tree.regexes) {
      const m = loc.regex!.exec(uri);
      if (!m) continue;
      r.captures = m;
      for (const c of loc.namedCaptures) r.vars[c.index] = m.groups?.[c.name] ?? '';
      if (!loc.nested) return { location: loc, autoRedirect: false, final: true };
      level.step = 'regex';
      level.regexLoc = loc;
      return { enter: loc.nested };
    }
  }
  return level.result;
}
