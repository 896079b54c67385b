/**
 * The one table that turns an upstream client failure into nginx's status,
 * error-log message and phase (`ngx_http_upstream.c`:
 * `ngx_http_upstream_next`, `ngx_http_upstream_process_header`,
 * `ngx_http_upstream_ssl_handshake`, `ngx_event_connect_peer`). Undici
 * reports system errors by name (`ECONNREFUSED`) and its own by `UND_ERR_*`
 * codes; Node.js reports OpenSSL errors as `ERR_SSL_*` with OpenSSL's text;
 * the upstream TLS connector (tls.ts) reports a certificate nginx would
 * refuse as an `UpstreamCertificateError`.
 */
import { errnoOf } from '../../os-errors.js';
import type { NextCondition } from './round-robin.js';
import { X509_ERRORS } from '../x509-errors.js';

/**
 * What went wrong with an upstream, stable for callers to branch on (the
 * message is nginx's text, for the log only): a row of `FAILURES`.
 */
export type FailureCode =
  | 'connect' | 'timeout' | 'premature-close' | 'invalid-header' | 'header-too-big' | 'ssl' | 'certificate' | 'read' | 'temp-file' | 'other';

/**
 * The one table of upstream failures: the client's status when nothing was
 * sent yet, and the `proxy_next_upstream`/`fastcgi_next_upstream`
 * condition (`NGX_HTTP_UPSTREAM_FT_*`) each falls under.
 */
const FAILURES: Readonly<Record<FailureCode, { readonly status: number; readonly condition: NextCondition }>> = {
  connect: { status: 502, condition: 'error' },
  timeout: { status: 504, condition: 'timeout' },
  'premature-close': { status: 502, condition: 'error' },
  'invalid-header': { status: 502, condition: 'invalid_header' },
  'header-too-big': { status: 502, condition: 'invalid_header' },
  ssl: { status: 502, condition: 'error' },
  certificate: { status: 502, condition: 'error' },
  read: { status: 502, condition: 'error' },
  'temp-file': { status: 502, condition: 'error' },
  other: { status: 502, condition: 'error' },
};

/** How nginx reports an upstream failure. */
export interface UpstreamFailure {
  readonly code: FailureCode;
  /** Status for the client when nothing was sent yet (502, 504). */
  readonly status: number;
  /** The error-log message, without the ` while …` part. */
  readonly message: string;
  /** The phase, nginx's `log->action`. */
  readonly action: string;
  /** The `proxy_next_upstream` condition it falls under (`NGX_HTTP_UPSTREAM_FT_*`). */
  readonly condition: NextCondition;
  /** The error-log level when it is not `error`. */
  readonly level?: 'crit';
}

/**
 * Errors of `connect()` that `ngx_event_connect_peer` logs at error; any
 * other is logged at crit.
 */
const CONNECT_ERRORS_AT_ERROR = new Set(['ECONNREFUSED', 'EAGAIN', 'ECONNRESET', 'ENETDOWN', 'ENETUNREACH', 'EHOSTDOWN', 'EHOSTUNREACH']);

/**
 * The failure `code` as nginx logs it: `message` while `action` (nginx's
 * `log->action`), at `level` when not error; its status and condition from
 * `FAILURES`.
 */
export function upstreamFailure(code: FailureCode, message: string, action: string, level?: 'crit'): UpstreamFailure {
  const row = FAILURES[code];
  return { code, status: row.status, message, action, condition: row.condition, ...(level ? { level } : {}) };
}

/** Whether the response header had been received when the failure happened. */
export type UpstreamStage = 'connect' | 'header' | 'body';

/** nginx's `log->action` while an upstream's response header, then its body, is read. */
export const READING_HEADER = 'reading response header from upstream';
export const READING_BODY = 'reading upstream';

/** The `(N: text)` part nginx prints for a system error code. */
function errnoText(code: string, fallback: string): string {
  const e = errnoOf(code);
  return e ? `(${e[0]}: ${e[1]})` : `(${fallback})`;
}

