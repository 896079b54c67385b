/**
 * Inheritance loss of array directives (`add_header`, `add_trailer`, `proxy_set_header`, `grpc_set_header`,
 * `proxy_hide_header`, `fastcgi_param`): a level that writes one of them
 * inherits none of its parents' (nginx's merge of an array: the child's
 * array, else the parent's, `ngx_http_headers_merge_conf`,
 * `ngx_http_proxy_merge_loc_conf`, `ngx_http_fastcgi_merge_loc_conf`). The
 * rule names each entry set above that the level drops, with where it was
 * set, and speaks only where the loss reaches a response or an upstream.
 * A level under `add_header_inherit` (`add_trailer_inherit`) `merge` keeps
 * the entries above, and one under `off` drops them by choice: neither is
 * reported.
 */
import type { LevelNode } from '../../check.js';
import { addHeaderInherit, addHeaders, addTrailerInherit, addTrailers, type InheritRule } from '../../modules/headers.js';
import type { CgiSlots } from '../../modules/cgi-upstream.js';
import { FASTCGI_SLOTS } from '../../modules/fastcgi.js';
import { SCGI_SLOTS } from '../../modules/scgi.js';
import { UWSGI_SLOTS } from '../../modules/uwsgi.js';
import { proxyHideHeader, proxySetHeader } from '../../modules/proxy.js';
import { grpcSetHeader } from '../../modules/grpc.js';
import type { ListSlot, Slot } from '../../spec.js';
import { ruleDocUrl, type LintRule, type LintSubject, type RuleFinding } from '../rule.js';
import { levelsOf, levelTitle, ownDirectives, where } from './security-levels.js';
import type { SourceLoc } from '../../../source-loc.js';

/** One array directive whose inheritance is checked. */
interface ArrayDirective<T> {
  readonly directive: string;
  readonly slot: ListSlot<T>;
  /** The name an entry sets (header or parameter). */
  readonly nameOf: (value: T) => string;
  /** Whether names compare case-insensitively (header names) or exactly (FastCGI parameters). */
  readonly caseless: boolean;
  /** The content handler the loss matters for (`proxy_pass`, `fastcgi_pass`), or undefined: every response. */
  readonly handler: string | undefined;
  /** What happens to the lost entries, ending the sentence after `is`/`are`. */
  readonly consequence: string;
  /** Lost names (keys) not reported when the level sets the name they map to: the level has decided on them. */
  readonly decidedBy?: ReadonlyMap<string, string>;
  /** The directive that changes how the list is inherited (`add_header_inherit`): only its `on` drops entries. */
  readonly inheritRule?: Slot<InheritRule>;
}

/** The inheritance rule in effect at a level: its own, else the nearest one above, else `on`. */
function ruleAt(level: LevelNode, rule: Slot<InheritRule>): InheritRule {
  for (let l: LevelNode | undefined = level; l; l = l.parent) {
    const own = l.conf.own(rule);
    if (own) return own.value;
  }
  return 'on';
}

/** Whether a level hands its requests to `handler` (written there, or in the location an `if` or `limit_except` is in). */
function usesHandler(subject: LintSubject, level: LevelNode, handler: string): boolean {
  for (let l: LevelNode | undefined = level; l; l = l.parent) {
    if (ownDirectives(subject, l).some((d) => d.name === handler)) return true;
    if (l.context !== 'lif' && l.context !== 'limit_except') return false;
  }
  return false;
}

/** Whether some level that takes `level`'s own list (itself, or a nested level without a list of its own) uses `handler`. */
function listReachesHandler<T>(subject: LintSubject, level: LevelNode, a: ArrayDirective<T>, handler: string): boolean {
  const stack = [level];
  while (stack.length > 0) {
    const l = stack.pop()!;
    if (usesHandler(subject, l, handler)) return true;
    for (const c of l.children) if (!c.conf.ownList(a.slot)) stack.push(c);
  }
  return false;
}

/**
 * `FILE:LINE via FILE:LINE…`: a place and the include directives that
 * brought its file in, but for the outermost (the main file's `include`,
 * which the file's name already tells).
 */
function placeWithChain(loc: SourceLoc): string {
  const parts = [where(loc)];
  for (let l = loc.includedFrom; l?.includedFrom; l = l.includedFrom) parts.push(where(l));
  return parts.join(' via ');
}

