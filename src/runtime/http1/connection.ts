/**
 * An HTTP/1.x client connection, read as nginx reads one
 * (`src/http/ngx_http_request.c`, `ngx_http_request_body.c`): the request
 * line and headers into `client_header_buffer_size`, then
 * `large_client_header_buffers` (414 for a request line, 494 for a header
 * line that does not fit one, or a request that fills them all); header
 * lines as `ngx_http_process_request_headers` takes them (invalid names
 * skipped with `ignore_invalid_headers`, `underscores_in_headers`, one
 * `Host`, unique headers, `Content-Length`/`Transfer-Encoding` rules,
 * CONNECT and TRACE refused); one request at a time, pipelined ones after
 * it; the body (a length or chunks) passed on as it is read, or discarded
 * once the response is done; keep-alive, `client_header_timeout`,
 * `keepalive_timeout`, and lingering close. What nginx refuses is refused
 * here with its status and info line (a refusal the phases answer), and
 * never reaches a handler.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import type { LocationConf, ServerSet, VirtualServer } from '../../config/route-table.js';
import type { LogLevel } from '../../log/levels.js';
import { systemErrorText } from '../../os-errors.js';
import type { Refusal } from '../request.js';
import type { ConnectionStat } from '../stub-status.js';
import { findServer } from '../server-names.js';
import { hostPort, validateHost } from '../uri.js';
import { ChunkedParser, HeaderLineParser, ParseResult, parseComplexUri, RequestLineParser } from './parse.js';
import type { DiscardableBody } from '../request-body.js';
import { Http1Target } from './response.js';

/** A request as its line and headers were read (or as far as they were, for a refusal). */
export interface Http1Head {
  readonly method: string;
  /** The request target as received (`$request_uri`). */
  readonly requestUri: string;
  /** `$request`: the request line as received (the line so far, for a refusal while reading it). */
  readonly requestLine: string;
  /** `$server_protocol`: `HTTP/1.1`, `HTTP/1.0`, or '' for HTTP/0.9. */
  readonly protocol: string;
  /** nginx's `http_version`: major * 1000 + minor. */
  readonly httpVersion: number;
  /** Headers with lowercase names (repeated ones joined with `, `, cookies with `; `). */
  readonly headers: IncomingHttpHeaders;
  /** Headers as received: name, value, name, value … */
  readonly rawHeaders: string[];
  /** `$uri` and `$args` as `ngx_http_process_request_uri` makes them. */
  readonly uri: string;
  readonly args: string;
  /** The validated, lowercased host of the request line or Host header, '' when there was none. */
  readonly host: string;
  /** `$request_port`: the port given with that host, '' when none. */
  readonly requestPort: string;
  /** Whether the client asked to keep the connection (`Connection`, or HTTP/1.1 without it). */
  readonly keepalive: boolean;
  /** The request has a body, which is discarded before the connection closes (nginx's `r->lingering_close`). */
  readonly hasBody: boolean;
  /** Bytes of the request line and headers (`$request_length` before the body). */
  readonly headLength: number;
  readonly refusal: Refusal | undefined;
}

/** What an HTTP/1.x connection needs from the engine. */
export interface Http1Owner {
  /** The connection's part in the stub_status counters. */
  readonly stat: ConnectionStat;
  /** The servers of the connection's local address, in the configuration in service. */
  servers(): ServerSet;
  /** A request whose head was read (or refused): it is served, its response going to `out`. */
  request(head: Http1Head, body: Readable, out: Http1Target): void;
  /** A line about the connection, with nginx's connection context (`client: ADDR, server: LISTEN_ADDR`) unless `bare`. */
  log(level: LogLevel, message: string, bare?: boolean): void;
  /**
   * An info line about the request whose head is being read, with nginx's
   * request context (`while reading client request headers, client: …,
   * server: NAME, request: "LINE", host: …`).
   */
  requestLog(message: string, head: { readonly server: VirtualServer; readonly requestLine: string; readonly headers: IncomingHttpHeaders }): void;
}

/** nginx's `ngx_http_client_errors`, by parse result. */
const LINE_ERRORS: Partial<Record<ParseResult, string>> = {
  [ParseResult.InvalidMethod]: 'client sent invalid method',
  [ParseResult.InvalidRequest]: 'client sent invalid request',
  [ParseResult.Invalid09Method]: 'client sent invalid method in HTTP/0.9 request',
  [ParseResult.InvalidVersion]: 'client sent invalid version',
};

/** Headers of which nginx keeps one and refuses a second (`ngx_http_process_unique_header_line`). */
const UNIQUE = new Set([
  'if-modified-since', 'if-unmodified-since', 'if-match', 'if-none-match', 'content-length', 'content-range', 'if-range', 'transfer-encoding', 'expect',
  'authorization',
]);

/** Headers node:http (and jinx's phases after it) keep the first of, dropping repeats. */
const FIRST_ONLY = new Set([
  'age', 'authorization', 'content-length', 'content-type', 'etag', 'expires', 'from', 'host', 'if-modified-since',
  'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after',
  'server', 'user-agent',
]);

/** `NGX_MAX_ERROR_STR` less the room nginx keeps for the rest of a "too long header line" message. */
const TOO_LONG_LINE_TEXT = 2048 - 300;

/** Bytes read ahead of the request being served (pipelined requests, a body not yet wanted) before reading pauses. */
const READ_AHEAD_BYTES = 64 * 1024;

