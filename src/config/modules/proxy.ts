/**
 * The proxy module (`src/http/modules/ngx_http_proxy_module.c`): `proxy_pass`
 * and the settings of a proxied request.
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import type { LevelNode } from '../check.js';
import { groupKey, inheritedIntoIf, levelsInOrder, type CompileContext } from '../compile-context.js';
import { HTTP_SRV_LOC } from '../flags.js';
import {
  bitmaskSetter, bufsSetter, DirectiveFailure, enumSetter, fail, flagSetter, listSlot, msecSetter, noEffect, numSetter, pathSetter, rule,
  sizeSetter, slot, valueSetter, type ConfChain, type DirectiveSpec, type LevelConf, type ListSlot, type Rule, type SetContext,
  type TempPathValue,
} from '../spec.js';
import { bindCache, cacheDirectives, cacheZones, proxyCache, type CacheConf } from './cache.js';
import { compileRegex, type NginxRegex } from '../regex.js';
import { proxySslDirectives, readProxyTls, upstreamTlsConf, type UpstreamTlsConf } from './proxy-ssl.js';
import { isIP } from 'node:net';
import type { CompiledValue, ValueSource, VariableRegistry } from '../variables.js';
import {
  CACHE_REQUEST_HEADERS, nextUpstreamConf, spoolSizes, type PassAddress, type UpstreamConf, type UpstreamMergeSlots,
} from './upstream.js';
import { locationDef, lowatIgnored, setContentHandler } from './http-core.js';
import { parseUnixPath } from '../listen.js';

const PROXY = 'ngx_http_proxy_module';

/** `proxy_pass URL` as read. */
export type ProxyPassDef =
  | {
      readonly kind: 'static';
      readonly scheme: 'http' | 'https';
      /** Host as written (a name, an IP, or an upstream block's name). */
      readonly host: string;
      /** Port from the URL, or undefined when none was written. */
      readonly port: number | undefined;
      readonly uri: string | undefined;
      /** `plcf->location`: the location prefix a URI part replaces ("" when it cannot). */
      readonly locationPrefix: string;
      readonly url: string;
      readonly loc: SourceLoc;
    }
  | { readonly kind: 'variable'; readonly url: ValueSource; readonly locationPrefix: string; readonly loc: SourceLoc };

/** Not inherited into nested locations; an `if` block takes its location's (see compile). */
export const proxyPass = slot<ProxyPassDef | undefined>('proxy_pass', undefined, false);
export const proxySetHeader = listSlot<{ readonly name: string; readonly value: ValueSource }>('proxy_set_header');
export const proxyHideHeader = listSlot<string>('proxy_hide_header');
export const proxyPassHeader = listSlot<string>('proxy_pass_header');
/** HTTP/1.1 by default since nginx 1.29.7 (undici always speaks HTTP/1.1 upstream). */
export const proxyHttpVersion = slot<'1.0' | '1.1'>('proxy_http_version', '1.1');
export const proxyPassRequestBody = slot('proxy_pass_request_body', true);
export const proxyPassRequestHeaders = slot('proxy_pass_request_headers', true);
/** `proxy_pass_trailers`: the trailers of a chunked upstream response go to the client. */
export const proxyPassTrailers = slot('proxy_pass_trailers', false);
export const proxyConnectTimeoutMs = slot('proxy_connect_timeout', 60_000);
export const proxySendTimeoutMs = slot('proxy_send_timeout', 60_000);
export const proxyReadTimeoutMs = slot('proxy_read_timeout', 60_000);
/** One memory page, as nginx's default on x86_64 Linux. */
export const proxyBufferSize = slot('proxy_buffer_size', 4096);
export const proxyInterceptErrors = slot('proxy_intercept_errors', false);
export const proxyBuffering = slot('proxy_buffering', true);
/** `proxy_ignore_headers`: upstream headers not acted on (jinx acts only on X-Accel-Buffering). */
export const proxyIgnoreHeaders = slot<readonly string[]>('proxy_ignore_headers', []);
export const proxyRequestBuffering = slot('proxy_request_buffering', true);
/** Eight pages, nginx's default on x86_64 Linux. */
export const proxyBuffers = slot('proxy_buffers', { count: 8, sizeBytes: 4096 });
export const proxyBusyBuffersSize = slot<number | undefined>('proxy_busy_buffers_size', undefined);
/** Resolved against the prefix when the configuration is compiled. */
export const proxyTempPath = slot<TempPathValue | undefined>('proxy_temp_path', undefined);
export const proxyMaxTempFileSize = slot('proxy_max_temp_file_size', 1024 * 1024 * 1024);
export const proxyTempFileWriteSize = slot<number | undefined>('proxy_temp_file_write_size', undefined);
export const proxyIgnoreClientAbort = slot('proxy_ignore_client_abort', false);
/** `proxy_next_upstream`: when another server of the group is tried (`ngx_http_upstream_next`). */
export const proxyNextUpstream = slot<readonly string[]>('proxy_next_upstream', ['error', 'timeout']);
/** 0: as many tries as the group has servers. */
export const proxyNextUpstreamTries = slot('proxy_next_upstream_tries', 0);
/** 0: no time limit for passing a request to the next server. */
export const proxyNextUpstreamTimeoutMs = slot('proxy_next_upstream_timeout', 0);
/** `proxy_redirect`: `off`, or rules (list semantics; `default` is the rule `defaultRedirect` makes where it is written). */
export const proxyRedirect = listSlot<RedirectDef | 'off'>('proxy_redirect');

