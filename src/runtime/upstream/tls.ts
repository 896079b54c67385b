/**
 * TLS to upstream servers, as `ngx_http_upstream_ssl_init_connection`,
 * `ngx_http_upstream_ssl_name` and `ngx_http_upstream_ssl_handshake` do it
 * (`src/http/ngx_http_upstream.c`): SNI only with `proxy_ssl_server_name on`
 * and never for an IP address; with `proxy_ssl_verify on`, the chain's
 * verification result first, then the name (`ngx_ssl_check_host`,
 * `src/event/ngx_event_openssl.c`); sessions resumed unless
 * `proxy_ssl_session_reuse off`.
 *
 * The connector wraps undici's `buildConnector` (which calls `tls.connect`
 * and keeps resumable sessions, `maxCachedSessions`). The per-request name
 * travels as undici's `servername` dispatch option, which undici hands to
 * the connector; the connector decides whether it becomes SNI.
 */
import { X509Certificate } from 'node:crypto';
import { isIPv4 } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type PeerCertificate, type TLSSocket } from 'node:tls';
import buildConnector from 'undici/lib/core/connect.js';
import type { UpstreamTlsConf } from '../../config/route-table.js';
import { UpstreamCertificateError } from './errors.js';
import type { UpstreamOnRead } from './read-buffers.js';

/** Stands for an empty name in undici's `servername` (undici would replace `''` by the Host header's name). */
const EMPTY_NAME = '\u0000';

/** What to pass as undici's `servername` for the name `name`. */
export function servernameOption(name: string): string {
  return name === '' ? EMPTY_NAME : name;
}

/**
 * The name for SNI and the certificate check (`ngx_http_upstream_ssl_name`):
 * `proxy_ssl_name` evaluated, or the host of `proxy_pass`, without a port
 * (`$proxy_host` and `$http_host` may carry one; `[v6]:port` keeps its brackets).
 */
export function sslName(value: string): string {
  let from = 0;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close !== -1) from = close;
  }
  const colon = value.indexOf(':', from);
  return colon === -1 ? value : value.slice(0, colon);
}

/** Whether a name may be sent as SNI: RFC 6066 forbids literal IPv4 and IPv6 addresses. */
function sniAllowed(name: string): boolean {
  return name !== '' && !name.startsWith('[') && !isIPv4(name);
}

type TlsVersion = 'TLSv1' | 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3';
const VERSIONS: readonly TlsVersion[] = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

/**
 * The version range of `proxy_ssl_protocols`. OpenSSL uses the versions from
 * the lowest enabled one up to the first disabled one (a hole disables what
 * is above it); SSLv2 and SSLv3 are not available in Node.js.
 */