/** The header buffer of a connection between requests. */
const NO_BYTES = Buffer.alloc(0);

const enum Phase { Wait, Line, Headers, Request, Discard, Keepalive, Lingering, Tunnel, Closed }

/** `ngx_atoof`: a non-negative decimal, or -1 for anything else (an empty value, a sign, overflow). */
function parseLength(value: string): number {
  if (value.length === 0 || value.length > 19) return -1;
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i) - 0x30;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n > Number.MAX_SAFE_INTEGER ? -1 : n;
}

/** An HTTP/1.x connection: reads requests one at a time and writes their responses. */
export class Http1Connection {
  private phase = Phase.Wait;
  /** Bytes read and not yet taken, oldest first. */
  private readonly pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The header buffer of the request being read, and what is in it. */
  private buf = NO_BYTES;
  private pos = 0;
  private last = 0;
  /** `large_client_header_buffers` taken by the request being read (`hc->nbusy`). */
  private largeBuffers = 0;
  private line = new RequestLineParser();
  private header = new HeaderLineParser();
  /** What has been read of the request's head. */
  private method = '';
  private requestUri = '';
  private requestLine = '';
  private protocol = '';
  private httpVersion = 0;
  private uri = '';
  private args = '';
  private lineHost: string | undefined;
  private lineHostRaw = '';
  private headers: IncomingHttpHeaders = {};
  private rawHeaders: string[] = [];
  private hostHeader: { name: string; value: string; host: string } | undefined;
  private connectionType: 'close' | 'keep-alive' | undefined;
  private headLength = 0;
  /** The server whose settings apply while the head is read: the default one, then the one the host selects. */
  private server: VirtualServer | undefined;
  /** How the body of the request being served is framed, and what is left of it. */
  private body: { kind: 'length'; remaining: number } | { kind: 'chunked'; parser: ChunkedParser } | undefined;
  private bodyStream: Http1Body | undefined;
  /** The body is read and dropped as it arrives (`ngx_http_discard_request_body`). */
  private discarding = false;
  /** `Expect: 100-continue` not answered yet (`ngx_http_test_expect`). */
  private expectContinue = false;
  /**
   * Bytes of the body read, framing included (`$request_length` after the
   * head); a discarded body's are not counted (`ngx_http_discard_request_body_filter`
   * leaves `r->request_length` as it is).
   */
  bodyBytesRead = 0;
  private target: Http1Target | undefined;
  /** Whether the connection is kept after the response in progress. */
  private keepAfter = false;
  private lingerAfter = false;
  private timer: NodeJS.Timeout | undefined;
  private lingeringDeadline = 0;
  private stopping = false;
  /** Kept alive since its last response: not closed to make room or by a stop before this time (`keepalive_min_timeout`, ms since the epoch). */
  private keptUntilMs = 0;
  /** Kept alive since its last response: closed at this time (`keepalive_timeout`, ms since the epoch). */
  private keepaliveDeadlineMs = 0;

  /** The server is shutting down gracefully (`stop`): responses from now on close the connection. */
  get exiting(): boolean {
    return this.stopping;
  }

  private readonly onData = (chunk: Buffer): void => this.received(chunk);
  private readonly onEnd = (): void => this.ended(undefined);
  private readonly onError = (err: NodeJS.ErrnoException): void => this.ended(err);
  private readonly onClose = (): void => this.closed();

