/**
 * What nginx's `ngx_ssl_get_*` functions (`src/event/ngx_event_openssl.c`)
 * report about a TLS connection, for the `$ssl_*` variables of
 * `src/http/modules/ngx_http_ssl_module.c`, read from node:tls's socket.
 *
 * What a handshake settled (protocol, cipher, names, the client certificate
 * handle) is taken when the connection is secured; everything that costs
 * more is worked out on first use and kept for the connection's later
 * requests, so requests that use none of these variables pay nothing. What
 * Node.js does not tell a server is read from the ClientHello
 * (`client-hello.ts`): the client's cipher suites and groups, and from them
 * and the server's groups, the group the handshake chose.
 */
import { createHash, type X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { children, element } from './der.js';
import { parseClientHello, type ClientHello } from './client-hello.js';
import { cipherName, groupId, groupName } from './openssl-names.js';
import { X509_ERRORS } from './x509-errors.js';
import { certificateText, pem, type CertificateText } from './x509-text.js';
import type { ClientCertificateView, TlsView } from '../config/request-view.js';

/**
 * The groups a Node.js server offers (`ecdhCurve: 'auto'`: OpenSSL 3.0's
 * `supported_groups_default` in `ssl/t1_lib.c`, those its default provider
 * implements), in its order of preference.
 */
const DEFAULT_GROUPS: readonly number[] = [0x1d, 0x17, 0x1e, 0x19, 0x18, 0x100, 0x101, 0x102, 0x103, 0x104];

/** The groups of an `ssl_ecdh_curve` list (checked when the configuration was loaded), in its order. */
function serverGroups(ecdhCurve: string): readonly number[] {
  if (ecdhCurve === 'auto') return DEFAULT_GROUPS;
  return ecdhCurve.split(':').map(groupId).filter((g) => g !== undefined);
}
/** The finite-field groups, which OpenSSL uses in TLS 1.3 only. */
const isFfdhe = (g: number): boolean => g >= 0x100 && g <= 0x1ff;

/** `ngx_escape_uri(…, NGX_ESCAPE_URI_COMPONENT)`: all but letters, digits and `-._~` as `%XX`. */
function escapeUriComponent(s: string): string {
  return s.replace(/[^A-Za-z0-9\-._~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

/** A client certificate as the `$ssl_client_*` variables print it, each part made when first asked for. */
export class ClientCertificate implements ClientCertificateView {
  private parsed: CertificateText | null | undefined;
  private pemText: string | undefined;
  private sha1: string | undefined;

  constructor(private readonly x509: X509Certificate) {}

  /** The names, serial and validity; undefined for a certificate jinx cannot read (OpenSSL took it: not expected). */
  private get text(): CertificateText | undefined {
    if (this.parsed === undefined) {
      try {
        this.parsed = certificateText(this.x509.raw);
      } catch {
        this.parsed = null;
      }
    }
    return this.parsed ?? undefined;
  }

  /** `ngx_ssl_get_raw_certificate`: the certificate in PEM (`$ssl_client_raw_cert`). */
  get raw(): string {
    return (this.pemText ??= pem(this.x509.raw));
  }

  /** `ngx_ssl_get_certificate`: the PEM without its last newline, every other line break followed by a tab (`$ssl_client_cert`). */
  get tabbed(): string {
    return this.raw.slice(0, -1).replace(/\n/g, '\n\t');
  }

  /** `ngx_ssl_get_escaped_certificate`: the PEM URI-component escaped (`$ssl_client_escaped_cert`). */
  get escaped(): string {
    return escapeUriComponent(this.raw);
  }

  /** `ngx_ssl_get_subject_dn`: the subject in RFC 2253 form. */
  get subject(): string | undefined {
    return this.text?.subject;
  }

  /** `ngx_ssl_get_issuer_dn`. */
  get issuer(): string | undefined {
    return this.text?.issuer;
  }

  /** `ngx_ssl_get_subject_dn_legacy`: `X509_NAME_oneline`. */
  get subjectLegacy(): string | undefined {
    return this.text?.subjectLegacy;
  }

  /** `ngx_ssl_get_issuer_dn_legacy`. */
  get issuerLegacy(): string | undefined {
    return this.text?.issuerLegacy;
  }

  /** `ngx_ssl_get_serial_number`: upper-case hex. */
  get serial(): string | undefined {
    return this.text?.serial;
  }

  /** `ngx_ssl_get_fingerprint`: the SHA-1 of the DER encoding, lower-case hex. */
  get fingerprint(): string {
    return (this.sha1 ??= createHash('sha1').update(this.x509.raw).digest('hex'));
  }

  /** `ngx_ssl_get_client_v_start`: `notBefore` as `ASN1_TIME_print` writes it (`Nov  2 02:54:13 2026 GMT`). */
  get validFrom(): string | undefined {
    return this.text?.notBefore?.text;
  }

  /** `ngx_ssl_get_client_v_end`. */
  get validTo(): string | undefined {
    return this.text?.notAfter?.text;
  }

  /**
   * `ngx_ssl_get_client_v_remain`: whole days until `notAfter`, `0` when less
   * than one is left (or it has passed).
   */
  daysLeft(nowMs: number): string | undefined {
    const end = this.text?.notAfter;
    if (!end) return undefined;
    const now = Math.floor(nowMs / 1000);
    const endSec = Math.floor(end.ms / 1000);
    return endSec < now + 86400 ? '0' : String(Math.floor((endSec - now) / 86400));
  }
}

/** Verification errors `ssl_verify_client optional_no_ca` lets through (`ngx_ssl_verify_error_optional`). */
const OPTIONAL_NO_CA = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

/**
 * The client certificate checks of `ssl_verify_client` (`verify`) on a
 * connection whose verification result is `result` (`TlsDetails.clientVerify`),
 * as `ngx_http_process_request` and `ngx_stream_ssl_handler` make them: the
 * info line `client SSL certificate verify error: (N:text)` for a
 * certificate that did not verify, `client sent no required SSL
 * certificate` for none with `on`; undefined when the connection may go on.
 */
export function clientCertificateError(verify: 'off' | 'on' | 'optional' | 'optional_no_ca', result: string): string | undefined {
  if (verify === 'off') return undefined;
  if (result !== 'ok' && result !== 'none' && !(verify === 'optional_no_ca' && OPTIONAL_NO_CA.has(result))) {
    const [n, text] = X509_ERRORS[result] ?? [1, result];
    return `client SSL certificate verify error: (${n}:${text})`;
  }
  if (verify === 'on' && result === 'none') return 'client sent no required SSL certificate';
  return undefined;
}

/** What the `$ssl_*` variables and `$https` report about one TLS connection. */
export class TlsDetails implements TlsView {
  /** `$ssl_server_name`: the SNI name, when the client sent one. */
  readonly serverName: string | undefined;
  /** `$ssl_protocol`: `TLSv1.3` … (`SSL_get_version`). */
  readonly protocol: string | undefined;
  /** `$ssl_cipher`: OpenSSL's name of the cipher suite (`SSL_get_cipher_name`). */
  readonly cipher: string | undefined;
  /** `$ssl_alpn_protocol`: the protocol ALPN chose, when it chose one. */
  readonly alpnProtocol: string | undefined;
  /** `$ssl_session_reused`: whether the handshake resumed a session (`SSL_session_reused`). */
  readonly sessionReused: boolean;
  /**
   * The client certificate: `none` when none was sent, `ok` when it
   * verified against `ssl_client_certificate`, else the verification error
   * as Node.js names it (`DEPTH_ZERO_SELF_SIGNED_CERT` …).
   */
  readonly clientVerify: string;
  private readonly peer: X509Certificate | undefined;
  private readonly socket: TLSSocket;
  private readonly helloBytes: Buffer | undefined;
  private hello: ClientHello | null | undefined;
  private certificate: ClientCertificate | undefined;
  private session: string | null | undefined;

  /**
   * Takes what the handshake settled from a secured socket; `helloBytes`
   * are the bytes the connection started with (its ClientHello), when known.
   * `sniName` is the SNI name of a socket still handshaking (node:tls sets
   * `servername` only at the end): '' when the client sent none.
   */
  constructor(socket: TLSSocket, helloBytes: Buffer | undefined, sniName?: string) {
    this.socket = socket;
    this.helloBytes = helloBytes;
    this.protocol = socket.getProtocol() ?? undefined;
    this.cipher = socket.getCipher()?.name;
    this.alpnProtocol = socket.alpnProtocol || undefined;
    this.sessionReused = socket.isSessionReused();
    // Node.js has no name for a resumed TLS 1.2 session; OpenSSL gives nginx the name the session was made for
    this.serverName = sniName !== undefined ? sniName || undefined : (socket as TLSSocket & { servername?: string | false }).servername
      || (this.sessionReused && this.protocol !== 'TLSv1.3' ? this.clientHello()?.serverName : undefined) || undefined;
    this.peer = socket.getPeerX509Certificate();
    if (!this.peer) this.clientVerify = 'none';
    else if (socket.authorized) this.clientVerify = 'ok';
    else {
      const err = socket.authorizationError as unknown as string | Error | null;
      this.clientVerify = (typeof err === 'string' ? err : (err as { code?: string } | null)?.code) ?? 'UNSPECIFIED';
    }
  }

  /** The client certificate, when the client sent one. */
  get clientCertificate(): ClientCertificate | undefined {
    if (!this.peer) return undefined;
    return (this.certificate ??= new ClientCertificate(this.peer));
  }

  /**
   * `ngx_ssl_get_client_verify`: `NONE` without a client certificate,
   * `SUCCESS` when it verified, else `FAILED:` and OpenSSL's reason
   * (`X509_verify_cert_error_string`).
   */
  get verifyResult(): string {
    if (this.clientVerify === 'none') return 'NONE';
    if (this.clientVerify === 'ok') return 'SUCCESS';
    return `FAILED:${X509_ERRORS[this.clientVerify]?.[1] ?? this.clientVerify}`;
  }

  /**
   * `ngx_ssl_get_session_id`: the session's id in lower-case hex
   * (`SSL_SESSION_get_id`), read from the serialized session
   * (`SSL_SESSION_ASN1`: version, TLS version, cipher, id …); undefined when
   * it has none (TLS 1.2 with a session ticket) or the connection is gone.
   */
  get sessionId(): string | undefined {
    if (this.session === undefined) {
      this.session = null;
      const der = this.socket.getSession();
      if (der) {
        try {
          const id = children(der, element(der, 0))[3];
          if (id && id.tag === 0x04 && id.end > id.contentStart) this.session = der.toString('hex', id.contentStart, id.end);
        } catch {
          // not a session we can read: no id
        }
      }
    }
    return this.session ?? undefined;
  }

  private clientHello(): ClientHello | undefined {
    if (this.hello === undefined) this.hello = (this.helloBytes && parseClientHello(this.helloBytes)) ?? null;
    return this.hello ?? undefined;
  }

  /**
   * `ngx_ssl_get_ciphers`: the cipher suites the client offered, by OpenSSL's
   * names, `0x` and the hex of the id for those it has no name for, joined
   * with `:`.
   */
  get ciphers(): string | undefined {
    const suites = this.clientHello()?.cipherSuites;
    if (!suites || suites.length === 0) return undefined;
    return suites.map((id) => cipherName(id) ?? `0x${id.toString(16).padStart(4, '0')}`).join(':');
  }

  /**
   * `ngx_ssl_get_curves`: the groups the client supports, by name (`0x001f`
   * for those without one), joined with `:`; none for a resumed TLS 1.2
   * session, whose `supported_groups` OpenSSL does not keep.
   */
  get curves(): string | undefined {
    if (this.sessionReused && this.protocol !== 'TLSv1.3') return undefined;
    const groups = this.clientHello()?.supportedGroups;
    if (!groups || groups.length === 0) return undefined;
    return groups.map((id) => groupName(id) ?? `0x${id.toString(16).padStart(4, '0')}`).join(':');
  }

  /**
   * `ngx_ssl_get_curve` (`SSL_get_negotiated_group`): the group of the key
   * exchange, chosen as OpenSSL's server chooses it. TLS 1.3: the first of
   * the client's key shares in a group the server supports, else (after a
   * HelloRetryRequest) the first of the server's groups the client supports
   * (`tls_parse_ctos_key_share`, `final_key_share`). TLS 1.2 with an ECDHE
   * cipher: the first shared elliptic-curve group, in the client's order or,
   * with `serverPreference` (`ssl_prefer_server_ciphers`), the server's
   * (`tls1_shared_group`). The server's groups are `ecdhCurve`'s
   * (`ssl_ecdh_curve`), `auto` for Node.js's default. Undefined for other
   * key exchanges.
   */
  curve(serverPreference: boolean, ecdhCurve = 'auto'): string | undefined {
    const server = serverGroups(ecdhCurve);
    const hello = this.clientHello();
    const client = hello?.supportedGroups;
    if (!hello || !client) return undefined;
    let id: number | undefined;
    if (this.protocol === 'TLSv1.3') {
      if (!hello.keyShareGroups) return undefined;
      id = hello.keyShareGroups.find((g) => server.includes(g) && client.includes(g)) ?? server.find((g) => client.includes(g));
    } else if (this.cipher?.startsWith('ECDHE-')) {
      const [pref, supp] = serverPreference ? [server, client] : [client, server];
      id = pref.find((g) => supp.includes(g) && !isFfdhe(g));
    }
    return id === undefined ? undefined : groupName(id) ?? `0x${id.toString(16).padStart(4, '0')}`;
  }
}
