/**
 * HTTP/2 connections to one upstream peer, for `grpc_pass`
 * (`src/http/modules/ngx_http_grpc_module.c`). As nginx's gRPC module, a
 * connection carries one request at a time: a request takes the peer's
 * most recently kept idle connection (an `upstream` block with
 * `keepalive`), or opens a new one; after a response read whole, with the
 * request's body sent and no GOAWAY, the connection goes to its group's
 * cache, else it is closed. The session is node's `node:http2` over a
 * socket from undici's connector (TCP for `grpc://`, TLS with ALPN `h2` for
 * `grpcs://`), with nginx's connection preface but for the header table
 * and the window: no server push, a header table of HTTP/2's default size,
 * and a window of `WINDOW_BYTES` for the stream and the connection. nginx
 * offers no header table (SETTINGS_HEADER_TABLE_SIZE 0) and its decoder
 * takes a response whose block does not begin with the table size update
 * RFC 7541 (4.2) then asks for, as grpc's C core sends a request it refuses
 * early (a GET: `grpc-status: 2`); node's nghttp2 answers such a block with
 * GOAWAY COMPRESSION_ERROR and the request would wait for
 * `grpc_read_timeout`. nginx offers a window of 2^31-1 and holds a fast
 * upstream back by not reading its socket while the client is slow; node's
 * session reads on, so the window is what holds it back here: a paused
 * stream keeps at most that much.
 *
 * Requests are driven through undici's dispatch-handler interface
 * (`onConnect`, `onHeaders`, `onData`, `onComplete`, `onError`), the one
 * the proxy's `ProxyResponse` takes from undici's HTTP/1.1 connections, so
 * that the proxy's response handling (hidden headers, intercepted errors,
 * the next upstream, `$upstream_*`) is the gRPC module's too, as nginx's
 * `ngx_http_upstream` is. A response whose HEADERS frame ends the stream
 * (gRPC's trailers-only response) gets `content-length: 0` as nginx sets
 * `content_length_n` (`ngx_http_grpc_process_header`); trailers are passed
 * to `onComplete` as undici passes them, names and values alternating.
 */
import type * as Http2 from 'node:http2';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type buildConnector from 'undici/lib/core/connect.js';
import undiciErrors from 'undici/lib/core/errors.js';
import { Http2UpstreamError } from './errors.js';
import type { ConnectionOwner, IdleConnections, UpstreamRequest } from './peer-connections.js';
import { meterSocket } from './undici-socket.js';

/** node's HTTP/2, loaded with the first connection: loading it costs a process about 5 MiB and 7 ms, which a start without gRPC does not pay. */
let loaded: typeof Http2 | undefined;
function http2(): typeof Http2 {
  return (loaded ??= createRequire(import.meta.url)('node:http2') as typeof Http2);
}

/** RST_STREAM and GOAWAY error codes (RFC 9113, 7): no error, cancel. */
const NGHTTP2_NO_ERROR = 0;
const NGHTTP2_CANCEL = 8;
/** The END_STREAM flag of a HEADERS frame. */
const FLAG_END_STREAM = 0x1;
const HTTP2_HEADER_STATUS = ':status';

/** The window given the upstream's stream and connection: what a response read ahead of a slow client holds at most. */
const WINDOW_BYTES = 1 << 20;

/** What `H2PeerConnections` needs to open, keep and count connections. */
export interface H2ConnectionOptions {
  /** `http:` (`grpc://`) or `https:` (`grpcs://`). */
  readonly protocol: 'http:' | 'https:';
  readonly hostname: string;
  readonly port: number;
  /** Opens the TCP or TLS connection (undici's connector with the location's connect timeout and TLS settings). */
  readonly connect: buildConnector.connector;
  /** The group's idle connections; undefined when nothing is kept. */
  readonly cache: IdleConnections | undefined;
  /**
   * `grpc_buffer_size`: a response header larger is `upstream sent too big
   * header`. nginx measures the HPACK-encoded frames it buffers; node hands
   * over decoded fields, so the size measured is HTTP/2's header list size
   * (each field's name and value, and 32; RFC 9113, 6.5.2).
   */
  readonly maxHeaderBytes: number;
  /** `keepalive_requests`, `keepalive_timeout`, `keepalive_time` of the peer's group. */
  readonly keepaliveRequests: number;
  readonly keepaliveTimeoutMs: number;
  readonly keepaliveTimeMs: number;
}

