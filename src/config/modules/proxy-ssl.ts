/**
 * The proxy module's TLS to upstream servers (the `proxy_ssl_*` directives of
 * `src/http/modules/ngx_http_proxy_module.c`): their slots and directives,
 * the files they name read when the configuration is (`ngx_http_proxy_set_ssl`),
 * and the merged `UpstreamTlsConf` a `proxy_pass https://…` uses.
 */
import { ConfigError } from '../../errors.js';
import { loadCrl, loadTrustedCertificates, type CertificatePair } from '../certificates.js';
import type { LevelNode } from '../check.js';
import { hasVariables, type CompileContext } from '../compile-context.js';
import { HTTP_SRV_LOC } from '../flags.js';
import {
  bitmaskSetter, DirectiveFailure, flagSetter, noEffect, numSetter, rule, slot, strSetter, valueSetter, type ConfChain, type DirectiveSpec,
  type Slot,
} from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import { certificatePair, checkCiphersOnce, parseCertificateCache, readPasswordFile, SSL_PROTOCOLS } from './ssl.js';

const PROXY = 'ngx_http_proxy_module';

/**
 * The slots of one module's `*_ssl_*` directives: the proxy module's
 * `proxy_ssl_*` (http and stream), the gRPC module's `grpc_ssl_*` and the
 * uwsgi module's `uwsgi_ssl_*` declare the same directives with the same
 * defaults (`ngx_http_proxy_merge_loc_conf`, `ngx_http_grpc_merge_loc_conf`,
 * `ngx_http_uwsgi_merge_loc_conf`).
 */
export interface UpstreamSslSlots {
  /** `proxy`, `grpc`: the directives' names start with it. */
  readonly prefix: string;
  /** `*_ssl_server_name`: send SNI (off by default). */
  readonly serverName: Slot<boolean>;
  /** `*_ssl_name`: the name for SNI and the certificate check; unset: the host of the `*_pass` address. */
  readonly name: Slot<ValueSource | undefined>;
  readonly verify: Slot<boolean>;
  readonly verifyDepth: Slot<number>;
  /** As written: resolved against the configuration directory when loaded (`ngx_conf_full_name(…, 1)`). */
  readonly trustedCertificate: Slot<string | undefined>;
  /** `NGX_SSL_DEFAULT_PROTOCOLS`. */
  readonly protocols: Slot<readonly string[]>;
  readonly ciphers: Slot<string>;
  /** The client certificate and its key, as written (`ngx_http_set_complex_value_slot`). */
  readonly certificate: Slot<ValueSource | undefined>;
  readonly certificateKey: Slot<ValueSource | undefined>;
  readonly sessionReuse: Slot<boolean>;
  /** `*_ssl_password_file`: the passphrases tried on an encrypted `*_ssl_certificate_key`. */
  readonly passwords: Slot<readonly string[] | undefined>;
  /** `*_ssl_crl`: revoked certificates, checked with `*_ssl_verify`; as written, resolved against the configuration directory. */
  readonly crl: Slot<string | undefined>;
}

/** The `PREFIX_ssl_*` slots. */
function upstreamSslSlots(prefix: string): UpstreamSslSlots {
  const n = (name: string): string => `${prefix}_ssl_${name}`;
  return {
    prefix,
    serverName: slot(n('server_name'), false),
    name: slot<ValueSource | undefined>(n('name'), undefined),
    verify: slot(n('verify'), false),
    verifyDepth: slot(n('verify_depth'), 1),
    trustedCertificate: slot<string | undefined>(n('trusted_certificate'), undefined),
    protocols: slot<readonly string[]>(n('protocols'), ['TLSv1.2', 'TLSv1.3']),
    ciphers: slot(n('ciphers'), 'DEFAULT'),
    certificate: slot<ValueSource | undefined>(n('certificate'), undefined),
    certificateKey: slot<ValueSource | undefined>(n('certificate_key'), undefined),
    sessionReuse: slot(n('session_reuse'), true),
    passwords: slot<readonly string[] | undefined>(n('password_file'), undefined),
    crl: slot<string | undefined>(n('crl'), undefined),
  };
}

/** The proxy module's `proxy_ssl_*` slots (http and stream). */
export const PROXY_SSL = upstreamSslSlots('proxy');
/** The gRPC module's `grpc_ssl_*` slots. */
export const GRPC_SSL = upstreamSslSlots('grpc');
/** The uwsgi module's `uwsgi_ssl_*` slots. */
export const UWSGI_SSL = upstreamSslSlots('uwsgi');

