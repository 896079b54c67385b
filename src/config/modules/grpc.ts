/**
 * The gRPC module (`src/http/modules/ngx_http_grpc_module.c`): `grpc_pass`
 * sends the request over HTTP/2 (cleartext for `grpc://`, TLS with ALPN
 * `h2` for `grpcs://`) and passes the response, trailers included, without
 * buffering it. Its settings are the proxy's shape (`ProxyConf`), with the
 * values nginx hardcodes for gRPC (`ngx_http_grpc_create_loc_conf`): no
 * response buffering, the request body passed as it arrives, trailers
 * passed, no cache, no redirect or cookie rewriting.
 */
import type { SourceLoc } from '../../parser/ast.js';
import type { LevelNode } from '../check.js';
import { groupKey, inheritedIntoIf, levelsInOrder, type CompileContext } from '../compile-context.js';
import { HTTP_SRV_LOC } from '../flags.js';
import {
  bitmaskSetter, DirectiveFailure, flagSetter, listSlot, msecSetter, noEffect, numSetter, rule, sizeSetter, slot, type ConfChain,
  type DirectiveSpec, type LevelConf, type SetContext,
} from '../spec.js';
import type { ValueSource } from '../variables.js';
import { parseStaticPass } from './cgi-upstream.js';
import { setContentHandler } from './http-core.js';
import { hiddenHeaders, IGNORE_HEADERS, parseBind, upstreamHeaders, type ProxyConf } from './proxy.js';
import { GRPC_SSL, readProxyTls, upstreamSslDirectives, upstreamTlsConf } from './proxy-ssl.js';
import { nextUpstreamOf, unbufferedSpool, type PassAddress } from './upstream.js';

const GRPC = 'ngx_http_grpc_module';

/** `grpc_pass ADDRESS` as read: `grpc://` (or no scheme) is cleartext HTTP/2, `grpcs://` TLS. */
export type GrpcPassDef =
  | {
      readonly kind: 'static';
      readonly tls: boolean;
      /** `HOST` (an `upstream` block's name or an address), or `unix:PATH`. */
      readonly host: string;
      readonly port: number | undefined;
      readonly loc: SourceLoc;
    }
  | { readonly kind: 'variable'; readonly url: ValueSource; readonly loc: SourceLoc };

/** Not inherited into nested locations; an `if` block takes its location's. */
export const grpcPass = slot<GrpcPassDef | undefined>('grpc_pass', undefined, false);
/** `grpc_set_header NAME VALUE`, as written. */
export const grpcSetHeader = listSlot<{ readonly name: string; readonly value: ValueSource }>('grpc_set_header');
const hideHeader = listSlot<string>('grpc_hide_header');
const passHeader = listSlot<string>('grpc_pass_header');
const ignoreHeaders = slot<readonly string[]>('grpc_ignore_headers', []);
const connectTimeoutMs = slot('grpc_connect_timeout', 60_000);
const sendTimeoutMs = slot('grpc_send_timeout', 60_000);
const readTimeoutMs = slot('grpc_read_timeout', 60_000);
/** `ngx_pagesize`. */
const bufferSize = slot('grpc_buffer_size', 4096);
const interceptErrors = slot('grpc_intercept_errors', false);
const nextUpstream = slot<readonly string[]>('grpc_next_upstream', ['error', 'timeout']);
const nextUpstreamTries = slot('grpc_next_upstream_tries', 0);
const nextUpstreamTimeoutMs = slot('grpc_next_upstream_timeout', 0);

/** `ngx_http_grpc_next_upstream_masks`: the proxy's, without `updating`. */
const NEXT_UPSTREAM = [
  'error', 'timeout', 'invalid_header', 'non_idempotent', 'http_500', 'http_502', 'http_503', 'http_504', 'http_403', 'http_404', 'http_429', 'off',
];