/** One HTTP/2 connection: its session, socket, and the requests it carried. */
interface H2Connection {
  readonly session: Http2.ClientHttp2Session;
  readonly socket: Socket;
  readonly openedAtMs: number;
  requests: number;
  /** The peer sent GOAWAY: no request more (nginx's `ctx->goaway`). */
  goaway: { readonly errorCode: number; readonly lastStreamId: number } | undefined;
  /** The timer that closes it after `keepalive_timeout` idle. */
  idleTimer: NodeJS.Timeout | undefined;
}

/** The HTTP/2 connections to one peer with one set of connection settings (the `PeerConnections` of `grpc_pass`). */
export class H2PeerConnections implements ConnectionOwner<H2Connection> {
  /** Every connection, busy or idle. */
  private readonly connections = new Set<H2Connection>();
  private closing = false;

  constructor(private readonly options: H2ConnectionOptions) {}

  /** Connections open right now (busy and idle), for `worker_connections`. */
  get connected(): number {
    return this.connections.size;
  }

  /**
   * Sends a request (undici's dispatch options: method, path, headers as
   * names and values alternating, body, read timeouts, servername) on an
   * idle connection of the peer or a new one; `handler` hears of it as
   * undici's handlers do.
   */
  dispatch(opts: Dispatcher.DispatchOptions & { servername?: string }, handler: Dispatcher.DispatchHandler): UpstreamRequest {
    const request = new H2Request(opts, this.options.protocol.slice(0, -1), this.options.maxHeaderBytes, handler, (conn, reusable) => this.settle(conn, reusable));
    const idle = this.idleConnection();
    if (idle) request.start(idle);
    else this.open(opts.servername, request);
    return { cancel: (err) => request.cancel(err) };
  }

  /** Closes every connection: idle ones at once, busy ones after their request (reload, shutdown). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.connections].map((conn) => {
      if (this.options.cache?.remove(conn)) {
        this.discard(conn);
        return undefined;
      }
      return new Promise<void>((resolve) => conn.session.close(resolve));
    }));
  }

  /** Closes `conn` at once (evicted from the cache, or not to be kept). */
  discard(conn: H2Connection): void {
    clearTimeout(conn.idleTimer);
    this.connections.delete(conn);
    conn.session.destroy();
  }

  /** The most recently kept idle connection that is still open. */
  private idleConnection(): H2Connection | undefined {
    const { cache } = this.options;
    for (let conn = cache?.take<H2Connection>(this); conn; conn = cache!.take<H2Connection>(this)) {
      clearTimeout(conn.idleTimer);
      if (!conn.session.closed && !conn.session.destroyed && conn.goaway === undefined) return conn;
      this.discard(conn);
    }
    return undefined;
  }

  /** Opens a connection for `request`: the socket, then the session with nginx's preface. */
  private open(servername: string | undefined, request: H2Request): void {
    const { protocol, hostname, port } = this.options;
    this.options.connect({ hostname, host: hostname, protocol, port: String(port), servername, localAddress: null }, (err, socket) => {
      if (err || !socket) {
        request.fail(err ?? new undiciErrors.SocketError('other side closed'));
        return;
      }
      const session = http2().connect(`${protocol}//${hostname}`, {
        createConnection: () => socket as Socket,
        settings: { enablePush: false, initialWindowSize: WINDOW_BYTES },
      });
      const conn: H2Connection = { session, socket: socket as Socket, openedAtMs: Date.now(), requests: 0, goaway: undefined, idleTimer: undefined };
      this.connections.add(conn);
      session.setLocalWindowSize(WINDOW_BYTES);
      session.on('goaway', (errorCode: number, lastStreamId: number) => {
        conn.goaway = { errorCode, lastStreamId };
      });
      // a session's failure reaches its stream, which reports it; an idle one is dropped
      session.on('error', () => undefined);
      session.on('close', () => {
        this.connections.delete(conn);
        if (this.options.cache?.remove(conn)) clearTimeout(conn.idleTimer);
      });
      request.start(conn);
    });
  }

  /** After a request: a connection that may be kept goes to the cache (`ngx_http_upstream_free_keepalive_peer`), any other is closed. */
  private settle(conn: H2Connection, reusable: boolean): void {
    const { cache, keepaliveRequests, keepaliveTimeoutMs, keepaliveTimeMs } = this.options;
    const keep = reusable && cache !== undefined && !this.closing && conn.goaway === undefined && !conn.session.closed
      && !conn.session.destroyed && conn.requests < keepaliveRequests && Date.now() - conn.openedAtMs <= keepaliveTimeMs;
    if (!keep) {
      this.discard(conn);
      return;
    }
    conn.idleTimer = setTimeout(() => {
      if (cache.remove(conn)) this.discard(conn);
    }, keepaliveTimeoutMs);
    conn.idleTimer.unref();
    cache.put(this, conn);
  }
}