/** A `proxy_redirect REDIRECT REPLACEMENT` rule: a prefix with variables, or `~REGEX` (`~*` case-insensitive). */
export type RedirectDef =
  | { readonly from: ValueSource; readonly to: ValueSource }
  | { readonly regex: NginxRegex; readonly to: ValueSource };

// Upstream TLS, with the defaults of `ngx_http_proxy_merge_loc_conf`
// (`src/http/modules/ngx_http_proxy_module.c`); read when the configuration
// is compiled (`ngx_http_proxy_set_ssl`) and used by the upstream connector
// (`ngx_http_upstream_ssl_init_connection` in `src/http/ngx_http_upstream.c`).


/** `proxy_method`: the method of the upstream request (with variables); unset: the client's. */
export const proxyMethod = slot<ValueSource | undefined>('proxy_method', undefined);
/** `proxy_set_body`: the body sent upstream in place of the client's (with variables). */
export const proxySetBody = slot<ValueSource | undefined>('proxy_set_body', undefined);

/**
 * One rule of `proxy_cookie_domain` or `proxy_cookie_path`: a value to
 * compare (with variables) or a regex, and the replacement.
 */
export interface CookieRewriteDef {
  readonly match: { readonly kind: 'value'; readonly value: ValueSource } | { readonly kind: 'regex'; readonly regex: NginxRegex };
  readonly replacement: ValueSource;
}

/** One rule of `proxy_cookie_flags`: the cookie (a name with variables, or a regex) and up to three flags (with variables). */
export interface CookieFlagsDef {
  readonly cookie: { readonly kind: 'value'; readonly value: ValueSource } | { readonly kind: 'regex'; readonly regex: NginxRegex };
  readonly flags: readonly ValueSource[];
}

/** `off` at a level stops the rules of the levels above (nginx's NULL array). */
export const proxyCookieDomain = listSlot<CookieRewriteDef | 'off'>('proxy_cookie_domain');
export const proxyCookiePath = listSlot<CookieRewriteDef | 'off'>('proxy_cookie_path');
export const proxyCookieFlags = listSlot<CookieFlagsDef | 'off'>('proxy_cookie_flags');

/**
 * The shared part of `ngx_http_proxy_cookie_domain`, `…_path` and
 * `…_flags`: `off` alone, once, or rules; either twice at a level is a
 * duplicate. Returns false when the directive was `off`.
 * @throws DirectiveFailure `is duplicate`, `invalid parameter "…"`
 */
function cookieRuleStart<T>(d: Directive, cx: SetContext, s: ListSlot<T | 'off'>): boolean {
  const own = cx.level.ownList(s);
  if (own?.some((e) => e.value === 'off')) throw new DirectiveFailure('is duplicate');
  if (d.args.length > 1) return true;
  if (d.args[0] !== 'off') fail(`invalid parameter "${d.args[0]}"`);
  if (own) throw new DirectiveFailure('is duplicate');
  cx.level.append(s, 'off', d.loc);
  return false;
}

/**
 * `proxy_cookie_domain off | DOMAIN REPLACEMENT`: a leading `.` of both is
 * dropped; `~REGEX` matches case-insensitively.
 */
function setCookieDomain(d: Directive, cx: SetContext): void {
  if (!cookieRuleStart(d, cx, proxyCookieDomain)) return;
  const vars = cx.scope.variables;
  let [from, to] = [d.args[0]!, d.args[1]!];
  let match: CookieRewriteDef['match'];
  if (from.startsWith('~')) match = { kind: 'regex', regex: compileRegex(from.slice(1), true) };
  else {
    if (from.startsWith('.')) from = from.slice(1);
    if (to.startsWith('.')) to = to.slice(1);
    match = { kind: 'value', value: vars.value(from, d.loc) };
  }
  cx.level.append(proxyCookieDomain, { match, replacement: vars.value(to, d.loc) }, d.loc);
}