/** The `*_ssl_*` directives of `module` on slots `s`, in http's server, location and main contexts. */
export function upstreamSslDirectives(s: UpstreamSslSlots, module: string): DirectiveSpec[] {
  const n = (name: string): string => `${s.prefix}_ssl_${name}`;
  const spec = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set']): DirectiveSpec => ({
    name: n(name), module, contexts: HTTP_SRV_LOC, args, effect: 'runtime', set,
  });
  return [
    spec('server_name', ['FLAG'], flagSetter(s.serverName)),
    spec('name', ['TAKE1'], valueSetter(s.name)),
    spec('verify', ['FLAG'], flagSetter(s.verify)),
    spec('verify_depth', ['TAKE1'], numSetter(s.verifyDepth)),
    spec('trusted_certificate', ['TAKE1'], strSetter(s.trustedCertificate)),
    spec('protocols', ['1MORE'], bitmaskSetter(s.protocols, SSL_PROTOCOLS)),
    spec('ciphers', ['TAKE1'], strSetter(s.ciphers)),
    spec('certificate', ['TAKE1'], valueSetter(s.certificate)),
    spec('certificate_key', ['TAKE1'], valueSetter(s.certificateKey)),
    spec('session_reuse', ['FLAG'], flagSetter(s.sessionReuse)),
    spec('password_file', ['TAKE1'], (d, cx) => {
      if (cx.level.own(s.passwords)) throw new DirectiveFailure('is duplicate');
      cx.level.set(s.passwords, cx.scope.offline ? [] : readPasswordFile(cx.scope, cx.scope.confPath(d.args[0]!)), d.loc);
    }),
    spec('crl', ['TAKE1'], strSetter(s.crl)),
    noEffect({ name: n('conf_command'), module, contexts: HTTP_SRV_LOC, args: ['TAKE2'], note: 'OpenSSL configuration commands are not passed through' }, rule.array),
    noEffect({
      name: n('certificate_cache'), module, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3'],
      note: 'client certificates with variables are read once per configuration',
    }, rule.custom(parseCertificateCache)),
  ];
}

/** The `proxy_ssl_*` directives. */
export const proxySslDirectives: readonly DirectiveSpec[] = upstreamSslDirectives(PROXY_SSL, PROXY);

/**
 * TLS to upstream servers (`ngx_http_proxy_set_ssl` in
 * `src/http/modules/ngx_http_proxy_module.c`, merged with nginx's defaults;
 * used as `ngx_http_upstream_ssl_init_connection` uses them,
 * `src/http/ngx_http_upstream.c`). Files are read when the configuration is.
 */
export interface UpstreamTlsConf {
  /** The settings below as text: locations with equal settings share connection pools. */
  readonly key: string;
  /** `proxy_ssl_server_name`: send the name as SNI (never for an IP address). */
  readonly serverName: boolean;
  /** `proxy_ssl_name`; undefined: the host of `proxy_pass` (`$proxy_host` without the port). */
  readonly name: CompiledValue | undefined;
  /** `proxy_ssl_verify`: check the chain against `trusted` and the name against the certificate. */
  readonly verify: boolean;
  /** `proxy_ssl_verify_depth`. */
  readonly verifyDepth: number;
  /** The PEM certificates of `proxy_ssl_trusted_certificate` (read when `verify` is on). */
  readonly trusted: Buffer | undefined;
  /** `proxy_ssl_certificate` and `…_key`: the client certificate, if any. */
  readonly certificate: CertificatePair | undefined;
  /**
   * `proxy_ssl_certificate` and `…_key` with variables: the files are read
   * when a request needs them (an empty certificate: none), relative paths
   * against `confPrefix` (`ngx_http_upstream_ssl_certificate`).
   */
  readonly certificateFiles: { readonly cert: CompiledValue; readonly key: CompiledValue; readonly confPrefix: string } | undefined;
  /** `proxy_ssl_protocols`. */
  readonly protocols: readonly string[];
  /** `proxy_ssl_ciphers` (an OpenSSL cipher list, TLS 1.2 and older). */
  readonly ciphers: string;
  /** `proxy_ssl_password_file`: the passphrases of an encrypted `proxy_ssl_certificate_key`. */
  readonly passwords: readonly string[] | undefined;
  /** `proxy_ssl_crl`: revoked certificates, read when `verify` is on. */
  readonly crl: Buffer | undefined;
  /** `proxy_ssl_session_reuse`: resume TLS sessions on new connections. */
  readonly sessionReuse: boolean;
}

/** A location's upstream TLS settings as read before variables are bound (`proxy_ssl_name` and certificates with variables are bound later). */
export type LoadedTls = Omit<UpstreamTlsConf, 'name' | 'certificateFiles'> & {
  readonly certificateSources: { readonly cert: ValueSource; readonly key: ValueSource } | undefined;
};

/** The upstream TLS settings read for every level that proxies over TLS (`readProxyTls`), and the trusted certificates read, by path. */
const PROXY_TLS = Symbol('proxy tls');