  constructor(
    private readonly socket: Socket,
    private readonly owner: Http1Owner,
    /** Bytes already read from the socket (by the TCP front). */
    first: Buffer | undefined,
    /**
     * When the connection was accepted, in ms since the epoch: the first
     * request's `client_header_timeout` runs from then, through the TLS
     * handshake and the first bytes, as nginx's one timer set in
     * `ngx_http_init_connection` (neither the handshake nor a read resets it).
     */
    acceptedAtMs: number,
    /** The client's address, for `client ADDR closed keepalive connection`. */
    private readonly peerAddr: string,
  ) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    this.armTimer(Math.max(acceptedAtMs + this.defaultServer().conf.clientHeaderTimeoutMs - Date.now(), 0), () => this.headerTimedOut());
    // reading goes on while a request is served (bounded by READ_AHEAD_BYTES), so that a client that leaves is seen
    socket.resume();
    if (first && first.length > 0) this.received(first);
  }

  /**
   * No request is in progress (waiting for the first one, or kept alive
   * between two past its `keepalive_min_timeout`): the connection may be
   * closed to make room.
   */
  get idle(): boolean {
    return this.phase === Phase.Wait || (this.phase === Phase.Keepalive && Date.now() >= this.keptUntilMs);
  }

  /**
   * Graceful shutdown or reload: a kept-alive connection closes now, a busy
   * one after its response; one still waiting for its first request is
   * served (without keep-alive) or times out, as an exiting nginx worker
   * leaves it (`ngx_close_idle_connections` does not reach it).
   */
  stop(): void {
    this.stopping = true;
    if (this.phase !== Phase.Keepalive) return;
    // ngx_http_finalize_connection: within keepalive_min_timeout the connection stays kept alive, a request on it served with Connection: close
    const left = Math.min(this.keptUntilMs, this.keepaliveDeadlineMs) - Date.now();
    if (left > 0) this.armTimer(left, () => this.close());
    else this.close();
  }

  /** Closes the connection at once. */
  close(): void {
    this.phase = Phase.Closed;
    this.socket.destroy();
  }

  private defaultServer(): VirtualServer {
    return this.owner.servers().defaultServer;
  }

  private armTimer(ms: number, fire: () => void): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(fire, ms);
  }

  private received(chunk: Buffer): void {
    if (this.phase === Phase.Closed || this.phase === Phase.Tunnel) return;
    if (this.phase === Phase.Lingering) {
      this.lingered();
      return;
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    switch (this.phase) {
      case Phase.Wait:
      case Phase.Keepalive:
        this.nextRequest();
        break;
      case Phase.Line:
      case Phase.Headers:
        this.readHead();
        break;
      case Phase.Request:
        if (this.discarding) this.dropBody();
        else if (this.bodyStream?.wanted) this.pumpBody();
        if (this.pendingBytes > READ_AHEAD_BYTES) this.socket.pause();
        break;
      case Phase.Discard:
        this.discard();
        break;
    }
  }

  /**
   * A request begins with the bytes read and reads its head as far as they
   * go. After keep-alive (`ngx_http_keepalive_handler` deletes the
   * keep-alive timer), `client_header_timeout` runs only when the head is
   * not all there: `ngx_http_read_request_header` sets it when a read finds
   * nothing more. The first request's runs from the connection's start
   * (`ngx_http_init_connection`).
   */
  private nextRequest(): void {
    const afterKeepalive = this.phase === Phase.Keepalive;
    if (afterKeepalive) clearTimeout(this.timer);
    this.startRequest();
    this.readHead();
    if (afterKeepalive && (this.phase === Phase.Line || this.phase === Phase.Headers)) {
      this.armTimer(this.defaultServer().conf.clientHeaderTimeoutMs, () => this.headerTimedOut());
    }
  }

  /** A new request begins (`ngx_http_create_request`): a fresh header buffer of `client_header_buffer_size`. */
  private startRequest(): void {
    this.owner.stat.requestCreated();
    this.phase = Phase.Line;
    this.forgetRequest();
    this.buf = Buffer.allocUnsafe(this.defaultServer().conf.clientHeaderBufferSizeBytes);
    this.line = new RequestLineParser();
    this.header = new HeaderLineParser();
  }

  /**
   * Drops what the last request held: its header buffer, header, server,
   * body and response. A kept-alive connection waits holding none of it, as
   * `ngx_http_set_keepalive` frees the request and its header buffer.
   */
  private forgetRequest(): void {
    this.buf = NO_BYTES;
    this.pos = this.last = 0;
    this.largeBuffers = 0;
    this.method = this.requestUri = this.requestLine = this.protocol = this.uri = this.args = this.lineHostRaw = '';
    this.httpVersion = 0;
    this.lineHost = undefined;
    this.headers = {};
    this.rawHeaders = [];
    this.hostHeader = undefined;
    this.connectionType = undefined;
    this.headLength = 0;
    this.server = undefined;
    this.body = undefined;
    this.bodyStream = undefined;
    this.discarding = false;
    this.invalidBody = false;
    this.expectContinue = false;
    this.bodyBytesRead = 0;
    this.chunkedReceived = 0;
    this.target = undefined;
    this.finalConf = undefined;
  }

  /** Moves pending bytes into the header buffer, as far as it has room (nginx's `recv` into `[last, end)`). */
  private fill(): boolean {
    let room = this.buf.length - this.last;
    let moved = false;
    while (room > 0 && this.pending.length > 0) {
      const chunk = this.pending[0]!;
      const n = Math.min(room, chunk.length);
      chunk.copy(this.buf, this.last, 0, n);
      this.last += n;
      room -= n;
      this.pendingBytes -= n;
      if (n === chunk.length) this.pending.shift();
      else this.pending[0] = chunk.subarray(n);
      moved = true;
    }
    return moved;
  }

  /** Reads the request line and headers from what has arrived (`ngx_http_process_request_line`, `…_headers`). */
  private readHead(): void {
    for (;;) {
      if (this.pos === this.last) {
        if (this.last === this.buf.length && !this.largeBuffer()) return;
        if (!this.fill()) return;
      }
      if (this.phase === Phase.Line) {
        const { result, pos } = this.line.parse(this.buf, this.pos, this.last);
        this.pos = pos;
        if (result === ParseResult.Again) continue;
        if (result !== ParseResult.Ok) {
          // an HTTP/0.9 line with another method than GET is answered the HTTP/0.9 way (a page alone)
          if (result === ParseResult.Invalid09Method) this.httpVersion = this.line.httpVersion;
          this.refuse(result === ParseResult.InvalidVersion ? 505 : 400, LINE_ERRORS[result]!, 'request line', this.partialLine());
          return;
        }
        if (!this.requestLineDone()) return;
        if (this.httpVersion < 1000) {
          this.headDone();
          return;
        }
        this.phase = Phase.Headers;
        continue;
      }
      const server = this.server ?? this.defaultServer();
      const { result, pos } = this.header.parse(this.buf, this.pos, this.last, server.conf.underscoresInHeaders);
      this.pos = pos;
      if (result === ParseResult.Again) continue;
      if (result === ParseResult.Done) {
        this.headLength += this.pos - this.header.nameStart;
        this.headDone();
        return;
      }
      if (result === ParseResult.InvalidHeader) {
        const h = this.header;
        const text = this.buf.toString('latin1', h.nameStart, h.valueEnd);
        const code = this.buf[h.valueEnd]!.toString(16).padStart(2, '0');
        this.refuse(400, `client sent invalid header line: "${text}\\x${code}..."`, 'request headers');
        return;
      }
      this.headLength += this.pos - this.header.nameStart;
      if (!this.headerLine(server)) return;
    }
  }

  /**
   * `ngx_http_alloc_large_header_buffer`: the header buffer is full with the
   * head incomplete. Between two lines (or before any) reading goes on in a
   * new buffer; a line in progress moves to one, unless it is already as
   * long as one (414 for the request line, 494 for a header line) or every
   * buffer is taken (494). Returns false when the request was refused.
   */
  private largeBuffer(): boolean {
    const requestLine = this.phase === Phase.Line;
    const parser = requestLine ? this.line : this.header;
    if (requestLine && !this.line.inProgress) {
      // the client fills up the buffer with "\r\n"
      this.pos = this.last = 0;
      return true;
    }
    const old = requestLine ? this.line.requestStart : this.header.nameStart;
    const server = this.server ?? this.defaultServer();
    const { count, sizeBytes } = server.conf.largeClientHeaderBuffers;
    if ((parser.inProgress && this.pos - old >= sizeBytes) || this.largeBuffers >= count) {
      if (requestLine) {
        this.refuse(414, 'client sent too long URI', 'request line', this.buf.toString('latin1', this.line.requestStart, this.buf.length));
      } else if (this.header.nameStart < 0) {
        this.refuse(494, 'client sent too large request', 'request headers');
      } else {
        const end = Math.min(this.buf.length, this.header.nameStart + TOO_LONG_LINE_TEXT);
        this.refuse(494, `client sent too long header line: "${this.buf.toString('latin1', this.header.nameStart, end)}..."`, 'request headers');
      }
      return false;
    }
    this.largeBuffers++;
    const next = Buffer.allocUnsafe(sizeBytes);
    if (!parser.inProgress) {
      this.buf = next;
      this.pos = this.last = 0;
      return true;
    }
    this.buf.copy(next, 0, old, this.pos);
    parser.rebase(-old);
    this.buf = next;
    this.pos = this.last = this.pos - old;
    return true;
  }

  /** The request line so far, up to a CR or LF (`$request` of a request refused while its line was read). */
  private partialLine(): string {
    const start = this.line.requestStart;
    if (start < 0) return '';
    let end = start;
    while (end < this.last && this.buf[end] !== 0x0d && this.buf[end] !== 0x0a) end++;
    return this.buf.toString('latin1', start, end);
  }

  /**
   * The request line was read (`ngx_http_process_request_line`): its parts,
   * the URI as `ngx_http_process_request_uri` makes it, and the host of an
   * absolute target. Returns false when the request was refused.
   */
  private requestLineDone(): boolean {
    const l = this.line;
    const b = this.buf;
    this.requestLine = b.toString('latin1', l.requestStart, l.requestEnd);
    this.headLength = this.pos - l.requestStart;
    this.method = b.toString('latin1', l.requestStart, l.methodEnd + 1);
    this.httpVersion = l.httpVersion;
    this.protocol = l.protocolStart >= 0 ? b.toString('latin1', l.protocolStart, l.requestEnd) : '';
    this.requestUri = l.uriStart >= 0 ? b.toString('latin1', l.uriStart, l.uriEnd) : '';
    const rawUri = this.requestUri;
    if (l.complexUri || l.quotedUri || l.emptyPathInUri) {
      const parsed = parseComplexUri(rawUri, (this.defaultServer()).conf.mergeSlashes, l.emptyPathInUri);
      if (!parsed) {
        this.refuse(400, 'client sent invalid request', 'request line');
        return false;
      }
      this.uri = parsed.uri;
      this.args = parsed.args ?? '';
    } else {
      const q = l.argsStart >= 0 ? l.argsStart - 1 - l.uriStart : rawUri.length;
      this.uri = rawUri.slice(0, q);
      this.args = l.argsStart >= 0 ? rawUri.slice(q + 1) : '';
    }
    if (l.hostEnd >= 0) {
      this.lineHostRaw = b.toString('latin1', l.hostStart, l.hostEnd);
      const host = validateHost(this.lineHostRaw);
      if (host === undefined) {
        this.refuse(400, 'client sent invalid host in request line', 'request line');
        return false;
      }
      this.lineHost = host;
      this.server = findServer(this.owner.servers(), host);
    }
    this.phase = Phase.Headers;
    return true;
  }

  /**
   * One header line (`ngx_http_process_request_headers` and the handlers of
   * `ngx_http_headers_in`). Returns false when the request was refused.
   */
  private headerLine(server: VirtualServer): boolean {
    const h = this.header;
    const name = this.buf.toString('latin1', h.nameStart, h.nameEnd);
    const value = this.buf.toString('latin1', h.valueStart, h.valueEnd);
    if (h.invalid && server.conf.ignoreInvalidHeaders) {
      this.owner.requestLog(`client sent invalid header line: "${this.buf.toString('latin1', h.nameStart, h.valueEnd)}"`, {
        server, requestLine: this.requestLine, headers: this.headers,
      });
      return true;
    }
    if (this.rawHeaders.length >= 2 * server.conf.maxHeaders) {
      this.refuse(494, 'client sent too many header lines', 'request headers');
      return false;
    }
    const lower = name.toLowerCase();
    this.rawHeaders.push(name, value);
    const seen = this.headers[lower];
    if (lower === 'host') {
      if (this.hostHeader) {
        const first = this.hostHeader;
        this.refuse(400, `client sent duplicate host header: "${name}: ${value}", previous value: "${first.name}: ${first.value}"`, 'request headers');
        return false;
      }
      const host = validateHost(value);
      if (host === undefined) {
        this.headers.host = value;
        this.refuse(400, 'client sent invalid host header', 'request headers');
        return false;
      }
      this.hostHeader = { name, value, host };
      if (!this.lineHost) this.server = findServer(this.owner.servers(), host);
    } else if (UNIQUE.has(lower) && seen !== undefined) {
      const first = this.firstRaw(lower);
      this.refuse(400, `client sent duplicate header line: "${name}: ${value}", previous value: "${first[0]}: ${first[1]}"`, 'request headers');
      return false;
    } else if (lower === 'connection') {
      const v = value.toLowerCase();
      if (v.includes('close')) this.connectionType = 'close';
      else if (v.includes('keep-alive')) this.connectionType = 'keep-alive';
    }
    if (seen === undefined) this.headers[lower] = lower === 'set-cookie' ? [value] : value;
    else if (lower === 'set-cookie') (seen as string[]).push(value);
    else if (!FIRST_ONLY.has(lower)) this.headers[lower] = `${seen as string}${lower === 'cookie' ? '; ' : ', '}${value}`;
    return true;
  }

  /** The first header line named `lower`, as received. */
  private firstRaw(lower: string): [string, string] {
    for (let i = 0; i < this.rawHeaders.length; i += 2) {
      if (this.rawHeaders[i]!.toLowerCase() === lower) return [this.rawHeaders[i]!, this.rawHeaders[i + 1]!];
    }
    return ['', ''];
  }

  /**
   * The head was read (`ngx_http_process_request_header`): a Host for
   * HTTP/1.1, a valid `Content-Length`, `Transfer-Encoding: chunked` only
   * (over HTTP/1.1, without a length), no CONNECT or TRACE; then the
   * request is served.
   */
  private headDone(): void {
    const headers = this.headers;
    if (!this.hostHeader && this.httpVersion > 1000) {
      this.refuse(400, 'client sent HTTP/1.1 request without "Host" header', 'request headers');
      return;
    }
    let length = -1;
    const cl = headers['content-length'];
    if (cl !== undefined) {
      length = parseLength(cl);
      if (length < 0) {
        this.refuse(400, 'client sent invalid "Content-Length" header', 'request headers');
        return;
      }
    }
    let chunked = false;
    const te = headers['transfer-encoding'];
    if (te !== undefined) {
      const first = te as string;
      if (this.httpVersion < 1001) {
        this.refuse(400, 'client sent HTTP/1.0 request with "Transfer-Encoding" header', 'request headers');
        return;
      }
      if (first.length !== 7 || first.toLowerCase() !== 'chunked') {
        this.refuse(501, `client sent unknown "Transfer-Encoding": "${first}"`, 'request headers');
        return;
      }
      if (cl !== undefined) {
        this.refuse(400, 'client sent "Content-Length" and "Transfer-Encoding" headers at the same time', 'request headers');
        return;
      }
      chunked = true;
    }
    if (this.method === 'CONNECT' || this.method === 'TRACE') {
      this.refuse(405, `client sent ${this.method} method`, 'request headers');
      return;
    }
    if (chunked) this.body = { kind: 'chunked', parser: new ChunkedParser() };
    else if (length > 0) this.body = { kind: 'length', remaining: length };
    const expect = headers.expect;
    this.expectContinue = this.httpVersion >= 1001 && typeof expect === 'string' && expect.toLowerCase() === '100-continue';
    const keepalive = this.connectionType === 'close' ? false : this.connectionType === 'keep-alive' ? true : this.httpVersion > 1000;
    this.serve(keepalive, undefined);
  }

  /**
   * A request nginx refuses while reading its head: the phases answer with
   * `status` (or, `silent`, only log it), and the connection closes after.
   */
  private refuse(status: number, message: string, reading: Refusal['reading'], requestLine?: string, silent = false): void {
    if (requestLine !== undefined) this.requestLine = requestLine;
    this.body = undefined;
    this.serve(false, { status, message, reading, silent });
  }

  /** Hands the request to the engine; what is left of the header buffer comes first in what is read next. */
  private serve(keepalive: boolean, refusal: Refusal | undefined): void {
    clearTimeout(this.timer);
    this.phase = Phase.Request;
    this.prereadBytes = this.last - this.pos;
    if (this.pos < this.last) {
      this.pending.unshift(this.buf.subarray(this.pos, this.last));
      this.pendingBytes += this.last - this.pos;
    }
    this.pos = this.last = 0;
    const host = this.lineHost ?? this.hostHeader?.host ?? '';
    const head: Http1Head = {
      method: this.method,
      requestUri: this.requestUri,
      requestLine: this.requestLine,
      protocol: this.protocol,
      httpVersion: this.httpVersion,
      headers: this.headers,
      rawHeaders: this.rawHeaders,
      uri: this.uri,
      args: this.args,
      host,
      requestPort: this.lineHost !== undefined ? hostPort(this.lineHostRaw) : this.hostHeader ? hostPort(this.hostHeader.value) : '',
      keepalive,
      hasBody: this.body !== undefined,
      headLength: this.headLength,
      refusal,
    };
    const target = new Http1Target(this.socket, this, { method: this.method, httpVersion: this.httpVersion || 1000 }, this.headers.upgrade !== undefined);
    this.target = target;
    this.bodyStream = new Http1Body(this);
    if (refusal) this.socket.pause();
    // ngx_http_process_request (a refused request is finalized while it is read)
    if (!refusal) this.owner.stat.requestProcessed();
    this.owner.request(head, this.bodyStream, target);
  }

  /** Whether the body of the request being served has more to come. */
  private get bodyOpen(): boolean {
    return this.body !== undefined;
  }

  /**
   * Passes body bytes to the body stream while it wants them, from what was
   * read; reads on when more are needed. nginx sends `HTTP/1.1 100 Continue`
   * before it first reads a body a client is waiting to send
   * (`ngx_http_test_expect`).
   */
  pumpBody(force = false): void {
    const stream = this.bodyStream;
    if (!stream || this.discarding) return;
    this.continueIfExpected();
    // what one pass takes is delivered as one piece, as nginx passes on what one read brought
    // (a chunked body's chunks become one chunk upstream)
    const pieces: Buffer[] = [];
    const deliver = (): void => {
      if (pieces.length > 0) stream.deliver(pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces));
    };
    while (stream.wanted || force) {
      if (!this.body) {
        deliver();
        stream.finish();
        return;
      }
      const data = this.takeBody();
      if (data === 'again') {
        deliver();
        this.socket.resume();
        return;
      }
      if (data === 'invalid') {
        this.body = undefined;
        this.invalidBody = true;
        deliver();
        stream.fail(400, 'client sent invalid chunked body');
        return;
      }
      if (data === 'too-large') {
        deliver();
        stream.fail(413, `client intended to send too large chunked body: ${this.chunkedReceived}+${(this.body as { parser: ChunkedParser }).parser.size} bytes`);
        return;
      }
      if (data !== undefined) pieces.push(data);
    }
    deliver();
  }

  /** Whether the body's end has been read (what came is delivered or being delivered); does not read on. */
  bodyEndRead(): boolean {
    return this.bodyStream !== undefined && !this.discarding && this.body === undefined;
  }

  /**
   * The next piece of body data: bytes of the length left, or of chunk data
   * (the chunked parser takes the framing); undefined when the framing was
   * all there was, 'again' when nothing more has arrived, 'invalid' for a
   * chunked body nginx refuses. The body's end leaves `body` unset.
   */
  private takeBody(): Buffer | undefined | 'again' | 'invalid' | 'too-large' {
    const body = this.body!;
    const chunk = this.pending[0];
    if (!chunk) return 'again';
    if (body.kind === 'length') {
      const n = Math.min(body.remaining, chunk.length);
      const data = this.consume(n);
      body.remaining -= n;
      this.countBody(n);
      if (body.remaining === 0) this.body = undefined;
      return data;
    }
    const parser = body.parser;
    if (parser.size > 0 && this.chunkDataReady) {
      const n = Math.min(parser.size, chunk.length);
      parser.take(n);
      this.countBody(n);
      this.chunkedReceived += n;
      if (parser.size === 0) this.chunkDataReady = false;
      return this.consume(n);
    }
    const { result, pos } = parser.parse(chunk, 0, chunk.length);
    this.countBody(pos);
    this.consume(pos);
    if (result === ParseResult.Invalid) {
      // nginx counts the body bytes that came with the head only once they passed its chunked filter
      if (this.bodyBytesRead <= this.prereadBytes) this.bodyBytesRead = 0;
      return 'invalid';
    }
    if (result === ParseResult.Done) {
      this.body = undefined;
      return undefined;
    }
    if (result === ParseResult.Ok) {
      this.chunkDataReady = true;
      // ngx_http_request_body_chunked_filter: client_max_body_size is checked at each chunk's size
      const max = this.discarding ? 0 : this.bodyStream?.maxBytes ?? 0;
      if (max > 0 && max - this.chunkedReceived < parser.size) return 'too-large';
    }
    return undefined;
  }

  private countBody(n: number): void {
    if (!this.discarding) this.bodyBytesRead += n;
  }

  /** Data bytes of a chunked body read so far (nginx's `content_length_n` while it reads chunks). */
  private chunkedReceived = 0;
  /** Bytes of the body that arrived with the head (nginx's preread part of `header_in`). */
  private prereadBytes = 0;

  /** The chunked parser stopped at chunk data not yet taken. */
  private chunkDataReady = false;

  /** Takes `n` bytes off the front of the first pending chunk. */
  private consume(n: number): Buffer {
    const chunk = this.pending[0]!;
    this.pendingBytes -= n;
    if (n === chunk.length) {
      this.pending.shift();
      return chunk;
    }
    this.pending[0] = chunk.subarray(n);
    return chunk.subarray(0, n);
  }

  /**
   * `ngx_http_test_expect`: a client that waits for `100 Continue` before it
   * sends its body gets it once, when the body is first read or discarded,
   * or before the response (whose handler discarded the body).
   */
  continueIfExpected(): void {
    if (!this.expectContinue) return;
    this.expectContinue = false;
    this.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
  }

  /** A client waiting for `100 Continue` does not get it for this request (nginx's `r->expect_tested` set without a test). */
  forgoContinue(): void {
    this.expectContinue = false;
  }

  /**
   * `ngx_http_discard_request_body`, for a handler that does not read the
   * body: from now on it is read and dropped as it arrives. Returns 400
   * when what has arrived is an invalid chunked body (the connection then
   * closes after the response).
   */
  discardBody(): number | undefined {
    if (this.phase !== Phase.Request || this.discarding || this.bodyStream?.reading) return undefined;
    this.continueIfExpected();
    this.discarding = true;
    this.bodyStream?.detach();
    return this.dropBody() ? undefined : 400;
  }

  /** Drops what has arrived of a body being discarded; false (the body unset) when it is an invalid chunked body. */
  private dropBody(): boolean {
    while (this.body) {
      const data = this.takeBody();
      if (data === 'again') {
        this.socket.resume();
        return true;
      }
      if (data === 'invalid') {
        this.body = undefined;
        this.invalidBody = true;
        return false;
      }
    }
    return true;
  }


  /** The body turned out to be an invalid chunked body: the connection closes after the response. */
  private invalidBody = false;

  /**
   * Passes every body byte already read to the body stream, whatever its
   * room, and tells whether that was the whole body (node's
   * `IncomingMessage.complete`; nginx's body preread with the header).
   */
  bodyArrived(): boolean {
    if (!this.bodyStream || this.discarding) return false;
    if (this.body) this.pumpBody(true);
    return this.body === undefined;
  }

  /** The client is reading the body no more for now: reading pauses once enough is buffered. */
  bodyPaused(): void {
    if (this.pendingBytes > READ_AHEAD_BYTES) this.socket.pause();
  }

  /**
   * The response ended. The rest of the body is read and dropped first
   * (`ngx_http_discard_request_body`); then the connection is kept for the
   * next request, or closed (lingering when a body may still be coming).
   */
  responseDone(keepalive: boolean, conf: LocationConf | undefined): void {
    if (this.phase !== Phase.Request) return;
    this.finalConf = conf;
    this.keepAfter = keepalive && !this.stopping && !this.invalidBody;
    this.lingerAfter = this.bodyOpen || this.invalidBody;
    this.bodyStream?.detach();
    if (this.bodyOpen) {
      this.phase = Phase.Discard;
      const conf = this.requestConf();
      this.lingeringDeadline = Date.now() + conf.lingering.timeMs;
      this.socket.resume();
      this.discard();
      return;
    }
    this.afterRequest();
  }

  /** Reads and drops body bytes, `lingering_timeout` allowed between reads, until the body ends or `lingering_time` passes. */
  private discard(): void {
    while (this.body) {
      const data = this.takeBody();
      if (data === 'invalid' || data === 'too-large') {
        this.close();
        return;
      }
      if (data === 'again') {
        this.lingered();
        return;
      }
    }
    clearTimeout(this.timer);
    this.afterRequest();
  }

  /**
   * `ngx_http_finalize_connection`: keep-alive, with the next pipelined
   * request served next (deferred, as nginx posts it); else lingering close
   * (`ngx_http_set_lingering_close`) when a body was refused or more bytes
   * are waiting, or a plain close.
   */
  private afterRequest(): void {
    const conf = this.requestConf();
    if (this.clientEnded) {
      this.phase = Phase.Closed;
      this.socket.destroySoon();
      return;
    }
    if (this.keepAfter) {
      this.phase = Phase.Keepalive;
      this.socket.resume();
      // ngx_http_set_keepalive frees the request; without a pipelined one the connection is idle
      this.owner.stat.requestFreed();
      if (this.pending.length > 0) {
        setImmediate(() => {
          if (this.phase !== Phase.Keepalive || this.pending.length === 0) return;
          this.nextRequest();
        });
        return;
      }
      this.owner.stat.reusable(true);
      const now = Date.now();
      this.keptUntilMs = now + conf.keepaliveMinTimeoutMs;
      this.keepaliveDeadlineMs = now + conf.keepaliveTimeoutMs;
      this.armTimer(conf.keepaliveTimeoutMs, () => this.close());
      this.forgetRequest();
      return;
    }
    const { close, timeMs, timeoutMs } = conf.lingering;
    if (close === 'always' || (close === 'on' && (this.lingerAfter || this.pendingBytes > 0))) {
      this.phase = Phase.Lingering;
      this.pending.length = 0;
      this.pendingBytes = 0;
      this.lingeringDeadline = Date.now() + timeMs;
      this.socket.end();
      this.socket.resume();
      this.armTimer(Math.min(timeoutMs, timeMs), () => this.close());
      return;
    }
    this.phase = Phase.Closed;
    this.socket.destroySoon();
  }

  /**
   * Waiting for more bytes while discarding a body or lingering: the
   * connection closes after `lingering_timeout` without any, or once
   * `lingering_time` has passed.
   */
  private lingered(): void {
    const conf = this.requestConf();
    const left = this.lingeringDeadline - Date.now();
    if (left <= 0) {
      this.close();
      return;
    }
    this.armTimer(Math.min(conf.lingering.timeoutMs, left), () => this.close());
  }

  /** The response was given up: the connection closes (flushed first, or reset). */
  responseAborted(how: 'flush' | 'reset' | undefined): void {
    this.phase = Phase.Closed;
    clearTimeout(this.timer);
    Http1Target.destroy(this.socket, how);
  }

  /** A 101 response went out: the socket leaves HTTP, with the bytes read past the request put back. */
  upgraded(): Duplex {
    this.phase = Phase.Tunnel;
    clearTimeout(this.timer);
    this.socket.off('data', this.onData).off('end', this.onEnd).off('error', this.onError).off('close', this.onClose);
    this.socket.pause();
    for (let i = this.pending.length - 1; i >= 0; i--) this.socket.unshift(this.pending[i]!);
    this.pending.length = 0;
    this.pendingBytes = 0;
    return this.socket;
  }

  /**
   * `client_header_timeout` passed: before any request, the connection
   * closes with `client timed out … while waiting for request`; during one,
   * the request is logged as 408 (no response), with the timed-out line.
   */
  private headerTimedOut(): void {
    const timedOut = `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`;
    const reset = this.requestConf().resetTimedoutConnection;
    if (this.phase === Phase.Wait) {
      this.owner.log('info', `${timedOut} while waiting for request`);
      this.phase = Phase.Closed;
      Http1Target.destroy(this.socket, reset ? 'reset' : undefined);
      return;
    }
    if (this.phase !== Phase.Line && this.phase !== Phase.Headers) return;
    const reading = this.phase === Phase.Line ? 'request line' : 'request headers';
    this.refuse(408, timedOut, reading, this.phase === Phase.Line ? this.partialLine() : undefined, true);
    this.phase = Phase.Closed;
    Http1Target.destroy(this.socket, reset ? 'reset' : undefined);
  }

  /**
   * The client closed its side (or the connection failed): logged as nginx
   * logs it for the phase the connection is in, and a request in progress
   * hears of it.
   */
  private ended(err: NodeJS.ErrnoException | undefined): void {
    switch (this.phase) {
      case Phase.Wait:
        if (!err) this.owner.log('info', 'client closed connection while waiting for request');
        break;
      case Phase.Keepalive:
        if (!err) this.owner.log('info', `client ${this.peerAddr} closed keepalive connection`, true);
        break;
      case Phase.Line:
      case Phase.Headers: {
        const reading = this.phase === Phase.Line ? 'request line' : 'request headers';
        const message = err ? `recv() failed (${systemErrorText(err)})` : 'client prematurely closed connection';
        this.refuse(400, message, reading, this.phase === Phase.Line ? this.partialLine() : undefined, true);
        break;
      }
      case Phase.Request:
        if (!err) {
          // the client shut down its side: the response goes on (a proxied one is cut, as nginx's
          // check of a broken connection cuts it), the connection closes after it
          this.clientEnded = true;
          if (this.body && !this.discarding) this.bodyStream?.aborted(undefined);
          this.target?.clientHalfClosed();
          return;
        }
        this.bodyStream?.aborted(err);
        this.target?.clientGone(err);
        break;
      default:
        break;
    }
    this.phase = Phase.Closed;
    clearTimeout(this.timer);
    this.socket.destroy();
  }

  /**
   * The settings that end the request in progress: its location's, once its
   * response went out (`keepalive_timeout`, `lingering_*`), else its server's.
   */
  private requestConf(): LocationConf {
    return this.finalConf ?? (this.server ?? this.defaultServer()).conf;
  }

  private finalConf: LocationConf | undefined;

  /** The client shut down its side while a request was served: no keep-alive after it. */
  private clientEnded = false;

  private closed(): void {
    clearTimeout(this.timer);
    if (this.phase === Phase.Request) {
      this.bodyStream?.aborted(undefined);
      this.target?.clientGone(undefined);
    }
    this.phase = Phase.Closed;
  }
}

