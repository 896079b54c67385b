/**
 * The http core module (`src/http/ngx_http_core_module.c`, `ngx_http.c`) and
 * the index and try_files directives: the `http`, `server`, `location` and
 * `limit_except` blocks, `listen`, `server_name`, `root`/`alias`, `types`,
 * `error_page`, timeouts and limits.
 */
import { isIP } from 'node:net';
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV, HTTP_SRV_LOC, HTTP_SRV_LOC_LIF, type Context } from '../flags.js';
import { ipv4Address, parseListenAddress, parseListenParams, type ListenAddress, type ListenParams } from '../listen.js';
import { compileRegex, type NginxRegex } from '../regex.js';
import {
  bitmaskSetter, DirectiveFailure, enumSetter, fail, flagSetter, LevelConf, listSlot, msecSetter, noEffect, numSetter, offSetter,
  parseNumber, parseOffset, parseMsec, parseSize, parseTime, pathSetter, rule, ruleSetter, slot, sizeSetter, valueSizeSetter, type DirectiveSpec, type PostCheck,
  type Rule, type SetContext, type TempPathValue,
} from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import type { ErrorLogTarget } from './core.js';

const CORE = 'ngx_http_core_module';

// --- blocks ----------------------------------------------------------------

/** How a `location` matches, with its regex when it has one. */
export interface LocationDef {
  readonly match: 'exact' | 'prefix' | 'prefix-no-regex' | 'regex' | 'regex-caseless' | 'named';
  readonly name: string;
  readonly regex: NginxRegex | undefined;
  readonly loc: SourceLoc;
}

/** The `location` that opened a level (not inherited). */
export const locationDef = slot<LocationDef | undefined>('location', undefined, false);

/** One parsed `listen`. */
export interface ListenDef extends ListenAddress, ListenParams {
  readonly loc: SourceLoc;
}

export const listens = listSlot<ListenDef>('listen', false);
/**
 * The directives that give a location its content handler (nginx's
 * `clcf->handler`, which each of their setters assigns).
 */
export type ContentHandlerName = 'proxy_pass' | 'fastcgi_pass' | 'uwsgi_pass' | 'scgi_pass' | 'grpc_pass' | 'memcached_pass' | 'empty_gif' | 'stub_status' | 'flv' | 'mp4';

/** The level's content handler: the last directive of the level that sets one (not inherited, as `clcf->handler` is not merged). */
export const contentHandler = slot<ContentHandlerName | undefined>('content_handler', undefined, false);

/** Makes `name` the level's content handler in place of one an earlier directive set, as nginx's setters assign `clcf->handler`. */
export function setContentHandler(cx: SetContext, name: ContentHandlerName, loc: SourceLoc): void {
  cx.level.replace(contentHandler, name, loc);
}

/** `server_name` entries, lowercased unless they are regexes. */
export const serverNames = listSlot<{ readonly name: string; readonly regex: NginxRegex | undefined }>('server_name', false);

/** The methods a `limit_except` block lets through. */
export const limitExceptMethods = slot<readonly string[] | undefined>('limit_except', undefined, false);

/**
 * `listen ADDRESS[:PORT] [default_server] [ssl] …` (`ngx_http_core_listen`);
 * an address a server already listens on is `a duplicate listen ADDR`
 * (`ngx_http_add_server` in `src/http/ngx_http.c`).
 */
function setListen(d: Directive, cx: SetContext): void {
  const params = parseListenParams(d, 'http', cx);
  for (const addr of parseListenAddress(d.args[0]!)) {
    // Object.assign, not `{ ...addr, ...params }`: V8 gives each object a spread after the first makes a map of its own
    const def: ListenDef = Object.assign({ loc: d.loc }, addr, params);
    if (cx.level.ownList(listens)?.some((l) => l.value.host === def.host && l.value.port === def.port)) {
      fail(`a duplicate listen ${def.addrText}`);
    }
    cx.level.append(listens, def, d.loc);
  }
}

function setServerName(d: Directive, cx: SetContext): void {
  for (const raw of d.args) {
    const ch = raw[0];
    if ((ch === '*' && (raw.length < 3 || raw[1] !== '.')) || (ch === '.' && raw.length < 2)) {
      fail(`server name "${raw}" is invalid`);
    }
    if (raw.includes('/')) cx.warn(`server name "${raw}" has suspicious symbols`, 'server-name-symbols');
    if (ch !== '~') {
      cx.level.append(serverNames, { name: raw.toLowerCase(), regex: undefined }, d.loc);
      continue;
    }
    if (raw.length === 1) fail(`empty regex in server name "${raw}"`);
    const source = raw.slice(1);
    const regex = compileRegex(source, /[A-Z]/.test(source));
    for (const name of regex.captureNames) cx.scope.variables.declare(name, { kind: 'set' });
    cx.level.append(serverNames, { name: raw, regex }, d.loc);
  }
}