/** `proxy_cookie_path off | PATH REPLACEMENT`: a prefix, or `~REGEX` (`~*` case-insensitive). */
function setCookiePath(d: Directive, cx: SetContext): void {
  if (!cookieRuleStart(d, cx, proxyCookiePath)) return;
  const vars = cx.scope.variables;
  const from = d.args[0]!;
  const match: CookieRewriteDef['match'] = from.startsWith('~*')
    ? { kind: 'regex', regex: compileRegex(from.slice(2), true) }
    : from.startsWith('~')
      ? { kind: 'regex', regex: compileRegex(from.slice(1), false) }
      : { kind: 'value', value: vars.value(from, d.loc) };
  cx.level.append(proxyCookiePath, { match, replacement: vars.value(d.args[1]!, d.loc) }, d.loc);
}

/** `proxy_cookie_flags off | COOKIE [FLAG…]`: the cookie's name, or `~REGEX` (case-insensitive). */
function setCookieFlags(d: Directive, cx: SetContext): void {
  if (!cookieRuleStart(d, cx, proxyCookieFlags)) return;
  const vars = cx.scope.variables;
  const name = d.args[0]!;
  const cookie: CookieFlagsDef['cookie'] = name.startsWith('~')
    ? { kind: 'regex', regex: compileRegex(name.slice(1), true) }
    : { kind: 'value', value: vars.value(name, d.loc) };
  cx.level.append(proxyCookieFlags, { cookie, flags: d.args.slice(1).map((f) => vars.value(f, d.loc)) }, d.loc);
}

/**
 * Splits `http://host:port/uri` or `http://unix:PATH:/uri` of a static
 * `proxy_pass` (`ngx_parse_url` with `uri_part`).
 */
function parseStaticUrl(d: Directive, url: string, locationPrefix: string): ProxyPassDef {
  const lower = url.toLowerCase();
  const scheme = lower.startsWith('http://') ? 'http' : lower.startsWith('https://') ? 'https' : undefined;
  if (!scheme) fail('invalid URL prefix');
  const rest = url.slice(scheme.length + 3);
  if (rest.startsWith('unix:')) {
    // ngx_parse_unix_domain_url with uri_part: the path ends at the first ':', the URI follows it
    const colon = rest.indexOf(':', 'unix:'.length);
    const hostText = colon === -1 ? rest : rest.slice(0, colon);
    parseUnixPath(hostText, (err) => fail(`${err} in upstream "${rest}"`));
    const uri = colon === -1 || colon === rest.length - 1 ? undefined : rest.slice(colon + 1);
    return { kind: 'static', scheme, host: hostText, port: undefined, uri, locationPrefix, url, loc: d.loc };
  }
  const slash = rest.indexOf('/');
  const authority = slash === -1 ? rest : rest.slice(0, slash);
  const uri = slash === -1 ? undefined : rest.slice(slash);
  let host = authority;
  let port: number | undefined;
  const v6 = /^\[([^\]]+)\](?::(\d*))?$/.exec(authority);
  const m = v6 ?? /^([^:]*)(?::(\d*))?$/.exec(authority);
  if (!m) fail(`invalid host in upstream "${rest}"`);
  host = v6 ? `[${m[1]}]` : m[1]!;
  if (m[2] !== undefined) {
    port = Number(m[2]);
    if (m[2] === '' || port < 1 || port > 65535) fail(`invalid port in upstream "${rest}"`);
  }
  if (host.length === 0) fail(`no host in upstream "${rest}"`);
  return { kind: 'static', scheme, host, port, uri, locationPrefix, url, loc: d.loc };
}

function setProxyPass(d: Directive, cx: SetContext): void {
  if (cx.level.own(proxyPass)) throw new DirectiveFailure('is duplicate');
  setContentHandler(cx, 'proxy_pass', d.loc);
  const url = d.args[0]!;
  const def = cx.level.own(locationDef)?.value;
  const noname = cx.context === 'lif' || cx.context === 'limit_except';
  const prefixUsable = def !== undefined && def.match !== 'named' && !def.regex && !noname;
  const locationPrefix = prefixUsable ? def.name : '';
  if (url.includes('$')) {
    cx.level.set(proxyPass, { kind: 'variable', url: cx.scope.variables.value(url, d.loc), locationPrefix, loc: d.loc }, d.loc);
    return;
  }
  const parsed = parseStaticUrl(d, url, locationPrefix);
  if (parsed.kind === 'static' && parsed.uri !== undefined && !prefixUsable) {
    fail('"proxy_pass" cannot have URI part in location given by regular expression, or inside named location, '
      + 'or inside "if" statement, or inside "limit_except" block');
  }
  cx.level.set(proxyPass, parsed, d.loc);
}

