/**
 * What the FastCGI, uwsgi and SCGI modules share (`ngx_http_fastcgi_module.c`,
 * `ngx_http_uwsgi_module.c`, `ngx_http_scgi_module.c`): each passes the
 * request as CGI parameters (`*_param`, then the request headers as
 * `HTTP_*`) to an address or `upstream` block and reads a CGI response, with
 * the same family of directives on `ngx_http_upstream_conf_t` under its own
 * prefix: `*_pass`, `*_param`, timeouts, buffers, temp files, header
 * filters, `*_next_upstream`, the cache. Each module declares its family
 * from here, as data, and adds its own directives.
 */
import { parseUnixPath } from '../listen.js';
import type { SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import {
  bitmaskSetter, bufsSetter, DirectiveFailure, fail, flagSetter, listSlot, msecSetter, noEffect, numSetter, pathSetter, rule, slot, sizeSetter,
  type ConfChain, type DirectiveSpec, type LevelConf, type ListSlot, type Rule, type SetContext, type Slot, type TempPathValue,
} from '../spec.js';
import type { LevelNode } from '../check.js';
import { groupKey, inheritedIntoIf, type CompileContext } from '../compile-context.js';
import { bindCache, cacheDirectives, cacheSlots, cacheZones, type CacheConf, type CacheSlots } from './cache.js';
import { IGNORE_HEADERS, parseAccess, parseBind, parseStore } from './proxy.js';
import { setContentHandler, type ContentHandlerName } from './http-core.js';
import {
  CACHE_REQUEST_HEADERS, nextUpstreamConf, spoolSizes, type PassAddress, type UpstreamConf, type UpstreamMergeSlots,
} from './upstream.js';
import type { CompiledValue, ValueSource } from '../variables.js';

/** The prefix of a module's directives, which is also the scheme nginx logs (`fastcgi://`, `uwsgi://`, `scgi://`). */
export type CgiPrefix = 'fastcgi' | 'uwsgi' | 'scgi';

/** A `*_pass` as read. */
export type CgiPassDef =
  | { readonly kind: 'static'; readonly host: string; readonly port: number | undefined; readonly loc: SourceLoc }
  | { readonly kind: 'unix'; readonly path: string; readonly loc: SourceLoc }
  | { readonly kind: 'variable'; readonly address: ValueSource; readonly loc: SourceLoc };

/** One `*_param`. */
export interface CgiParamDef {
  readonly name: string;
  readonly value: ValueSource;
  readonly ifNotEmpty: boolean;
}

/** The slots of one module's family, each keyed by its directive's name. */
export interface CgiSlots {
  readonly prefix: CgiPrefix;
  /** Not inherited into nested locations; an `if` block takes its location's. */
  readonly pass: Slot<CgiPassDef | undefined>;
  readonly params: ListSlot<CgiParamDef>;
  readonly connectTimeoutMs: Slot<number>;
  readonly sendTimeoutMs: Slot<number>;
  readonly readTimeoutMs: Slot<number>;
  /** One memory page, as nginx's default on x86_64 Linux. */
  readonly bufferSize: Slot<number>;
  readonly buffering: Slot<boolean>;
  /** `*_ignore_headers`: upstream headers not acted on. */
  readonly ignoreHeaders: Slot<readonly string[]>;
  readonly requestBuffering: Slot<boolean>;
  readonly buffers: Slot<{ readonly count: number; readonly sizeBytes: number }>;
  readonly tempPath: Slot<TempPathValue | undefined>;
  readonly maxTempFileSize: Slot<number>;
  readonly interceptErrors: Slot<boolean>;
  readonly hideHeader: ListSlot<string>;
  readonly passHeader: ListSlot<string>;
  readonly passRequestBody: Slot<boolean>;
  readonly passRequestHeaders: Slot<boolean>;
  readonly ignoreClientAbort: Slot<boolean>;
  /** Checked against the buffers when the configuration is merged; not used otherwise. */
  readonly busyBuffersSize: Slot<number | undefined>;
  readonly tempFileWriteSize: Slot<number | undefined>;
  readonly nextUpstream: Slot<readonly string[]>;
  readonly nextUpstreamTries: Slot<number>;
  readonly nextUpstreamTimeoutMs: Slot<number>;
  readonly cache: CacheSlots;
  /** The slots the upstream merge checks read. */
  readonly merge: UpstreamMergeSlots;
}

/** The slots of the `PREFIX_*` family. */
export function cgiSlots(prefix: CgiPrefix): CgiSlots {
  const s = <T>(name: string, v: T): Slot<T> => slot<T>(`${prefix}_${name}`, v);
  const cache = cacheSlots(prefix);
  const slots = {
    prefix,
    pass: slot<CgiPassDef | undefined>(`${prefix}_pass`, undefined, false),
    params: listSlot<CgiParamDef>(`${prefix}_param`),
    connectTimeoutMs: s('connect_timeout', 60_000),
    sendTimeoutMs: s('send_timeout', 60_000),
    readTimeoutMs: s('read_timeout', 60_000),
    bufferSize: s('buffer_size', 4096),
    buffering: s('buffering', true),
    ignoreHeaders: s<readonly string[]>('ignore_headers', []),
    requestBuffering: s('request_buffering', true),
    buffers: s('buffers', { count: 8, sizeBytes: 4096 }),
    tempPath: s<TempPathValue | undefined>('temp_path', undefined),
    maxTempFileSize: s('max_temp_file_size', 1024 * 1024 * 1024),
    interceptErrors: s('intercept_errors', false),
    hideHeader: listSlot<string>(`${prefix}_hide_header`),
    passHeader: listSlot<string>(`${prefix}_pass_header`),
    passRequestBody: s('pass_request_body', true),
    passRequestHeaders: s('pass_request_headers', true),
    ignoreClientAbort: s('ignore_client_abort', false),
    busyBuffersSize: s<number | undefined>('busy_buffers_size', undefined),
    tempFileWriteSize: s<number | undefined>('temp_file_write_size', undefined),
    nextUpstream: s<readonly string[]>('next_upstream', ['error', 'timeout']),
    nextUpstreamTries: s('next_upstream_tries', 0),
    nextUpstreamTimeoutMs: s('next_upstream_timeout', 0),
    cache,
  };
  return {
    ...slots,
    merge: {
      prefix, buffers: slots.buffers, bufferSize: slots.bufferSize, busyBuffersSize: slots.busyBuffersSize,
      tempFileWriteSize: slots.tempFileWriteSize, maxTempFileSize: slots.maxTempFileSize, cacheZone: cache.zone, cacheKey: cache.key,
      nextUpstream: slots.nextUpstream, nextUpstreamTries: slots.nextUpstreamTries, nextUpstreamTimeoutMs: slots.nextUpstreamTimeoutMs,
    },
  };
}

/**
 * `ngx_http_*_next_upstream_masks` of the three modules: no `http_502` and
 * `http_504`, unlike the proxy module's.
 */
export const CGI_NEXT_UPSTREAM = [
  'error', 'timeout', 'invalid_header', 'non_idempotent', 'http_500', 'http_503', 'http_403', 'http_404', 'http_429', 'updating', 'off',
];

/**
 * A `*_pass` address (`ngx_http_fastcgi_pass` and its kin): a value with
 * variables, or `parseStaticPass`'s, after one of `schemes` (`uwsgi://`),
 * which is dropped.
 * @throws DirectiveFailure nginx's `invalid host/port in upstream "…"`
 */
export function parseCgiPass(arg: string, cx: SetContext, loc: SourceLoc, schemes: readonly string[] = []): CgiPassDef {
  if (arg.includes('$')) return { kind: 'variable', address: cx.scope.variables.value(arg, loc), loc };
  const scheme = schemes.find((s) => arg.toLowerCase().startsWith(s));
  return parseStaticPass(scheme ? arg.slice(scheme.length) : arg, loc);
}

/** A static upstream address (`ngx_http_upstream_add`): `unix:PATH`, or `HOST[:PORT]` (the name of an `upstream` block or an address). */
export type StaticPassDef = Exclude<CgiPassDef, { readonly kind: 'variable' }>;

/**
 * Reads a static upstream address as `ngx_parse_url` does.
 * @throws DirectiveFailure nginx's `invalid host/port in upstream "…"`
 */
export function parseStaticPass(url: string, loc: SourceLoc): StaticPassDef {
  if (url.startsWith('unix:')) return { kind: 'unix', path: parseUnixPath(url, (err) => fail(`${err} in upstream "${url}"`)), loc };
  // ngx_parse_inet_url without uri_part: a URI or arguments after the address
  if (/[/?]/.test(url)) fail(`invalid host in upstream "${url}"`);
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(url);
  if (!m && !url.startsWith('[') && url.includes(':')) fail(`invalid port in upstream "${url}"`);
  if (!m) fail(`invalid host in upstream "${url}"`);
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) fail(`invalid port in upstream "${url}"`);
  return { kind: 'static', host: m[1]!, port, loc };
}

