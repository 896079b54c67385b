/**
 * The memcached module (`src/http/modules/ngx_http_memcached_module.c`):
 * `memcached_pass ADDRESS|unix:PATH|UPSTREAM` answers GET and HEAD with the
 * value memcached has under `$memcached_key` (a variable a `set` must
 * define), typed by the location's `types`/`default_type`, gzip-encoded
 * when its flags have `memcached_gzip_flag`; a missing key is 404. Its
 * upstream settings are nginx's hardcoded ones: never buffered, errors
 * always intercepted, no request headers nor body passed.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import {
  bitmaskSetter, DirectiveFailure, msecSetter, noEffect, numSetter, rule, sizeSetter, slot,
  type ConfChain, type DirectiveSpec, type LevelConf, type SetContext,
} from '../spec.js';
import type { LevelNode } from '../check.js';
import { groupKey, inheritedIntoIf, type CompileContext } from '../compile-context.js';
import { parseBind } from './proxy.js';
import { setContentHandler } from './http-core.js';
import { parseStaticPass, type CgiTarget, type StaticPassDef } from './cgi-upstream.js';
import { nextUpstreamOf, unbufferedSpool, type PassAddress, type UpstreamConf } from './upstream.js';
import type { CompiledValue, ValueSource } from '../variables.js';

const MEMCACHED = 'ngx_http_memcached_module';

/** `memcached_pass` as read, with the `$memcached_key` it reads. */
interface MemcachedPassDef {
  readonly address: StaticPassDef;
  readonly key: ValueSource;
}

/** Not inherited into nested locations; an `if` block takes its location's. */
const memcachedPass = slot<MemcachedPassDef | undefined>('memcached_pass', undefined, false);
const connectTimeoutMs = slot('memcached_connect_timeout', 60_000);
const sendTimeoutMs = slot('memcached_send_timeout', 60_000);
const readTimeoutMs = slot('memcached_read_timeout', 60_000);
/** One memory page, as nginx's default on x86_64 Linux. */
const bufferSize = slot('memcached_buffer_size', 4096);
const nextUpstream = slot<readonly string[]>('memcached_next_upstream', ['error', 'timeout']);
const nextUpstreamTries = slot('memcached_next_upstream_tries', 0);
const nextUpstreamTimeoutMs = slot('memcached_next_upstream_timeout', 0);
const gzipFlag = slot('memcached_gzip_flag', 0);

/** `ngx_http_memcached_next_upstream_masks`, and the upstream conditions they stand for. */
const NEXT_UPSTREAM: Readonly<Record<string, string>> = {
  error: 'error', timeout: 'timeout', invalid_response: 'invalid_header', not_found: 'http_404', off: 'off',
};

/** `ngx_http_memcached_pass`: a static address (no variables), or the name of an `upstream` block. */
function setPass(d: Directive, cx: SetContext): void {
  if (cx.level.own(memcachedPass)) throw new DirectiveFailure('is duplicate');
  setContentHandler(cx, 'memcached_pass', d.loc);
  cx.level.set(memcachedPass, { address: parseStaticPass(d.args[0]!, d.loc), key: cx.scope.variables.value('$memcached_key', d.loc) }, d.loc);
}

const runtime = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
  name, module: MEMCACHED, contexts, args, effect: 'runtime', set,
});

export const memcachedDirectives: readonly DirectiveSpec[] = [
  { ...runtime('memcached_pass', ['TAKE1'], setPass, ['location', 'lif']), resolves: 'address' },
  runtime('memcached_connect_timeout', ['TAKE1'], msecSetter(connectTimeoutMs)),
  runtime('memcached_send_timeout', ['TAKE1'], msecSetter(sendTimeoutMs)),
  runtime('memcached_read_timeout', ['TAKE1'], msecSetter(readTimeoutMs)),
  runtime('memcached_buffer_size', ['TAKE1'], sizeSetter(bufferSize)),
  runtime('memcached_next_upstream', ['1MORE'], bitmaskSetter(nextUpstream, Object.keys(NEXT_UPSTREAM))),
  runtime('memcached_next_upstream_tries', ['TAKE1'], numSetter(nextUpstreamTries)),
  runtime('memcached_next_upstream_timeout', ['TAKE1'], msecSetter(nextUpstreamTimeoutMs)),
  runtime('memcached_gzip_flag', ['TAKE1'], numSetter(gzipFlag)),
  noEffect({ name: 'memcached_bind', module: MEMCACHED, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2'], note: 'upstream connections use the address the system chooses' }, rule.custom(parseBind)),
  noEffect({ name: 'memcached_socket_keepalive', module: MEMCACHED, contexts: HTTP_SRV_LOC, args: ['FLAG'], note: 'TCP keepalive is the runtime\'s' }, rule.flag),
];

/** The settings of the memcached module in a location. */
export interface MemcachedConf extends UpstreamConf {
  readonly target: CgiTarget;
  /** `$memcached_key`. */
  readonly key: CompiledValue;
  /** `memcached_gzip_flag`: a value whose flags have these bits is sent with `Content-Encoding: gzip`; 0: never. */
  readonly gzipFlag: number;
  /** The memcached module does not cache. */
  readonly cache: undefined;
}

/** The static address of a level's own `memcached_pass`, for `resolveUpstreams`. */
export function memcachedPassAddress(conf: LevelConf): PassAddress | undefined {
  const pass = conf.own(memcachedPass)?.value?.address;
  if (pass?.kind !== 'static') return undefined;
  return { host: pass.host, port: pass.port, defaultPort: undefined, loc: pass.loc };
}

/** The memcached settings of a level (`ngx_http_memcached_merge_loc_conf` and the hardcoded ones), undefined without `memcached_pass`. */
export function memcachedConf(cx: CompileContext, node: LevelNode, c: ConfChain): MemcachedConf | undefined {
  const pass = inheritedIntoIf(node, (n) => n.conf.own(memcachedPass)?.value);
  if (!pass) return undefined;
  const { address } = pass;
  const conditions = c.get(nextUpstream).map((n) => NEXT_UPSTREAM[n]!);
  const buffer = c.get(bufferSize);
  return {
    target: address.kind === 'static' ? { kind: 'group', group: groupKey(address.host, address.port), host: groupKey(address.host, undefined) } : { kind: 'unix', path: address.path },
    key: cx.scope.variables.bind(pass.key),
    gzipFlag: c.get(gzipFlag),
    cache: undefined,
    connectTimeoutMs: c.get(connectTimeoutMs),
    sendTimeoutMs: c.get(sendTimeoutMs),
    readTimeoutMs: c.get(readTimeoutMs),
    bufferSizeBytes: buffer,
    interceptErrors: true,
    hideHeaders: new Set(),
    passRequestBody: false,
    passRequestHeaders: false,
    ignoreClientAbort: false,
    buffering: false,
    accelBuffering: false,
    accelRedirect: false,
    accelLimitRate: false,
    accelCharset: false,
    requestBuffering: true,
    ...unbufferedSpool(cx, buffer),
    ...nextUpstreamOf(conditions, c.get(nextUpstreamTries), c.get(nextUpstreamTimeoutMs)),
  };
}