/** `grpc_pass [grpc://|grpcs://]ADDRESS`, or a URL with variables (`ngx_http_grpc_pass`). */
function setGrpcPass(d: { readonly args: readonly string[]; readonly loc: SourceLoc }, cx: SetContext): void {
  if (cx.level.own(grpcPass)) throw new DirectiveFailure('is duplicate');
  setContentHandler(cx, 'grpc_pass', d.loc);
  const url = d.args[0]!;
  if (url.includes('$')) {
    cx.level.set(grpcPass, { kind: 'variable', url: cx.scope.variables.value(url, d.loc), loc: d.loc }, d.loc);
    return;
  }
  const lower = url.toLowerCase();
  const tls = lower.startsWith('grpcs://');
  const rest = tls ? url.slice(8) : lower.startsWith('grpc://') ? url.slice(7) : url;
  const parsed = parseStaticPass(rest, d.loc);
  cx.level.set(grpcPass, parsed.kind === 'unix'
    ? { kind: 'static', tls, host: `unix:${parsed.path}`, port: undefined, loc: d.loc }
    : { kind: 'static', tls, host: parsed.host, port: parsed.port, loc: d.loc }, d.loc);
}

const none = (name: string, args: DirectiveSpec['args'], note: string, r: Parameters<typeof noEffect>[1]): DirectiveSpec =>
  noEffect({ name, module: GRPC, contexts: HTTP_SRV_LOC, args, note }, r);

export const grpcDirectives: readonly DirectiveSpec[] = [
  { name: 'grpc_pass', module: GRPC, contexts: ['location', 'lif'], args: ['TAKE1'], effect: 'runtime', resolves: 'url', set: setGrpcPass },
  {
    name: 'grpc_set_header', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime',
    set: (d, cx) => cx.level.append(grpcSetHeader, { name: d.args[0]!, value: cx.scope.variables.value(d.args[1]!, d.loc) }, d.loc),
  },
  { name: 'grpc_hide_header', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: (d, cx) => cx.level.append(hideHeader, d.args[0]!, d.loc) },
  { name: 'grpc_pass_header', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: (d, cx) => cx.level.append(passHeader, d.args[0]!, d.loc) },
  { name: 'grpc_ignore_headers', module: GRPC, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: bitmaskSetter(ignoreHeaders, IGNORE_HEADERS) },
  { name: 'grpc_connect_timeout', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(connectTimeoutMs) },
  { name: 'grpc_send_timeout', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(sendTimeoutMs) },
  { name: 'grpc_read_timeout', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: msecSetter(readTimeoutMs) },
  { name: 'grpc_buffer_size', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(bufferSize) },
  { name: 'grpc_intercept_errors', module: GRPC, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(interceptErrors) },
  { name: 'grpc_next_upstream', module: GRPC, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: bitmaskSetter(nextUpstream, NEXT_UPSTREAM) },
  { name: 'grpc_next_upstream_tries', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: numSetter(nextUpstreamTries) },
  {
    name: 'grpc_next_upstream_timeout', module: GRPC, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: msecSetter(nextUpstreamTimeoutMs),
  },
  ...upstreamSslDirectives(GRPC_SSL, GRPC),
  none('grpc_bind', ['TAKE1', 'TAKE2'], 'upstream connections use the address the system chooses', rule.custom(parseBind)),
  none('grpc_socket_keepalive', ['FLAG'], 'TCP keepalive is the runtime\'s', rule.flag),
];

/** The static address of a level's own `grpc_pass`, for `resolveUpstreams`: no default port (`no port in upstream "…"`). */
export function grpcPassAddress(conf: LevelConf): PassAddress | undefined {
  const pass = conf.own(grpcPass)?.value;
  if (pass?.kind !== 'static') return undefined;
  return { host: pass.host, port: pass.port, defaultPort: undefined, loc: pass.loc };
}

/**
 * `ngx_http_grpc_headers`: what `grpc_set_header` adds unless it names the
 * header itself. `Host` empty: the host of `grpc_pass` goes as `:authority`
 * (a `grpc_set_header Host` is sent as a `host` field instead, and no
 * `:authority`); `TE` is `trailers` when the client said it takes them.
 */
