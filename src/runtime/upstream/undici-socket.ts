/**
 * What jinx needs of the socket undici sends a request on, which undici does
 * not hand to a request's handler. undici publishes it on the
 * `undici:client:sendHeaders` diagnostics channel, synchronously right after
 * calling the handler's `onConnect` and before writing the request's head;
 * this module's subscriber, on each publication:
 *
 * - lets the connection's response parser take a line ended by a bare LF,
 *   as nginx's parsers of upstream responses do (`ngx_http_parse_status_line`,
 *   `ngx_http_parse_header_line`, `ngx_http_parse_chunked`); undici's llhttp
 *   asks for CRLF, and exports the switch (`llhttp_set_lenient_optional_cr_before_lf`);
 *   and has it take a 204 or 304 as ended after its header, as nginx does,
 *   whatever its `Content-Length`;
 * - starts the `WireMeter` armed by that handler's `onConnect`, for
 *   `$upstream_bytes_sent` and `$upstream_bytes_received` (nginx counts them
 *   on the peer connection);
 * - has undici close the connection after the response when it has been
 *   open longer than its `keepalive_time` (`retireAfter`), as
 *   `ngx_http_upstream_free_keepalive_peer` does.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

/** Counts one request's bytes on the connection undici sends it on. */
export class WireMeter {
  private socket: Socket | undefined;
  private readAtStart = 0;
  private writtenAtStart = 0;

  /** Call from the handler's `onConnect`: the request's head is written next, on the socket published then. */
  arm(): void {
    armed = this;
  }

  /** Starts counting on `socket`, before the request's head is written. */
  attach(socket: Socket): void {
    this.socket = socket;
    this.readAtStart = socket.bytesRead;
    this.writtenAtStart = socket.bytesWritten;
  }

  /**
   * Holds the connection's writes until the event loop's next turn, so that
   * the last piece of a chunked body and undici's last chunk, which it
   * writes on the body's 'end' a tick later, leave in one write, as nginx's
   * one `writev` of its last buffers does (`ngx_http_upstream_send_request_body`);
   * an upstream that answers and closes once it read the last chunk does
   * not reset the connection on a part it had not read.
   */
  holdWrites(): void {
    const socket = this.socket;
    if (!socket || this.holding) return;
    this.holding = true;
    socket.cork();
    setImmediate(() => socket.uncork());
  }

  private holding = false;

  /** Bytes read from the peer since the request was sent (0 before). */
  get received(): number {
    return this.socket ? this.socket.bytesRead - this.readAtStart : 0;
  }

  /** Bytes written to the peer for this request (0 before it was sent). */
  get sent(): number {
    return this.socket ? this.socket.bytesWritten - this.writtenAtStart : 0;
  }
}

/** The meter whose request undici is about to write. */
let armed: WireMeter | undefined;

/** Sockets a request was sent on (their parser takes bare LFs). */
const used = new WeakSet<Socket>();

/** When each kept upstream connection is to be closed after its request: `keepalive_time` after it opened, in ms since the epoch. */
const retireAtMs = new WeakMap<Socket, number>();

/** Marks a new connection to be closed after the first response that ends more than `keepaliveTimeMs` after now. */
export function retireAfter(socket: Socket, keepaliveTimeMs: number): void {
  retireAtMs.set(socket, Date.now() + keepaliveTimeMs);
}

/** undici's own property of `socket` named `name` (its symbols are private to it). */
function undiciSymbol(socket: Socket, name: string): symbol | undefined {
  return Object.getOwnPropertySymbols(socket).find((sym) => sym.description === name);
}

/**
 * undici's HTTP/1 parser of a socket (`socket[kParser]`): its llhttp
 * instance and parser pointer, the `Content-Length` it read, and its
 * header-complete callback.
 */
interface UndiciParser {
  readonly llhttp: { llhttp_set_lenient_optional_cr_before_lf?: (ptr: number, on: number) => void };
  readonly ptr: number | null;
  contentLength?: string;
  onHeadersComplete?: (statusCode: number, ...rest: unknown[]) => unknown;
}

/**
 * Adjusts a connection's parser to nginx's reading of upstream responses:
 * bare LFs end lines, and a 204 or 304 has no body whatever its
 * `Content-Length` says (`ngx_http_upstream_process_header` sets the
 * length to 0; undici would call the empty body a length mismatch and
 * close the connection).
 */
function acceptBareLf(socket: Socket): void {
  if (used.has(socket)) return;
  used.add(socket);
  const key = undiciSymbol(socket, 'parser');
  const parser = key && (socket as unknown as Record<symbol, UndiciParser | null | undefined>)[key];
  if (!parser?.ptr) return;
  parser.llhttp.llhttp_set_lenient_optional_cr_before_lf?.(parser.ptr, 1);
  const headersComplete = parser.onHeadersComplete;
  if (typeof headersComplete !== 'function') return;
  parser.onHeadersComplete = function (this: UndiciParser, statusCode: number, ...rest: unknown[]): unknown {
    if (statusCode === 204 || statusCode === 304) this.contentLength = '';
    // undici closes a connection marked `reset` once its response is complete
    const retireAt = retireAtMs.get(socket);
    const reset = retireAt !== undefined && Date.now() > retireAt ? undiciSymbol(socket, 'reset') : undefined;
    if (reset) (socket as unknown as Record<symbol, boolean>)[reset] = true;
    return headersComplete.call(this, statusCode, ...rest);
  };
}

/**
 * Starts the `WireMeter` armed by the handler whose request is about to be
 * written on `socket`: undici's own requests through the channel below,
 * HTTP/2 requests (h2-connections.ts) directly.
 */
export function meterSocket(socket: Socket): void {
  const meter = armed;
  armed = undefined;
  meter?.attach(socket);
}

subscribe('undici:client:sendHeaders', (message) => {
  const { socket } = message as { socket: Socket };
  acceptBareLf(socket);
  meterSocket(socket);
});
