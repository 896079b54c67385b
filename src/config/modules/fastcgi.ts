/**
 * The FastCGI module (`src/http/modules/ngx_http_fastcgi_module.c`):
 * `fastcgi_pass ADDRESS|unix:PATH|UPSTREAM`, `fastcgi_param NAME VALUE
 * [if_not_empty]`, `fastcgi_index`, `fastcgi_split_path_info`, timeouts,
 * buffers, and the header filters.
 */
import { parseUnixPath } from '../listen.js';
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { compileRegex, type NginxRegex } from '../regex.js';
import {
  bitmaskSetter, bufsSetter, DirectiveFailure, fail, flagSetter, listSlot, msecSetter, noEffect, numSetter, pathSetter, rule, slot, sizeSetter,
  strSetter,
  type ConfChain, type DirectiveSpec, type LevelConf, type Rule, type SetContext, type TempPathValue,
} from '../spec.js';
import type { LevelNode } from '../check.js';
import { groupKey, inheritedIntoIf, type CompileContext } from '../compile-context.js';
import { bindCache, cacheDirectives, cacheZones, fastcgiCache, type CacheConf } from './cache.js';
import { IGNORE_HEADERS, parseAccess, parseBind, parseStore } from './proxy.js';
import { lowatIgnored, setContentHandler } from './http-core.js';
import {
  CACHE_REQUEST_HEADERS, nextUpstreamConf, spoolSizes, type PassAddress, type UpstreamConf, type UpstreamMergeSlots,
} from './upstream.js';
import type { CompiledValue, ValueSource } from '../variables.js';

const FASTCGI = 'ngx_http_fastcgi_module';

/** `fastcgi_pass` as read. */
export type FastcgiPassDef =
  | { readonly kind: 'static'; readonly host: string; readonly port: number | undefined; readonly loc: SourceLoc }
  | { readonly kind: 'unix'; readonly path: string; readonly loc: SourceLoc }
  | { readonly kind: 'variable'; readonly address: ValueSource; readonly loc: SourceLoc };

/** Not inherited into nested locations; an `if` block takes its location's. */
export const fastcgiPass = slot<FastcgiPassDef | undefined>('fastcgi_pass', undefined, false);
export const fastcgiParams = listSlot<{ readonly name: string; readonly value: ValueSource; readonly ifNotEmpty: boolean }>('fastcgi_param');
export const fastcgiIndex = slot<string | undefined>('fastcgi_index', undefined);
export const fastcgiSplitPathInfo = slot<NginxRegex | undefined>('fastcgi_split_path_info', undefined);
export const fastcgiConnectTimeoutMs = slot('fastcgi_connect_timeout', 60_000);
export const fastcgiSendTimeoutMs = slot('fastcgi_send_timeout', 60_000);
export const fastcgiReadTimeoutMs = slot('fastcgi_read_timeout', 60_000);
/** One memory page, as nginx's default on x86_64 Linux. */
export const fastcgiBufferSize = slot('fastcgi_buffer_size', 4096);
export const fastcgiBuffering = slot('fastcgi_buffering', true);
/** `fastcgi_ignore_headers`: upstream headers not acted on (jinx acts only on X-Accel-Buffering). */
export const fastcgiIgnoreHeaders = slot<readonly string[]>('fastcgi_ignore_headers', []);
export const fastcgiRequestBuffering = slot('fastcgi_request_buffering', true);
export const fastcgiBuffers = slot('fastcgi_buffers', { count: 8, sizeBytes: 4096 });
export const fastcgiTempPath = slot<TempPathValue | undefined>('fastcgi_temp_path', undefined);
export const fastcgiMaxTempFileSize = slot('fastcgi_max_temp_file_size', 1024 * 1024 * 1024);
export const fastcgiInterceptErrors = slot('fastcgi_intercept_errors', false);
export const fastcgiKeepConn = slot('fastcgi_keep_conn', false);
export const fastcgiHideHeader = listSlot<string>('fastcgi_hide_header');
export const fastcgiPassHeader = listSlot<string>('fastcgi_pass_header');
export const fastcgiPassRequestBody = slot('fastcgi_pass_request_body', true);
export const fastcgiPassRequestHeaders = slot('fastcgi_pass_request_headers', true);
export const fastcgiIgnoreClientAbort = slot('fastcgi_ignore_client_abort', false);
/** `fastcgi_catch_stderr`: strings that make a response whose header is not read yet invalid when its stderr has them. */
export const fastcgiCatchStderr = listSlot<string>('fastcgi_catch_stderr');
/** Checked against the buffers when the configuration is merged; not used otherwise. */
export const fastcgiBusyBuffersSize = slot<number | undefined>('fastcgi_busy_buffers_size', undefined);
export const fastcgiTempFileWriteSize = slot<number | undefined>('fastcgi_temp_file_write_size', undefined);

