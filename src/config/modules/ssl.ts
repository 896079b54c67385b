/**
 * TLS termination settings (`src/http/modules/ngx_http_ssl_module.c`).
 * Certificates are read when the configuration is loaded (and on reload).
 */
import type { Directive } from '../../parser/ast.js';
import type { SourceLoc } from '../../source-loc.js';
import { systemErrorText } from '../../os-errors.js';
import { HTTP_SRV } from '../flags.js';
import { ConfigError } from '../../errors.js';
import {
  checkCiphers, checkEcdhCurve, loadCertificatePair, loadCrl, loadDhparam, loadTicketKey, loadTrustedCertificates, type CertificatePair,
} from '../certificates.js';
import type { LevelNode } from '../check.js';
import type { ConfigScope } from '../scope.js';
import { hasVariables, type CompileContext } from '../compile-context.js';
import type { CompiledValue, ScriptView, ValueSource, VariableRegistry } from '../variables.js';
import type { RequestView } from '../request-view.js';
import {
  bitmaskSetter, DirectiveFailure, enumSetter, fail, flagSetter, listSlot, noEffect, numSetter, parseNumber, parseSize, parseTime, rule, secSetter, slot, strSetter,
  type ConfChain, type DirectiveSpec, type Rule, type SetContext,
} from '../spec.js';
import { listens } from './http-core.js';

const SSL = 'ngx_http_ssl_module';

/** `ssl_certificate` files as written: with variables they are read per handshake (`ngx_http_ssl_compile_certificates`). */
export const sslCertificates = listSlot<ValueSource>('ssl_certificate');
export const sslCertificateKeys = listSlot<ValueSource>('ssl_certificate_key');
export const sslProtocols = slot<readonly string[]>('ssl_protocols', ['TLSv1.2', 'TLSv1.3']);
export const sslCiphers = slot('ssl_ciphers', 'HIGH:!aNULL:!MD5');
export const sslPreferServerCiphers = slot('ssl_prefer_server_ciphers', false);
export const sslRejectHandshake = slot('ssl_reject_handshake', false);
export const sslSessionTimeoutSec = slot('ssl_session_timeout', 300);
/** `ssl_verify_client`: whether and how client certificates are requested and checked. */
export const sslVerifyClient = slot<'off' | 'on' | 'optional' | 'optional_no_ca'>('ssl_verify_client', 'off');
/** `ssl_client_certificate`: CA certificates (full path) client certificates are verified against. */
export const sslClientCertificate = slot<string | undefined>('ssl_client_certificate', undefined);
export const sslVerifyDepth = slot('ssl_verify_depth', 1);
/** The DH parameters file, as written: read (and checked) when a server with certificates is merged. */
export const sslDhparam = slot<string | undefined>('ssl_dhparam', undefined);
/** `ssl_session_ticket_key` files, in order (a level with any inherits none: `ngx_conf_merge_ptr_value`). */
export const sslSessionTicketKeys = listSlot<string>('ssl_session_ticket_key');
/** `ssl_ecdh_curve`: an OpenSSL curve list, `auto` for OpenSSL's default. */
export const sslEcdhCurve = slot('ssl_ecdh_curve', 'auto');
/** `ssl_session_tickets`. */
export const sslSessionTickets = slot('ssl_session_tickets', true);
/** `ssl_trusted_certificate`: CA certificates (as written) client certificates may chain to, not named to clients. */
export const sslTrustedCertificate = slot<string | undefined>('ssl_trusted_certificate', undefined);
/** `ssl_crl`: revoked client certificates (as written). */
export const sslCrl = slot<string | undefined>('ssl_crl', undefined);

/** The SSL protocol masks of `ngx_http_ssl_protocols` and `ngx_http_proxy_ssl_protocols` (and the stream modules'). */
export const SSL_PROTOCOLS = ['SSLv2', 'SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'] as const;

const none = (name: string, args: DirectiveSpec['args'], note: string, r: Rule): DirectiveSpec =>
  noEffect({ name, module: SSL, contexts: HTTP_SRV, args, note }, r);

/** Eight pages: the smallest shared session cache nginx takes. */
const MIN_SHARED_CACHE = 8 * 4096;

