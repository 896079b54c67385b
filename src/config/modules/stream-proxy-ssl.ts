/**
 * TLS to the upstreams of stream servers (`proxy_ssl on`, the `proxy_ssl_*`
 * directives of `src/stream/ngx_stream_proxy_module.c`): the same slots and
 * file reading as http's proxy (`proxy-ssl.ts`), `proxy_ssl_name` with the
 * stream module's variables.
 */
import { ConfigError } from '../../errors.js';
import { hasVariables, type CompileContext } from '../compile-context.js';
import type { Context } from '../flags.js';
import type { ConfigScope } from '../scope.js';
import { DirectiveFailure, flagSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { CompiledValue, VariableRegistry } from '../variables.js';
import { PROXY_SSL, proxySslDirectives, readUpstreamTls, type LoadedTls } from './proxy-ssl.js';

const PROXY = 'ngx_stream_proxy_module';
const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];

/** `proxy_ssl`: the upstream connections speak TLS. */
export const streamProxySsl = slot('stream proxy_ssl', false);

/** A stream server's TLS to its upstreams (`ngx_stream_proxy_ssl_init_connection`). */
export interface StreamUpstreamTls extends Omit<LoadedTls, 'certificateSources'> {
  /** `proxy_ssl_name`; undefined: the upstream's name (`ngx_stream_proxy_ssl_name`). */
  readonly name: CompiledValue<StreamView> | undefined;
}

/** The stream proxy's `proxy_ssl` and `proxy_ssl_*` directives; `vars` is the stream module's variable registry. */
export function streamProxySslDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  const http = (name: string): DirectiveSpec => ({ ...proxySslDirectives.find((s) => s.name === name)!, module: PROXY, contexts: STREAM_ANY });
  return [
    { name: 'proxy_ssl', module: PROXY, contexts: STREAM_ANY, args: ['FLAG'], effect: 'runtime', set: flagSetter(streamProxySsl) },
    {
      name: 'proxy_ssl_name', module: PROXY, contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime',
      set: (d, cx) => {
        if (cx.level.own(PROXY_SSL.name)) throw new DirectiveFailure('is duplicate');
        cx.level.set(PROXY_SSL.name, vars(cx.scope).value(d.args[0]!, d.loc), d.loc);
      },
    },
    ...[
      'proxy_ssl_server_name', 'proxy_ssl_verify', 'proxy_ssl_verify_depth', 'proxy_ssl_trusted_certificate', 'proxy_ssl_protocols',
      'proxy_ssl_ciphers', 'proxy_ssl_certificate', 'proxy_ssl_certificate_key', 'proxy_ssl_session_reuse', 'proxy_ssl_password_file',
      'proxy_ssl_crl', 'proxy_ssl_conf_command', 'proxy_ssl_certificate_cache',
    ].map(http),
  ];
}

/**
 * `ngx_stream_proxy_merge_srv_conf` → `ngx_stream_proxy_set_ssl`: the
 * settings of a server with `proxy_ssl on` (undefined without), files read now.
 * @throws ConfigError the errors of `readUpstreamTls`, and for a client
 *   certificate named with variables, which jinx reads in http only
 */
export function streamUpstreamTls(cx: CompileContext, c: ConfChain, vars: VariableRegistry<StreamView>): StreamUpstreamTls | undefined {
  if (!c.get(streamProxySsl)) return undefined;
  const cert = c.get(PROXY_SSL.certificate);
  const key = c.get(PROXY_SSL.certificateKey);
  for (const v of [cert, key]) {
    if (v && hasVariables(v)) throw new ConfigError('invalid-value', `jinx reads certificates named with variables ("${v.text}") in http servers only`, v.loc);
  }
  const { certificateSources: _none, ...loaded } = readUpstreamTls(cx, c);
  const name = c.get(PROXY_SSL.name);
  return { ...loaded, name: name && vars.bind(name) };
}