/** `fastcgi_next_upstream`, `_tries`, `_timeout`: as the proxy module's. */
export const fastcgiNextUpstream = slot<readonly string[]>('fastcgi_next_upstream', ['error', 'timeout']);
export const fastcgiNextUpstreamTries = slot('fastcgi_next_upstream_tries', 0);
export const fastcgiNextUpstreamTimeoutMs = slot('fastcgi_next_upstream_timeout', 0);

/** `ngx_http_fastcgi_next_upstream_masks`: no `http_502` and `http_504`, unlike the proxy module's. */
const NEXT_UPSTREAM = [
  'error', 'timeout', 'invalid_header', 'non_idempotent', 'http_500', 'http_503', 'http_403', 'http_404', 'http_429', 'updating', 'off',
];

function setPass(d: Directive, cx: SetContext): void {
  if (cx.level.own(fastcgiPass)) throw new DirectiveFailure('is duplicate');
  setContentHandler(cx, 'fastcgi_pass', d.loc);
  const arg = d.args[0]!;
  if (arg.includes('$')) {
    cx.level.set(fastcgiPass, { kind: 'variable', address: cx.scope.variables.value(arg, d.loc), loc: d.loc }, d.loc);
    return;
  }
  if (arg.startsWith('unix:')) {
    const path = parseUnixPath(arg, (err) => fail(`${err} in upstream "${arg}"`));
    cx.level.set(fastcgiPass, { kind: 'unix', path, loc: d.loc }, d.loc);
    return;
  }
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(arg);
  if (!m && !arg.startsWith('[') && arg.includes(':')) fail(`invalid port in upstream "${arg}"`);
  if (!m) fail(`invalid host in upstream "${arg}"`);
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) fail(`invalid port in upstream "${arg}"`);
  cx.level.set(fastcgiPass, { kind: 'static', host: m[1]!, port, loc: d.loc }, d.loc);
}

function setParam(d: Directive, cx: SetContext): void {
  if (d.args[2] !== undefined && d.args[2] !== 'if_not_empty') fail(`invalid parameter "${d.args[2]}"`);
  cx.level.append(fastcgiParams, {
    name: d.args[0]!, value: cx.scope.variables.value(d.args[1]!, d.loc), ifNotEmpty: d.args[2] === 'if_not_empty',
  }, d.loc);
}

const none = (name: string, args: DirectiveSpec['args'], note: string, r: Rule): DirectiveSpec =>
  noEffect({ name, module: FASTCGI, contexts: HTTP_SRV_LOC, args, note }, r);

const runtime = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
  name, module: FASTCGI, contexts, args, effect: 'runtime', set,
});