/**
 * The rule of `proxy_redirect default`, and of a location with `proxy_pass`
 * and no `proxy_redirect` of its own or inherited
 * (`ngx_http_proxy_redirect`, `ngx_http_proxy_merge_loc_conf`): the
 * `proxy_pass` URL as written is replaced by the location's name, or, for a
 * URL without a URI part, the URL and "/" by "/". Made where it is written:
 * a nested location inheriting it keeps its parent's URL.
 */
function defaultRedirect(pass: Extract<ProxyPassDef, { kind: 'static' }>): RedirectDef {
  const literal = (text: string): ValueSource => ({ text, parts: [text], loc: pass.loc });
  return pass.uri !== undefined
    ? { from: literal(pass.url), to: literal(pass.locationPrefix) }
    : { from: literal(`${pass.url}/`), to: literal('/') };
}

function setRedirect(d: Directive, cx: SetContext): void {
  const own = cx.level.ownList(proxyRedirect);
  if (d.args.length === 1) {
    const a = d.args[0]!;
    if (a === 'off') {
      if (own) throw new DirectiveFailure('is duplicate');
      cx.level.append(proxyRedirect, 'off', d.loc);
      return;
    }
    if (own?.some((e) => e.value === 'off')) throw new DirectiveFailure('is duplicate');
    if (a !== 'default') fail(`invalid parameter "${a}"`);
    const pass = cx.level.own(proxyPass)?.value;
    if (pass?.kind === 'variable') fail('"proxy_redirect default" cannot be used with "proxy_pass" directive with variables');
    if (!pass) fail('"proxy_redirect default" should be placed after the "proxy_pass" directive');
    cx.level.append(proxyRedirect, defaultRedirect(pass), d.loc);
    return;
  }
  if (own?.some((e) => e.value === 'off')) throw new DirectiveFailure('is duplicate');
  const [from, to] = [d.args[0]!, cx.scope.variables.value(d.args[1]!, d.loc)];
  if (from.startsWith('~')) {
    const caseless = from.startsWith('~*');
    cx.level.append(proxyRedirect, { regex: compileRegex(from.slice(caseless ? 2 : 1), caseless), to }, d.loc);
    return;
  }
  cx.level.append(proxyRedirect, { from: cx.scope.variables.value(from, d.loc), to }, d.loc);
}

const none = (name: string, args: DirectiveSpec['args'], note: string, r: Rule): DirectiveSpec =>
  noEffect({ name, module: PROXY, contexts: HTTP_SRV_LOC, args, note }, r);

/** `ngx_http_proxy_next_upstream_masks`: the values of `proxy_next_upstream` and `proxy_cache_use_stale`. */
export const NEXT_UPSTREAM = [
  'error', 'timeout', 'invalid_header', 'non_idempotent', 'http_500', 'http_502', 'http_503', 'http_504', 'http_403',
  'http_404', 'http_429', 'updating', 'off',
];
/** `ngx_http_upstream_ignore_headers_masks` (`src/http/ngx_http_upstream.c`). */
export const IGNORE_HEADERS = [
  'X-Accel-Redirect', 'X-Accel-Expires', 'X-Accel-Limit-Rate', 'X-Accel-Buffering', 'X-Accel-Charset', 'Expires',
  'Cache-Control', 'Set-Cookie', 'Vary',
];

/**
 * `ngx_http_upstream_bind_set_slot` (`proxy_bind`, `fastcgi_bind`): `off`,
 * an address with variables, or `ADDRESS[:PORT]`, then `transparent`.
 * @throws DirectiveFailure `invalid address "…"`, `invalid parameter "…"`
 */
export function parseBind(d: Directive): string {
  const address = d.args[0]!;
  if (d.args[1] !== undefined && d.args[1] !== 'transparent') fail(`invalid parameter "${d.args[1]}"`);
  if (address === 'off' || address.includes('$')) return address;
  const m = /^(?:\[([^\]]+)\]|([^:]+)|([0-9a-fA-F:]+))(?::(\d+))?$/.exec(address);
  const host = m && (m[1] ?? m[2] ?? m[3]);
  if (!host || !isIP(host) || (m[4] !== undefined && Number(m[4]) > 65535)) fail(`invalid address "${address}"`);
  return address;
}

/**
 * `proxy_store` and `fastcgi_store` (`ngx_http_proxy_store`): `off`, `on`
 * (the document root) or a path with variables.
 * @throws DirectiveFailure `empty path`
 */