/**
 * OpenSSL's error string as nginx prints it (`ngx_ssl_error` in
 * `src/event/ngx_event_openssl.c`: `ERR_error_string_n()`, then `:DATA`
 * when the error has data): `(SSL: error:0A00010B:SSL routines:ssl3_get_record:wrong version number)`,
 * `(SSL: error:0A00042E:SSL routines:ssl3_read_bytes:tlsv1 alert protocol version:SSL alert number 70)`.
 * Node.js's message is `…:error:CODE:LIB:FUNC:REASON:FILE:LINE:DATA`.
 * OpenSSL 3.2 renamed the alert reasons `sslv3 alert …` to `ssl/tls alert …`:
 * jinx prints the name nginx 1.30's OpenSSL prints.
 */
export function sslErrorText(err: Error): string | undefined {
  const m = /error:([0-9A-Fa-f]+):([^:]*):([^:]*):([^:\n]*)(?::[^:\n]*:\d+:([^\n]*))?/.exec(err.message);
  if (!m) return undefined;
  const reason = m[4]!.replace(/^sslv3 alert /, 'ssl/tls alert ');
  return `(SSL: error:${m[1]!.toUpperCase()}:${m[2]}:${m[3]}:${reason}${m[5] ? `:${m[5]}` : ''})`;
}

/**
 * No connection was left within `worker_connections` to open one to the
 * upstream (`ngx_get_connection` failing in `ngx_event_connect_peer`): nginx
 * logs this alert and answers 500, trying no other server.
 */
export class WorkerConnectionsError extends Error {
  readonly code = 'JINX_WORKER_CONNECTIONS';
  constructor(limit: number) {
    super(`${limit} worker_connections are not enough`);
  }
}

/**
 * The upstream did not take any of the request for `proxy_send_timeout`
 * (`fastcgi_send_timeout`) while jinx had more to write.
 */
export class SendTimeoutError extends Error {
  readonly code = 'JINX_UPSTREAM_SEND_TIMEOUT';
  constructor() {
    super('upstream send timed out');
  }
}

/** Where `upstreamTimeout` happened: a stage, or while the request was written. */
export type TimeoutStage = UpstreamStage | 'send';

const TIMEOUT_ACTIONS: Readonly<Record<TimeoutStage, string>> = {
  connect: 'connecting to upstream', send: 'sending request to upstream', header: READING_HEADER, body: READING_BODY,
};

/** OpenSSL's verification results, also for callers that map an upstream's (`runtime/x509-errors.ts`). */
export { X509_ERRORS };

/**
 * The upstream's certificate failed nginx's checks after the handshake
 * (`ngx_http_upstream_ssl_handshake`): `code` is a verification result as
 * Node.js names it (`DEPTH_ZERO_SELF_SIGNED_CERT` …), or
 * `ERR_TLS_CERT_ALTNAME_INVALID` when the certificate does not match `host`.
 */
export class UpstreamCertificateError extends Error {
  constructor(
    readonly code: string,
    /** The name checked (`proxy_ssl_name`, or the host of `proxy_pass`). */
    readonly host: string,
    message?: string,
  ) {
    super(message ?? (code === 'ERR_TLS_CERT_ALTNAME_INVALID' ? `certificate does not match "${host}"` : code));
    this.name = 'UpstreamCertificateError';
  }
}

/**
 * An HTTP/2 upstream's refusal of the request or breach of the protocol,
 * in the words of nginx's gRPC module (`upstream rejected request with
 * error N`, `upstream sent goaway with error N`): an invalid header before
 * the response header, a read error after it.
 */
export class Http2UpstreamError extends Error {
  readonly code = 'JINX_UPSTREAM_HTTP2';
}

const SSL_HANDSHAKING = 'SSL handshaking to upstream';

/**
 * nginx's report of a timeout at `stage` (`ngx_http_upstream_next` with
 * `NGX_HTTP_UPSTREAM_FT_TIMEOUT`): 504, `upstream timed out (110: …)`.
 */
export function upstreamTimeout(stage: TimeoutStage): UpstreamFailure {
  const action = TIMEOUT_ACTIONS[stage];
  return upstreamFailure('timeout', `upstream timed out ${errnoText('ETIMEDOUT', 'timed out')}`, action);
}