function setLocation(d: Directive, cx: SetContext): { context: Context; level: LevelConf } {
  let match: LocationDef['match'];
  let name: string;
  let regex: NginxRegex | undefined;
  const regexLocation = (src: string, caseless: boolean): NginxRegex => {
    const r = compileRegex(src, caseless);
    for (const n of r.captureNames) cx.scope.variables.declare(n, { kind: 'set' });
    return r;
  };
  if (d.args.length === 2) {
    const [mod, uri] = d.args as [string, string];
    name = uri;
    if (mod === '=') match = 'exact';
    else if (mod === '^~') match = 'prefix-no-regex';
    else if (mod === '~') [match, regex] = ['regex', regexLocation(uri, false)];
    else if (mod === '~*') [match, regex] = ['regex-caseless', regexLocation(uri, true)];
    else fail(`invalid location modifier "${mod}"`);
  } else {
    const arg = d.args[0]!;
    if (arg.startsWith('=')) [match, name] = ['exact', arg.slice(1)];
    else if (arg.startsWith('^~')) [match, name] = ['prefix-no-regex', arg.slice(2)];
    else if (arg.startsWith('~*')) [match, name] = ['regex-caseless', arg.slice(2)];
    else if (arg.startsWith('~')) [match, name] = ['regex', arg.slice(1)];
    else [match, name] = [arg.startsWith('@') ? 'named' : 'prefix', arg];
    if (match === 'regex' || match === 'regex-caseless') regex = regexLocation(name, match === 'regex-caseless');
  }
  const parent = cx.context === 'location' ? cx.level.own(locationDef)?.value : undefined;
  if (parent) {
    if (parent.match === 'exact') fail(`location "${name}" cannot be inside the exact location "${parent.name}"`);
    if (parent.match === 'named') fail(`location "${name}" cannot be inside the named location "${parent.name}"`);
    if (match === 'named') fail(`named location "${name}" can be on the server level only`);
    if (!regex && !name.startsWith(parent.name)) fail(`location "${name}" is outside location "${parent.name}"`);
  }
  const level = new LevelConf();
  level.set(locationDef, { match, name, regex, loc: d.loc }, d.loc);
  return { context: 'location', level };
}

// --- values ----------------------------------------------------------------

/**
 * `root` or `alias`: path template, which one, and for an alias what the
 * location it is set in makes of it (`ngx_http_core_root`): the length of
 * the location's name, the part of the URI it replaces, or a regex
 * location's whole path.
 */
export interface DocRootDef {
  readonly alias: boolean;
  readonly path: ValueSource;
  readonly aliasRegex: boolean;
  readonly aliasLength: number;
}
export const docRoot = slot<DocRootDef | undefined>('root', undefined);

