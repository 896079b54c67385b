/**
 * Semantic lint rules about how nginx picks a location and redirects within
 * a server: locations no request can reach, `try_files` and `error_page`
 * targets that fail in the same way again, and `auth_request` subrequest
 * locations that clients can request too. They follow
 * `ngx_http_core_find_location`, `ngx_http_try_files_handler`,
 * `ngx_http_internal_redirect` (`src/http/ngx_http_core_module.c`) and
 * `ngx_http_send_error_page` (`src/http/ngx_http_special_response.c`).
 */
import { statSync } from 'node:fs';
import type { Directive } from '../../../parser/ast.js';
import { ruleDocUrl, type LintRule, type LintSubject, type RuleFinding } from '../rule.js';
import { at, blocksNamed, httpBlocks, inherited, locationName, own, Routes, serverOf, shown, type Block } from './semantic-model.js';
import { regexCovers, regexCoversPrefix, regexLiteral } from './semantic-regex.js';

/** The levels that hold `location` blocks: servers and locations. */
function locationLevels(http: Block): Block[] {
  return [...blocksNamed(http, 'server'), ...blocksNamed(http, 'location')];
}

/** Whether a location modifier is a regex's (`~`, `~*`). */
const isRegex = (m: string): boolean => m === '~' || m === '~*';

/** The `location` blocks of a level with their modifiers and names. */
function locationsOf(level: Block): ({ block: Block } & ReturnType<typeof locationName>)[] {
  return level.children.filter((b) => b.directive.name === 'location').map((b) => ({ block: b, ...locationName(b.directive) }));
}

/**
 * The regex locations nginx tries for a URI whose longest prefix at `level`
 * is a plain prefix: the level's own, then, while the level is itself a
 * plain prefix location, those of the level around it (a nested search
 * that ends on a prefix lets the enclosing level try its regexes).
 */
function regexesTried(level: Block): ({ block: Block } & ReturnType<typeof locationName>)[] {
  const out = locationsOf(level).filter((n) => isRegex(n.modifier));
  for (let l = level; l.directive.name === 'location' && locationName(l.directive).modifier === '' && l.parent; l = l.parent) {
    out.push(...locationsOf(l.parent).filter((n) => isRegex(n.modifier)));
  }
  return out;
}

/** Reports, for one level, each location that no URI can select. */
function shadowedAt(level: Block, report: (f: RuleFinding) => void): void {
  const names = locationsOf(level);
  const regexes = names.filter((n) => isRegex(n.modifier));
  const tried = regexesTried(level);
  for (const p of names) {
    if (p.modifier !== '' || p.block.children.some((c) => c.directive.name === 'location')) continue;
    const r = tried.find((x) => regexCoversPrefix(x.name, x.modifier === '~*', p.name));
    if (!r) continue;
    report({
      message: `location ${shown(p.block.directive)} is never chosen: every URI it matches also matches the regex location ${shown(r.block.directive)} at ${at(r.block.directive.loc)}, and nginx tries regex locations after the longest prefix unless that prefix is "^~"`,
      loc: p.block.directive.loc,
    });
  }
  for (const [i, r] of regexes.entries()) {
    const earlier = regexes.slice(0, i).find((e) => regexCovers(e.name, e.modifier === '~*', r.name, r.modifier === '~*'));
    if (earlier) {
      report({
        message: `regex location ${shown(r.block.directive)} is never chosen: the regex location ${shown(earlier.block.directive)} at ${at(earlier.block.directive.loc)} comes first and matches every URI it matches`,
        loc: r.block.directive.loc,
      });
      continue;
    }
    const lit = r.modifier === '~' ? regexLiteral(r.name) : undefined;
    if (!lit?.anchored) continue;
    const stop = names.find((q) => q.modifier === '^~' && lit.literal.startsWith(q.name)
      && !names.some((o) => o.modifier === '' && o.name.length > q.name.length && o.name.startsWith(q.name)));
    if (!stop) continue;
    report({
      message: `regex location ${shown(r.block.directive)} is never chosen: every URI it matches starts with "${stop.name}", whose location ${shown(stop.block.directive)} at ${at(stop.block.directive.loc)} stops the search for regex locations`,
      loc: r.block.directive.loc,
    });
  }
}

/** `location-shadowed`: a location that no request can select. */
export const locationShadowed: LintRule = {
  code: 'location-shadowed',
  severity: 'warning',
  title: 'A location that no request can reach',
  explanation:
    'nginx picks a location in a fixed order (ngx_http_core_find_location): an exact "=" match, else the longest prefix; unless that prefix is "^~", '
    + 'the regex locations are then tried in the order they are written and the first that matches wins. So a plain prefix location is never used when '
    + 'a regex at the same level (or around a plain prefix it is nested in) matches every URI that starts with the prefix (location /static/ beside '
    + 'location ~ ^/st), a regex location is never used '
    + 'when an earlier regex matches everything it matches, and a case-sensitive regex is never used when every URI it matches starts with a "^~" prefix. '
    + 'Fix: make the prefix win with "location ^~ /static/", narrow or reorder the regexes, or remove the dead location.',
  docUrl: ruleDocUrl('location-shadowed'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    for (const http of httpBlocks(subject.nodes)) for (const level of locationLevels(http)) shadowedAt(level, report);
  },
};

