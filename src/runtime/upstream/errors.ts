/**
 * The one table that turns an upstream client failure into nginx's status,
 * error-log message and phase (`ngx_http_upstream.c`:
 * `ngx_http_upstream_next`, `ngx_http_upstream_process_header`,
 * `ngx_event_connect_peer`). Undici reports system errors by name
 * (`ECONNREFUSED`) and its own by `UND_ERR_*` codes.
 */
import { errnoOf } from '../../os-errors.js';
import type { NextCondition } from './round-robin.js';

/** How nginx reports an upstream failure. */
export interface UpstreamFailure {
  /** Status for the client when nothing was sent yet (502, 504). */
  readonly status: number;
  /** The error-log message, without the ` while …` part. */
  readonly message: string;
  /** The phase, nginx's `log->action`. */
  readonly action: string;
  /** The `proxy_next_upstream` condition it falls under (`NGX_HTTP_UPSTREAM_FT_*`). */
  readonly condition: NextCondition;
}

/** Whether the response header had been received when the failure happened. */
export type UpstreamStage = 'connect' | 'header' | 'body';

const READING_HEADER = 'reading response header from upstream';
const READING_BODY = 'reading upstream';

/** The `(N: text)` part nginx prints for a system error code. */
function errnoText(code: string, fallback: string): string {
  const e = errnoOf(code);
  return e ? `(${e[0]}: ${e[1]})` : `(${fallback})`;
}

/**
 * OpenSSL's error string as nginx prints it after `SSL_do_handshake() failed`:
 * `(SSL: error:0A00010B:SSL routines:ssl3_get_record:wrong version number)`.
 */
function sslErrorText(err: Error): string | undefined {
  const m = /error:([0-9A-Fa-f]+):([^:]*):([^:]*):([^:\n]*)/.exec(err.message);
  return m ? `(SSL: error:${m[1]!.toUpperCase()}:${m[2]}:${m[3]}:${m[4]})` : undefined;
}

/**
 * The upstream did not take any of the request for `proxy_send_timeout`
 * (`fastcgi_send_timeout`) while jinx had more to write.
 */
export class SendTimeoutError extends Error {
  constructor() {
    super('upstream send timed out');
  }
}

/** Where `upstreamTimeout` happened: a stage, or while the request was written. */
export type TimeoutStage = UpstreamStage | 'send';

const TIMEOUT_ACTIONS: Readonly<Record<TimeoutStage, string>> = {
  connect: 'connecting to upstream', send: 'sending request to upstream', header: READING_HEADER, body: READING_BODY,
};

/**
 * nginx's report of a timeout at `stage` (`ngx_http_upstream_next` with
 * `NGX_HTTP_UPSTREAM_FT_TIMEOUT`): 504, `upstream timed out (110: …)`.
 */
export function upstreamTimeout(stage: TimeoutStage): UpstreamFailure {
  const action = TIMEOUT_ACTIONS[stage];
  return { status: 504, message: `upstream timed out ${errnoText('ETIMEDOUT', 'timed out')}`, action, condition: 'timeout' };
}

/**
 * Maps an upstream error at `stage` to nginx's report. `buffered` tells how
 * the body was being read: with `proxy_buffering on` nginx's event pipe reads
 * with `readv()`, otherwise (and for the header) with `recv()`, and the
 * system call's name is in the message.
 */
export function mapUpstreamError(err: Error & { code?: string }, stage: UpstreamStage, buffered = false): UpstreamFailure {
  if (err instanceof SendTimeoutError) return upstreamTimeout('send');
  const code = err.code ?? '';
  if (err.name === 'HTTPParserError' || code.startsWith('HPE_')) {
    // undici's parser refused the status line (nginx: not HTTP) or a header line
    const statusLine = /Expected HTTP\/|Invalid HTTP version|Invalid status|Invalid method/i.test(err.message);
    return {
      status: 502,
      message: statusLine && stage !== 'body' ? 'upstream sent no valid HTTP/1.0 header' : 'upstream sent invalid header',
      action: stage === 'body' ? READING_BODY : READING_HEADER,
      condition: 'invalid_header',
    };
  }
  if (code.startsWith('ERR_SSL_') || (stage === 'connect' && sslErrorText(err))) {
    return { status: 502, message: `SSL_do_handshake() failed ${sslErrorText(err) ?? `(SSL: ${err.message})`}`, action: 'SSL handshaking to upstream', condition: 'error' };
  }
  const phaseAction = stage === 'body' ? READING_BODY : stage === 'header' ? READING_HEADER : 'connecting to upstream';
  switch (code) {
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EADDRNOTAVAIL':
      return { status: 502, message: `connect() failed ${errnoText(code, err.message)}`, action: 'connecting to upstream', condition: 'error' };
    case 'UND_ERR_CONNECT_TIMEOUT':
      return upstreamTimeout('connect');
    case 'UND_ERR_HEADERS_TIMEOUT':
      return upstreamTimeout('header');
    case 'UND_ERR_BODY_TIMEOUT':
      return upstreamTimeout('body');
    case 'UND_ERR_HEADERS_OVERFLOW':
      return { status: 502, message: 'upstream sent too big header', action: READING_HEADER, condition: 'invalid_header' };
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return {
        status: 502, message: 'upstream prematurely closed connection', action: stage === 'body' ? READING_BODY : READING_HEADER, condition: 'error',
      };
    default:
      if (errnoOf(code)) {
        // a system error while reading: the socket was connected (ECONNRESET …)
        return {
          status: 502,
          message: `${stage === 'body' && buffered ? 'readv' : 'recv'}() failed ${errnoText(code, err.message)}`,
          action: stage === 'connect' ? READING_HEADER : phaseAction,
          condition: 'error',
        };
      }
      return { status: 502, message: `upstream error: ${err.message}`, action: phaseAction, condition: 'error' };
  }
}