function setRoot(d: Directive, cx: SetContext): void {
  const alias = d.name === 'alias';
  const own = cx.level.own(docRoot);
  if (own) {
    if (own.value!.alias === alias) throw new DirectiveFailure('is duplicate');
    fail(`"${d.name}" directive is duplicate, "${own.value!.alias ? 'alias' : 'root'}" directive was specified earlier`);
  }
  const def = cx.level.own(locationDef)?.value;
  if (def?.match === 'named' && alias) fail('the "alias" directive cannot be used inside the named location');
  let path = d.args[0]!;
  for (const v of ['document_root', 'realpath_root']) {
    if (path.includes(`$${v}`) || path.includes(`\${${v}}`)) {
      fail(`the $${v} variable cannot be used in the "${d.name}" directive`);
    }
  }
  if (!alias && path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  if (!path.startsWith('$')) path = cx.scope.fullPath(path);
  const aliasRegex = alias && def?.regex !== undefined;
  const aliasLength = alias && !aliasRegex ? (def?.name.length ?? 0) : 0;
  cx.level.set(docRoot, { alias, path: cx.scope.variables.value(path, d.loc), aliasRegex, aliasLength }, d.loc);
}

export const indexFiles = listSlot<ValueSource>('index');

function setIndex(d: Directive, cx: SetContext): void {
  d.args.forEach((name, i) => {
    if (name.length === 0) fail(`index "${name}" in "index" directive is invalid`);
    if (name.startsWith('/') && i !== d.args.length - 1) {
      cx.warn('only the last index in "index" directive should be absolute', 'index-absolute');
    }
    cx.level.append(indexFiles, cx.scope.variables.value(name, d.loc), d.loc);
  });
}

/** `try_files FILE … URI|=CODE`. */
export interface TryFilesDef {
  /** Items before the last; `testDir` when written with a final `/` (which is removed from the value). */
  readonly files: readonly { readonly value: ValueSource; readonly testDir: boolean }[];
  readonly fallback: { readonly uri: ValueSource } | { readonly code: number };
}
export const tryFiles = slot<TryFilesDef | undefined>('try_files', undefined, false);

function setTryFiles(d: Directive, cx: SetContext): void {
  if (cx.level.own(tryFiles)) throw new DirectiveFailure('is duplicate');
  const last = d.args[d.args.length - 1]!;
  let fallback: TryFilesDef['fallback'];
  if (last.startsWith('=')) {
    const code = parseNumber(last.slice(1));
    if (code === undefined || code > 999) fail(`invalid code "${last}"`);
    fallback = { code };
  } else fallback = { uri: cx.scope.variables.value(last, d.loc) };
  const files = d.args.slice(0, -1).map((f) => {
    const testDir = f.length > 0 && f.endsWith('/');
    return { value: cx.scope.variables.value(testDir ? f.slice(0, -1) : f, d.loc), testDir };
  });
  cx.level.set(tryFiles, { files, fallback }, d.loc);
}

/** The `types { … }` map of a level: extension → MIME type. */
export const types = slot<ReadonlyMap<string, string> | undefined>('types', undefined);

/**
 * `types_hash_max_size` and `types_hash_bucket_size` (nginx's defaults 1024
 * and 64): jinx builds no hash, and reads them only to refuse the sizes
 * nginx's `ngx_hash_init` cannot build the types hash with.
 */
export const typesHashMaxSize = slot<number | undefined>('types_hash_max_size', undefined);
export const typesHashBucketSize = slot<number | undefined>('types_hash_bucket_size', undefined);

/**
 * `server_names_hash_max_size` and `server_names_hash_bucket_size` (nginx's
 * defaults 512 and the CPU's cache line, 64 here): jinx keeps server names
 * in Maps, and reads them to give the errors and the `could not build
 * optimal server_names_hash` warning of nginx's `ngx_hash_init`.
 */
export const serverNamesHashMaxSize = slot<number>('server_names_hash_max_size', 512);
export const serverNamesHashBucketSize = slot<number>('server_names_hash_bucket_size', 64);

/** `ngx_conf_set_num_slot` for a hash size. @throws DirectiveFailure `invalid number` */
function hashSize(d: Directive): number {
  const n = parseNumber(d.args[0]!);
  if (n === undefined) throw new DirectiveFailure('invalid number');
  return n;
}

/** nginx's built-in types when no `types` block applies (`ngx_http_core_default_types`). */
export const DEFAULT_TYPES: ReadonlyMap<string, string> = new Map([
  ['html', 'text/html'], ['gif', 'image/gif'], ['jpg', 'image/jpeg'],
]);

function setTypes(d: Directive, cx: SetContext): void {
  const own = cx.level.own(types);
  const map = new Map(own?.value ?? []);
  for (const entry of d.block ?? []) {
    if (entry.kind === 'error') throw entry.error;
    if (entry.block !== null) fail('unexpected "{"', entry.loc);
    for (const ext of entry.args.map((e) => e.toLowerCase())) {
      const old = map.get(ext);
      if (old !== undefined) {
        cx.warn(`duplicate extension "${ext}", content type: "${entry.name}", previous content type: "${old}"`, 'duplicate-extension', entry.loc);
      }
      map.set(ext, entry.name);
    }
  }
  cx.level.replace(types, map, d.loc);
}

/** `error_page CODE… [=[RESPONSE]] URI`: one entry per code. */
export interface ErrorPageDef {
  readonly code: number;
  readonly overwrite: number | 'from-target' | undefined;
  readonly target: ValueSource;
}
export const errorPages = listSlot<ErrorPageDef>('error_page');
/**
 * `early_hints` (nginx 1.29): the values that pass an upstream's `103 Early
 * Hints` on to the client when one is neither empty nor "0"
 * (`ngx_http_set_predicate_slot`, appended at a level, inherited whole).
 */
export const earlyHints = listSlot<ValueSource>('early_hints');

function setErrorPage(d: Directive, cx: SetContext): void {
  const args = d.args;
  let overwrite: ErrorPageDef['overwrite'];
  let codesEnd = args.length - 1;
  const maybe = args[args.length - 2]!;
  if (maybe.startsWith('=')) {
    if (args.length === 2) fail(`invalid value "${maybe}"`);
    if (maybe.length > 1) {
      const n = parseNumber(maybe.slice(1));
      if (n === undefined) fail(`invalid value "${maybe}"`);
      overwrite = n;
    } else overwrite = 'from-target';
    codesEnd--;
  }
  const target = cx.scope.variables.value(args[args.length - 1]!, d.loc);
  for (const c of args.slice(0, codesEnd)) {
    const code = parseNumber(c);
    if (code === undefined || code === 499) fail(`invalid value "${c}"`);
    if (code < 300 || code > 599) fail(`value "${c}" must be between 300 and 599`);
    cx.level.append(errorPages, { code, overwrite, target }, d.loc);
  }
}

export const internal = slot('internal', false, false);
export const defaultType = slot('default_type', 'text/plain');
export const clientMaxBodySize = slot('client_max_body_size', 1024 * 1024);
/** Two memory pages (`2 * ngx_pagesize`), nginx's default: 8k with x86_64's 4k pages. */
export const clientBodyBufferSize = slot('client_body_buffer_size', 8 * 1024);
/** `subrequest_output_buffer_size`: a page of memory by default; what an SSI `include … set=` may keep. */
export const subrequestOutputBufferSize = slot('subrequest_output_buffer_size', 4 * 1024);
/** `off`, `on` (the file is kept) or `clean` (removed when the request ends). */
export const clientBodyInFileOnly = slot<'off' | 'on' | 'clean'>('client_body_in_file_only', 'off');
/** Resolved against the prefix when the configuration is compiled. */
export const clientBodyTempPath = slot<TempPathValue | undefined>('client_body_temp_path', undefined);
export const keepaliveTimeoutMs = slot('keepalive_timeout', 75_000);
/** The second argument of `keepalive_timeout`: the `Keep-Alive: timeout=N` header, in seconds. */
export const keepaliveHeaderSec = slot<number | undefined>('keepalive_timeout header', undefined);
export const keepaliveRequests = slot('keepalive_requests', 1000);
export const keepaliveTimeMs = slot('keepalive_time', 3_600_000);
/** `keepalive_min_timeout` (nginx 1.27.4): how long a kept-alive connection is not closed to reuse it or by a graceful stop. */
export const keepaliveMinTimeoutMs = slot('keepalive_min_timeout', 0);
/** `keepalive_disable`: the browsers keep-alive is disabled for (`none` alone: none). */
export const keepaliveDisable = slot<readonly ('none' | 'msie6' | 'safari')[]>('keepalive_disable', ['msie6']);
export const sendTimeoutMs = slot('send_timeout', 60_000);
/** `limit_rate` and `limit_rate_after`: sizes, with variables or not (none: 0). */
export const limitRate = slot<ValueSource | undefined>('limit_rate', undefined);
export const limitRateAfter = slot<ValueSource | undefined>('limit_rate_after', undefined);
export const clientHeaderTimeoutMs = slot('client_header_timeout', 60_000);
export const clientBodyTimeoutMs = slot('client_body_timeout', 60_000);
/** `aio`: `off` (nginx's default: files are read in the worker) or `threads[=POOL]` (in a thread pool). */
export const aio = slot<string | undefined>('aio', undefined);
export const lingeringClose = slot<'off' | 'on' | 'always'>('lingering_close', 'on');
export const lingeringTimeMs = slot('lingering_time', 30_000);
export const lingeringTimeoutMs = slot('lingering_timeout', 5_000);
export const resetTimedoutConnection = slot('reset_timedout_connection', false);
export const logNotFound = slot('log_not_found', true);
/** `etag`: static files are sent with an ETag. */
export const etag = slot('etag', true);
/** `if_modified_since`: how `If-Modified-Since` is compared with a response's `Last-Modified`. */
export const ifModifiedSince = slot<'off' | 'exact' | 'before'>('if_modified_since', 'exact');
/** `max_ranges`: the most ranges a range request may ask for (unlimited when unset). */
export const maxRanges = slot<number | undefined>('max_ranges', undefined);
export const serverTokens = slot<'on' | 'off' | 'build'>('server_tokens', 'on');
export const absoluteRedirect = slot('absolute_redirect', true);
export const serverNameInRedirect = slot('server_name_in_redirect', false);
export const portInRedirect = slot('port_in_redirect', true);
export const recursiveErrorPages = slot('recursive_error_pages', false);
export const chunkedTransferEncoding = slot('chunked_transfer_encoding', true);
/** `log_subrequest`: subrequests (`auth_request`, `mirror`, SSI includes) are written to the access log of their location. */
export const logSubrequest = slot('log_subrequest', false);
export const msiePadding = slot('msie_padding', true);
export const satisfy = slot<'all' | 'any'>('satisfy', 'all');
export const mergeSlashes = slot('merge_slashes', true);
export const underscoresInHeaders = slot('underscores_in_headers', false);
export const ignoreInvalidHeaders = slot('ignore_invalid_headers', true);
export const largeClientHeaderBuffers = slot('large_client_header_buffers', { count: 4, sizeBytes: 8192 });
export const clientHeaderBufferSize = slot('client_header_buffer_size', 1024);
/**
 * `connection_pool_size` in bytes (nginx's default `64 * sizeof(void *)`, 512
 * on 64-bit): no counterpart in jinx, read only by the merge check of
 * `large_client_header_buffers` (`checkCoreServerMerge`).
 */
export const connectionPoolSizeBytes = slot('connection_pool_size', 512);
/** `max_headers` (nginx 1.29.6): the most header lines a request may have. */
export const maxHeaders = slot('max_headers', 1000);
export const resolverTimeoutMs = slot('resolver_timeout', 30_000);

/** `resolver ADDRESS … [valid=TIME] [ipv4=on|off] [ipv6=on|off] [status_zone=…]`. */
export interface ResolverDef {
  readonly servers: readonly string[];
  readonly validSec: number | undefined;
  readonly ipv4: boolean;
  readonly ipv6: boolean;
}
export const resolver = slot<ResolverDef | undefined>('resolver', undefined);

/** `ngx_resolver_create` (`src/core/ngx_resolver.c`): the addresses and parameters of `resolver`. */
export function parseResolver(d: Directive): ResolverDef {
  const servers: string[] = [];
  let validSec: number | undefined;
  let ipv4 = true;
  let ipv6 = true;
  for (const a of d.args) {
    if (a.startsWith('valid=')) {
      const v = parseTime(a.slice(6), true);
      if (v === undefined) fail(`invalid parameter: ${a}`);
      validSec = v;
    } else if (a.startsWith('ipv4=') || a.startsWith('ipv6=')) {
      const on = a.endsWith('=on');
      if (!on && !a.endsWith('=off')) fail(`invalid parameter: ${a}`);
      if (a.startsWith('ipv4')) ipv4 = on;
      else ipv6 = on;
    } else if (a.startsWith('status_zone=')) continue;
    else {
      const v6 = /^\[([^\]]+)\](?::(.*))?$/s.exec(a);
      // ngx_parse_inet_url: without brackets, the port is what follows the first `:` (so `::1` is an invalid port)
      const colon = a.indexOf(':');
      const host = v6 ? v6[1]! : colon === -1 ? a : a.slice(0, colon);
      const port = v6 ? v6[2] : colon === -1 ? undefined : a.slice(colon + 1);
      // ngx_parse_inet_url: the port is read before the host is resolved
      const portNumber = port === undefined ? undefined : parseNumber(port);
      if (port !== undefined && (portNumber === undefined || portNumber < 1 || portNumber > 65535)) fail(`invalid port in resolver "${a}"`);
      // an IPv4 host as ngx_inet_addr or getaddrinfo reads it (`127.0.0.`, `127.1`)
      if (v6 && (isIP(host) !== 6 || host.includes('%'))) fail(`invalid IPv6 address in resolver "${a}"`);
      const address = v6 ? host : ipv4Address(host);
      if (address === undefined) fail(`host not found in resolver "${a}"`);
      servers.push(portNumber ? (isIP(address) === 6 ? `[${address}]:${portNumber}` : `${address}:${portNumber}`) : address);
    }
  }
  if (!ipv4 && !ipv6) fail('"ipv4" and "ipv6" cannot both be "off"');
  if (servers.length === 0) fail('no name servers defined');
  return { servers, validSec, ipv4, ipv6 };
}