/**
 * `ssl_session_cache`: whether sessions are kept for resumption by session
 * id (and TLS 1.3's stateful tickets), and how many. `off` and `none` (the
 * default) keep none.
 */
export interface SessionCacheConf {
  readonly maxSessions: number;
  /** The zone of `shared:NAME:SIZE` (the last one given): its sessions are every worker's, of every server that names it. */
  readonly sharedZone: string | undefined;
}

export const sslSessionCache = slot<SessionCacheConf | undefined>('ssl_session_cache', undefined);

/** `builtin` without a size: OpenSSL's default cache size. */
const BUILTIN_SESSIONS = 20480;
/** Sessions per byte of a shared zone: nginx's documentation counts about 4000 per megabyte. */
const SHARED_SESSION_BYTES = 256;

/**
 * `ngx_http_ssl_session_cache` (and the stream module's): `off`, `none`,
 * `builtin[:N]`, `shared:NAME:SIZE`, in any combination; may be repeated.
 * `tag` is the module the shared zone is declared for. Returns how many
 * sessions the cache keeps, undefined for `off`/`none`.
 */
export function setSessionCache(d: Directive, cx: SetContext, tag: string): SessionCacheConf | undefined {
  let maxSessions = 0;
  let sharedZone: string | undefined;
  for (const p of d.args) {
    if (p === 'off' || p === 'none') continue;
    if (p === 'builtin') {
      maxSessions += BUILTIN_SESSIONS;
      continue;
    }
    if (p.startsWith('builtin:') && p.length > 8) {
      const n = parseNumber(p.slice(8));
      if (n === undefined) fail(`invalid session cache "${p}"`);
      maxSessions += n;
      continue;
    }
    const shared = p.length > 7 && p.startsWith('shared:') ? /^shared:([^:]+):(.*)$/.exec(p) : null;
    const size = shared ? parseSize(shared[2]!) : undefined;
    if (!shared || size === undefined) fail(`invalid session cache "${p}"`);
    if (size < MIN_SHARED_CACHE) fail(`session cache "${p}" is too small`);
    cx.scope.sharedZone(shared[1]!, size, tag);
    maxSessions += Math.floor(size / SHARED_SESSION_BYTES);
    sharedZone = shared[1]!;
  }
  return maxSessions > 0 ? { maxSessions, sharedZone } : undefined;
}

/** `ssl_certificate_cache`: how long certificates read per handshake are kept (`ngx_ssl_cache_init`). */
export interface CertificateCacheConf {
  readonly maxEntries: number;
  readonly inactiveSec: number;
  readonly validSec: number;
}

/** `ssl_certificate_cache`; undefined is `off` (the default): read at every handshake. */
export const sslCertificateCache = slot<CertificateCacheConf | undefined>('ssl_certificate_cache', undefined);

/**
 * `ngx_http_ssl_certificate_cache` (and the proxy module's
 * `proxy_ssl_certificate_cache`): `off` (undefined), or `max=N
 * [inactive=TIME] [valid=TIME]` (defaults 10 s and 60 s).
 * @throws DirectiveFailure `invalid parameter "…"`, `"NAME" must have the "max" parameter`
 */
export function parseCertificateCache(d: Directive): CertificateCacheConf | undefined {
  let [maxEntries, inactiveSec, validSec, off] = [0, 10, 60, false];
  for (const p of d.args) {
    const time = (prefix: string): number | undefined => (p.startsWith(prefix) ? parseTime(p.slice(prefix.length), true) : undefined);
    if (p.startsWith('max=') && (parseNumber(p.slice(4)) ?? 0) > 0) maxEntries = parseNumber(p.slice(4))!;
    else if (time('inactive=') !== undefined) inactiveSec = time('inactive=')!;
    else if (time('valid=') !== undefined) validSec = time('valid=')!;
    else if (p === 'off') off = true;
    else fail(`invalid parameter "${p}"`);
  }
  if (off) return undefined;
  if (maxEntries === 0) fail(`"${d.name}" must have the "max" parameter`);
  return { maxEntries, inactiveSec, validSec };
}

