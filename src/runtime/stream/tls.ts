/**
 * The SSL phase of a stream session (`ngx_stream_ssl_handler`,
 * `ngx_stream_ssl_init_connection`, `ngx_stream_ssl_handshake_handler`,
 * `ngx_stream_ssl_alpn_select` in `src/stream/ngx_stream_ssl_module.c`): the
 * TLS handshake of a `listen … ssl` connection with the server's settings,
 * within `ssl_handshake_timeout`, its failures logged as
 * `ngx_ssl_handshake` logs them, then the `ssl_verify_client` checks.
 */
import type { Socket } from 'node:net';
import { isAbsolute } from 'node:path';
import { createSecureContext, createServer as createTlsServer, TLSSocket, type SecureContext, type SecureContextOptions, type Server as TlsServer } from 'node:tls';
import { loadCertificatePair, type CertificatePair } from '../../config/certificates.js';
import type { CertificateCacheConf } from '../../config/modules/ssl.js';
import type { TlsView } from '../../config/request-view.js';
import { ConfigError } from '../../errors.js';
import { CertificateCache } from '../certificate-cache.js';
import type { StreamServer } from '../../config/route-table.js';
import type { StreamTlsConf } from '../../config/modules/stream-ssl.js';
import { secureContextOptions } from '../listen.js';
import { handshakeFailure } from '../server/tls-handshake.js';
import { LocalSessions, serveSessions } from '../session-cache.js';
import { clientCertificateError, TlsDetails } from '../tls-details.js';
import { readClientHello } from './preread.js';
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
    made = { context: createSecureContext(secureContextOptions(tls, undefined, 'STREAM')), hub };
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

/** What OpenSSL settles before the servername callback: the default server's protocols and ciphers. */
function settledFirst(baseTls: StreamTlsConf): SecureContextOptions {
  const { ciphers, honorCipherOrder, minVersion, maxVersion } = secureContextOptions(baseTls, undefined, 'STREAM');
  return { ciphers, honorCipherOrder, minVersion, maxVersion };
}

/**
 * The context of a handshake whose ClientHello chose `chosen` (by its SNI
 * name) on an address whose default server is `base`: `chosen`'s
 * certificates, client CAs, CRL, session settings, with `base`'s protocols
 * and ciphers, as nginx's handshake gets them: `ngx_stream_ssl_servername`
 * moves the connection to the chosen server's `SSL_CTX`, whose certificates
 * and verification apply, once OpenSSL has settled the version and keeps
 * the connection's cipher list (made from the default server's).
 */
function chosenContext(base: StreamServer, baseTls: StreamTlsConf, chosen: StreamServer, chosenTls: StreamTlsConf): SecureContext {
  if (chosen === base) return serverTls(base, baseTls).context;
  let byChosen = pairs.get(base);
  if (!byChosen) pairs.set(base, (byChosen = new WeakMap()));
  let made = byChosen.get(chosen);
  if (!made) {
    made = createSecureContext({ ...secureContextOptions(chosenTls, undefined, 'STREAM'), ...settledFirst(baseTls) });
    byChosen.set(chosen, made);
  }
  return made;
}

/**
 * What the ClientHello showed before the handshake, as nginx's `c->ssl`
 * shows it when `ngx_stream_ssl_certificate` evaluates certificate names:
 * the SNI name (`$ssl_server_name`); nothing is settled yet.
 */
class HelloView implements TlsView {
  readonly protocol = undefined;
  readonly cipher = undefined;
  readonly alpnProtocol = undefined;
  readonly sessionReused = false;
  readonly sessionId = undefined;
  readonly ciphers = undefined;
  readonly curves = undefined;
  readonly verifyResult = 'NONE';
  readonly clientCertificate = undefined;
  constructor(readonly serverName: string | undefined) {}
  curve(): undefined {
    return undefined;
  }
}

/** `ssl_certificate_cache`s of stream servers, one per directive. */
const caches = new WeakMap<CertificateCacheConf, CertificateCache>();

/**
 * `ngx_stream_ssl_certificate`: `context` with the certificates of `tls`
 * (which have variables) evaluated for `session`, its `$ssl_server_name`
 * the ClientHello's `serverName` ('' without), and read now (or taken from
 * `ssl_certificate_cache`), relative paths against the configuration's
 * directory; a pair that cannot be read is nginx's error line (`cannot
 * load certificate "PATH": …`) and undefined.
 */
function handshakeContext(session: StreamSession, tls: StreamTlsConf, options: SecureContextOptions, serverName: string): SecureContext | undefined {
  const values = tls.certificateValues!;
  const full = (p: string): string => (isAbsolute(p) ? p : values.confPrefix + p);
  let cache = values.cache && caches.get(values.cache);
  if (values.cache && !cache) caches.set(values.cache, (cache = new CertificateCache(values.cache)));
  session.tls = new HelloView(serverName || undefined);
  try {
    const pairs = values.pairs.map((p) => {
      const [cert, key] = [full(p.cert.evaluate(session)), full(p.key.evaluate(session))];
      const load = (): CertificatePair => loadCertificatePair(cert, key, true, values.passwords);
      return cache ? cache.fetch(cert, key, load) : load();
    });
    return createSecureContext({ ...options, cert: pairs.map((p) => p.cert), key: pairs.map((p) => p.key) });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    session.log('error', err.message);
    return undefined;
  } finally {
    session.tls = undefined;
  }
}

/** The contexts of `chosenContext`, by default server and chosen server. */
const pairs = new WeakMap<StreamServer, WeakMap<StreamServer, SecureContext>>();

/** OpenSSL's fatal `internal_error` alert (RFC 8446 section 6), in a TLS 1.2 record: a certificate callback that failed. */
const INTERNAL_ERROR_ALERT = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50]);