/** What a module adds to its family's directives: its `*_pass` reading, and nginx's module name. */
export interface CgiModuleSpec {
  readonly slots: CgiSlots;
  /** nginx's name of the module (`ngx_http_uwsgi_module`). */
  readonly module: string;
  /** The protocol's name in notes (`FastCGI`, `uwsgi`, `SCGI`). */
  readonly protocol: string;
  /** Reads the `*_pass` argument. */
  readonly parsePass: (arg: string, cx: SetContext, loc: SourceLoc) => CgiPassDef;
}

/**
 * The directives of a module's family, as data: `*_pass` (location and
 * `if` in location), `*_param NAME VALUE [if_not_empty]`, the timeouts,
 * buffers, temp files, header lists, request settings, `*_next_upstream*`,
 * the cache family, and those jinx reads without acting on (`*_store`,
 * `*_bind`, `*_limit_rate`, `*_force_ranges`, `*_socket_keepalive`).
 */
export function cgiDirectives(m: CgiModuleSpec): DirectiveSpec[] {
  const s = m.slots;
  const p = s.prefix;
  const runtime = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
    name: `${p}_${name}`, module: m.module, contexts, args, effect: 'runtime', set,
  });
  const none = (name: string, args: DirectiveSpec['args'], note: string, r: Rule): DirectiveSpec =>
    noEffect({ name: `${p}_${name}`, module: m.module, contexts: HTTP_SRV_LOC, args, note }, r);
  const append = (sl: ListSlot<string>): DirectiveSpec['set'] => (d, cx) => cx.level.append(sl, d.args[0]!, d.loc);
  return [
    {
      ...runtime('pass', ['TAKE1'], (d, cx) => {
        if (cx.level.own(s.pass)) throw new DirectiveFailure('is duplicate');
        setContentHandler(cx, `${p}_pass` as ContentHandlerName, d.loc);
        cx.level.set(s.pass, m.parsePass(d.args[0]!, cx, d.loc), d.loc);
      }, ['location', 'lif']),
      resolves: 'address',
    },
    runtime('param', ['TAKE2', 'TAKE3'], (d, cx) => {
      if (d.args[2] !== undefined && d.args[2] !== 'if_not_empty') fail(`invalid parameter "${d.args[2]}"`);
      cx.level.append(s.params, {
        name: d.args[0]!, value: cx.scope.variables.value(d.args[1]!, d.loc), ifNotEmpty: d.args[2] === 'if_not_empty',
      }, d.loc);
    }),
    runtime('connect_timeout', ['TAKE1'], msecSetter(s.connectTimeoutMs)),
    runtime('send_timeout', ['TAKE1'], msecSetter(s.sendTimeoutMs)),
    runtime('read_timeout', ['TAKE1'], msecSetter(s.readTimeoutMs)),
    runtime('buffer_size', ['TAKE1'], sizeSetter(s.bufferSize)),
    runtime('buffering', ['FLAG'], flagSetter(s.buffering)),
    runtime('ignore_headers', ['1MORE'], bitmaskSetter(s.ignoreHeaders, IGNORE_HEADERS)),
    runtime('request_buffering', ['FLAG'], flagSetter(s.requestBuffering)),
    runtime('buffers', ['TAKE2'], bufsSetter(s.buffers)),
    runtime('temp_path', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], (d, cx) => pathSetter(s.tempPath, (path) => cx.scope.fullPath(path))(d, cx)),
    runtime('max_temp_file_size', ['TAKE1'], sizeSetter(s.maxTempFileSize)),
    runtime('intercept_errors', ['FLAG'], flagSetter(s.interceptErrors)),
    runtime('hide_header', ['TAKE1'], append(s.hideHeader)),
    runtime('pass_header', ['TAKE1'], append(s.passHeader)),
    runtime('pass_request_body', ['FLAG'], flagSetter(s.passRequestBody)),
    runtime('pass_request_headers', ['FLAG'], flagSetter(s.passRequestHeaders)),
    runtime('ignore_client_abort', ['FLAG'], flagSetter(s.ignoreClientAbort)),
    runtime('busy_buffers_size', ['TAKE1'], sizeSetter(s.busyBuffersSize)),
    runtime('temp_file_write_size', ['TAKE1'], sizeSetter(s.tempFileWriteSize)),
    runtime('next_upstream', ['1MORE'], bitmaskSetter(s.nextUpstream, CGI_NEXT_UPSTREAM)),
    runtime('next_upstream_tries', ['TAKE1'], numSetter(s.nextUpstreamTries)),
    runtime('next_upstream_timeout', ['TAKE1'], msecSetter(s.nextUpstreamTimeoutMs)),
    ...cacheDirectives(s.cache, m.module, CGI_NEXT_UPSTREAM),
    none('store', ['TAKE1'], 'responses are not stored as files', rule.custom(parseStore)),
    none('store_access', ['TAKE1', 'TAKE2', 'TAKE3'], 'responses are not stored as files', rule.custom(parseAccess)),
    none('bind', ['TAKE1', 'TAKE2'], 'upstream connections use the address the system chooses', rule.custom(parseBind)),
    none('limit_rate', ['TAKE1'], 'the upstream is read at full speed (limit_rate throttles the client)', rule.valueSize),
    none('force_ranges', ['FLAG'], `byte ranges of ${m.protocol} responses are not served`, rule.flag),
    none('socket_keepalive', ['FLAG'], 'TCP keepalive is the runtime\'s', rule.flag),
  ];
}