export const fastcgiDirectives: readonly DirectiveSpec[] = [
  { ...runtime('fastcgi_pass', ['TAKE1'], setPass, ['location', 'lif']), resolves: 'address' },
  runtime('fastcgi_param', ['TAKE2', 'TAKE3'], setParam),
  runtime('fastcgi_index', ['TAKE1'], strSetter(fastcgiIndex)),
  runtime('fastcgi_split_path_info', ['TAKE1'], (d, cx) => {
    if (cx.level.own(fastcgiSplitPathInfo)) throw new DirectiveFailure('is duplicate');
    const regex = compileRegex(d.args[0]!, false);
    if (regex.captureCount !== 2) fail(`pattern "${d.args[0]}" must have 2 captures`);
    cx.level.set(fastcgiSplitPathInfo, regex, d.loc);
  }, ['location']),
  runtime('fastcgi_connect_timeout', ['TAKE1'], msecSetter(fastcgiConnectTimeoutMs)),
  runtime('fastcgi_send_timeout', ['TAKE1'], msecSetter(fastcgiSendTimeoutMs)),
  runtime('fastcgi_read_timeout', ['TAKE1'], msecSetter(fastcgiReadTimeoutMs)),
  runtime('fastcgi_buffer_size', ['TAKE1'], sizeSetter(fastcgiBufferSize)),
  runtime('fastcgi_buffering', ['FLAG'], flagSetter(fastcgiBuffering)),
  runtime('fastcgi_ignore_headers', ['1MORE'], bitmaskSetter(fastcgiIgnoreHeaders, IGNORE_HEADERS)),
  runtime('fastcgi_request_buffering', ['FLAG'], flagSetter(fastcgiRequestBuffering)),
  runtime('fastcgi_buffers', ['TAKE2'], bufsSetter(fastcgiBuffers)),
  runtime('fastcgi_temp_path', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'], (d, cx) => pathSetter(fastcgiTempPath, (p) => cx.scope.fullPath(p))(d, cx)),
  runtime('fastcgi_max_temp_file_size', ['TAKE1'], sizeSetter(fastcgiMaxTempFileSize)),
  runtime('fastcgi_intercept_errors', ['FLAG'], flagSetter(fastcgiInterceptErrors)),
  runtime('fastcgi_keep_conn', ['FLAG'], flagSetter(fastcgiKeepConn)),
  runtime('fastcgi_hide_header', ['TAKE1'], (d, cx) => cx.level.append(fastcgiHideHeader, d.args[0]!, d.loc)),
  runtime('fastcgi_pass_header', ['TAKE1'], (d, cx) => cx.level.append(fastcgiPassHeader, d.args[0]!, d.loc)),
  runtime('fastcgi_pass_request_body', ['FLAG'], flagSetter(fastcgiPassRequestBody)),
  runtime('fastcgi_pass_request_headers', ['FLAG'], flagSetter(fastcgiPassRequestHeaders)),
  runtime('fastcgi_ignore_client_abort', ['FLAG'], flagSetter(fastcgiIgnoreClientAbort)),
  {
    name: 'fastcgi_busy_buffers_size', module: FASTCGI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: sizeSetter(fastcgiBusyBuffersSize),
  },
  {
    name: 'fastcgi_temp_file_write_size', module: FASTCGI, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: sizeSetter(fastcgiTempFileWriteSize),
  },
  runtime('fastcgi_next_upstream', ['1MORE'], bitmaskSetter(fastcgiNextUpstream, NEXT_UPSTREAM)),
  runtime('fastcgi_next_upstream_tries', ['TAKE1'], numSetter(fastcgiNextUpstreamTries)),
  runtime('fastcgi_next_upstream_timeout', ['TAKE1'], msecSetter(fastcgiNextUpstreamTimeoutMs)),
  ...cacheDirectives(fastcgiCache, FASTCGI, NEXT_UPSTREAM),
  none('fastcgi_store', ['TAKE1'], 'responses are not stored as files', rule.custom(parseStore)),
  none('fastcgi_store_access', ['TAKE1', 'TAKE2', 'TAKE3'], 'responses are not stored as files', rule.custom(parseAccess)),
  none('fastcgi_bind', ['TAKE1', 'TAKE2'], 'upstream connections use the address the system chooses', rule.custom(parseBind)),
  none('fastcgi_limit_rate', ['TAKE1'], 'the upstream is read at full speed (limit_rate throttles the client)', rule.valueSize),
  none('fastcgi_force_ranges', ['FLAG'], 'byte ranges of FastCGI responses are not served', rule.flag),
  none('fastcgi_send_lowat', ['TAKE1'], 'a kernel tuning knob with no counterpart in jinx', rule.size(lowatIgnored)),
  runtime('fastcgi_catch_stderr', ['TAKE1'], (d, cx) => cx.level.append(fastcgiCatchStderr, d.args[0]!, d.loc)),
  none('fastcgi_socket_keepalive', ['FLAG'], 'TCP keepalive is the runtime\'s', rule.flag),
];

/** Where a `fastcgi_pass` sends requests. */
export type FastcgiTarget =
  | { readonly kind: 'group'; readonly group: string }
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'variable'; readonly address: CompiledValue };

/** Settings of the FastCGI module in a location. */
export interface FastcgiConf extends UpstreamConf {
  readonly target: FastcgiTarget;
  /** `fastcgi_param`s in order, after merging. */
  readonly params: readonly { readonly name: string; readonly value: CompiledValue; readonly ifNotEmpty: boolean }[];
  /** Names set by `fastcgi_param`: request headers are not passed as `HTTP_*` under these names. */
  readonly paramNames: ReadonlySet<string>;
  readonly index: string | undefined;
  readonly splitPathInfo: RegExp | undefined;
  readonly keepConn: boolean;
  /** `fastcgi_catch_stderr`: a header-time STDERR record with one of these strings makes the response invalid. */
  readonly catchStderr: readonly string[];
  /** `fastcgi_cache` and its kin; undefined when the location does not cache. */
  readonly cache: CacheConf | undefined;
}

/** The FastCGI module's slots that the upstream merge checks read. */
export const FASTCGI_MERGE: UpstreamMergeSlots = {
  prefix: 'fastcgi', buffers: fastcgiBuffers, bufferSize: fastcgiBufferSize, busyBuffersSize: fastcgiBusyBuffersSize,
  tempFileWriteSize: fastcgiTempFileWriteSize, maxTempFileSize: fastcgiMaxTempFileSize, cacheZone: fastcgiCache.zone,
  cacheKey: fastcgiCache.key, nextUpstream: fastcgiNextUpstream, nextUpstreamTries: fastcgiNextUpstreamTries,
  nextUpstreamTimeoutMs: fastcgiNextUpstreamTimeoutMs,
};