const DEFAULT_HEADERS: readonly [string, string][] = [
  ['Content-Length', '$content_length'], ['TE', '$grpc_internal_trailers'], ['Host', ''], ['Connection', ''], ['Proxy-Connection', ''],
  ['Transfer-Encoding', ''], ['Keep-Alive', ''], ['Expect', ''], ['Upgrade', ''],
];

/** `ngx_http_grpc_hide_headers`. */
const HIDDEN = ['date', 'server', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset'];

/**
 * The gRPC settings of a level (`ngx_http_grpc_merge_loc_conf` with the
 * hardcoded values of `ngx_http_grpc_create_loc_conf`), values bound;
 * undefined without `grpc_pass`.
 */
export function grpcConf(cx: CompileContext, node: LevelNode, c: ConfChain): ProxyConf | undefined {
  const pass = inheritedIntoIf(node, (n) => n.conf.own(grpcPass)?.value);
  if (!pass) return undefined;
  const vars = cx.scope.variables;
  const headers = upstreamHeaders(vars, c.list(grpcSetHeader), DEFAULT_HEADERS, pass.loc);
  const hide = hiddenHeaders(HIDDEN, c.list(hideHeader), c.list(passHeader));
  const ignored = c.get(ignoreHeaders);
  const buffer = c.get(bufferSize);
  return {
    module: 'grpc',
    target: pass.kind === 'static'
      ? {
          kind: 'static', scheme: pass.tls ? 'https' : 'http', group: groupKey(pass.host, pass.port), uri: undefined,
          // ngx_http_grpc_pass: the host as written, with its port; `localhost` for a unix domain socket
          hostHeader: pass.host.startsWith('unix:') ? 'localhost' : pass.port === undefined ? pass.host : `${pass.host}:${pass.port}`,
        }
      : { kind: 'variable', url: vars.bind(pass.url) },
    locationPrefix: '',
    headers,
    headerNames: new Set(headers.map((h) => h.lowerName)),
    httpVersion: '2',
    hideHeaders: hide,
    passTrailers: true,
    passRequestBody: true,
    passRequestHeaders: true,
    connectTimeoutMs: c.get(connectTimeoutMs),
    sendTimeoutMs: c.get(sendTimeoutMs),
    readTimeoutMs: c.get(readTimeoutMs),
    bufferSizeBytes: buffer,
    interceptErrors: c.get(interceptErrors),
    redirect: [],
    ignoreClientAbort: false,
    buffering: false,
    accelBuffering: !ignored.includes('X-Accel-Buffering'),
    accelRedirect: !ignored.includes('X-Accel-Redirect'),
    accelLimitRate: !ignored.includes('X-Accel-Limit-Rate'),
    accelCharset: !ignored.includes('X-Accel-Charset'),
    requestBuffering: false,
    ...unbufferedSpool(cx, buffer),
    ...nextUpstreamOf(c.get(nextUpstream), c.get(nextUpstreamTries), c.get(nextUpstreamTimeoutMs)),
    tls: upstreamTlsConf(cx, node, c, GRPC_SSL),
    method: undefined,
    setBody: undefined,
    cookieDomains: undefined,
    cookiePaths: undefined,
    cookieFlags: undefined,
    cache: undefined,
  };
}

/**
 * Reads the `grpc_ssl_*` files of every location (and `if` block) whose
 * `grpc_pass` is `grpcs://…` or has variables, in configuration order
 * (`ngx_http_grpc_set_ssl` from the merge).
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function loadGrpcTls(cx: CompileContext, servers: readonly LevelNode[]): void {
  for (const node of levelsInOrder(servers)) {
    const pass = inheritedIntoIf(node, (n) => n.conf.own(grpcPass)?.value);
    if (pass && (pass.kind === 'variable' || pass.tls)) readProxyTls(cx, node, GRPC_SSL);
  }
}