/** Where a `*_pass` sends requests: a group of peers (an `upstream` block or an address), a unix socket, or an address made per request. */
export type CgiTarget =
  /** `host`: the address's host as written, lowercased (the name a `suwsgi://` server's certificate is checked against). */
  | { readonly kind: 'group'; readonly group: string; readonly host: string }
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'variable'; readonly address: CompiledValue };

/** The settings a location's FastCGI, uwsgi or SCGI handler runs with. */
export interface CgiConf extends UpstreamConf {
  readonly target: CgiTarget;
  /** `*_param`s in order, after merging, with the cache's request headers when the location caches. */
  readonly params: readonly { readonly name: string; readonly value: CompiledValue; readonly ifNotEmpty: boolean }[];
  /** Upper-case names set by `*_param`: request headers are not passed as `HTTP_*` under these names. */
  readonly paramNames: ReadonlySet<string>;
  /** `*_cache` and its kin; undefined when the location does not cache. */
  readonly cache: CacheConf | undefined;
}

/** The static address of a level's own `*_pass`, for `resolveUpstreams`. */
export function cgiPassAddress(s: CgiSlots): (conf: LevelConf) => PassAddress | undefined {
  return (conf) => {
    const pass = conf.own(s.pass)?.value;
    if (pass?.kind !== 'static') return undefined;
    return { host: pass.host, port: pass.port, defaultPort: undefined, loc: pass.loc };
  };
}