/**
 * A request body as a stream: bytes of the length, or chunk data without
 * the framing, as the connection reads them. Errors carry nginx's reason
 * (`client sent invalid chunked body`, 400); a client that goes away emits
 * `aborted` first.
 */
export class Http1Body extends Readable implements DiscardableBody {
  /** The stream asked for data and has room for it. */
  wanted = false;
  /** Reading has begun (a handler consumes the body). */
  reading = false;
  /** `client_max_body_size` for a chunked body, checked at each chunk's size (0: no limit). */
  maxBytes = 0;
  private detached = false;

  constructor(private readonly conn: Http1Connection) {
    super({ highWaterMark: 64 * 1024 });
    // a handler that reads the body hears of its failure; one that does not is not failed by it
    this.on('error', () => undefined);
  }

  override _read(): void {
    if (this.detached) return;
    this.wanted = true;
    this.reading = true;
    this.conn.pumpBody();
  }

  discard(): number | undefined {
    return this.conn.discardBody();
  }

  forgoContinue(): void {
    this.conn.forgoContinue();
  }

  /** Whether the whole body has arrived (what had, is now in the stream's buffer). */
  get complete(): boolean {
    return this.conn.bodyArrived();
  }

  /** Whether the connection has read the body's end: the data now delivered is the last (reads nothing). */
  get endRead(): boolean {
    return this.conn.bodyEndRead();
  }

  /** Body bytes from the connection. */
  deliver(data: Buffer): void {
    if (!this.push(data)) {
      this.wanted = false;
      this.conn.bodyPaused();
    }
  }

  /** The body ended. */
  finish(): void {
    this.wanted = false;
    this.push(null);
  }

  /** The body is refused as nginx refuses it: `status` (400, 413) with `message`, an error line. */
  fail(status: number, message: string): void {
    this.wanted = false;
    this.destroy(Object.assign(new Error(message), { status }));
  }

  /** The connection went away before the body ended. */
  aborted(err: NodeJS.ErrnoException | undefined): void {
    if (this.readableEnded || this.destroyed) return;
    this.wanted = false;
    this.emit('aborted');
    this.destroy(err ?? Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  }

  /** The response is done: the connection reads (and drops) the rest itself. */
  detach(): void {
    this.detached = true;
    this.wanted = false;
  }
}