/**
 * Maps an upstream error at `stage` to nginx's report. `buffered` tells how
 * the body was being read: with `proxy_buffering on` nginx's event pipe reads
 * with `readv()`, otherwise (and for the header) with `recv()`, and the
 * system call's name is in the message. `unixPeer` names a peer on a unix
 * domain socket (`unix:PATH`), whose `connect()` fails at once: nginx's
 * `connect() to unix:PATH failed (2: No such file or directory)`, at crit
 * but for a refused connection (`ngx_event_connect_peer`).
 */
export function mapUpstreamError(err: Error & { code?: string }, stage: UpstreamStage, buffered = false, unixPeer?: string): UpstreamFailure {
  if (err instanceof SendTimeoutError) return upstreamTimeout('send');
  if (err instanceof Http2UpstreamError) {
    return stage === 'body' ? upstreamFailure('read', err.message, READING_BODY) : upstreamFailure('invalid-header', err.message, READING_HEADER);
  }
  const code = err.code ?? '';
  if (unixPeer !== undefined && stage === 'connect' && errnoOf(code)) {
    return upstreamFailure('connect', `connect() to ${unixPeer} failed ${errnoText(code, err.message)}`, 'connecting to upstream', CONNECT_ERRORS_AT_ERROR.has(code) ? undefined : 'crit');
  }
  if (stage === 'body' && (code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' || /\(Invalid EOF state\)/.test(err.message))) {
    // the connection closed before the body's length, or in a chunk (ngx_http_upstream_process_upstream's eof)
    return upstreamFailure('premature-close', 'upstream prematurely closed connection', READING_BODY);
  }
  if (err.name === 'HTTPParserError' || code.startsWith('HPE_')) {
    // undici's parser refused the status line (nginx: not HTTP) or a header line
    const statusLine = /Expected HTTP\/|Invalid HTTP version|Invalid status|Invalid method/i.test(err.message);
    return upstreamFailure(
      'invalid-header', statusLine && stage !== 'body' ? 'upstream sent no valid HTTP/1.0 header' : 'upstream sent invalid header',
      stage === 'body' ? READING_BODY : READING_HEADER,
    );
  }
  if (err instanceof UpstreamCertificateError) {
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
      return upstreamFailure('certificate', `upstream SSL certificate does not match "${err.host}"`, SSL_HANDSHAKING);
    }
    const [n, text] = X509_ERRORS[code] ?? [1, err.message];
    return upstreamFailure('certificate', `upstream SSL certificate verify error: (${n}:${text})`, SSL_HANDSHAKING);
  }
  const phaseAction = stage === 'body' ? READING_BODY : stage === 'header' ? READING_HEADER : 'connecting to upstream';
  if (code.startsWith('ERR_SSL_') || sslErrorText(err)) {
    // an OpenSSL error: in the handshake (until the connection is ready), or while reading
    const text = sslErrorText(err) ?? `(SSL: ${err.message})`;
    if (stage === 'connect') return upstreamFailure('ssl', `SSL_do_handshake() failed ${text}`, SSL_HANDSHAKING);
    return upstreamFailure('ssl', `SSL_read() failed ${text}`, phaseAction);
  }
  switch (code) {
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EADDRNOTAVAIL':
      return upstreamFailure('connect', `connect() failed ${errnoText(code, err.message)}`, 'connecting to upstream');
    case 'UND_ERR_CONNECT_TIMEOUT':
      return upstreamTimeout('connect');
    case 'UND_ERR_HEADERS_TIMEOUT':
      return upstreamTimeout('header');
    case 'UND_ERR_BODY_TIMEOUT':
      return upstreamTimeout('body');
    case 'UND_ERR_HEADERS_OVERFLOW':
      return upstreamFailure('header-too-big', 'upstream sent too big header', READING_HEADER);
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return upstreamFailure('premature-close', 'upstream prematurely closed connection', stage === 'body' ? READING_BODY : READING_HEADER);
    default:
      if (errnoOf(code)) {
        // a system error while reading: the socket was connected (ECONNRESET …)
        return upstreamFailure(
          'read', `${stage === 'body' && buffered ? 'readv' : 'recv'}() failed ${errnoText(code, err.message)}`, stage === 'connect' ? READING_HEADER : phaseAction,
        );
      }
      return upstreamFailure('other', `upstream error: ${err.message}`, phaseAction);
  }
}
