/**
 * The sticky module (`src/http/modules/ngx_http_upstream_sticky_module.c`,
 * nginx 1.29.6): `sticky` in an `upstream` block sends a client's requests
 * to the server it was sent to before, wrapping the block's balancing
 * method (which must come before it).
 *
 * - `sticky cookie NAME [expires=TIME|max] [domain=D] [path=P] [httponly]
 *   [secure] [samesite=strict|lax|none]`: the response says which server
 *   answered in the cookie NAME (the server's ID: its `route=`, else the MD5
 *   of its address in hex), and a request with that cookie goes there.
 * - `sticky route $VAR …`: the first non-empty variable names the server ID.
 * - `sticky learn create=$VAR lookup=$VAR zone=NAME:SIZE [timeout=TIME]
 *   [header]`: once a server answered, the first non-empty `create`
 *   variable (`$upstream_cookie_SESSION`) names a session the zone keeps
 *   for that server, for `timeout` (10 minutes) after its last use; a
 *   request whose first non-empty `lookup` variable names a known session
 *   goes to its server. Learned when the request ends, or with `header`
 *   when the response header arrives; a request that names a session and
 *   creates none keeps it alive.
 *
 * The request goes to the server it names when that server is usable (not
 * tried, failed, at `max_conns`, or `down`; `drain` servers are), else by
 * the method as if it named none. The runtime side is
 * `src/runtime/upstream/round-robin.ts` (`PeerAttempts`) and
 * `src/runtime/handlers/upstream-peer.ts` (`stickyCookie`).
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { DirectiveFailure, fail } from '../failure.js';
import { parseMsec, parseSize, parseTime, type DirectiveSpec, type SetContext } from '../spec.js';
import type { SharedZone, StickyCookieDecl, StickyDecl } from '../scope.js';
import type { ValueSource } from '../variables.js';
import { balancerSet, currentUpstream } from './upstream.js';
import { USERID_MAX_EXPIRES } from './userid.js';

const MODULE = 'ngx_http_upstream_sticky_module';

/** `NGX_HTTP_STICKY_COOKIE_MAX_EXPIRES`: `expires=max`, 31 Dec 2037 23:55:55 GMT. */
export const STICKY_MAX_EXPIRES = USERID_MAX_EXPIRES;

/** The `samesite=` values a constant may have (`ngx_http_upstream_sticky_samesite`), compared case-insensitively. */
export const SAMESITE_VALUES: readonly string[] = ['strict', 'lax', 'none'];

/** A variable by its whole name, as `ngx_http_get_variable_index` takes it (`$cookie_srv-id` is the cookie `srv-id`). */
function variable(cx: SetContext, name: string, loc: SourceLoc): ValueSource {
  cx.scope.variables.reference(name, loc);
  return { text: `$${name}`, parts: [{ name }], loc };
}

/** A message nginx's handler returns: `"sticky" directive TEXT`. */
function inDirective(text: string): never {
  throw new DirectiveFailure(text);
}

/**
 * `ngx_http_upstream_sticky_cookie`: the cookie's name and parameters.
 * @throws DirectiveFailure nginx's messages (`"sticky" directive empty cookie name`, `… parameter "expires" is duplicate`, `unknown parameter "…"` …)
 */
function cookieMode(cx: SetContext, args: readonly string[], loc: SourceLoc): StickyDecl {
  const name = args[0]!;
  const value = (text: string): ValueSource => cx.scope.variables.value(text, loc);
  if (name === '') inDirective('empty cookie name');
  let expiresSec: number | undefined;
  let domain: ValueSource | undefined;
  let path: string | undefined;
  let httponly = false;
  let secure = false;
  let samesite: ValueSource | undefined;
  for (const p of args.slice(1)) {
    if (p.startsWith('domain=')) {
      if (domain) inDirective('parameter "domain" is duplicate');
      if (p.length === 7) inDirective('no value for "domain"');
      domain = value(p.slice(7));
    } else if (p.startsWith('path=')) {
      if (path !== undefined) inDirective('parameter "path" is duplicate');
      if (p.length === 5) inDirective('no value for "path"');
      path = p.slice(5);
    } else if (p.startsWith('expires=')) {
      if (expiresSec !== undefined) inDirective('parameter "expires" is duplicate');
      const text = p.slice(8);
      expiresSec = text === 'max' ? STICKY_MAX_EXPIRES : parseTime(text, true) ?? inDirective('invalid "expires" parameter value');
    } else if (p === 'httponly') {
      if (httponly) inDirective('parameter "httponly" is duplicate');
      httponly = true;
    } else if (p === 'secure') {
      if (secure) inDirective('parameter "secure" is duplicate');
      secure = true;
    } else if (p.startsWith('samesite=')) {
      if (samesite) inDirective('parameter "samesite" is duplicate');
      samesite = value(p.slice(9));
      const constant = samesite.parts.every((part) => typeof part === 'string');
      if (constant && !SAMESITE_VALUES.includes(samesite.text.toLowerCase())) inDirective('invalid "samesite" parameter value');
    } else fail(`unknown parameter "${p}"`);
  }
  const cookie: StickyCookieDecl = { name, expiresSec, domain, path: path ?? '', httponly, secure, samesite };
  return { lookup: [variable(cx, `cookie_${name}`, loc)], cookie, active: true };
}

