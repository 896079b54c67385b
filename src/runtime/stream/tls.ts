/**
 * The SSL phase of a stream session (`ngx_stream_ssl_handler`,
 * `ngx_stream_ssl_init_connection`, `ngx_stream_ssl_handshake_handler`,
 * `ngx_stream_ssl_alpn_select` in `src/stream/ngx_stream_ssl_module.c`): the
 * TLS handshake of a `listen … ssl` connection with the server's settings,
 * within `ssl_handshake_timeout`, its failures logged as
 * `ngx_ssl_handshake` logs them, then the `ssl_verify_client` checks.
 */
import type { Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer, TLSSocket, type SecureContext, type Server as TlsServer } from 'node:tls';
import type { StreamServer } from '../../config/route-table.js';
import type { StreamTlsConf } from '../../config/modules/stream-ssl.js';
import { secureContextOptions } from '../listen.js';
import { handshakeFailure } from '../server/tls-handshake.js';
import { LocalSessions, serveSessions } from '../session-cache.js';
import { clientCertificateError, TlsDetails } from '../tls-details.js';
import type { StreamSession } from './session.js';

/** A server's TLS context, and the (never listening) server node:tls keeps its session cache on. */
interface ServerTls {
  readonly context: SecureContext;
  readonly hub: TlsServer;
}

const contexts = new WeakMap<StreamServer, ServerTls>();
/** The sessions of `ssl_session_cache` in stream servers: this process's. */
const sessions = new LocalSessions();

function serverTls(server: StreamServer, tls: StreamTlsConf): ServerTls {
  let made = contexts.get(server);
  if (!made) {
    const hub = createTlsServer();
    if (tls.sessionCache) serveSessions(hub, tls.sessionCache, tls.sessionTimeoutSec * 1000, sessions);
    // nginx's session id context of stream servers (ngx_stream_ssl_sess_id_ctx); without one OpenSSL refuses to resume by id
    made = { context: createSecureContext({ ...secureContextOptions(tls, undefined), sessionIdContext: 'STREAM' }), hub };
    contexts.set(server, made);
  }
  return made;
}

/** The verification error node:tls's handle reports (`SSL_get_verify_result`), null when the chain verified. */
type VerifyingHandle = { verifyError(): (Error & { code?: string }) | null };

/**
 * What node:tls's server does when a handshake that asked for a client
 * certificate completes (`onServerSocketSecure`), which a `TLSSocket` made
 * on an accepted socket does not: `authorized`, or `authorizationError`
 * set to the verification error's code (as `TlsDetails` reads it).
 */
function authorize(socket: TLSSocket): void {
  const error = (socket as TLSSocket & { ssl: VerifyingHandle }).ssl.verifyError();
  if (error) Object.assign(socket, { authorizationError: error.code ?? 'UNSPECIFIED' });
  else socket.authorized = true;
}

/**
 * Runs the handshake of `raw` (its first bytes still unread) for `session`,
 * with `action` `SSL handshaking`. On success the session's `tls` is set and
 * `done` gets the secured socket; on a failure, a refused client certificate
 * or `ssl_handshake_timeout`, the line nginx writes is logged and the
 * session ends with 500 (`ngx_stream_finalize_session(…, NGX_STREAM_INTERNAL_SERVER_ERROR)`).
 */
export function streamHandshake(session: StreamSession, raw: Socket, done: (socket: TLSSocket) => void): void {
  const tls = session.server.tls!;
  session.action = 'SSL handshaking';
  const fail = (): void => {
    clearTimeout(timer);
    session.finalize(500);
    socket.destroy();
    raw.destroy();
  };
  const named = session.group.names;
  const onlyServer = named.exact.size <= 1 && named.heads.length === 0 && named.tails.length === 0 && named.regexes.length === 0;
  if (tls.rejectHandshake && onlyServer) {
    // ngx_stream_ssl_servername: the server refuses every handshake
    raw.once('data', () => {
      session.log('info', 'handshake rejected');
      fail();
    });
    raw.resume();
    return;
  }
  const { context, hub } = serverTls(session.server, tls);
  let rejected = false;
  const socket = new TLSSocket(raw, {
    // ngx_stream_ssl_servername: the SNI name chooses the server, whose context (if it has one) the handshake takes
    SNICallback: (name: string, cb: (err: Error | null, ctx?: SecureContext) => void) => {
      session.selectServer(name);
      const chosen = session.server.tls;
      if (chosen?.rejectHandshake) {
        rejected = true;
        cb(new Error('handshake rejected'));
        return;
      }
      cb(null, chosen && chosen.certificates.length > 0 ? serverTls(session.server, chosen).context : context);
    },
    isServer: true,
    server: hub,
    secureContext: context,
    requestCert: tls.verifyClient !== 'off',
    rejectUnauthorized: false,
    ...(tls.alpn.length > 0 ? { ALPNProtocols: [...tls.alpn] } : {}),
  });
  const timer = setTimeout(fail, tls.handshakeTimeoutMs);
  socket.once('secure', () => {
    clearTimeout(timer);
    if (tls.verifyClient !== 'off') authorize(socket);
    session.tls = new TlsDetails(socket, undefined);
    const refusal = clientCertificateError((session.server.tls ?? tls).verifyClient, (session.tls as TlsDetails).clientVerify);
    if (refusal) {
      session.log('info', refusal);
      fail();
      return;
    }
    done(socket);
  });
  socket.once('error', (err: Error) => {
    if (session.tls) return;
    // the variables of a handshake that failed: what it had settled (nginx's c->ssl is there)
    if (socket.getProtocol()) session.tls = new TlsDetails(socket, undefined);
    const code = (err as NodeJS.ErrnoException).code;
    if (rejected) session.log('info', 'handshake rejected');
    else if (code === 'ECONNRESET' && (err as NodeJS.ErrnoException).syscall === undefined) {
      if (raw.bytesRead > 0) session.log('info', 'peer closed connection in SSL handshake');
    } else {
      const failure = handshakeFailure(err);
      if (failure) session.log(failure.level, failure.message);
      else session.connectionError(err, 'SSL_do_handshake() failed', false);
    }
    fail();
  });
  raw.resume();
}