export function versionRange(protocols: readonly string[]): { minVersion: TlsVersion; maxVersion: TlsVersion } {
  const first = VERSIONS.findIndex((v) => protocols.includes(v));
  if (first === -1) return { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.3' };
  let last = first;
  while (last + 1 < VERSIONS.length && protocols.includes(VERSIONS[last + 1]!)) last++;
  return { minVersion: VERSIONS[first]!, maxVersion: VERSIONS[last]! };
}

/**
 * What a connection's peer showed: its certificate, and the length of the
 * verified chain, leaf first, up to the self-signed certificate at its top
 * (those the server sent, completed from the trusted ones).
 */
export interface PeerChain {
  readonly cert: X509Certificate;
  readonly chainLength: number;
}

/**
 * The peer's certificate and chain, from Node.js's `getPeerCertificate(true)`
 * (Node.js 20 answers it and `getPeerX509Certificate()` only once between
 * them: the leaf is made from the chain's DER instead); undefined when the
 * handshake showed none (a resumed session).
 */
export function peerChain(socket: TLSSocket): PeerChain | undefined {
  const leaf = socket.getPeerCertificate(true) as PeerCertificate | undefined;
  if (!leaf?.raw) return undefined;
  const seen = new Set<string>();
  for (let c: PeerCertificate | undefined = leaf; c?.fingerprint256 && !seen.has(c.fingerprint256); c = (c as PeerCertificate & { issuerCertificate?: PeerCertificate }).issuerCertificate) {
    seen.add(c.fingerprint256);
  }
  return { cert: new X509Certificate(leaf.raw), chainLength: seen.size };
}

/**
 * nginx's checks after the handshake with `proxy_ssl_verify on`
 * (`ngx_http_upstream_ssl_handshake`): `SSL_get_verify_result()` first, then
 * `X509_check_host()` on the name (DNS names and, without them, the common
 * name; never IP addresses: Node.js's `X509Certificate.checkHost` is that
 * OpenSSL call with its default flags).
 *
 * Node.js verifies without a depth limit; OpenSSL's with
 * `proxy_ssl_verify_depth N` builds chains of at most N + 2 certificates,
 * trust anchor included, and reports a longer one as nginx's OpenSSL does:
 * `(20:unable to get local issuer certificate)` (for a chain that would reach
 * a trusted or a self-signed certificate only beyond the limit).
 *
 * `peer` is what the handshake showed, or for a resumed session what the
 * session was made with (OpenSSL keeps the certificate in the session;
 * Node.js shows none on a resumed connection).
 */
export function verifyPeer(socket: TLSSocket, name: string, depth: number, peer: PeerChain | undefined): UpstreamCertificateError | undefined {
  // Node.js sets the verification result's code here (typed as an Error)
  const result = socket.authorizationError as unknown as string | (Error & { code?: string }) | null | undefined;
  let code = typeof result === 'string' ? result : result ? result.code ?? 'UNSPECIFIED' : undefined;
  if ((code === undefined || code === 'SELF_SIGNED_CERT_IN_CHAIN') && (peer?.chainLength ?? 0) > depth + 2) {
    code = 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY';
  }
  if (code !== undefined) return new UpstreamCertificateError(code, name);
  if (name === '' || peer?.cert.checkHost(name) === undefined) return new UpstreamCertificateError('ERR_TLS_CERT_ALTNAME_INVALID', name);
  return undefined;
}

/**
 * The node:tls options of a location's or a stream server's `proxy_ssl_*`
 * settings for the handshake with an upstream (http's and stream's):
 * certificates are verified after the handshake, as nginx does it
 * (`verifyPeer`), so node's own checks are off.
 */
export function upstreamTlsOptions(
  tls: Pick<UpstreamTlsConf, 'verify' | 'trusted' | 'crl' | 'certificate' | 'protocols' | 'ciphers'>,
): ConnectionOptions {
  return {
    rejectUnauthorized: false,
    checkServerIdentity: () => undefined,
    ...(tls.verify && tls.trusted ? { ca: tls.trusted } : {}),
    ...(tls.verify && tls.crl ? { crl: tls.crl } : {}),
    ...(tls.certificate ? { cert: tls.certificate.cert, key: tls.certificate.key } : {}),
    ...versionRange(tls.protocols),
    ciphers: tls.ciphers,
  };
}

/**
 * An undici connector for the TLS settings of a location. `timeoutMs` is
 * `proxy_connect_timeout`; undici's connector applies it to the TCP connect
 * and the handshake together. `http2`: ALPN offers `h2` (`grpc_pass
 * grpcs://`; undici offers `http/1.1` with it, nginx `h2` alone).
 * `onread`: node's option for the decrypted bytes (`upstreamOnRead`,
 * read-buffers.ts), which node hands over in pieces of at most 16 KiB.
 */
export function tlsConnector(
  tls: UpstreamTlsConf, timeoutMs: number, socketPath?: string, http2 = false, onread?: UpstreamOnRead,
): buildConnector.connector {
  const base = buildConnector({
    timeout: timeoutMs,
    allowH2: http2,
    ...(socketPath !== undefined ? { socketPath } : {}),
    ...(onread ? { onread } : {}),
    ...upstreamTlsOptions(tls),
    maxCachedSessions: tls.sessionReuse ? 100 : 0,
  });
  /**
   * undici keeps cached sessions through weak references; the latest
   * session per name is held here so that resumption does not depend on
   * the garbage collector (nginx keeps the session of each peer).
   */
  const held = new Map<string, { readonly session: Buffer; readonly peer: PeerChain | undefined }>();
  const peers = new WeakMap<TLSSocket, PeerChain | undefined>();
  const MAX_HELD_SESSIONS = 100;
  return (opts, callback) => {
    const name = opts.servername === EMPTY_NAME ? '' : opts.servername ?? '';
    const sni = tls.serverName && sniAllowed(name) ? name : undefined;
    const socket = base({ ...opts, servername: sni }, (err, connected) => {
      if (err) {
        callback(err, null);
        return;
      }
      const tlsSocket = connected as TLSSocket;
      const failure = tls.verify ? verifyPeer(tlsSocket, name, tls.verifyDepth, peerOf(tlsSocket)) : undefined;
      if (failure) {
        tlsSocket.destroy();
        callback(failure, null);
        return;
      }
      callback(null, tlsSocket);
    }) as unknown as TLSSocket | undefined;
    // undici resumes the latest session of the name (or host), the one held here with its certificate
    const key = sni ?? opts.hostname;
    const peerOf = (s: TLSSocket): PeerChain | undefined => {
      if (!peers.has(s)) peers.set(s, peerChain(s) ?? (s.isSessionReused() ? held.get(key)?.peer : undefined));
      return peers.get(s);
    };
    if (tls.sessionReuse) {
      socket?.on('session', (session: Buffer) => {
        if (!held.has(key) && held.size >= MAX_HELD_SESSIONS) held.delete(held.keys().next().value!);
        held.set(key, { session, peer: peerOf(socket) });
      });
    }
    // After a fatal alert Node.js emits the OpenSSL error, then the end of the stream, which undici would
    // report as "other side closed" in its place: ending the socket at once keeps the OpenSSL error.
    socket?.on('error', (err: Error & { code?: string }) => {
      if (err.code?.startsWith('ERR_SSL_')) socket.destroy();
    });
  };
}

/** Sessions to resume on the TLS connections `connectTls` opens, with the chain each was made with: the latest per settings and peer. */
const heldSessions = new Map<string, { readonly session: Buffer; readonly peer: PeerChain | undefined }>();
const MAX_HELD_SESSIONS = 100;

/**
 * Opens a TLS connection with a location's settings for the modules that
 * open their own sockets (uwsgi's `suwsgi://`; the proxy's and gRPC's go
 * through `tlsConnector`): SNI `name` with `*_ssl_server_name on` (never an
 * IP address), the latest session with this peer resumed unless
 * `*_ssl_session_reuse off`. The caller waits for `secureConnect`, then
 * checks the certificate with `verifyPeer(socket, name, depth, peer())`
 * when `tls.verify` is on; `peer()` is the chain the handshake showed, or
 * the one a resumed session was made with. `onread`: node's option for
 * the decrypted bytes (`cgiOnRead`).
 */
export function connectTls(
  tls: UpstreamTlsConf, target: { readonly host: string; readonly port: number } | { readonly path: string }, name: string,
  onread?: UpstreamOnRead,
): { readonly socket: TLSSocket; peer(): PeerChain | undefined } {
  const key = `${tls.key}|${'path' in target ? target.path : `${target.host}:${target.port}`}|${name}`;
  const held = tls.sessionReuse ? heldSessions.get(key) : undefined;
  const socket = tlsConnect({
    ...('path' in target ? { path: target.path } : { host: target.host, port: target.port }),
    ...upstreamTlsOptions(tls),
    ...(tls.serverName && sniAllowed(name) ? { servername: name } : {}),
    ...(held ? { session: held.session } : {}),
    ...(onread ? { onread } : {}),
  });
  const peer = (): PeerChain | undefined => peerChain(socket) ?? (socket.isSessionReused() ? held?.peer : undefined);
  if (tls.sessionReuse) {
    socket.on('session', (session: Buffer) => {
      if (!heldSessions.has(key) && heldSessions.size >= MAX_HELD_SESSIONS) heldSessions.delete(heldSessions.keys().next().value!);
      heldSessions.set(key, { session, peer: peer() });
    });
  }
  return { socket, peer };
}