function setCertificateCache(d: Directive, cx: SetContext): void {
  if (cx.level.own(sslCertificateCache)) throw new DirectiveFailure('is duplicate');
  cx.level.set(sslCertificateCache, parseCertificateCache(d), d.loc);
}

/** `ssl_password_file`: the passphrases to try, in order, on encrypted certificate keys. */
export const sslPasswords = slot<readonly string[] | undefined>('ssl_password_file', undefined);

/**
 * `ngx_http_ssl_password_file` → `ngx_ssl_read_password_file`
 * (`src/event/ngx_event_openssl.c`): the file is read when the directive is,
 * one passphrase a line, trailing blanks cut: `open() "PATH" failed (…)`,
 * `password file "PATH" is empty`.
 */
function setPasswordFile(d: Directive, cx: SetContext): void {
  if (cx.level.own(sslPasswords)) throw new DirectiveFailure('is duplicate');
  cx.level.set(sslPasswords, cx.scope.offline ? [] : readPasswordFile(cx.scope, cx.scope.confPath(d.args[0]!)), d.loc);
}

/**
 * `ngx_ssl_read_password_file`: one passphrase a line, trailing blanks cut,
 * for `ssl_password_file` and `proxy_ssl_password_file`; read through
 * `scope` (`ConfigScope.readFile`), so that a worker gets what its master
 * read (the file may be a FIFO, which gives its text once).
 * @throws DirectiveFailure `open() "PATH" failed (…)`, `password file "PATH" is empty`
 */
export function readPasswordFile(scope: ConfigScope, path: string): readonly string[] {
  let text = '';
  try {
    text = scope.readFile(path);
  } catch (err) {
    fail(`open() "${path}" failed (${systemErrorText(err)})`);
  }
  const passwords = text.split('\n').map((l) => l.replace(/[ \t\r]+$/, '')).filter((l, i, all) => l !== '' || i < all.length - 1);
  if (passwords.length === 0) fail(`password file "${path}" is empty`);
  return passwords;
}

export const sslDirectives: readonly DirectiveSpec[] = [
  {
    name: 'ssl_certificate', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(sslCertificates, cx.scope.variables.value(d.args[0]!, d.loc), d.loc),
  },
  {
    name: 'ssl_certificate_key', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(sslCertificateKeys, cx.scope.variables.value(d.args[0]!, d.loc), d.loc),
  },
  {
    name: 'ssl_protocols', module: SSL, contexts: HTTP_SRV, args: ['1MORE'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(sslProtocols)) throw new DirectiveFailure('is duplicate');
      bitmaskSetter(sslProtocols, SSL_PROTOCOLS)(d, cx);
    },
  },
  { name: 'ssl_ciphers', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslCiphers) },
  { name: 'ssl_prefer_server_ciphers', module: SSL, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslPreferServerCiphers) },
  { name: 'ssl_reject_handshake', module: SSL, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslRejectHandshake) },
  { name: 'ssl_session_timeout', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: secSetter(sslSessionTimeoutSec) },
  {
    name: 'ssl_session_cache', module: SSL, contexts: HTTP_SRV, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    set: (d, cx) => cx.level.set(sslSessionCache, setSessionCache(d, cx, SSL), d.loc),
  },
  { name: 'ssl_session_tickets', module: SSL, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslSessionTickets) },
  {
    name: 'ssl_session_ticket_key', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(sslSessionTicketKeys, d.args[0]!, d.loc),
  },
  none('ssl_buffer_size', ['TAKE1'], 'TLS records are sized by the runtime', rule.size()),
  none('ssl_certificate_compression', ['FLAG'], 'node:tls does not compress certificates (RFC 8879): they are sent whole', rule.flag),
  { name: 'ssl_dhparam', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslDhparam) },
  { name: 'ssl_ecdh_curve', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslEcdhCurve) },
  none('ssl_stapling', ['FLAG'], 'OCSP stapling needs network access and is not implemented', rule.flag),
  none('ssl_stapling_verify', ['FLAG'], 'OCSP stapling needs network access and is not implemented', rule.flag),
  none('ssl_stapling_file', ['TAKE1'], 'OCSP stapling is not implemented', rule.str),
  none('ssl_stapling_responder', ['TAKE1'], 'OCSP stapling is not implemented', rule.str),
  { name: 'ssl_trusted_certificate', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslTrustedCertificate) },
  {
    name: 'ssl_client_certificate', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(sslClientCertificate)) throw new DirectiveFailure('is duplicate');
      cx.level.set(sslClientCertificate, cx.scope.confPath(d.args[0]!), d.loc);
    },
  },
  {
    name: 'ssl_verify_client', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(sslVerifyClient, ['off', 'on', 'optional', 'optional_no_ca']),
  },
  { name: 'ssl_verify_depth', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: numSetter(sslVerifyDepth) },
  { name: 'ssl_crl', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslCrl) },
  { name: 'ssl_password_file', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: setPasswordFile },
  { name: 'ssl_certificate_cache', module: SSL, contexts: HTTP_SRV, args: ['TAKE1', 'TAKE2', 'TAKE3'], effect: 'runtime', set: setCertificateCache },
  none('ssl_early_data', ['FLAG'], 'TLS 1.3 early data is not accepted', rule.flag),
  none('ssl_conf_command', ['TAKE2'], 'OpenSSL configuration commands are not passed through', rule.array),
];