/**
 * The settings of a module at a level (`ngx_http_*_merge_loc_conf`), values
 * bound; undefined without a `*_pass` (its own or, for an `if` block, its
 * location's). `hidden` are the response headers the module never passes
 * (`ngx_http_*_hide_headers`), before `*_hide_header` and `*_pass_header`.
 */
export function cgiConf(cx: CompileContext, node: LevelNode, c: ConfChain, s: CgiSlots, hidden: readonly string[]): CgiConf | undefined {
  const pass = inheritedIntoIf(node, (n) => n.conf.own(s.pass)?.value);
  if (!pass) return undefined;
  const vars = cx.scope.variables;
  const params = c.list(s.params).map((p) => ({ name: p.name, value: vars.bind(p.value), ifNotEmpty: p.ifNotEmpty }));
  const ignore = c.get(s.ignoreHeaders);
  const cache = bindCache(c, s.cache, vars, cx.scope.registry(cacheZones), vars.value('', pass.loc), ignore);
  if (cache) {
    // ngx_http_*_cache_headers: the client's validators and ranges are not passed, as params only when not empty
    const set = new Set(params.map((p) => p.name.toUpperCase()));
    for (const [name, value] of CACHE_REQUEST_HEADERS) {
      const param = `HTTP_${name.toUpperCase().replace(/-/g, '_')}`;
      if (!set.has(param)) params.push({ name: param, value: vars.bind(vars.value(value, pass.loc)), ifNotEmpty: true });
    }
  }
  const hide = new Set(hidden.map((h) => h.toLowerCase()));
  for (const h of c.list(s.hideHeader)) hide.add(h.toLowerCase());
  for (const h of c.list(s.passHeader)) hide.delete(h.toLowerCase());
  const buffers = c.get(s.buffers);
  return {
    target: pass.kind === 'static' ? { kind: 'group', group: groupKey(pass.host, pass.port), host: groupKey(pass.host, undefined) }
      : pass.kind === 'unix' ? { kind: 'unix', path: pass.path } : { kind: 'variable', address: vars.bind(pass.address) },
    params,
    paramNames: new Set(params.map((p) => p.name.toUpperCase())),
    connectTimeoutMs: c.get(s.connectTimeoutMs),
    sendTimeoutMs: c.get(s.sendTimeoutMs),
    readTimeoutMs: c.get(s.readTimeoutMs),
    bufferSizeBytes: c.get(s.bufferSize),
    buffering: c.get(s.buffering),
    accelBuffering: !ignore.includes('X-Accel-Buffering'),
    accelRedirect: !ignore.includes('X-Accel-Redirect'),
    accelLimitRate: !ignore.includes('X-Accel-Limit-Rate'),
    accelCharset: !ignore.includes('X-Accel-Charset'),
    requestBuffering: c.get(s.requestBuffering),
    memoryBytes: buffers.count * buffers.sizeBytes,
    bufferBytes: buffers.sizeBytes,
    tempPath: c.get(s.tempPath) ?? { dir: cx.scope.fullPath(`${s.prefix}_temp`), levels: [] },
    maxTempFileBytes: c.get(s.maxTempFileSize),
    ...spoolSizes(c, s.merge),
    interceptErrors: c.get(s.interceptErrors),
    hideHeaders: hide,
    passRequestBody: c.get(s.passRequestBody),
    passRequestHeaders: c.get(s.passRequestHeaders),
    ignoreClientAbort: c.get(s.ignoreClientAbort),
    ...nextUpstreamConf(c, s.merge),
    cache,
  };
}

/** Keeps a level's `*_temp_path` (default or set) among the directories created at start: nginx creates every one. */
export function keepCgiTempDir(cx: CompileContext, c: ConfChain, s: CgiSlots): void {
  cx.tempDirs.add((c.get(s.tempPath) ?? { dir: cx.scope.fullPath(`${s.prefix}_temp`) }).dir);
}