function setResolver(d: Directive, cx: SetContext): void {
  if (cx.level.own(resolver)) throw new DirectiveFailure('is duplicate');
  cx.level.set(resolver, parseResolver(d), d.loc);
}

function setKeepaliveTimeout(d: Directive, cx: SetContext): void {
  if (cx.level.own(keepaliveTimeoutMs)) throw new DirectiveFailure('is duplicate');
  const v = parseMsec(d.args[0]!);
  if (v === undefined) throw new DirectiveFailure('invalid value');
  const header = d.args[1] !== undefined ? parseTime(d.args[1], true) : undefined;
  if (d.args[1] !== undefined && header === undefined) throw new DirectiveFailure('invalid value');
  cx.level.set(keepaliveTimeoutMs, v, d.loc);
  if (header !== undefined) cx.level.set(keepaliveHeaderSec, header, d.loc);
}

const none = (name: string, contexts: readonly Context[], args: DirectiveSpec['args'], note: string, r: Rule): DirectiveSpec =>
  noEffect({ name, module: CORE, contexts, args, note }, r);

/**
 * `ngx_http_core_set_aio`: `off`, `threads[=POOL]`; `on` needs file AIO,
 * which Debian's nginx is built without (`"aio on" is unsupported on this platform`).
 */
function parseAio(d: Directive, cx: SetContext): string {
  const v = d.args[0]!;
  if (v === 'off') return v;
  if (v === 'on') fail('"aio on" is unsupported on this platform');
  if (v === 'threads' || v.startsWith('threads=')) {
    const name = v.length > 8 ? v.slice(8) : 'default';
    if (name.includes('$')) cx.scope.variables.value(name, d.loc);
    else if (!cx.scope.threadPools.has(name)) cx.scope.threadPools.set(name, { defined: name === 'default', loc: d.loc });
    return v;
  }
  throw new DirectiveFailure('invalid value');
}