export function parseStore(d: Directive, cx: SetContext): string {
  const value = d.args[0]!;
  if (value === '') fail('empty path');
  if (value !== 'off' && value !== 'on') cx.scope.variables.value(value, d.loc);
  return value;
}

/**
 * `ngx_conf_set_access_slot` (`proxy_store_access`): `user:rw`, `group:r`,
 * `all:rw` …; the user reads and writes unless `user:` says otherwise.
 * @throws DirectiveFailure `invalid value "…"`
 */
export function parseAccess(d: Directive): number {
  let mode = 0;
  let user = 0o600;
  for (const a of d.args) {
    const m = /^(user|group|all):(rw|r)$/.exec(a);
    if (!m) fail(`invalid value "${a}"`);
    if (m[1] === 'user') user = 0;
    mode += (m[2] === 'rw' ? 6 : 4) << (m[1] === 'user' ? 6 : m[1] === 'group' ? 3 : 0);
  }
  return mode | user;
}

const NO_STORE = 'responses are not stored as files';
const NO_RATE = 'the upstream is read at full speed (limit_rate throttles the client)';
const NO_BIND = 'upstream connections use the address the system chooses';

export const proxyDirectives: readonly DirectiveSpec[] = [
  {
    name: 'proxy_pass', module: PROXY, contexts: ['location', 'lif', 'limit_except'], args: ['TAKE1'], effect: 'runtime', resolves: 'url',
    set: setProxyPass,
  },
  {
    name: 'proxy_set_header', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime',
    set: (d, cx) => cx.level.append(proxySetHeader, { name: d.args[0]!, value: cx.scope.variables.value(d.args[1]!, d.loc) }, d.loc),
  },
  {
    name: 'proxy_hide_header', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(proxyHideHeader, d.args[0]!, d.loc),
  },
  {
    name: 'proxy_pass_header', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(proxyPassHeader, d.args[0]!, d.loc),
  },
  { name: 'proxy_http_version', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: enumSetter(proxyHttpVersion, ['1.0', '1.1']) },
  { name: 'proxy_pass_request_body', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyPassRequestBody) },
  { name: 'proxy_pass_request_headers', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyPassRequestHeaders) },
  { name: 'proxy_pass_trailers', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyPassTrailers) },
  { name: 'proxy_connect_timeout', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(proxyConnectTimeoutMs) },
  { name: 'proxy_send_timeout', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(proxySendTimeoutMs) },
  { name: 'proxy_read_timeout', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(proxyReadTimeoutMs) },
  { name: 'proxy_buffer_size', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(proxyBufferSize) },
  { name: 'proxy_intercept_errors', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyInterceptErrors) },
  { name: 'proxy_ignore_client_abort', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyIgnoreClientAbort) },
  { name: 'proxy_redirect', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setRedirect },
  { name: 'proxy_buffering', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyBuffering) },
  {
    name: 'proxy_ignore_headers', module: PROXY, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: bitmaskSetter(proxyIgnoreHeaders, IGNORE_HEADERS),
  },
  { name: 'proxy_request_buffering', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxyRequestBuffering) },
  { name: 'proxy_buffers', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime', set: bufsSetter(proxyBuffers) },
  {
    name: 'proxy_busy_buffers_size', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: sizeSetter(proxyBusyBuffersSize),
  },
  {
    name: 'proxy_temp_path', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], effect: 'runtime',
    set: (d, cx) => pathSetter(proxyTempPath, (p) => cx.scope.fullPath(p))(d, cx),
  },
  { name: 'proxy_max_temp_file_size', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(proxyMaxTempFileSize) },
  {
    name: 'proxy_temp_file_write_size', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: sizeSetter(proxyTempFileWriteSize),
  },
  {
    name: 'proxy_next_upstream', module: PROXY, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: bitmaskSetter(proxyNextUpstream, NEXT_UPSTREAM),
  },
  { name: 'proxy_next_upstream_tries', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: numSetter(proxyNextUpstreamTries) },
  {
    name: 'proxy_next_upstream_timeout', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: msecSetter(proxyNextUpstreamTimeoutMs),
  },
  { name: 'proxy_method', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: valueSetter(proxyMethod) },
  { name: 'proxy_set_body', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: valueSetter(proxySetBody) },
  { name: 'proxy_cookie_domain', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setCookieDomain },
  { name: 'proxy_cookie_path', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setCookiePath },
  {
    name: 'proxy_cookie_flags', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], effect: 'runtime',
    set: setCookieFlags,
  },
  ...proxySslDirectives,
  ...cacheDirectives(proxyCache, PROXY, NEXT_UPSTREAM),
  none('proxy_store', ['TAKE1'], NO_STORE, rule.custom(parseStore)),
  none('proxy_store_access', ['TAKE1', 'TAKE2', 'TAKE3'], NO_STORE, rule.custom(parseAccess)),
  none('proxy_bind', ['TAKE1', 'TAKE2'], NO_BIND, rule.custom(parseBind)),
  none('proxy_limit_rate', ['TAKE1'], NO_RATE, rule.valueSize),
  none('proxy_force_ranges', ['FLAG'], 'byte ranges of proxied responses are not served', rule.flag),
  none('proxy_headers_hash_max_size', ['TAKE1'], 'headers are kept in a Map', rule.num()),
  none('proxy_headers_hash_bucket_size', ['TAKE1'], 'headers are kept in a Map', rule.num()),
  none('proxy_socket_keepalive', ['FLAG'], 'TCP keepalive is the runtime\'s', rule.flag),
  none('proxy_send_lowat', ['TAKE1'], 'a kernel tuning knob with no counterpart in jinx', rule.size(lowatIgnored)),
];