/** The upstream block each sticky zone of a configuration is used in (nginx's `shm_zone->data`). */
const zoneUsers = new WeakMap<SharedZone, string>();

/** nginx's page size: a sticky zone has at least eight pages. */
const PAGE_BYTES = 4096;

/**
 * `ngx_http_upstream_sticky_learn`: the variables, the zone, the timeout.
 * @throws DirectiveFailure nginx's messages (`"sticky" directive "zone" parameter is not specified`,
 *   `… zone is too small`, `sticky zone "NAME" is already used in upstream "…"` …)
 */
function learnMode(cx: SetContext, args: readonly string[], loc: SourceLoc, upstream: string): StickyDecl {
  const create: ValueSource[] = [];
  const lookup: ValueSource[] = [];
  let zone: { name: string; sizeBytes: number } | undefined;
  let timeoutMs: number | undefined;
  let afterHeader = false;
  for (const p of args) {
    if (p.startsWith('zone=')) {
      if (zone) inDirective('duplicate zone');
      const colon = p.indexOf(':', 5);
      if (colon === -1) inDirective('zone size is not specified');
      const name = p.slice(5, colon);
      if (name === '') inDirective('zone name is not specified');
      const sizeBytes = parseSize(p.slice(colon + 1)) ?? inDirective('invalid zone size');
      if (sizeBytes < 8 * PAGE_BYTES) inDirective('zone is too small');
      zone = { name, sizeBytes };
    } else if (p.startsWith('timeout=')) {
      if (timeoutMs !== undefined) inDirective('duplicate timeout');
      const ms = parseMsec(p.slice(8));
      if (ms === undefined || ms === 0) inDirective('invalid timeout');
      timeoutMs = ms;
    } else if (p.startsWith('create=') || p.startsWith('lookup=')) {
      const which = p.slice(0, 6);
      if (p[7] !== '$') inDirective(`missing variable in the "${which}" parameter`);
      (which === 'create' ? create : lookup).push(variable(cx, p.slice(8), loc));
    } else if (p === 'header') afterHeader = true;
    else fail(`unknown parameter "${p}"`);
  }
  if (lookup.length === 0) inDirective('"lookup" parameter is not specified');
  if (create.length === 0) inDirective('"create" parameter is not specified');
  if (!zone) inDirective('"zone" parameter is not specified');
  const shared = cx.scope.sharedZone(zone.name, zone.sizeBytes, MODULE);
  const user = zoneUsers.get(shared);
  if (user !== undefined) fail(`sticky zone "${zone.name}" is already used in upstream "${user}"`);
  zoneUsers.set(shared, upstream);
  shared.defined = true;
  return {
    lookup, cookie: undefined, active: true,
    learn: { create, zone: zone.name, sizeBytes: zone.sizeBytes, timeoutMs: timeoutMs ?? 600_000, afterHeader },
  };
}

/**
 * `ngx_http_upstream_sticky`: once per block, `cookie`, `route` or `learn`.
 * @throws DirectiveFailure `is duplicate`, `unknown parameter "…"`, `invalid variable name "…"`, the cookie's
 */
function setSticky(d: Directive, cx: SetContext): void {
  const up = currentUpstream(cx);
  if (up.sticky) inDirective('is duplicate');
  const [mode, ...rest] = d.args as [string, ...string[]];
  let sticky: StickyDecl;
  if (mode === 'cookie') sticky = cookieMode(cx, rest, d.loc);
  else if (mode === 'route') {
    const lookup = rest.map((name) => {
      if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
      return variable(cx, name.slice(1), d.loc);
    });
    sticky = { lookup, cookie: undefined, active: true };
  } else if (mode === 'learn') sticky = learnMode(cx, rest, d.loc, up.name);
  else fail(`unknown parameter "${mode}"`);
  up.sticky = sticky;
  cx.level.replace(balancerSet, true, d.loc);
}

export const stickyDirectives: readonly DirectiveSpec[] = [
  { name: 'sticky', module: MODULE, contexts: ['upstream'], args: ['2MORE'], effect: 'runtime', set: setSticky },
];