function proxyTlsOf(cx: CompileContext): { levels: Map<UpstreamSslSlots, Map<LevelNode, LoadedTls>>; trusted: Map<string, Buffer> } {
  return cx.memo(PROXY_TLS, () => ({ levels: new Map<UpstreamSslSlots, Map<LevelNode, LoadedTls>>(), trusted: new Map<string, Buffer>() }));
}

/**
 * `ngx_http_proxy_set_ssl` (`src/http/modules/ngx_http_proxy_module.c`;
 * `ngx_http_grpc_set_ssl` with `GRPC_SSL`) for one location (or `if` block)
 * whose `proxy_pass` is `https://…` (`grpc_pass grpcs://…`) or has
 * variables: the cipher list, the client certificate and key, then with
 * `*_ssl_verify` the trusted certificates and CRL. The module calls it for
 * every such level in configuration order, as nginx's merge runs; nginx
 * reports these errors without a place.
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function readProxyTls(cx: CompileContext, node: LevelNode, slots: UpstreamSslSlots = PROXY_SSL): void {
  const { levels } = proxyTlsOf(cx);
  let mine = levels.get(slots);
  if (!mine) levels.set(slots, (mine = new Map()));
  mine.set(node, readUpstreamTls(cx, cx.chain(node), slots));
}

/**
 * The upstream TLS settings of a level (merged): the cipher list checked,
 * the client certificate read (with variables: kept to be bound), with
 * `proxy_ssl_verify` the trusted certificates and CRL read; http's proxy and
 * the stream proxy (`ngx_stream_proxy_set_ssl`) read them alike.
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function readUpstreamTls(cx: CompileContext, c: ConfChain, s: UpstreamSslSlots = PROXY_SSL): LoadedTls {
  const ciphers = c.get(s.ciphers);
  checkCiphersOnce(cx, ciphers);
  let certificate: CertificatePair | undefined;
  let certificateSources: LoadedTls['certificateSources'];
  const passwords = c.get(s.passwords);
  const cert = c.get(s.certificate);
  const key = c.get(s.certificateKey);
  if (cert !== undefined && cert.text !== '') {
    if (key === undefined) throw new ConfigError('file', `no "${s.prefix}_ssl_certificate_key" is defined for certificate "${cert.text}"`);
    if (hasVariables(cert) || hasVariables(key) || cx.scope.offline) {
      // read per request (nginx: per connection); offline, not read now
      certificateSources = { cert, key };
    } else {
      certificate = certificatePair(cx, cx.scope.confPath(cert.text), cx.scope.confPath(key.text), passwords);
    }
  }
  const verify = c.get(s.verify);
  let trusted: Buffer | undefined;
  const trustedFile = c.get(s.trustedCertificate);
  if (verify) {
    if (!trustedFile) throw new ConfigError('file', `no ${s.prefix}_ssl_trusted_certificate for ${s.prefix}_ssl_verify`);
    const path = cx.scope.confPath(trustedFile);
    const cache = proxyTlsOf(cx).trusted;
    trusted = cache.get(path);
    if (!trusted && !cx.scope.offline) cache.set(path, (trusted = loadTrustedCertificates(path)));
  }
  const crlFile = c.get(s.crl);
  const crl = verify && crlFile !== undefined && !cx.scope.offline ? loadCrl(cx.scope.confPath(crlFile)) : undefined;
  const settings = {
    serverName: c.get(s.serverName),
    verify,
    verifyDepth: c.get(s.verifyDepth),
    trusted,
    certificate,
    certificateSources,
    passwords,
    crl,
    protocols: c.get(s.protocols),
    ciphers,
    sessionReuse: c.get(s.sessionReuse),
  };
  return {
    key: JSON.stringify([
      settings.serverName, verify, settings.verifyDepth, verify ? trustedFile : '', verify ? crlFile ?? '' : '', certificate?.certPath ?? cert?.text ?? '',
      certificate?.keyPath ?? key?.text ?? '', passwords ?? [], settings.protocols, ciphers, settings.sessionReuse,
    ]),
    ...settings,
  };
}

/** The upstream TLS settings read for `node`, with `proxy_ssl_name` bound; undefined for a level that proxies over plain HTTP. */
export function upstreamTlsConf(cx: CompileContext, node: LevelNode, c: ConfChain, s: UpstreamSslSlots = PROXY_SSL): UpstreamTlsConf | undefined {
  const loaded = proxyTlsOf(cx).levels.get(s)?.get(node);
  if (!loaded) return undefined;
  const { certificateSources, ...settings } = loaded;
  const vars = cx.scope.variables;
  const name = c.get(s.name);
  return {
    ...settings,
    name: name && vars.bind(name),
    certificateFiles: certificateSources && {
      cert: vars.bind(certificateSources.cert), key: vars.bind(certificateSources.key), confPrefix: cx.scope.confPrefix,
    },
  };
}
