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
} from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import { certificatePair, checkCiphersOnce, parseCertificateCache, readPasswordFile, SSL_PROTOCOLS } from './ssl.js';

const PROXY = 'ngx_http_proxy_module';

/** `proxy_ssl_server_name`: send SNI (off by default). */
export const proxySslServerName = slot('proxy_ssl_server_name', false);
/** `proxy_ssl_name`: the name for SNI and the certificate check; unset: the host of `proxy_pass` (`$proxy_host`). */
export const proxySslName = slot<ValueSource | undefined>('proxy_ssl_name', undefined);
export const proxySslVerify = slot('proxy_ssl_verify', false);
export const proxySslVerifyDepth = slot('proxy_ssl_verify_depth', 1);
/** As written: resolved against the configuration directory when loaded (`ngx_conf_full_name(…, 1)`). */
export const proxySslTrustedCertificate = slot<string | undefined>('proxy_ssl_trusted_certificate', undefined);
/** `NGX_SSL_DEFAULT_PROTOCOLS`. */
export const proxySslProtocols = slot<readonly string[]>('proxy_ssl_protocols', ['TLSv1.2', 'TLSv1.3']);
export const proxySslCiphers = slot('proxy_ssl_ciphers', 'DEFAULT');
/** The client certificate and its key, as written (`ngx_http_set_complex_value_slot`). */
export const proxySslCertificate = slot<ValueSource | undefined>('proxy_ssl_certificate', undefined);
export const proxySslCertificateKey = slot<ValueSource | undefined>('proxy_ssl_certificate_key', undefined);
export const proxySslSessionReuse = slot('proxy_ssl_session_reuse', true);
/** `proxy_ssl_password_file`: the passphrases tried on an encrypted `proxy_ssl_certificate_key`. */
export const proxySslPasswords = slot<readonly string[] | undefined>('proxy_ssl_password_file', undefined);
/** `proxy_ssl_crl`: revoked certificates, checked with `proxy_ssl_verify`; as written, resolved against the configuration directory. */
export const proxySslCrl = slot<string | undefined>('proxy_ssl_crl', undefined);