/** `proxy_set_header` after merging with nginx's defaults. */
export interface ProxyHeader {
  readonly name: string;
  readonly lowerName: string;
  readonly value: CompiledValue;
}

/** Where a `proxy_pass` sends requests. */
export type ProxyTarget =
  | {
      readonly kind: 'static';
      readonly scheme: 'http' | 'https';
      /** The upstream group (an `upstream` block, or the URL's host:port). */
      readonly group: string;
      /** The URI part of the URL, or undefined when none was given. */
      readonly uri: string | undefined;
      /** `$proxy_host`: host[:port] as written in the URL (port omitted when default). */
      readonly hostHeader: string;
    }
  | { readonly kind: 'variable'; readonly url: CompiledValue };

/**
 * Settings of the proxy module in a location, and of the gRPC module
 * (grpc.ts), which nginx runs through the same upstream code with an
 * HTTP/2 upstream.
 */
export interface ProxyConf extends UpstreamConf {
  /** Whose settings: `proxy_pass` (HTTP/1.x upstream) or `grpc_pass` (HTTP/2; `grpc://` in log lines). */
  readonly module: 'proxy' | 'grpc';
  readonly target: ProxyTarget;
  /** The location prefix that a URI part replaces (nginx's `plcf->location`). */
  readonly locationPrefix: string;
  readonly headers: readonly ProxyHeader[];
  /** Lowercase names of `headers`: client headers with these names are not passed. */
  readonly headerNames: ReadonlySet<string>;
  /** `proxy_http_version`; `2` for gRPC. */
  readonly httpVersion: '1.0' | '1.1' | '2';
  /** The upstream's trailers go to the client (`u->conf->pass_trailers`: `proxy_pass_trailers`, always for gRPC). */
  readonly passTrailers: boolean;
  /**
   * The `proxy_ssl_*` settings, for a `proxy_pass https://…` or one with
   * variables (nginx's `plcf->ssl`); undefined for plain HTTP.
   */
  readonly tls: UpstreamTlsConf | undefined;
  /** `proxy_method`: the upstream request's method; undefined: the client's. */
  readonly method: CompiledValue | undefined;
  /** `proxy_set_body`: the body sent in place of the client's. */
  readonly setBody: CompiledValue | undefined;
  /** `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags` rules; undefined when there are none (or `off`). */
  readonly cookieDomains: readonly CookieRewrite[] | undefined;
  readonly cookiePaths: readonly CookieRewrite[] | undefined;
  readonly cookieFlags: readonly CookieFlags[] | undefined;
  /** `proxy_cache` and its kin; undefined when the location does not cache. */
  readonly cache: CacheConf | undefined;
  /** `proxy_redirect`: rules replace a prefix of the value, or (a regex) the whole value; none for `off`. */
  readonly redirect: readonly (
    { readonly from: CompiledValue; readonly to: CompiledValue } | { readonly regex: RegExp; readonly to: CompiledValue }
  )[];
}

/** What a cookie rule matches: a value (with variables) or a regex. */
export type CookieMatch =
  | { readonly kind: 'value'; readonly value: CompiledValue }
  | { readonly kind: 'regex'; readonly regex: RegExp };

/**
 * A rule of `proxy_cookie_domain` (`kind: 'value'` matches the whole domain,
 * case-insensitively) or `proxy_cookie_path` (a prefix); a regex replaces
 * the whole value, `$1`… taken from it.
 */
export interface CookieRewrite {
  readonly match: CookieMatch;
  readonly replacement: CompiledValue;
}

/** A rule of `proxy_cookie_flags`: the cookie's name (case-insensitive) or a regex, and its flags. */
export interface CookieFlags {
  readonly cookie: CookieMatch;
  readonly flags: readonly CompiledValue[];
}