/** The URI part (before `?`) of a redirect target, or undefined when it holds variables. */
function literalUri(target: string): string | undefined {
  const path = target.split('?')[0]!;
  return path.includes('$') ? undefined : path;
}

/**
 * Whether an item of `try_files`, evaluated for `uri`, can be found: true
 * when it names an existing file (or directory, written with a final `/`)
 * under an absolute `root` without variables, or when that cannot be known
 * (variables other than `$uri`, an `alias`, a relative root, `--offline`).
 * `uri` is undefined for a named location, where `$uri` keeps the request's URI.
 */
function mayExist(block: Block, item: string, uri: string | undefined, offline: boolean): boolean {
  if (offline || (uri === undefined && item.includes('$'))) return true;
  const testDir = item.endsWith('/');
  const value = uri === undefined ? item.replace(/\/$/, '') : item.replace(/\$\{?(uri|document_uri)\}?(?![A-Za-z0-9_])/g, uri).replace(/\/$/, '');
  if (value.includes('$')) return true;
  if (inherited(block, 'alias').length > 0) return true;
  const root = inherited(block, 'root')[0]?.args[0];
  if (!root?.startsWith('/') || root.includes('$')) return true;
  try {
    return statSync(root + value).isDirectory() === testDir;
  } catch {
    return false;
  }
}

/** `try-files-loop`: a `try_files` fallback that re-enters the same location. */
export const tryFilesLoop: LintRule = {
  code: 'try-files-loop',
  severity: 'error',
  title: 'try_files falls back to a URI that comes back to the same location',
  explanation:
    'The last parameter of try_files is an internal redirect when it is a URI or @name. When that URI is handled by the same location again and none of '
    + 'the files exists for it either, nginx redirects again and again; after 10 internal redirects it stops with 500 and logs "rewrite or internal '
    + 'redirection cycle while internally redirecting to …". The rule checks the files under an absolute root (not with --offline, where it cannot '
    + 'prove the loop and stays silent). Fix: make the fallback a file that exists, a location that does not use this try_files, or a status: "=404".',
  docUrl: ruleDocUrl('try-files-loop'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    const http = httpBlocks(subject.nodes);
    const routes = new Routes(subject.table, http);
    const seen = new Set<Directive>();
    for (const h of http) {
      for (const loc of blocksNamed(h, 'location')) {
        const tf = inherited(loc, 'try_files')[0];
        const server = serverOf(loc);
        const compiled = routes.location(loc);
        if (!tf || !server || !compiled || seen.has(tf)) continue;
        const target = literalUri(tf.args[tf.args.length - 1]!);
        if (target === undefined || target.startsWith('=')) continue;
        if (routes.select(server, target) !== compiled) continue;
        const named = target.startsWith('@');
        if (tf.args.slice(0, -1).some((item) => mayExist(loc, item, named ? undefined : target, subject.offline))) continue;
        seen.add(tf);
        report({
          message: `try_files falls back to "${target}", which location ${shown(loc.directive)} at ${at(loc.directive.loc)} handles again with the same try_files, and none of its files exists${named ? '' : ` for "${target}"`}: nginx redirects until it stops with 500 "rewrite or internal redirection cycle"`,
          loc: tf.loc,
        });
      }
    }
  },
};

/** The codes and target of an `error_page` directive. */
function errorPageParts(d: Directive): { codes: number[]; target: string } {
  const codes: number[] = [];
  for (const a of d.args.slice(0, -1)) if (/^\d+$/.test(a)) codes.push(Number(a));
  return { codes, target: d.args[d.args.length - 1]! };
}

/**
 * The status a location answers before doing anything else: its first
 * rewrite-module directive is a bare `return CODE`; undefined otherwise.
 */
function firstReturn(block: Block): { code: number; d: Directive } | undefined {
  for (const d of block.own) {
    if (d.name === 'set') continue;
    if (d.name === 'return' && d.args.length === 1 && /^\d+$/.test(d.args[0]!)) return { code: Number(d.args[0]), d };
    if (d.name === 'return' || d.name === 'rewrite' || d.name === 'if' || d.name === 'break') return undefined;
  }
  return undefined;
}

/** Whether `on` is the value of the `recursive_error_pages` a level inherits. */
function recursive(block: Block): boolean {
  return inherited(block, 'recursive_error_pages')[0]?.args[0]?.toLowerCase() === 'on';
}