/** TLS certificate settings of a server. */
export interface TlsServerConf {
  /** Certificate chains and keys, read when the configuration was loaded. */
  readonly certificates: readonly CertificatePair[];
  /**
   * `ssl_certificate` / `ssl_certificate_key` pairs when any has variables
   * (`$ssl_server_name` …): evaluated and read at every handshake, relative
   * paths against `confPrefix`, encrypted keys opened with `passwords`
   * (`ngx_http_ssl_certificate`); `certificates` is then empty.
   */
  readonly certificateValues: PerHandshakeCertificates | undefined;
  readonly protocols: readonly string[];
  readonly ciphers: string;
  readonly preferServerCiphers: boolean;
  readonly rejectHandshake: boolean;
  readonly sessionTimeoutSec: number;
  /** `ssl_verify_client`. */
  readonly verifyClient: 'off' | 'on' | 'optional' | 'optional_no_ca';
  /** PEM certificates of `ssl_client_certificate`, read when the configuration was loaded (only with `ssl_verify_client`). */
  readonly clientCa: Buffer | undefined;
  /** PEM certificates of `ssl_trusted_certificate`: client certificates may chain to them too. */
  readonly trusted: Buffer | undefined;
  readonly verifyDepth: number;
  /** PEM CRLs of `ssl_crl`. */
  readonly crl: Buffer | undefined;
  /** PEM DH parameters of `ssl_dhparam` (DHE ciphers are offered only with them). */
  readonly dhparam: Buffer | undefined;
  /** `ssl_ecdh_curve`: an OpenSSL curve list, or `auto`. */
  readonly ecdhCurve: string;
  /** `ssl_session_tickets`. */
  readonly sessionTickets: boolean;
  /**
   * The first `ssl_session_ticket_key` of 48 bytes, in node:tls's order
   * (name, HMAC key, AES key: `ticketKeys`); undefined without one (the
   * master's keys are used).
   */
  readonly ticketKey: Buffer | undefined;
  /** `ssl_session_cache`, undefined for `off`/`none`. */
  readonly sessionCache: SessionCacheConf | undefined;
}

/** `ssl_certificate` pairs with variables, read per handshake (or taken from `ssl_certificate_cache`); `V` is the module's view (http's request, a stream session). */
export interface PerHandshakeCertificates<V extends ScriptView = RequestView> {
  readonly pairs: readonly { readonly cert: CompiledValue<V>; readonly key: CompiledValue<V> }[];
  readonly confPrefix: string;
  readonly passwords: readonly string[] | undefined;
  /** `ssl_certificate_cache`, undefined when off. */
  readonly cache: CertificateCacheConf | undefined;
}

/** The certificate pairs read in one compile, by paths and passphrases, and the cipher lists and curves checked. */
const LOADED = Symbol('ssl files');

function loadedOf(cx: CompileContext): { pairs: Map<string, CertificatePair>; ciphers: Set<string>; curves: Set<string>; warned: Set<string> } {
  return cx.memo(LOADED, () => ({ pairs: new Map<string, CertificatePair>(), ciphers: new Set<string>(), curves: new Set<string>(), warned: new Set<string>() }));
}