/** `ngx_http_core_directio`: `off` or an offset. */
function parseDirectio(d: Directive): number | 'off' {
  if (d.args[0] === 'off') return 'off';
  const v = parseOffset(d.args[0]!);
  if (v === undefined) throw new DirectiveFailure('invalid value');
  return v;
}

/**
 * `ngx_http_core_open_file_cache`: `off` or `max=N [inactive=TIME]`;
 * `invalid "open_file_cache" parameter "…"`, `"open_file_cache" must have the "max" parameter`.
 */
function parseOpenFileCache(d: Directive): string {
  let max = 0;
  let off = false;
  for (const p of d.args) {
    if (p.startsWith('max=') && (parseNumber(p.slice(4)) ?? 0) > 0) max = parseNumber(p.slice(4))!;
    else if (p.startsWith('inactive=') && parseTime(p.slice(9), true) !== undefined) continue;
    else if (p === 'off') off = true;
    else fail(`invalid "open_file_cache" parameter "${p}"`);
  }
  if (!off && max === 0) fail('"open_file_cache" must have the "max" parameter');
  return d.args.join(' ');
}

/**
 * `ngx_http_core_pool_size`, the post handler of `connection_pool_size` and
 * `request_pool_size`: at least `NGX_MIN_POOL_SIZE` (112 on 64-bit), a
 * multiple of `NGX_POOL_ALIGNMENT` (16).
 */
export const poolSize = (v: number): void => {
  if (v < 112) fail('the pool size must be no less than 112');
  if (v % 16 !== 0) fail('the pool size must be a multiple of 16');
};

/** `ngx_conf_set_size_slot` with `ngx_http_core_pool_size` as its post handler: the size in bytes. */
function parsePoolSize(d: Directive): number {
  const v = parseSize(d.args[0]!);
  if (v === undefined) throw new DirectiveFailure('invalid value');
  poolSize(v);
  return v;
}

/**
 * `ngx_http_core_lowat_check` and its proxy/FastCGI counterparts: Debian's
 * nginx is built without `SO_SNDLOWAT`, so the value is ignored with a warning.
 */
export const lowatIgnored: PostCheck = (_v, d, cx) => cx.warn(`"${d.name}" is not supported, ignored`, 'lowat-ignored');

/**
 * `ngx_http_disable_symlinks`: `off`, `on` or `if_not_owner`, and
 * `from=PATH` (not with `off`).
 */
function parseDisableSymlinks(d: Directive, cx: SetContext): string {
  let mode: string | undefined;
  let from = false;
  for (const p of d.args) {
    if (p === 'off' || p === 'on' || p === 'if_not_owner') mode = p;
    else if (p.startsWith('from=')) {
      cx.scope.variables.value(p.slice(5), d.loc);
      from = true;
    } else fail(`invalid parameter "${p}"`);
  }
  if (mode === undefined) fail('"disable_symlinks" must have "off", "on" or "if_not_owner" parameter');
  if (d.args.length === 2 && !from) fail(`duplicate parameters "${d.args[0]} ${d.args[1]}"`);
  if (from && mode === 'off') fail('"from=" cannot be used with "off" parameter');
  return mode;
}

const TUNING = 'a kernel or memory tuning knob with no counterpart in jinx';