/** Joins names for a sentence: `A`, `A and B`, `A, B and C`. */
function listing(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** What a level drops: each entry set above it, by name, with where it was set and whether that was the http block. */
interface Lost {
  readonly name: string;
  readonly loc: SourceLoc;
  readonly fromHttp: boolean;
}

/**
 * Reports each loss once. An entry set in a server or location is named in
 * the finding of each level below that drops it (placed at that level, with
 * its include chain: that is where the fix goes). An entry set in the http
 * block is one finding at the entry, naming every level that drops it: a
 * default of the whole http block lost in many locations is one thing to
 * know, not one per location.
 */
function checkArray<T>(subject: LintSubject, a: ArrayDirective<T>, report: (f: RuleFinding) => void): void {
  const key = (name: string): string => (a.caseless ? name.toLowerCase() : name);
  const httpLosses = new Map<SourceLoc, { name: string; levels: LevelNode[] }>();
  for (const level of levelsOf(subject.root)) {
    if (level.context === 'main' || level.context === 'http' || !level.directive) continue;
    const own = level.conf.ownList(a.slot);
    if (!own || (a.inheritRule && ruleAt(level, a.inheritRule) !== 'on')) continue;
    const ownNames = new Set(own.map((e) => key(a.nameOf(e.value))));
    const lost = new Map<string, Lost>();
    for (let p = level.parent; p; p = p.parent) {
      for (const e of p.conf.ownList(a.slot) ?? []) {
        const name = a.nameOf(e.value);
        const decider = a.decidedBy?.get(key(name));
        if (decider !== undefined && ownNames.has(decider)) continue;
        if (!ownNames.has(key(name)) && !lost.has(key(name))) lost.set(key(name), { name, loc: e.loc, fromHttp: p.context === 'http' });
      }
    }
    if (lost.size === 0) continue;
    if (a.handler && !listReachesHandler(subject, level, a, a.handler)) continue;
    for (const l of lost.values()) {
      if (!l.fromHttp) continue;
      const entry = httpLosses.get(l.loc) ?? { name: l.name, levels: [] };
      entry.levels.push(level);
      httpLosses.set(l.loc, entry);
    }
    const names = [...lost.values()].filter((l) => !l.fromHttp).map((l) => `${l.name} (${where(l.loc)})`);
    if (names.length === 0) continue;
    report({
      message: `${levelTitle(level)} sets its own ${a.directive} (${where(own[0]!.loc)}), so ${listing(names)}, set above, ${names.length === 1 ? 'is' : 'are'} ${a.consequence}.`,
      loc: level.directive.loc,
    });
  }
  for (const [loc, { name, levels }] of httpLosses) {
    const n = levels.length;
    const noun = levels.every((l) => l.directive!.name === 'location') ? 'location' : 'level';
    const places = levels.map((l) => `${levelTitle(l)} (${placeWithChain(l.directive!.loc)})`);
    report({
      message: `${a.directive} ${name}, set here in the http block, is dropped by ${n === 1 ? `a ${noun}` : `${n} ${noun}s`} with ${n === 1 ? 'its' : 'their'} own ${a.directive}, so it is ${n === 1 ? a.consequence : a.consequence.replace(/\bits\b/, 'their')}: ${places.join(', ')}.`,
      loc,
    });
  }
}

const EXPLAIN_TAIL = 'nginx merges these arrays whole: a level that has one entry of its own inherits none of its parents\' entries. An entry of the http block is reported once, at the entry, with every level that drops it.';

/** The inheritance rules, one per array directive. */
/**
 * `fastcgi-param-inheritance` and its uwsgi and SCGI twins: a level with
 * its own `*_param` passes none of the levels above it
 * (`ngx_http_*_merge_params` takes the parent's list only when the level
 * has none); `lost` names the parameters usually lost.
 */
function paramInheritance(s: CgiSlots, protocol: string, lost: string): LintRule {
  const directive = `${s.prefix}_param`;
  return {
    code: `${s.prefix}-param-inheritance`,
    severity: 'warning',
    title: `${directive} at this level drops the parameters set above it`,
    explanation: `A location with its own ${directive} passes none of the ${directive} parameters of the levels above it (${lost} or an application setting written at the server level). ${EXPLAIN_TAIL} Reported only where the level's list reaches a ${s.prefix}_pass. Fix: include the shared parameters (${s.prefix}_params) at the level that adds its own.`,
    docUrl: ruleDocUrl(`${s.prefix}-param-inheritance`),
    check: (subject, report) => checkArray(subject, {
      directive, slot: s.params, nameOf: (p) => p.name, caseless: false, handler: `${s.prefix}_pass`, consequence: `not passed to its ${protocol} server`,
    }, report),
  };
}

export const inheritanceRules: readonly LintRule[] = [
  {
    code: 'add-header-inheritance',
    severity: 'warning',
    title: 'add_header at this level drops the headers set above it',
    explanation: `A server, location or if block with its own add_header sends none of the add_header headers of the levels above it (security headers such as Strict-Transport-Security set at the server level silently disappear from that location). ${EXPLAIN_TAIL} Fix: repeat the lost headers at the level (an include file with all of them helps), move the level's own add_header up, or, with nginx 1.29.3 or later, write add_header_inherit merge (at the level, or once in the http block for every level).`,
    docUrl: ruleDocUrl('add-header-inheritance'),
    check: (subject, report) => checkArray(subject, {
      directive: 'add_header', slot: addHeaders, nameOf: (h) => h.name, caseless: true, handler: undefined, consequence: 'not sent with its responses',
      inheritRule: addHeaderInherit,
    }, report),
  },
  {
    code: 'add-trailer-inheritance',
    severity: 'warning',
    title: 'add_trailer at this level drops the trailers set above it',
    explanation: `A server, location or if block with its own add_trailer sends none of the add_trailer trailers of the levels above it. ${EXPLAIN_TAIL} Fix: repeat the lost trailers at the level.`,
    docUrl: ruleDocUrl('add-trailer-inheritance'),
    check: (subject, report) => checkArray(subject, {
      directive: 'add_trailer', slot: addTrailers, nameOf: (h) => h.name, caseless: true, handler: undefined, consequence: 'not sent with its responses',
      inheritRule: addTrailerInherit,
    }, report),
  },
  {
    code: 'proxy-set-header-inheritance',
    severity: 'warning',
    title: 'proxy_set_header at this level drops the headers set above it',
    explanation: `A location (or server) with its own proxy_set_header sends none of the proxy_set_header headers of the levels above it to the upstream (X-Forwarded-For, Upgrade/Connection for WebSockets, an emptied Accept-Encoding). ${EXPLAIN_TAIL} Reported only where the level's list reaches a proxy_pass; a lost Upgrade is not reported where the level writes its own Connection (it has chosen whether to upgrade). Fix: repeat the lost headers at the level, or keep all proxy_set_header lines at one level.`,
    docUrl: ruleDocUrl('proxy-set-header-inheritance'),
    check: (subject, report) => checkArray(subject, {
      directive: 'proxy_set_header', slot: proxySetHeader, nameOf: (h) => h.name, caseless: true, handler: 'proxy_pass', consequence: 'not sent to its upstream',
      // an upgrade needs both headers, and nginx passes neither hop-by-hop header on its own: a level that writes its own Connection has chosen
      decidedBy: new Map([['upgrade', 'connection']]),
    }, report),
  },
  {
    code: 'grpc-set-header-inheritance',
    severity: 'warning',
    title: 'grpc_set_header at this level drops the headers set above it',
    explanation: `A location (or server) with its own grpc_set_header sends none of the grpc_set_header headers of the levels above it to the gRPC server (X-Real-IP, X-Forwarded-For, an authorization header). ${EXPLAIN_TAIL} Reported only where the level's list reaches a grpc_pass. Fix: repeat the lost headers at the level, or keep all grpc_set_header lines at one level.`,
    docUrl: ruleDocUrl('grpc-set-header-inheritance'),
    check: (subject, report) => checkArray(subject, {
      directive: 'grpc_set_header', slot: grpcSetHeader, nameOf: (h) => h.name, caseless: true, handler: 'grpc_pass', consequence: 'not sent to its upstream',
    }, report),
  },
  {
    code: 'proxy-hide-header-inheritance',
    severity: 'warning',
    title: 'proxy_hide_header at this level lets the headers hidden above it through',
    explanation: `A location (or server) with its own proxy_hide_header hides only its own headers: the upstream response headers hidden at the levels above reach the client again (a backend's X-Powered-By or internal headers). ${EXPLAIN_TAIL} Reported only where the level's list reaches a proxy_pass. Fix: repeat the hidden headers at the level.`,
    docUrl: ruleDocUrl('proxy-hide-header-inheritance'),
    check: (subject, report) => checkArray(subject, {
      directive: 'proxy_hide_header', slot: proxyHideHeader, nameOf: (h) => h, caseless: true, handler: 'proxy_pass', consequence: 'not hidden from its responses',
    }, report),
  },
  paramInheritance(FASTCGI_SLOTS, 'FastCGI', 'SCRIPT_FILENAME, HTTPS'),
  paramInheritance(UWSGI_SLOTS, 'uwsgi', 'UWSGI_SCRIPT, HTTPS'),
  paramInheritance(SCGI_SLOTS, 'SCGI', 'SCRIPT_NAME, HTTPS'),
];