/** One request on its way: sent on a connection, its response handed to undici's handler. */
class H2Request {
  private conn: H2Connection | undefined;
  private stream: Http2.ClientHttp2Stream | undefined;
  /** The handler heard of the request's end (`onComplete` or `onError`). */
  private ended = false;
  private cancelled: Error | undefined;
  private responded = false;
  /** The body was sent whole, END_STREAM with it (nginx's `ctx->output_closed`). */
  private bodySent = false;
  private completed = false;
  private trailers: string[] | null = null;
  /** What the stream failed with, if it did (a reset connection's system error is logged as nginx logs it). */
  private streamError: (Error & { code?: string }) | undefined;

  constructor(
    private readonly opts: Dispatcher.DispatchOptions,
    /** `http` or `https`, the `:scheme`. */
    private readonly scheme: string,
    /** `grpc_buffer_size`, the largest response header list taken. */
    private readonly maxHeaderBytes: number,
    private readonly handler: Dispatcher.DispatchHandler,
    /** Called once the stream closed: whether its connection may carry another request. */
    private readonly done: (conn: H2Connection, reusable: boolean) => void,
  ) {}

  /** The connection could not be opened. */
  fail(err: Error): void {
    this.end(err);
  }

  /** Ends the request with `err`, closing its stream and connection (the handler's `onError` gets `err`). */
  cancel(err: Error): void {
    if (this.ended) return;
    this.cancelled = err;
    if (this.stream) this.stream.close(NGHTTP2_CANCEL);
    this.end(err);
  }

  private end(err: Error): void {
    if (this.ended) return;
    this.ended = true;
    (this.opts.body as Readable | null | undefined)?.unpipe?.();
    this.handler.onError?.(err);
  }

  /**
   * Sends the request on `conn`: HEADERS, then the body as DATA, END_STREAM
   * on the last (an empty DATA frame after an empty body). A request
   * without a body (neither a length nor chunks) ends with its HEADERS
   * frame: nginx reads it as a buffered body of nothing
   * (`ngx_http_read_client_request_body` clears `request_body_no_buffering`),
   * and `ngx_http_grpc_create_request` sets END_STREAM on the HEADERS of a
   * buffered request without body; a gRPC server may not answer such a
   * request (grpc's C core: a GET) before its stream ends.
   */
  start(conn: H2Connection): void {
    if (this.ended) {
      this.done(conn, !this.cancelled);
      return;
    }
    this.conn = conn;
    conn.requests++;
    const { opts, handler } = this;
    handler.onConnect?.((err) => this.cancel(err ?? new Error('aborted')));
    meterSocket(conn.socket);
    if (this.ended) {
      this.done(conn, false);
      return;
    }
    let stream: Http2.ClientHttp2Stream;
    try {
      stream = conn.session.request(requestHeaders(opts, this.scheme), { endStream: opts.body === null || opts.body === undefined });
    } catch (err) {
      // a header node's HTTP/2 refuses to send (a connection-specific field, a TE other than trailers)
      this.done(conn, false);
      this.end(err as Error);
      return;
    }
    this.stream = stream;
    const readTimeoutMs = opts.headersTimeout ?? 0;
    if (readTimeoutMs > 0) stream.setTimeout(readTimeoutMs);
    stream.on('timeout', () => {
      const err = this.responded ? new undiciErrors.BodyTimeoutError() : new undiciErrors.HeadersTimeoutError();
      stream.close(NGHTTP2_CANCEL);
      this.end(err);
    });
    stream.on('headers', (headers) => {
      // 1xx: only 103 Early Hints goes on
      const status = Number(headers[HTTP2_HEADER_STATUS]);
      if (status === 103) handler.onHeaders?.(103, rawHeaders(headers), () => undefined, '');
    });
    stream.on('response', (headers, flags) => {
      this.responded = true;
      if (opts.bodyTimeout !== undefined && opts.bodyTimeout !== null && opts.bodyTimeout > 0) stream.setTimeout(opts.bodyTimeout);
      const raw = rawHeaders(headers);
      if (headerListBytes(raw) > this.maxHeaderBytes) {
        stream.close(NGHTTP2_CANCEL);
        this.end(new undiciErrors.HeadersOverflowError());
        return;
      }
      // a HEADERS frame that ends the stream: no body (nginx's content_length_n = 0)
      if ((flags & FLAG_END_STREAM) !== 0 && headers['content-length'] === undefined) {
        raw.push(Buffer.from('content-length'), Buffer.from('0'));
      }
      if (this.ended) return;
      const go = handler.onHeaders?.(Number(headers[HTTP2_HEADER_STATUS]), raw, () => stream.resume(), '');
      if (go === false) stream.pause();
    });
    stream.on('data', (chunk: Buffer) => {
      if (this.ended) return;
      if (handler.onData?.(chunk) === false) stream.pause();
    });
    stream.on('trailers', (headers) => {
      this.trailers = rawHeaders(headers).map((b) => b.toString('latin1'));
    });
    stream.on('end', () => {
      // (a stream whose connection went away ends too, destroyed: 'close' reports it)
      if (this.ended || !this.responded || stream.destroyed) return;
      this.completed = true;
      this.ended = true;
      handler.onComplete?.(this.trailers as unknown as string[] | null);
    });
    stream.on('error', (err) => {
      this.streamError = err;
    });
    stream.on('close', () => {
      const reusable = this.completed && this.bodySent && stream.rstCode === NGHTTP2_NO_ERROR;
      const why = this.ended ? undefined : this.closedWhy(stream);
      this.done(conn, reusable);
      if (why) this.end(why);
    });
    this.sendBody(stream);
  }