export const httpCoreDirectives: readonly DirectiveSpec[] = [
  {
    name: 'http', module: 'ngx_http_module', contexts: ['main'], args: ['NOARGS'], block: 'context', effect: 'runtime',
    set: (_d, cx) => {
      if (cx.scope.seenBlocks.has('http')) throw new DirectiveFailure('is duplicate');
      cx.scope.seenBlocks.add('http');
      return { context: 'http', level: new LevelConf() };
    },
  },
  {
    name: 'server', module: CORE, contexts: ['http'], args: ['NOARGS'], block: 'context', effect: 'runtime',
    set: () => ({ context: 'server', level: new LevelConf() }),
  },
  {
    name: 'location', module: CORE, contexts: ['server', 'location'], args: ['TAKE1', 'TAKE2'], block: 'context',
    effect: 'runtime', set: setLocation,
  },
  {
    name: 'limit_except', module: CORE, contexts: ['location'], args: ['1MORE'], block: 'context', effect: 'runtime',
    set: (d) => {
      const methods = d.args.map((m) => {
        if (!/^(GET|HEAD|POST|PUT|DELETE|MKCOL|COPY|MOVE|OPTIONS|PROPFIND|PROPPATCH|LOCK|UNLOCK|PATCH)$/.test(m)) {
          fail(`invalid method "${m}"`);
        }
        return m;
      });
      if (methods.includes('GET')) methods.push('HEAD');
      const level = new LevelConf();
      level.set(limitExceptMethods, methods, d.loc);
      return { context: 'limit_except', level };
    },
  },
  {
    name: 'listen', module: CORE, contexts: ['server'], args: ['1MORE'], effect: 'runtime',
    set: setListen,
  },
  { name: 'server_name', module: CORE, contexts: ['server'], args: ['1MORE'], effect: 'runtime', set: setServerName },
  { name: 'root', module: CORE, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime', set: setRoot },
  { name: 'alias', module: CORE, contexts: ['location'], args: ['TAKE1'], effect: 'runtime', set: setRoot },
  { name: 'index', module: 'ngx_http_index_module', contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: setIndex },
  { name: 'try_files', module: 'ngx_http_try_files_module', contexts: ['server', 'location'], args: ['2MORE'], effect: 'runtime', set: setTryFiles },
  { name: 'types', module: CORE, contexts: HTTP_SRV_LOC, args: ['NOARGS'], block: 'raw', effect: 'runtime', set: setTypes },
  {
    name: 'default_type', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(defaultType)) throw new DirectiveFailure('is duplicate');
      cx.level.set(defaultType, d.args[0]!, d.loc);
    },
  },
  { name: 'error_page', module: CORE, contexts: HTTP_SRV_LOC_LIF, args: ['2MORE'], effect: 'runtime', set: setErrorPage },
  {
    name: 'early_hints', module: CORE, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: (d, cx) => {
      for (const a of d.args) cx.level.append(earlyHints, cx.scope.variables.value(a, d.loc), d.loc);
    },
  },
  {
    name: 'internal', module: CORE, contexts: ['location'], args: ['NOARGS'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(internal)) throw new DirectiveFailure('is duplicate');
      cx.level.set(internal, true, d.loc);
    },
  },
  { name: 'client_max_body_size', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: offSetter(clientMaxBodySize) },
  { name: 'keepalive_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setKeepaliveTimeout },
  { name: 'keepalive_requests', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: numSetter(keepaliveRequests) },
  { name: 'keepalive_time', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(keepaliveTimeMs) },
  {
    name: 'keepalive_min_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: msecSetter(keepaliveMinTimeoutMs),
  },
  {
    name: 'keepalive_disable', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    set: bitmaskSetter(keepaliveDisable, ['none', 'msie6', 'safari']),
  },
  { name: 'send_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(sendTimeoutMs) },
  { name: 'client_header_timeout', module: CORE, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: msecSetter(clientHeaderTimeoutMs) },
  { name: 'client_body_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(clientBodyTimeoutMs) },
  { name: 'log_not_found', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(logNotFound) },
  { name: 'etag', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(etag) },
  {
    name: 'if_modified_since', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(ifModifiedSince, ['off', 'exact', 'before']),
  },
  {
    name: 'max_ranges', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(maxRanges)) throw new DirectiveFailure('is duplicate');
      const n = parseNumber(d.args[0]!);
      if (n === undefined) throw new DirectiveFailure('invalid number');
      cx.level.set(maxRanges, n, d.loc);
    },
  },
  { name: 'server_tokens', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: enumSetter(serverTokens, ['on', 'off', 'build']) },
  { name: 'absolute_redirect', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(absoluteRedirect) },
  { name: 'server_name_in_redirect', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(serverNameInRedirect) },
  { name: 'port_in_redirect', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(portInRedirect) },
  { name: 'recursive_error_pages', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(recursiveErrorPages) },
  { name: 'chunked_transfer_encoding', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(chunkedTransferEncoding) },
  { name: 'msie_padding', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(msiePadding) },
  { name: 'satisfy', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: enumSetter(satisfy, ['all', 'any']) },
  { name: 'merge_slashes', module: CORE, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(mergeSlashes) },
  { name: 'underscores_in_headers', module: CORE, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(underscoresInHeaders) },
  { name: 'ignore_invalid_headers', module: CORE, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(ignoreInvalidHeaders) },
  {
    name: 'large_client_header_buffers', module: CORE, contexts: HTTP_SRV, args: ['TAKE2'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(largeClientHeaderBuffers)) throw new DirectiveFailure('is duplicate');
      const count = parseNumber(d.args[0]!);
      const sizeBytes = parseSize(d.args[1]!);
      if (!count || !sizeBytes) throw new DirectiveFailure('invalid value');
      cx.level.set(largeClientHeaderBuffers, { count, sizeBytes }, d.loc);
    },
  },
  { name: 'client_header_buffer_size', module: CORE, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(clientHeaderBufferSize) },
  { name: 'max_headers', module: CORE, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: numSetter(maxHeaders) },
  { name: 'resolver', module: CORE, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: setResolver },
  { name: 'resolver_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(resolverTimeoutMs) },
  { name: 'client_body_buffer_size', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(clientBodyBufferSize) },
  {
    name: 'subrequest_output_buffer_size', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: sizeSetter(subrequestOutputBufferSize),
  },
  {
    name: 'client_body_temp_path', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], effect: 'runtime',
    set: (d, cx) => pathSetter(clientBodyTempPath, (p) => cx.scope.fullPath(p))(d, cx),
  },
  {
    name: 'client_body_in_file_only', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(clientBodyInFileOnly, ['off', 'on', 'clean']),
  },
  none('client_body_in_single_buffer', HTTP_SRV_LOC, ['FLAG'], TUNING, rule.flag),
  { name: 'lingering_close', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: enumSetter(lingeringClose, ['off', 'on', 'always']) },
  { name: 'lingering_time', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(lingeringTimeMs) },
  { name: 'lingering_timeout', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(lingeringTimeoutMs) },
  {
    name: 'reset_timedout_connection', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime',
    set: flagSetter(resetTimedoutConnection),
  },
  none('sendfile', HTTP_SRV_LOC_LIF, ['FLAG'], 'files are streamed by the runtime', rule.flag),
  none('sendfile_max_chunk', HTTP_SRV_LOC, ['TAKE1'], 'files are streamed by the runtime', rule.size()),
  none('tcp_nopush', HTTP_SRV_LOC, ['FLAG'], TUNING, rule.flag),
  none('tcp_nodelay', HTTP_SRV_LOC, ['FLAG'], 'jinx always sets TCP_NODELAY', rule.flag),
  { name: 'aio', module: CORE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: ruleSetter('aio', rule.custom(parseAio, aio)) },
  none('aio_write', HTTP_SRV_LOC, ['FLAG'], 'temporary files are written through node\'s thread pool', rule.flag),
  none('directio', HTTP_SRV_LOC, ['TAKE1'], TUNING, rule.custom(parseDirectio)),
  none('directio_alignment', HTTP_SRV_LOC, ['TAKE1'], TUNING, rule.off),
  none('open_file_cache', HTTP_SRV_LOC, ['TAKE1', 'TAKE2'], 'jinx does not cache file descriptors', rule.custom(parseOpenFileCache)),
  none('open_file_cache_valid', HTTP_SRV_LOC, ['TAKE1'], 'jinx does not cache file descriptors', rule.sec),
  none('open_file_cache_min_uses', HTTP_SRV_LOC, ['TAKE1'], 'jinx does not cache file descriptors', rule.num()),
  none('open_file_cache_errors', HTTP_SRV_LOC, ['FLAG'], 'jinx does not cache file descriptors', rule.flag),
  none('open_file_cache_events', HTTP_SRV_LOC, ['FLAG'], 'jinx does not cache file descriptors', rule.flag),
  none('server_names_hash_bucket_size', ['http'], ['TAKE1'], 'server names are kept in a Map', rule.custom(hashSize, serverNamesHashBucketSize)),
  none('server_names_hash_max_size', ['http'], ['TAKE1'], 'server names are kept in a Map', rule.custom(hashSize, serverNamesHashMaxSize)),
  none('types_hash_bucket_size', HTTP_SRV_LOC, ['TAKE1'], 'types are kept in a Map', rule.custom(hashSize, typesHashBucketSize)),
  none('types_hash_max_size', HTTP_SRV_LOC, ['TAKE1'], 'types are kept in a Map', rule.custom(hashSize, typesHashMaxSize)),
  none('variables_hash_bucket_size', ['http'], ['TAKE1'], 'variables are bound at configuration time', rule.num()),
  none('variables_hash_max_size', ['http'], ['TAKE1'], 'variables are bound at configuration time', rule.num()),
  none('connection_pool_size', HTTP_SRV, ['TAKE1'], TUNING, rule.custom(parsePoolSize, connectionPoolSizeBytes)),
  none('request_pool_size', HTTP_SRV, ['TAKE1'], TUNING, rule.size(poolSize)),
  none('postpone_output', HTTP_SRV_LOC, ['TAKE1'], TUNING, rule.size()),
  none('read_ahead', HTTP_SRV_LOC, ['TAKE1'], TUNING, rule.size()),
  none('send_lowat', HTTP_SRV_LOC, ['TAKE1'], TUNING, rule.size(lowatIgnored)),
  none('output_buffers', HTTP_SRV_LOC, ['TAKE2'], TUNING, rule.bufs),
  none('disable_symlinks', HTTP_SRV_LOC, ['TAKE1', 'TAKE2'], 'symbolic links are followed', rule.custom(parseDisableSymlinks)),
  { name: 'log_subrequest', module: CORE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(logSubrequest) },
  none('auth_delay', HTTP_SRV_LOC, ['TAKE1'], 'failed authentication is answered at once', rule.msec),
  { name: 'limit_rate', module: CORE, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime', set: valueSizeSetter(limitRate) },
  { name: 'limit_rate_after', module: CORE, contexts: HTTP_SRV_LOC_LIF, args: ['TAKE1'], effect: 'runtime', set: valueSizeSetter(limitRateAfter) },
  none('msie_refresh', HTTP_SRV_LOC, ['FLAG'], 'redirects are answered with Location', rule.flag),
];

