/**
 * TLS termination settings (`src/http/modules/ngx_http_ssl_module.c`).
 * Certificates are read when the configuration is loaded (and on reload).
 */
import { readFileSync } from 'node:fs';
import type { Directive } from '../../parser/ast.js';
import { systemErrorText } from '../../os-errors.js';
import { HTTP_SRV } from '../flags.js';
import type { ValueSource } from '../variables.js';
import {
  bitmaskSetter, DirectiveFailure, enumSetter, fail, flagSetter, listSlot, noEffect, numSetter, parseNumber, parseSize, parseTime, rule, secSetter, slot, strSetter,
  type DirectiveSpec, type Rule, type SetContext,
} from '../spec.js';

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
/** `ssl_ecdh_curve`: an OpenSSL curve list, `auto` for OpenSSL's default. */
export const sslEcdhCurve = slot('ssl_ecdh_curve', 'auto');
/** `ssl_session_tickets`. */
export const sslSessionTickets = slot('ssl_session_tickets', true);
/** `ssl_trusted_certificate`: CA certificates (as written) client certificates may chain to, not named to clients. */
export const sslTrustedCertificate = slot<string | undefined>('ssl_trusted_certificate', undefined);
/** `ssl_crl`: revoked client certificates (as written). */
export const sslCrl = slot<string | undefined>('ssl_crl', undefined);

const PROTOCOLS = ['SSLv2', 'SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'] as const;

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
  }
  return maxSessions > 0 ? { maxSessions } : undefined;
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
  cx.level.set(sslPasswords, readPasswordFile(cx.scope.confPath(d.args[0]!)), d.loc);
}

/**
 * `ngx_ssl_read_password_file`: one passphrase a line, trailing blanks cut,
 * for `ssl_password_file` and `proxy_ssl_password_file`.
 * @throws DirectiveFailure `open() "PATH" failed (…)`, `password file "PATH" is empty`
 */
export function readPasswordFile(path: string): readonly string[] {
  let text = '';
  try {
    text = readFileSync(path, 'latin1');
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
      bitmaskSetter(sslProtocols, PROTOCOLS)(d, cx);
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
  none('ssl_session_ticket_key', ['TAKE1'], 'session tickets follow the TLS library\'s default', rule.array),
  none('ssl_buffer_size', ['TAKE1'], 'TLS records are sized by the runtime', rule.size()),
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
