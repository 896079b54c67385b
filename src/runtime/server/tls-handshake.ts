/**
 * TLS handshakes of client connections: the ClientHello kept for the
 * `$ssl_*` variables, `ssl_reject_handshake`, certificates read per
 * handshake (`ssl_certificate` with variables), and the error-log lines of
 * a handshake that failed, as `ngx_ssl_handshake` and
 * `ngx_ssl_connection_error` (`src/event/ngx_event_openssl.c`) write them.
 */
import type { Socket } from 'node:net';
import type { SecureContext, TLSSocket } from 'node:tls';
import type { VirtualServer } from '../../config/route-table.js';
import { ConfigError } from '../../errors.js';
import { parseClientHello } from '../client-hello.js';
import { HttpRequestState } from '../request.js';
import { findServer } from '../server-names.js';
import { TlsDetails } from '../tls-details.js';
import { sslErrorText } from '../upstream/errors.js';
import { addressServers, type LogConnection } from './connection-log.js';
import type { ClientConnections } from './connections.js';
import type { Generations } from './generations.js';

/** `TLS1_2_VERSION`, a ClientHello's `legacy_version` from TLS 1.2 and 1.3 clients. */
const TLS1_2_VERSION = 0x0303;

/**
 * OpenSSL's reasons (of the SSL library) that `ngx_ssl_connection_error`
 * (`src/event/ngx_event_openssl.c`) logs at info as a client's handshake
 * failure, besides the alerts (1000 and up); others are logged at crit.
 */
const HANDSHAKE_FAILURES = new Set([
  101, 103, 118, 129, 149, 151, 152, 155, 156, 159, 182, 183, 187, 193, 213, 226, 227, 234, 235, 244, 245, 246, 252, 253, 258, 266, 267, 281,
]);

/** The TLS handshakes of the server's connections, each on the listen group `groupKey` of the configuration in service. */
export class TlsHandshakes {
  constructor(
    private readonly connections: ClientConnections,
    private readonly generations: Generations,
    private readonly logConnection: LogConnection,
  ) {}

  /**
   * The ClientHello of a TLS connection, kept for the `$ssl_*` variables.
   * Returns true when the server its SNI name selects (the default server
   * without SNI) has `ssl_reject_handshake on`: nginx's refusal, logged at
   * info as `handshake rejected while SSL handshaking`
   * (`ngx_http_ssl_servername`), before OpenSSL answers. A client older than
   * TLS 1.2 is left to OpenSSL, which refuses its version first.
   */
  clientHello(raw: Socket, bytes: Buffer, groupKey: string): boolean {
    const conn = this.connections.openOf(raw);
    const group = this.generations.current.groups.get(groupKey);
    if (!conn || !group) return false;
    // ngx_http_ssl_handshake: a connection in its handshake is not idle
    conn.stat.reusable(false);
    conn.clientHello = bytes;
    const hello = parseClientHello(bytes);
    if (!hello || hello.legacyVersion < TLS1_2_VERSION) return false;
    const set = addressServers(group, conn.info);
    const server = hello.serverName ? findServer(set, hello.serverName.toLowerCase()) : set.defaultServer;
    if (!server.tls?.rejectHandshake) return false;
    this.logConnection(group, conn.info, 'handshake rejected while SSL handshaking');
    return true;
  }