/**
 * A size that may have variables (the complex value of
 * `ngx_http_set_complex_value_size_slot`): its bytes, or its value to
 * parse when a request needs it.
 */
export type SizeValue = { readonly bytes: number } | { readonly value: CompiledValue };

/** `error_page CODES [=[RESPONSE]] URI`. */
export interface ErrorPage {
  readonly target: CompiledValue;
  /** `=CODE` replaces the status; `=` alone takes the status of the redirected request. */
  readonly overwrite: number | 'from-target' | undefined;
}

/** `try_files FILE … URI|=CODE`. */
export interface TryFiles {
  /** Items before the last: a directory is wanted for those written with a final `/`. */
  readonly files: readonly { readonly value: CompiledValue; readonly testDir: boolean }[];
  readonly fallback: { readonly uri: CompiledValue } | { readonly code: number };
}

/** The core module's settings of a level (`ngx_http_core_loc_conf_t`, and the server's that its locations carry). */
export interface HttpCoreLocConf {
  /**
   * `root` or `alias`. An alias replaces the first `aliasLength` bytes of the
   * URI, the length of the name of the location it was set in (nginx's
   * `clcf->alias`, inherited with the path), or, set in a regex location
   * (`aliasRegex`), is the whole path.
   */
  readonly root: { readonly alias: boolean; readonly path: CompiledValue; readonly aliasRegex: boolean; readonly aliasLength: number };
  readonly index: readonly CompiledValue[];
  readonly tryFiles: TryFiles | undefined;
  readonly types: ReadonlyMap<string, string>;
  readonly defaultType: string;
  readonly errorPages: ReadonlyMap<number, ErrorPage>;
  /** `early_hints`: an upstream's 103 goes to the client when one of these is neither empty nor "0" (none: never). */
  readonly earlyHints: readonly CompiledValue[];
  readonly recursiveErrorPages: boolean;
  readonly internal: boolean;
  readonly clientMaxBodySizeBytes: number;
  readonly clientBodyBufferSizeBytes: number;
  /** `subrequest_output_buffer_size`: the most a subrequest kept in memory (`include … set=`) may send. */
  readonly subrequestOutputBufferSizeBytes: number;
  readonly clientBodyTempPath: TempPathValue;
  /** `client_body_in_file_only`: `on` keeps the file after the request, `clean` removes it. */
  readonly clientBodyInFileOnly: 'off' | 'on' | 'clean';
  readonly clientBodyTimeoutMs: number;
  /**
   * `aio threads`: a file's contents are read in node's thread pool; else
   * (`aio off`, nginx's default) in the worker, as nginx reads them.
   */
  readonly aioThreads: boolean;
  /** `client_header_timeout` (a server's; its locations carry it). */
  readonly clientHeaderTimeoutMs: number;
  /**
   * `large_client_header_buffers` (a server's; its locations carry it): over
   * HTTP/2, the largest header field and, times `count`, header block.
   */
  readonly largeClientHeaderBuffers: { readonly count: number; readonly sizeBytes: number };
  /** `client_header_buffer_size` (a server's; its locations carry it): the first buffer a request's head is read into. */
  readonly clientHeaderBufferSizeBytes: number;
  /** `max_headers` (a server's; its locations carry it). */
  readonly maxHeaders: number;
  /** `merge_slashes`, `underscores_in_headers`, `ignore_invalid_headers` (a server's; its locations carry them). */
  readonly mergeSlashes: boolean;
  readonly underscoresInHeaders: boolean;
  readonly ignoreInvalidHeaders: boolean;
  readonly logNotFound: boolean;
  /** `etag`: static files carry an ETag. */
  readonly etag: boolean;
  /** `if_modified_since`. */
  readonly ifModifiedSince: 'off' | 'exact' | 'before';
  /** `max_ranges`; undefined: no limit. */
  readonly maxRanges: number | undefined;
  readonly serverTokens: 'on' | 'off' | 'build';
  readonly absoluteRedirect: boolean;
  readonly serverNameInRedirect: boolean;
  readonly portInRedirect: boolean;
  readonly msiePadding: boolean;
  readonly errorLogs: readonly ErrorLogTarget[];
  readonly satisfy: 'all' | 'any';
  readonly keepaliveTimeoutMs: number;
  readonly keepaliveRequests: number;
  /** `keepalive_timeout`'s second argument, sent as `Keep-Alive: timeout=N`. */
  readonly keepaliveHeaderSec: number | undefined;
  /** `keepalive_time`: how long after it was accepted a connection may still be kept alive. */
  readonly keepaliveTimeMs: number;
  /**
   * `keepalive_min_timeout`: for this long after its response a kept-alive
   * connection is neither closed to make room (`worker_connections`) nor by
   * a graceful stop or reload, which close it once the time is over.
   */
  readonly keepaliveMinTimeoutMs: number;
  /** `keepalive_disable`: no keep-alive for POSTs from MSIE 6 and older, or for Safari on Mac OS X. */
  readonly keepaliveDisable: { readonly msie6: boolean; readonly safari: boolean };
  readonly sendTimeoutMs: number;
  /** `limit_rate`: bytes per second of a response (0: no limit), unless `$limit_rate` or `X-Accel-Limit-Rate` set the request's. */
  readonly limitRate: SizeValue | undefined;
  /** `limit_rate_after`: bytes sent before `limit_rate` applies. */
  readonly limitRateAfter: SizeValue | undefined;
  /** `lingering_close`, `lingering_time`, `lingering_timeout`. */
  readonly lingering: { readonly close: 'off' | 'on' | 'always'; readonly timeMs: number; readonly timeoutMs: number };
  readonly resetTimedoutConnection: boolean;
  readonly chunkedTransferEncoding: boolean;
  /** `log_subrequest`: a subrequest ending in this location is written to its access log. */
  readonly logSubrequest: boolean;
  readonly resolver: ResolverDef | undefined;
  readonly resolverTimeoutMs: number;
}