/** The `proxy_ssl_*` directives. */
export const proxySslDirectives: readonly DirectiveSpec[] = [
  { name: 'proxy_ssl_server_name', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxySslServerName) },
  { name: 'proxy_ssl_name', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: valueSetter(proxySslName) },
  { name: 'proxy_ssl_verify', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxySslVerify) },
  { name: 'proxy_ssl_verify_depth', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: numSetter(proxySslVerifyDepth) },
  {
    name: 'proxy_ssl_trusted_certificate', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: strSetter(proxySslTrustedCertificate),
  },
  {
    name: 'proxy_ssl_protocols', module: PROXY, contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime',
    set: bitmaskSetter(proxySslProtocols, SSL_PROTOCOLS),
  },
  { name: 'proxy_ssl_ciphers', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(proxySslCiphers) },
  { name: 'proxy_ssl_certificate', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: valueSetter(proxySslCertificate) },
  {
    name: 'proxy_ssl_certificate_key', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: valueSetter(proxySslCertificateKey),
  },
  { name: 'proxy_ssl_session_reuse', module: PROXY, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(proxySslSessionReuse) },
  {
    name: 'proxy_ssl_password_file', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(proxySslPasswords)) throw new DirectiveFailure('is duplicate');
      cx.level.set(proxySslPasswords, cx.scope.offline ? [] : readPasswordFile(cx.scope, cx.scope.confPath(d.args[0]!)), d.loc);
    },
  },
  { name: 'proxy_ssl_crl', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(proxySslCrl) },
  noEffect({ name: 'proxy_ssl_conf_command', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE2'], note: 'OpenSSL configuration commands are not passed through' }, rule.array),
  noEffect({
    name: 'proxy_ssl_certificate_cache', module: PROXY, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3'],
    note: 'client certificates with variables are read once per configuration',
  }, rule.custom(parseCertificateCache)),
];

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

function proxyTlsOf(cx: CompileContext): { levels: Map<LevelNode, LoadedTls>; trusted: Map<string, Buffer> } {
  return cx.memo(PROXY_TLS, () => ({ levels: new Map<LevelNode, LoadedTls>(), trusted: new Map<string, Buffer>() }));
}

/**
 * `ngx_http_proxy_set_ssl` (`src/http/modules/ngx_http_proxy_module.c`)
 * for one location (or `if` block) whose `proxy_pass` is `https://…` or has
 * variables: the cipher list, the client certificate and key, then with
 * `proxy_ssl_verify` the trusted certificates and CRL. The proxy module calls
 * it for every such level in configuration order, as nginx's merge runs;
 * nginx reports these errors without a place.
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function readProxyTls(cx: CompileContext, node: LevelNode): void {
  proxyTlsOf(cx).levels.set(node, readUpstreamTls(cx, cx.chain(node)));
}

/**
 * The upstream TLS settings of a level (merged): the cipher list checked,
 * the client certificate read (with variables: kept to be bound), with
 * `proxy_ssl_verify` the trusted certificates and CRL read; http's proxy and
 * the stream proxy (`ngx_stream_proxy_set_ssl`) read them alike.
 * @throws ConfigError the first missing or unreadable file, or cipher list refused
 */
export function readUpstreamTls(cx: CompileContext, c: ConfChain): LoadedTls {
  const ciphers = c.get(proxySslCiphers);
  checkCiphersOnce(cx, ciphers);
  let certificate: CertificatePair | undefined;
  let certificateSources: LoadedTls['certificateSources'];
  const passwords = c.get(proxySslPasswords);
  const cert = c.get(proxySslCertificate);
  const key = c.get(proxySslCertificateKey);
  if (cert !== undefined && cert.text !== '') {
    if (key === undefined) throw new ConfigError('file', `no "proxy_ssl_certificate_key" is defined for certificate "${cert.text}"`);
    if (hasVariables(cert) || hasVariables(key) || cx.scope.offline) {
      // read per request (nginx: per connection); offline, not read now
      certificateSources = { cert, key };
    } else {
      certificate = certificatePair(cx, cx.scope.confPath(cert.text), cx.scope.confPath(key.text), passwords);
    }
  }
  const verify = c.get(proxySslVerify);
  let trusted: Buffer | undefined;
  const trustedFile = c.get(proxySslTrustedCertificate);
  if (verify) {
    if (!trustedFile) throw new ConfigError('file', 'no proxy_ssl_trusted_certificate for proxy_ssl_verify');
    const path = cx.scope.confPath(trustedFile);
    const cache = proxyTlsOf(cx).trusted;
    trusted = cache.get(path);
    if (!trusted && !cx.scope.offline) cache.set(path, (trusted = loadTrustedCertificates(path)));
  }
  const crlFile = c.get(proxySslCrl);
  const crl = verify && crlFile !== undefined && !cx.scope.offline ? loadCrl(cx.scope.confPath(crlFile)) : undefined;
  const settings = {
    serverName: c.get(proxySslServerName),
    verify,
    verifyDepth: c.get(proxySslVerifyDepth),
    trusted,
    certificate,
    certificateSources,
    passwords,
    crl,
    protocols: c.get(proxySslProtocols),
    ciphers,
    sessionReuse: c.get(proxySslSessionReuse),
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
export function upstreamTlsConf(cx: CompileContext, node: LevelNode, c: ConfChain): UpstreamTlsConf | undefined {
  const loaded = proxyTlsOf(cx).levels.get(node);
  if (!loaded) return undefined;
  const { certificateSources, ...settings } = loaded;
  const vars = cx.scope.variables;
  const name = c.get(proxySslName);
  return {
    ...settings,
    name: name && vars.bind(name),
    certificateFiles: certificateSources && {
      cert: vars.bind(certificateSources.cert), key: vars.bind(certificateSources.key), confPrefix: cx.scope.confPrefix,
    },
  };
}