/** `error-page-loop`: an error page whose location fails with the same status again. */
export const errorPageLoop: LintRule = {
  code: 'error-page-loop',
  severity: 'warning',
  title: 'error_page sends the request to a location that fails with the same status',
  explanation:
    'error_page CODE URI redirects a failed request to URI internally. When the location of URI answers with that status itself (return 404), nginx does '
    + 'not apply error_page a second time unless recursive_error_pages is on, and sends its own built-in error page: the custom page is never shown. With '
    + 'recursive_error_pages on and an error_page there that leads back to the same location, nginx redirects until its limit of 10 URI changes and '
    + 'then sends the built-in page. Fix: let the error page location serve the page (a file, or return 200/404 with a body), or point error_page at a '
    + 'location that does not fail.',
  docUrl: ruleDocUrl('error-page-loop'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    const http = httpBlocks(subject.nodes);
    const routes = new Routes(subject.table, http);
    const seen = new Set<Directive>();
    for (const h of http) {
      for (const server of blocksNamed(h, 'server')) {
        for (const level of [h, server, ...blocksNamed(server, 'location'), ...blocksNamed(server, 'if')]) {
          for (const d of own(level, 'error_page')) {
            if (seen.has(d) || (level === h && !inherited(server, 'error_page').includes(d))) continue;
            const { codes, target } = errorPageParts(d);
            const uri = literalUri(target);
            if (uri === undefined || !(uri.startsWith('/') || uri.startsWith('@'))) continue;
            const x = routes.select(server, uri);
            const xb = x && routes.blockOf(x);
            const ret = xb && firstReturn(xb);
            if (!xb || !ret || !codes.includes(ret.code)) continue;
            const again = inherited(xb, 'error_page').find((e) => errorPageParts(e).codes.includes(ret.code));
            const againUri = again && literalUri(errorPageParts(again).target);
            const loops = again !== undefined && againUri !== undefined && routes.select(server, againUri) === x;
            if (recursive(xb) && !loops) continue;
            seen.add(d);
            const what = recursive(xb)
              ? `recursive_error_pages is on and error_page at ${at(again!.loc)} sends it there again, so nginx redirects until its limit of 10 URI changes, then sends its built-in ${ret.code} page`
              : `nginx then sends its built-in ${ret.code} page, as error_page does not apply to the error page's own failure without recursive_error_pages`;
            report({
              message: `error_page ${ret.code} redirects to "${uri}", whose location ${shown(xb.directive)} at ${at(xb.directive.loc)} answers ${ret.code} itself (return at ${at(ret.d.loc)}): ${what}`,
              loc: d.loc,
            });
          }
        }
      }
    }
  },
};

/** Whether a level's access rules (those of the nearest level with any `allow`/`deny`) start with `deny all`: no client gets in. */
function deniesAll(block: Block): boolean {
  for (let b: Block | undefined = block; b; b = b.parent) {
    const rules = b.own.filter((d) => d.name === 'allow' || d.name === 'deny');
    if (rules.length > 0) return rules[0]!.name === 'deny' && rules[0]!.args[0] === 'all';
  }
  return false;
}

/** `auth-request-not-internal`: the subrequest location of `auth_request` is open to clients. */
export const authRequestNotInternal: LintRule = {
  code: 'auth-request-not-internal',
  severity: 'warning',
  title: 'auth_request goes to a location that clients can request directly',
  explanation:
    'auth_request URI makes a subrequest to URI and lets the request through when it answers 2xx. The location that answers it is an ordinary location: '
    + 'unless it is marked "internal", clients can request URI themselves and see what the authorization service answers (tokens, user names, headers '
    + 'it sets for auth_request_set), or send requests to that service with their own headers. A location whose access rules start with "deny all" '
    + 'is not reported. Fix: add "internal;" to the location of the subrequest (subrequests may use internal locations).',
  docUrl: ruleDocUrl('auth-request-not-internal'),
  check(subject: LintSubject, report: (f: RuleFinding) => void): void {
    const http = httpBlocks(subject.nodes);
    const routes = new Routes(subject.table, http);
    const seen = new Set<Directive>();
    for (const h of http) {
      for (const server of blocksNamed(h, 'server')) {
        for (const level of [server, ...blocksNamed(server, 'location'), ...blocksNamed(server, 'if')]) {
          const d = inherited(level, 'auth_request')[0];
          if (!d || seen.has(d) || d.args[0] === 'off') continue;
          const uri = literalUri(d.args[0]!);
          const x = uri === undefined ? undefined : routes.select(server, uri);
          const xb = x && routes.blockOf(x);
          if (!x || !xb || x.conf.internal || deniesAll(xb)) continue;
          seen.add(d);
          report({
            message: `auth_request "${uri}" is answered by location ${shown(xb.directive)} at ${at(xb.directive.loc)}, which is not internal: clients can request "${uri}" directly; add "internal;" to it`,
            loc: d.loc,
          });
        }
      }
    }
  },
};