/** `ngx_ssl_ciphers` once per distinct list in a compile (`checkCiphers`). */
export function checkCiphersOnce(cx: CompileContext, ciphers: string): void {
  const { ciphers: checked } = loadedOf(cx);
  if (checked.has(ciphers)) return;
  checkCiphers(ciphers);
  checked.add(ciphers);
}

/** A certificate and its key (`loadCertificatePair`), read once per compile for the same files and passphrases. */
export function certificatePair(cx: CompileContext, certPath: string, keyPath: string, passwords: readonly string[] | undefined): CertificatePair {
  const { pairs } = loadedOf(cx);
  const cacheKey = `${certPath}\0${keyPath}\0${passwords?.join('\n') ?? ''}`;
  let pair = pairs.get(cacheKey);
  if (!pair) pairs.set(cacheKey, (pair = loadCertificatePair(certPath, keyPath, false, passwords)));
  return pair;
}

/** A server's certificates: read now, or (with variables) to be read per handshake. */
export interface ServerCertificates {
  readonly loaded: CertificatePair[];
  readonly perHandshake: readonly { readonly cert: ValueSource; readonly key: ValueSource }[] | undefined;
  readonly passwords: readonly string[] | undefined;
  /** The other files of a TLS server, read after its certificates; undefined for a server without TLS. */
  readonly files: TlsFiles | undefined;
}

/** What a TLS server reads besides its certificates. */
type TlsFiles = Pick<TlsServerConf, 'verifyClient' | 'clientCa' | 'trusted' | 'verifyDepth' | 'crl' | 'dhparam' | 'ticketKey'>;

/**
 * Loads a server's certificates (merged from http level), pairing
 * `ssl_certificate` and `ssl_certificate_key` in order
 * (`ngx_http_ssl_merge_srv_conf`). When any of them has variables, none
 * is read now: all are bound to be read per handshake
 * (`ngx_http_ssl_compile_certificates`). A server that gets a TLS context
 * (a certificate or `ssl_reject_handshake on`) has its `ssl_ciphers`
 * checked first, as nginx 1.30 does before it reads a certificate.
 * @throws ConfigError `no "ssl_certificate_key" is defined for certificate "…"`, the errors of `checkCiphers` and the loading errors of `loadCertificatePair`
 */
export function serverCertificates(cx: CompileContext, node: LevelNode): ServerCertificates {
  const chain = cx.chain(node);
  const certs = chain.list(sslCertificates);
  const keys = chain.list(sslCertificateKeys);
  if (keys.length < certs.length) {
    throw new ConfigError('file', `no "ssl_certificate_key" is defined for certificate "${certs[certs.length - 1]!.text}"`);
  }
  if (certs.length > 0 || chain.get(sslRejectHandshake)) checkCiphersOnce(cx, chain.get(sslCiphers));
  const passwords = chain.get(sslPasswords);
  // offline, no file is read: as if every certificate were read per handshake
  const perHandshake = (cx.scope.offline && certs.length > 0) || certs.some((c, i) => hasVariables(c) || hasVariables(keys[i]!))
    ? certs.map((cert, i) => ({ cert, key: keys[i]! }))
    : undefined;
  const loaded = perHandshake ? [] : certs.map((c, i) => certificatePair(cx, cx.scope.confPath(c.text), cx.scope.confPath(keys[i]!.text), passwords));
  if (certs.length === 0 && !chain.get(sslRejectHandshake)) return { loaded, perHandshake, passwords, files: undefined };
  return { loaded, perHandshake, passwords, files: tlsFiles(cx, chain, node) };
}

/**
 * The files of a TLS server after its certificates, in the order of
 * `ngx_http_ssl_merge_srv_conf`: with `ssl_verify_client`, the CA
 * certificates of `ssl_client_certificate` (`on` and `optional` need them
 * or `ssl_trusted_certificate`); then `ssl_trusted_certificate`,
 * `ssl_crl`, `ssl_dhparam` and the `ssl_ecdh_curve` list, each read or
 * checked whether or not client certificates are asked for; then the
 * `ssl_session_ticket_key` files.
 * @throws ConfigError nginx's `[emerg]`s
 */