/** The static address of a level's own `fastcgi_pass`, for `resolveUpstreams`. */
export function fastcgiPassAddress(conf: LevelConf): PassAddress | undefined {
  const pass = conf.own(fastcgiPass)?.value;
  if (pass?.kind !== 'static') return undefined;
  return { host: pass.host, port: pass.port, defaultPort: undefined, loc: pass.loc };
}

/** The FastCGI settings of a level (`ngx_http_fastcgi_merge_loc_conf`), values bound; undefined without `fastcgi_pass`. */
export function fastcgiConf(cx: CompileContext, node: LevelNode, c: ConfChain): FastcgiConf | undefined {
  const pass = inheritedIntoIf(node, (n) => n.conf.own(fastcgiPass)?.value);
  if (!pass) return undefined;
  const vars = cx.scope.variables;
  const params = c.list(fastcgiParams).map((p) => ({ name: p.name, value: vars.bind(p.value), ifNotEmpty: p.ifNotEmpty }));
  const cache = bindCache(c, fastcgiCache, vars, cx.scope.registry(cacheZones), vars.value('', pass.loc), c.get(fastcgiIgnoreHeaders));
  if (cache) {
    // ngx_http_fastcgi_cache_headers: the client's validators and ranges are not passed, as params only when not empty
    const set = new Set(params.map((p) => p.name.toUpperCase()));
    for (const [name, value] of CACHE_REQUEST_HEADERS) {
      const param = `HTTP_${name.toUpperCase().replace(/-/g, '_')}`;
      if (!set.has(param)) params.push({ name: param, value: vars.bind(vars.value(value, pass.loc)), ifNotEmpty: true });
    }
  }
  const hide = new Set(['status', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset']);
  for (const h of c.list(fastcgiHideHeader)) hide.add(h.toLowerCase());
  for (const h of c.list(fastcgiPassHeader)) hide.delete(h.toLowerCase());
  const buffers = c.get(fastcgiBuffers);
  return {
    target: pass.kind === 'static' ? { kind: 'group', group: groupKey(pass.host, pass.port) }
      : pass.kind === 'unix' ? { kind: 'unix', path: pass.path } : { kind: 'variable', address: vars.bind(pass.address) },
    params,
    paramNames: new Set(params.map((p) => p.name.toUpperCase())),
    index: c.get(fastcgiIndex),
    splitPathInfo: c.get(fastcgiSplitPathInfo)?.regex,
    connectTimeoutMs: c.get(fastcgiConnectTimeoutMs),
    sendTimeoutMs: c.get(fastcgiSendTimeoutMs),
    readTimeoutMs: c.get(fastcgiReadTimeoutMs),
    bufferSizeBytes: c.get(fastcgiBufferSize),
    buffering: c.get(fastcgiBuffering),
    accelBuffering: !c.get(fastcgiIgnoreHeaders).includes('X-Accel-Buffering'),
    accelRedirect: !c.get(fastcgiIgnoreHeaders).includes('X-Accel-Redirect'),
    accelLimitRate: !c.get(fastcgiIgnoreHeaders).includes('X-Accel-Limit-Rate'),
    accelCharset: !c.get(fastcgiIgnoreHeaders).includes('X-Accel-Charset'),
    requestBuffering: c.get(fastcgiRequestBuffering),
    memoryBytes: buffers.count * buffers.sizeBytes,
    bufferBytes: buffers.sizeBytes,
    tempPath: c.get(fastcgiTempPath) ?? { dir: cx.scope.fullPath('fastcgi_temp'), levels: [] },
    maxTempFileBytes: c.get(fastcgiMaxTempFileSize),
    ...spoolSizes(c, FASTCGI_MERGE),
    interceptErrors: c.get(fastcgiInterceptErrors),
    keepConn: c.get(fastcgiKeepConn),
    hideHeaders: hide,
    passRequestBody: c.get(fastcgiPassRequestBody),
    passRequestHeaders: c.get(fastcgiPassRequestHeaders),
    ignoreClientAbort: c.get(fastcgiIgnoreClientAbort),
    catchStderr: c.list(fastcgiCatchStderr),
    ...nextUpstreamConf(c, FASTCGI_MERGE),
    cache,
  };
}

/** `fastcgi_split_path_info` and `fastcgi_index` of a level, for `$fastcgi_script_name` and `$fastcgi_path_info`. */
export function fastcgiSplitConf(c: ConfChain): { readonly regex: RegExp | undefined; readonly index: string | undefined } {
  return { regex: c.get(fastcgiSplitPathInfo)?.regex, index: c.get(fastcgiIndex) };
}

/** Keeps a level's `fastcgi_temp_path` (default or set) among the directories created at start: nginx creates every one. */
export function keepFastcgiTempDir(cx: CompileContext, c: ConfChain): void {
  cx.tempDirs.add((c.get(fastcgiTempPath) ?? { dir: cx.scope.fullPath('fastcgi_temp') }).dir);
}