/** The proxy module's slots that the upstream merge checks read. */
export const PROXY_MERGE: UpstreamMergeSlots = {
  prefix: 'proxy', buffers: proxyBuffers, bufferSize: proxyBufferSize, busyBuffersSize: proxyBusyBuffersSize,
  tempFileWriteSize: proxyTempFileWriteSize, maxTempFileSize: proxyMaxTempFileSize, cacheZone: proxyCache.zone,
  nextUpstream: proxyNextUpstream, nextUpstreamTries: proxyNextUpstreamTries, nextUpstreamTimeoutMs: proxyNextUpstreamTimeoutMs,
};


/** The static address of a level's own `proxy_pass`, for `resolveUpstreams`. */
export function proxyPassAddress(conf: LevelConf): PassAddress | undefined {
  const pass = conf.own(proxyPass)?.value;
  if (pass?.kind !== 'static') return undefined;
  return { host: pass.host, port: pass.port, defaultPort: pass.scheme === 'https' ? 443 : 80, loc: pass.loc };
}

/** The proxy settings of a level (`ngx_http_proxy_merge_loc_conf`), values bound; undefined without `proxy_pass`. */
export function proxyConf(cx: CompileContext, node: LevelNode, c: ConfChain): ProxyConf | undefined {
  const pass = inheritedIntoIf(node, (n) => n.conf.own(proxyPass)?.value);
  if (!pass) return undefined;
  const vars = cx.scope.variables;
  // nginx 1.30 sends no Connection header by default: keepalive decides whether the connection is reused
  // without proxy_cache_key the handler keys by the upstream request's URL (ngx_http_proxy_create_key)
  const cache = bindCache(c, proxyCache, vars, cx.scope.registry(cacheZones), undefined, c.get(proxyIgnoreHeaders));
  const defaults: [string, string][] = [
    ['Host', '$proxy_host'], ['Connection', ''], ['TE', ''], ['Keep-Alive', ''], ['Expect', ''], ['Upgrade', ''],
    // ngx_http_proxy_cache_headers: with a cache, the client's validators and ranges are not passed
    ...(cache ? CACHE_REQUEST_HEADERS : []),
  ];
  const headers = upstreamHeaders(vars, c.list(proxySetHeader), defaults, pass.loc);
  const hide = hiddenHeaders(['date', 'server', 'x-pad', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate',
    'x-accel-buffering', 'x-accel-charset'], c.list(proxyHideHeader), c.list(proxyPassHeader));
  const redirects = c.list(proxyRedirect);
  const method = c.get(proxyMethod);
  const setBody = c.get(proxySetBody);
  return {
    module: 'proxy',
    target: pass.kind === 'static'
      ? {
          kind: 'static', scheme: pass.scheme, group: groupKey(pass.host, pass.port), uri: pass.uri,
          // ngx_http_proxy_set_vars: a unix domain socket's Host is `localhost`
          hostHeader: pass.host.startsWith('unix:') ? 'localhost'
            : pass.port === undefined || pass.port === (pass.scheme === 'https' ? 443 : 80) ? pass.host
            : `${pass.host}:${pass.port}`,
        }
      : { kind: 'variable', url: vars.bind(pass.url) },
    locationPrefix: pass.locationPrefix,
    headers,
    headerNames: new Set(headers.map((h) => h.lowerName)),
    httpVersion: c.get(proxyHttpVersion),
    passTrailers: c.get(proxyPassTrailers),
    hideHeaders: hide,
    passRequestBody: c.get(proxyPassRequestBody),
    passRequestHeaders: c.get(proxyPassRequestHeaders),
    connectTimeoutMs: c.get(proxyConnectTimeoutMs),
    sendTimeoutMs: c.get(proxySendTimeoutMs),
    readTimeoutMs: c.get(proxyReadTimeoutMs),
    bufferSizeBytes: c.get(proxyBufferSize),
    interceptErrors: c.get(proxyInterceptErrors),
    redirect: (redirects.length === 0 && pass.kind === 'static' ? [defaultRedirect(pass)] : redirects)
      .filter((r) => r !== 'off')
      .map((r) => ('regex' in r ? { regex: r.regex.regex, to: vars.bind(r.to) } : { from: vars.bind(r.from), to: vars.bind(r.to) })),
    ignoreClientAbort: c.get(proxyIgnoreClientAbort),
    buffering: c.get(proxyBuffering),
    accelBuffering: !c.get(proxyIgnoreHeaders).includes('X-Accel-Buffering'),
    accelRedirect: !c.get(proxyIgnoreHeaders).includes('X-Accel-Redirect'),
    accelLimitRate: !c.get(proxyIgnoreHeaders).includes('X-Accel-Limit-Rate'),
    accelCharset: !c.get(proxyIgnoreHeaders).includes('X-Accel-Charset'),
    requestBuffering: c.get(proxyRequestBuffering),
    memoryBytes: c.get(proxyBuffers).count * c.get(proxyBuffers).sizeBytes,
    bufferBytes: c.get(proxyBuffers).sizeBytes,
    tempPath: c.get(proxyTempPath) ?? { dir: cx.scope.fullPath('proxy_temp'), levels: [] },
    maxTempFileBytes: c.get(proxyMaxTempFileSize),
    ...spoolSizes(c, PROXY_MERGE),
    ...nextUpstreamConf(c, PROXY_MERGE),
    tls: upstreamTlsConf(cx, node, c),
    method: method && vars.bind(method),
    setBody: setBody && vars.bind(setBody),
    cookieDomains: cookieRewrites(vars, c.list(proxyCookieDomain)),
    cookiePaths: cookieRewrites(vars, c.list(proxyCookiePath)),
    cookieFlags: cookieFlags(vars, c.list(proxyCookieFlags)),
    cache,
  };
}