function tlsFiles(cx: CompileContext, chain: ConfChain, node: LevelNode): TlsFiles {
  const verifyClient = chain.get(sslVerifyClient);
  const caPath = chain.get(sslClientCertificate);
  const trustedPath = chain.get(sslTrustedCertificate);
  if (verifyClient !== 'off' && verifyClient !== 'optional_no_ca' && caPath === undefined && trustedPath === undefined) {
    throw new ConfigError('invalid-value', 'no ssl_client_certificate or ssl_trusted_certificate for ssl_verify_client');
  }
  const offline = cx.scope.offline;
  const clientCa = verifyClient !== 'off' && caPath !== undefined && !offline ? loadTrustedCertificates(caPath) : undefined;
  const read = <T>(path: string | undefined, load: (full: string) => T): T | undefined =>
    (path === undefined || offline ? undefined : load(cx.scope.confPath(path)));
  const trusted = read(trustedPath, loadTrustedCertificates);
  const crl = read(chain.get(sslCrl), loadCrl);
  const dhparam = read(chain.get(sslDhparam), loadDhparam);
  const curves = chain.get(sslEcdhCurve);
  const { curves: checked } = loadedOf(cx);
  if (!checked.has(curves)) {
    checkEcdhCurve(curves);
    checked.add(curves);
  }
  const ticketKey = offline ? undefined : ticketKeyOf(cx, chain.listEntries(sslSessionTicketKeys), node);
  return { verifyClient, clientCa, trusted, verifyDepth: chain.get(sslVerifyDepth), crl, dhparam, ticketKey };
}

/**
 * The key session tickets are made with, from a server's
 * `ssl_session_ticket_key` files (each read and checked as nginx does):
 * the first, when it has 48 bytes, reordered for node:tls (nginx's name,
 * AES key, HMAC key; node's name, HMAC key, AES key). node:tls takes one
 * key of that kind only: an 80-byte first key (AES-256) leaves tickets to
 * the master's own key, and the keys after the first, which nginx keeps to
 * resume tickets made with them, are not used; each is a warning, once per
 * file and line.
 * @throws ConfigError `open() "PATH" failed (…)`, `"PATH" must be 48 or 80 bytes`, at the end of
 *   the http (or stream) block, where nginx's merge of the server is when it reads the files
 */
function ticketKeyOf(cx: CompileContext, entries: readonly { readonly value: string; readonly loc: SourceLoc }[], server: LevelNode): Buffer | undefined {
  const { warned } = loadedOf(cx);
  const warnOnce = (loc: SourceLoc, code: string, text: string): void => {
    const key = `${code} ${loc.file}:${loc.line}`;
    if (warned.has(key)) return;
    warned.add(key);
    cx.warn({ level: 'warn', code, text, loc });
  };
  let block = server;
  while (block.parent?.directive) block = block.parent;
  const end = { file: block.directive!.loc.file, line: block.directive!.closeLine ?? block.directive!.loc.line };
  const keys = entries.map((e) => {
    try {
      return loadTicketKey(cx.scope.confPath(e.value));
    } catch (err) {
      if (err instanceof ConfigError) throw new ConfigError(err.code, err.text, end);
      throw err;
    }
  });
  entries.slice(1).forEach((e) => warnOnce(e.loc, 'ticket-key-unused',
    `"ssl_session_ticket_key" "${e.value}" is not used: jinx makes and resumes session tickets with the first key only`));
  const first = keys[0];
  if (!first) return undefined;
  if (first.length === 80) {
    warnOnce(entries[0]!.loc, 'ticket-key-unused',
      `"ssl_session_ticket_key" "${entries[0]!.value}" is not used: node:tls takes 48-byte keys only, session tickets are made with a key of jinx's own`);
    return undefined;
  }
  return Buffer.concat([first.subarray(0, 16), first.subarray(32, 48), first.subarray(16, 32)]);
}