/** The largest TLS record a ClientHello can come in: 2^14 bytes and a header (RFC 8446 section 5.1). */
const MAX_RECORD = 5 + 16384;

/**
 * Reads the first bytes of `raw` (paused, nothing read yet) until they hold
 * a whole ClientHello or cannot (not a TLS record, or more than a record),
 * puts them back and calls `done` with them and the ClientHello's SNI name
 * ('' without one; undefined when they are not a whole ClientHello, which
 * the handshake refuses before any certificate is looked for), or `closed`
 * when the client closed its side first.
 */
function readClientHelloOf(raw: Socket, done: (bytes: Buffer, serverName: string | undefined) => void, closed: () => void): void {
  let bytes = Buffer.alloc(0);
  const stop = (): void => {
    raw.off('data', onData).off('end', onEnd);
    raw.pause();
  };
  const onData = (chunk: Buffer): void => {
    bytes = Buffer.concat([bytes, chunk]);
    if (readClientHello(bytes) === 'again' && bytes.length < MAX_RECORD) return;
    stop();
    raw.unshift(bytes);
    const hello = readClientHello(bytes);
    done(bytes, typeof hello === 'string' ? undefined : hello.serverName);
  };
  const onEnd = (): void => {
    stop();
    closed();
  };
  raw.on('data', onData).once('end', onEnd);
  raw.resume();
}

/**
 * Runs the handshake of `raw` (its first bytes still unread) for `session`,
 * with `action` `SSL handshaking`. Its ClientHello is read first: the SNI
 * name chooses the server (`ngx_stream_ssl_servername`), whose certificates,
 * client-certificate request and CAs (`chosenContext`) and `ssl_alpn`
 * (`ngx_stream_ssl_alpn_select`) the handshake takes when it has
 * certificates, else the default server's. On success the session's `tls`
 * is set and `done` gets the secured socket; on a failure, a refused
 * client certificate or `ssl_handshake_timeout`, the line nginx writes is
 * logged and the session ends with 500
 * (`ngx_stream_finalize_session(…, NGX_STREAM_INTERNAL_SERVER_ERROR)`).
 */
export function streamHandshake(session: StreamSession, raw: Socket, done: (socket: TLSSocket) => void): void {
  const base = session.server;
  const baseTls = base.tls!;
  session.action = 'SSL handshaking';
  let socket: TLSSocket | undefined;
  const fail = (): void => {
    clearTimeout(timer);
    session.finalize(500);
    socket?.destroy();
    raw.destroy();
  };
  const timer = setTimeout(fail, baseTls.handshakeTimeoutMs);
  const named = session.group.names;
  const onlyServer = named.exact.size <= 1 && named.heads.length === 0 && named.tails.length === 0 && named.regexes.length === 0;
  if (baseTls.rejectHandshake && onlyServer) {
    // ngx_stream_ssl_servername: the server refuses every handshake
    raw.once('data', () => {
      session.log('info', 'handshake rejected');
      fail();
    });
    raw.resume();
    return;
  }
  readClientHelloOf(raw, (hello, serverName) => {
    if (session.finalized) return;
    session.selectServer(serverName ?? '');
    const chosen = session.server;
    const chosenTls = chosen.tls;
    // a chosen server without certificates has no context of its own: the default server's settings stay
    const own = chosenTls && (chosenTls.certificates.length > 0 || chosenTls.certificateValues) ? chosenTls : undefined;
    const tls = own ?? baseTls;
    const context = tls.certificateValues && serverName !== undefined
      ? handshakeContext(session, tls, { ...secureContextOptions(tls, undefined, 'STREAM'), ...settledFirst(baseTls) }, serverName)
      : own ? chosenContext(base, baseTls, chosen, own) : serverTls(base, baseTls).context;
    if (!context) {
      // the certificate callback failed: OpenSSL ends the handshake with an alert
      session.log('info', 'SSL_do_handshake() failed (SSL: error:0A000179:SSL routines::cert cb error)');
      raw.write(INTERNAL_ERROR_ALERT, () => fail());
      return;
    }
    let rejected = false;
    const secured = new TLSSocket(raw, {
      // the server was chosen above: only a refusal is left to this callback (node:tls calls it when the client sent a name)
      SNICallback: (_name: string, cb: (err: Error | null, ctx?: SecureContext) => void) => {
        if (chosenTls?.rejectHandshake) {
          rejected = true;
          cb(new Error('handshake rejected'));
          return;
        }
        cb(null, context);
      },
      isServer: true,
      server: serverTls(base, baseTls).hub,
      secureContext: context,
      requestCert: tls.verifyClient !== 'off',
      rejectUnauthorized: false,
      ...(tls.alpn.length > 0 ? { ALPNProtocols: [...tls.alpn] } : {}),
    });
    socket = secured;
    secured.once('secure', () => {
      clearTimeout(timer);
      if (tls.verifyClient !== 'off') authorize(secured);
      session.tls = new TlsDetails(secured, hello);
      const refusal = clientCertificateError((chosenTls ?? baseTls).verifyClient, (session.tls as TlsDetails).clientVerify);
      if (refusal) {
        session.log('info', refusal);
        fail();
        return;
      }
      done(secured);
    });
    secured.once('error', (err: Error) => {
      if (session.tls) return;
      // the variables of a handshake that failed: what it had settled (nginx's c->ssl is there)
      if (secured.getProtocol()) session.tls = new TlsDetails(secured, hello);
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
  }, () => {
    // ngx_ssl_handshake: the client closed before its ClientHello was whole (or sent nothing)
    session.log('info', 'peer closed connection in SSL handshake');
    fail();
  });
}