/**
 * The request headers of a location (`ngx_http_proxy_init_headers`,
 * `ngx_http_grpc_init_headers`): its `*_set_header` in order, then each
 * default the level does not name (an empty value: the header is not sent).
 */
export function upstreamHeaders(
  vars: VariableRegistry, set: readonly { readonly name: string; readonly value: ValueSource }[], defaults: readonly (readonly [string, string])[],
  loc: SourceLoc,
): ProxyHeader[] {
  const names = new Set(set.map((h) => h.name.toLowerCase()));
  return [
    ...set.map((h) => ({ name: h.name, lowerName: h.name.toLowerCase(), value: vars.bind(h.value) })),
    ...defaults.filter(([n]) => !names.has(n.toLowerCase())).map(([name, value]) => ({
      name, lowerName: name.toLowerCase(), value: vars.bind(vars.value(value, loc)),
    })),
  ];
}

/** Lowercase names of the response headers not passed (`ngx_http_upstream_hide_headers_hash`): the module's, and `*_hide_header`, but `*_pass_header`. */
export function hiddenHeaders(defaults: readonly string[], hide: readonly string[], pass: readonly string[]): Set<string> {
  const hidden = new Set(defaults);
  for (const h of hide) hidden.add(h.toLowerCase());
  for (const h of pass) hidden.delete(h.toLowerCase());
  return hidden;
}

/** The bound `proxy_cookie_domain`/`_path` rules of a location; undefined for none or `off`. */
function cookieRewrites(vars: VariableRegistry, rules: readonly (CookieRewriteDef | 'off')[]): CookieRewrite[] | undefined {
  const bound = rules.filter((r): r is CookieRewriteDef => r !== 'off').map((r) => ({
    match: cookieMatch(vars, r.match), replacement: vars.bind(r.replacement),
  }));
  return bound.length > 0 ? bound : undefined;
}

/** The bound `proxy_cookie_flags` rules of a location; undefined for none or `off`. */
function cookieFlags(vars: VariableRegistry, rules: readonly (CookieFlagsDef | 'off')[]): CookieFlags[] | undefined {
  const bound = rules.filter((r): r is CookieFlagsDef => r !== 'off').map((r) => ({
    cookie: cookieMatch(vars, r.cookie), flags: r.flags.map((f) => vars.bind(f)),
  }));
  return bound.length > 0 ? bound : undefined;
}

function cookieMatch(vars: VariableRegistry, m: CookieRewriteDef['match']): CookieMatch {
  return m.kind === 'regex' ? { kind: 'regex', regex: m.regex.regex } : { kind: 'value', value: vars.bind(m.value) };
}

/**
 * Reads the upstream TLS files of every location (and `if` block) whose
 * `proxy_pass` is `https://…` or has variables, in configuration order as
 * nginx's merge does (`readProxyTls`).
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function loadProxyTls(cx: CompileContext, servers: readonly LevelNode[]): void {
  for (const node of levelsInOrder(servers)) {
    const pass = inheritedIntoIf(node, (n) => n.conf.own(proxyPass)?.value);
    if (pass && (pass.kind === 'variable' || pass.scheme === 'https')) readProxyTls(cx, node);
  }
}

/** Keeps a level's `proxy_temp_path` (default or set) among the directories created at start: nginx creates every one. */
export function keepProxyTempDir(cx: CompileContext, c: ConfChain): void {
  cx.tempDirs.add((c.get(proxyTempPath) ?? { dir: cx.scope.fullPath('proxy_temp') }).dir);
}