/**
 * `ngx_http_ssl_init`: on every `listen … ssl` address, the default server
 * needs a certificate, or `ssl_reject_handshake on`, in which case every
 * other server of the address needs one of the two (a handshake's
 * certificate comes from the server SNI names, else the default server's).
 * @throws ConfigError `no "ssl_certificate" is defined for the "listen ... ssl" directive`, at the server
 */
export function checkSslListens(cx: CompileContext, servers: readonly LevelNode[], certificates: readonly ServerCertificates[]): void {
  const addrs = new Map<string, { ssl: boolean; defaultServer: number | undefined; servers: number[] }>();
  servers.forEach((s, i) => {
    for (const { value: l } of s.conf.ownList(listens) ?? []) {
      const key = `${l.host}|${l.port}`;
      let a = addrs.get(key);
      if (!a) addrs.set(key, (a = { ssl: false, defaultServer: undefined, servers: [] }));
      a.ssl ||= l.ssl;
      if (l.defaultServer && a.defaultServer === undefined) a.defaultServer = i;
      if (!a.servers.includes(i)) a.servers.push(i);
    }
  });
  const hasCertificate = (i: number): boolean => certificates[i]!.loaded.length > 0 || certificates[i]!.perHandshake !== undefined;
  const rejects = (i: number): boolean => cx.chain(servers[i]!).get(sslRejectHandshake);
  const refuse = (i: number): never => {
    throw new ConfigError('file', 'no "ssl_certificate" is defined for the "listen ... ssl" directive', servers[i]!.directive!.loc);
  };
  for (const a of addrs.values()) {
    if (!a.ssl) continue;
    const first = a.defaultServer ?? a.servers[0]!;
    if (hasCertificate(first)) continue;
    if (!rejects(first)) refuse(first);
    for (const i of a.servers) if (!hasCertificate(i) && !rejects(i)) refuse(i);
  }
}

/** A server's TLS settings (undefined without a certificate or `ssl_reject_handshake on`), certificates with variables bound. */
export function serverTlsConf(cx: CompileContext, node: LevelNode, certificates: ServerCertificates): TlsServerConf | undefined {
  const settings = serverTlsSettings(cx, node, certificates);
  return settings && { ...settings, certificateValues: perHandshakeCertificates(cx, node, certificates, cx.scope.variables) };
}

/**
 * A server's TLS settings but the certificates with variables (which the
 * module binds in its registry: `perHandshakeCertificates`); undefined
 * without a certificate or `ssl_reject_handshake on`.
 */
export function serverTlsSettings(cx: CompileContext, node: LevelNode, certificates: ServerCertificates): Omit<TlsServerConf, 'certificateValues'> | undefined {
  const chain = cx.chain(node);
  if (!(certificates.loaded.length > 0 || certificates.perHandshake || chain.get(sslRejectHandshake))) return undefined;
  // Object.assign, not a spread after the literal's fields: V8 would give each server's object a map of its own
  return Object.assign({
    certificates: certificates.loaded,
    protocols: chain.get(sslProtocols),
    ciphers: chain.get(sslCiphers),
    preferServerCiphers: chain.get(sslPreferServerCiphers),
    rejectHandshake: chain.get(sslRejectHandshake),
    sessionTimeoutSec: chain.get(sslSessionTimeoutSec),
    sessionTickets: chain.get(sslSessionTickets),
    sessionCache: chain.get(sslSessionCache),
    ecdhCurve: chain.get(sslEcdhCurve),
  }, certificates.files!);
}

/**
 * The pairs of a server whose certificates have variables, bound in `vars`
 * (the registry their values were made in: http's, or the stream module's);
 * undefined for a server whose certificates were read at load.
 */
export function perHandshakeCertificates<V extends ScriptView>(
  cx: CompileContext, node: LevelNode, { perHandshake, passwords }: ServerCertificates, vars: VariableRegistry<V>,
): PerHandshakeCertificates<V> | undefined {
  if (!perHandshake) return undefined;
  const chain = cx.chain(node);
  return {
    pairs: perHandshake.map((p) => ({ cert: vars.bind(p.cert), key: vars.bind(p.key) })),
    confPrefix: cx.scope.confPrefix,
    passwords,
    cache: chain.get(sslCertificateCache),
  };
}
