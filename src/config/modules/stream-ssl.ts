/**
 * TLS termination in stream servers (`src/stream/ngx_stream_ssl_module.c`):
 * the `ssl_*` directives of the `stream` and `server` levels, read into the
 * same slots as http's (`ssl.ts`), so that a stream server's certificates,
 * protocols, ciphers, session settings and client verification are loaded
 * and checked by http's code, plus the stream module's own `ssl_alpn` and
 * `ssl_handshake_timeout`.
 */
import type { Directive } from '../../parser/ast.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import type { Context } from '../flags.js';
import { DirectiveFailure, fail, msecSetter, slot, type DirectiveSpec, type SetContext } from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { ValueSource, VariableRegistry } from '../variables.js';
import type { ConfigScope } from '../scope.js';
import {
  perHandshakeCertificates, serverCertificates, serverTlsSettings, setSessionCache, sslCertificateKeys, sslCertificates, sslDirectives,
  sslSessionCache, type PerHandshakeCertificates, type TlsServerConf,
} from './ssl.js';

const STREAM_SSL = 'ngx_stream_ssl_module';
const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];

/** `ssl_handshake_timeout` (ms; nginx's default 60s). */
export const sslHandshakeTimeout = slot('ssl_handshake_timeout', 60_000);
/** `ssl_alpn`: the protocols the server accepts, in its order of preference; empty: no ALPN. */
export const sslAlpn = slot<readonly string[]>('ssl_alpn', []);

/** A stream server's TLS settings: http's (certificates with variables evaluated for a session), and the stream module's own. */
export interface StreamTlsConf extends Omit<TlsServerConf, 'certificateValues'> {
  readonly certificateValues: PerHandshakeCertificates<StreamView> | undefined;
  readonly handshakeTimeoutMs: number;
  /** `ssl_alpn`, in the server's order. */
  readonly alpn: readonly string[];
}

/** An http `ssl_*` directive declared again for the stream module, with its setter. */
function fromHttp(name: string): DirectiveSpec {
  const spec = sslDirectives.find((s) => s.name === name);
  if (!spec) throw new Error(`no http directive ${name}`);
  return { ...spec, module: STREAM_SSL, contexts: STREAM_ANY };
}

/**
 * `ngx_stream_ssl_alpn`: each protocol 1 to 255 bytes
 * (`invalid value "…"`), kept in order.
 */
function setAlpn(d: Directive, cx: SetContext): void {
  if (cx.level.own(sslAlpn)) throw new DirectiveFailure('is duplicate');
  for (const p of d.args) if (p.length === 0 || p.length > 255) fail(`invalid value "${p}"`);
  cx.level.set(sslAlpn, d.args, d.loc);
}

/**
 * The stream module's `ssl_*` directives; `vars` is the stream module's
 * variable registry of a configuration (certificate names may have variables).
 */
export function streamSslDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  const certificate = (target: typeof sslCertificates) => (d: Directive, cx: SetContext): void => {
    const value: ValueSource = vars(cx.scope).value(d.args[0]!, d.loc);
    cx.level.append(target, value, d.loc);
  };
  return [
    { name: 'ssl_certificate', module: STREAM_SSL, contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime', set: certificate(sslCertificates) },
    { name: 'ssl_certificate_key', module: STREAM_SSL, contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime', set: certificate(sslCertificateKeys) },
    {
      name: 'ssl_session_cache', module: STREAM_SSL, contexts: STREAM_ANY, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
      set: (d, cx) => cx.level.set(sslSessionCache, setSessionCache(d, cx, STREAM_SSL), d.loc),
    },
    { name: 'ssl_handshake_timeout', module: STREAM_SSL, contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime', set: msecSetter(sslHandshakeTimeout) },
    { name: 'ssl_alpn', module: STREAM_SSL, contexts: STREAM_ANY, args: ['1MORE'], effect: 'runtime', set: setAlpn },
    ...[
      'ssl_protocols', 'ssl_ciphers', 'ssl_prefer_server_ciphers', 'ssl_reject_handshake', 'ssl_session_timeout', 'ssl_session_tickets',
      'ssl_session_ticket_key', 'ssl_dhparam', 'ssl_ecdh_curve', 'ssl_stapling', 'ssl_stapling_verify', 'ssl_stapling_file',
      'ssl_stapling_responder', 'ssl_trusted_certificate', 'ssl_client_certificate', 'ssl_verify_client', 'ssl_verify_depth', 'ssl_crl',
      'ssl_password_file', 'ssl_certificate_cache', 'ssl_conf_command',
    ].map(fromHttp),
  ];
}

/**
 * `ngx_stream_ssl_merge_srv_conf`: a stream server's TLS settings (merged
 * from the stream level), its certificates read now, or with variables
 * (`ngx_stream_ssl_compile_certificates`) bound in the stream module's
 * registry `vars`, to be read for each handshake (`ngx_stream_ssl_certificate`);
 * undefined for a server without a certificate or `ssl_reject_handshake on`.
 * @throws ConfigError nginx's `[emerg]`s for the files (`serverCertificates`)
 */
export function streamTlsConf(cx: CompileContext, node: LevelNode, vars: VariableRegistry<StreamView>): StreamTlsConf | undefined {
  const chain = cx.chain(node);
  const certificates = serverCertificates(cx, node);
  const tls = serverTlsSettings(cx, node, certificates);
  if (!tls) return undefined;
  return {
    ...tls, certificateValues: perHandshakeCertificates(cx, node, certificates, vars),
    handshakeTimeoutMs: chain.get(sslHandshakeTimeout), alpn: chain.get(sslAlpn),
  };
}