  /**
   * `ngx_http_ssl_certificate`: the certificates of `server` (which have
   * variables) read for one handshake, the variables evaluated for a request
   * of the connection whose `$ssl_server_name` is `serverName`. When they
   * cannot be read, nginx's error line `cannot load certificate "…": … while
   * SSL handshaking` goes to the server's error_log, and the handshake gets
   * no certificate and fails (`failed`).
   */
  context(server: VirtualServer, socket: TLSSocket, serverName: string, groupKey: string): SecureContext {
    const gen = this.generations.current;
    const conn = this.connections.of(socket);
    const group = gen.groups.get(groupKey);
    if (!conn || !group) return gen.tls.withoutCertificate(server);
    const info = { ...conn.info, tls: new TlsDetails(socket, conn.clientHello, serverName) };
    const r = new HttpRequestState(info, 'GET', '', 'HTTP/1.0', {}, [], 'https', gen.table.variableCount);
    r.server = server;
    r.loc = server.conf;
    r.headersRead = false;
    try {
      return gen.tls.forHandshake(server, r);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      this.logConnection(group, info, `${err.message} while SSL handshaking`, 'error', server.conf.errorLogs);
      conn.certificateFailed = server;
      return gen.tls.withoutCertificate(server);
    }
  }

  /** The client of `socket` sent a server name; `rejected` by `ssl_reject_handshake`. */
  serverName(socket: TLSSocket, rejected: boolean): void {
    const conn = this.connections.of(socket);
    if (!conn) return;
    conn.sentSni = true;
    if (rejected) conn.handshakeRejected = true;
  }

  /**
   * A TLS handshake that failed: `ssl_reject_handshake` is nginx's info line
   * `handshake rejected while SSL handshaking` (`ngx_http_ssl_servername`);
   * a client that closes the connection after its first bytes is `peer
   * closed connection in SSL handshake` (`ngx_ssl_handshake`); certificates
   * that could not be read for it (`context`) end it with OpenSSL's
   * `cert cb error`; other OpenSSL failures are `SSL_do_handshake() failed
   * (SSL: …)`, at info for a client's (`ngx_ssl_connection_error`). A client without
   * SNI on an address whose default server reads its certificates per
   * handshake got no certificate from node:tls, which asks for none then:
   * they are read now for the error line nginx writes.
   */
  failed(err: Error, socket: TLSSocket, groupKey: string): void {
    const conn = this.connections.of(socket);
    const group = this.generations.current.groups.get(groupKey);
    if (!conn || !group) return;
    if (conn.handshakeRejected) {
      this.logConnection(group, conn.info, 'handshake rejected while SSL handshaking');
      return;
    }
    if ((err as NodeJS.ErrnoException).code === 'ECONNRESET' && (err as NodeJS.ErrnoException).syscall === undefined && conn.raw.bytesRead > 0) {
      // node:tls's "Client network socket disconnected before secure TLS connection was established": an end of file
      this.logConnection(group, conn.info, 'peer closed connection in SSL handshake while SSL handshaking');
      return;
    }
    const defaultServer = addressServers(group, conn.info).defaultServer;
    if (!conn.sentSni && this.generations.current.tls.perHandshake(defaultServer)) this.context(defaultServer, socket, '', groupKey);
    const server = conn.certificateFailed;
    if (server) {
      const certCbError = 'SSL_do_handshake() failed (SSL: error:0A000179:SSL routines::cert cb error) while SSL handshaking';
      this.logConnection(group, conn.info, certCbError, 'info', server.conf.errorLogs);
      return;
    }
    const failure = handshakeFailure(err);
    if (failure) this.logConnection(group, conn.info, `${failure.message} while SSL handshaking`, failure.level);
  }
}

/**
 * `ngx_ssl_connection_error` for a client's handshake that OpenSSL failed:
 * `SSL_do_handshake() failed (SSL: …)`, at info for the client's failures
 * (its alerts and `HANDSHAKE_FAILURES`), else at crit; undefined for an
 * error that is not OpenSSL's.
 */
export function handshakeFailure(err: Error): { readonly message: string; readonly level: 'info' | 'crit' } | undefined {
  const text = sslErrorText(err);
  const reasonHex = /error:0A([0-9A-F]{6}):/i.exec(err.message)?.[1];
  if (!text || !reasonHex) return undefined;
  const reason = parseInt(reasonHex, 16);
  return { message: `SSL_do_handshake() failed ${text}`, level: HANDSHAKE_FAILURES.has(reason) || reason >= 1000 ? 'info' : 'crit' };
}