  /** Why the stream closed before its response was complete, in the words nginx's gRPC module logs it. */
  private closedWhy(stream: Http2.ClientHttp2Stream): Error {
    if (this.streamError?.code !== undefined && /^E[A-Z]+$/.test(this.streamError.code)) return this.streamError;
    const goaway = this.conn?.goaway;
    if (goaway && stream.id !== undefined && goaway.lastStreamId < stream.id) {
      return new Http2UpstreamError(`upstream sent goaway with error ${goaway.errorCode}`);
    }
    if (stream.rstCode !== undefined && stream.rstCode !== NGHTTP2_NO_ERROR && !this.conn?.session.destroyed) {
      return new Http2UpstreamError(`upstream rejected request with error ${stream.rstCode}`);
    }
    if (stream.rstCode === NGHTTP2_NO_ERROR && !this.conn?.session.closed) {
      return new Http2UpstreamError('upstream rejected request with error 0');
    }
    return new undiciErrors.SocketError('other side closed');
  }

  /** The body: a Buffer, a stream passed as it arrives, or none. */
  private sendBody(stream: Http2.ClientHttp2Stream): void {
    const body = this.opts.body as Buffer | Readable | string | null | undefined;
    const finish = (): void => {
      this.bodySent = true;
    };
    if (body === null || body === undefined) {
      finish();
      return;
    }
    if (typeof body === 'string' || Buffer.isBuffer(body)) {
      stream.end(body, finish);
      return;
    }
    body.on('error', (err) => this.cancel(err));
    body.pipe(stream).on('finish', finish);
  }
}

/** The header list size of fields as `rawHeaders` gives them, with `:status` (RFC 9113, 6.5.2: name, value and 32 for each). */
function headerListBytes(raw: readonly Buffer[]): number {
  let bytes = ':status'.length + 3 + 32;
  for (let k = 0; k + 1 < raw.length; k += 2) bytes += raw[k]!.length + raw[k + 1]!.length + 32;
  return bytes;
}

/** A response's header fields as undici hands them to `onHeaders`: names and values alternating, `:status` left out. */
function rawHeaders(headers: Http2.IncomingHttpHeaders): Buffer[] {
  const raw: Buffer[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name === HTTP2_HEADER_STATUS || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) raw.push(Buffer.from(name, 'latin1'), Buffer.from(v, 'latin1'));
  }
  return raw;
}

/**
 * The request's header block (`ngx_http_grpc_create_request`): `:method`,
 * `:scheme`, `:path`, then `:authority` unless a `host` field is sent
 * (`grpc_set_header Host`), then the fields in order; a name given twice is
 * one field with the values joined, as node's HTTP/2 takes them.
 */
function requestHeaders(opts: Dispatcher.DispatchOptions & { readonly authority?: string }, scheme: string): Http2.OutgoingHttpHeaders {
  const out: Http2.OutgoingHttpHeaders = { ':method': opts.method, ':scheme': scheme, ':path': opts.path };
  const flat = (opts.headers ?? []) as string[];
  let host = false;
  for (let i = 0; i < flat.length; i += 2) if (flat[i]!.toLowerCase() === 'host') host = true;
  if (!host && opts.authority !== undefined) out[':authority'] = opts.authority;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    const value = flat[i + 1]!;
    const had = out[name];
    out[name] = had === undefined ? value : name === 'cookie' ? [...(Array.isArray(had) ? had : [String(had)]), value] : `${String(had)}, ${value}`;
  }
  return out;
}
