/**
 * An HTTP/2 client connection, read and written as nginx's
 * `src/http/v2/ngx_http_v2.c` does: the preface, then frames (SETTINGS,
 * HEADERS with CONTINUATION, DATA with padding, PRIORITY, RST_STREAM, PING,
 * GOAWAY, WINDOW_UPDATE; unknown types skipped), nginx's checks on each with
 * its info lines (`client sent … while processing HTTP/2 connection`) and
 * error codes (GOAWAY for a connection error, RST_STREAM for a stream's),
 * HPACK decoding against the connection's dynamic table, streams with their
 * windows both ways, `http2_max_concurrent_streams`, `http2_body_preread_size`,
 * `large_client_header_buffers` as the header limits, `keepalive_requests`,
 * `keepalive_time`, `keepalive_timeout` and `client_header_timeout` on the
 * connection, GOAWAY then lingering close (`ngx_http_v2_lingering_close`).
 * Each stream's request goes to the phases like an HTTP/1.x one; its
 * response is written by an `Http2Target` (`response.ts`).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { Readable } from 'node:stream';
import type { VirtualServer } from '../../config/route-table.js';
import type { LogLevel } from '../../log/levels.js';
import { systemErrorText } from '../../os-errors.js';
import type { ClientRequestHead } from '../phases.js';
import { InTransit } from '../in-transit.js';
import type { DiscardableBody } from '../request-body.js';
import type { HttpRequestState, Refusal } from '../request.js';
import { RequestStage, type ConnectionStat } from '../stub-status.js';
import {
  DEFAULT_FRAME_SIZE, DEFAULT_WEIGHT, DEFAULT_WINDOW, FLAG, FRAME, FRAME_HEADER_BYTES, frameHeader, MAX_FRAME_SIZE, MAX_WINDOW, SETTINGS_PARAMS, uint32,
} from './frames.js';
import { H2_ERROR, HpackDecoder, type HpackError } from './hpack.js';
import { Http2Target } from './response.js';
import { writeReleasing } from '../write-copies.js';
import { normalizePath, validateHost } from '../uri.js';

/** The client connection preface (RFC 9113 section 3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** What a connection may read beyond 8 times its payload before it is a flood (`ngx_http_v2_read_handler`: 1048576). */
const FLOOD_SLACK_BYTES = 1024 * 1024;

/** What a connection needs from the engine. */
export interface Http2Owner {
  /** The connection's server (`hc->conf_ctx`): the default server of its address, or the one its SNI name chose. */
  readonly server: VirtualServer;
  /** Whether the server is shutting down or reloading: the connection is to end with GOAWAY once its streams are done. */
  readonly exiting: boolean;
  /** The connection's part in the stub_status counters; its streams' requests count there too. */
  readonly stat: ConnectionStat;
  /** A stream's request whose header block was read (or refused): it is served, its response going to `out`. */
  request(head: ClientRequestHead, body: Http2Body, out: Http2Target): HttpRequestState;
  /** An info line with the connection's context, `while processing HTTP/2 connection`. */
  log(level: LogLevel, message: string): void;
  /** A line about a stream's request, with its request context. */
  requestLog(r: HttpRequestState, level: LogLevel, message: string): void;
  /**
   * A line about a stream's header block being read, before nginx builds
   * its request line: `while reading client request headers`, the client
   * and the connection's server.
   */
  headerLog(level: LogLevel, message: string): void;
  /**
   * The access-log entry of a stream ended while its header block was read
   * (fields read so far: names and values), after `message` at info when
   * given; `status` 408 for one that timed out, else 000.
   */
  unreadStream(rawHeaders: string[], message?: string, status?: number): void;
}

/**
 * The priority tree node of a stream (`ngx_http_v2_node_t`): its place in
 * the dependency tree gives the order in which streams' DATA frames go out.
 */
interface PriorityNode {
  /** The stream's id (a node dropped from the tree is reused for a new one, as nginx reuses its memory). */
  id: number;
  weight: number;
  parent: PriorityNode | undefined;
  readonly children: PriorityNode[];
  rank: number;
  relWeight: number;
  stream: Http2Stream | undefined;
}

/** One stream of the connection (`ngx_http_v2_stream_t`). */
export class Http2Stream {
  /** What the client may still send (stream window, `recv_window`). */
  recvWindow: number;
  /** What may be sent on the stream (`send_window`). */
  sendWindow: number;
  /** The client ended its side (END_STREAM, or RST_STREAM). */
  inClosed = false;
  /** The last frame of the response went out (or RST_STREAM). */
  outClosed = false;
  rstSent = false;
  /** DATA is dropped (`skip_data`): the body is refused, discarded or the stream is gone. */
  skipData = false;
  /** Bytes of the header block (then of the body) for `$request_length`. */
  requestLength = 0;
  /** The body read so far before the request reads it (`stream->preread`). */
  readonly preread: Buffer[] = [];
  prereadBytes = 0;
  /** The request body as the handlers read it. */
  body: Http2Body | undefined;
  target: Http2Target | undefined;
  request: HttpRequestState | undefined;
  /** Bytes of the body received (`rb->received`). */
  received = 0;
  /** `Content-Length` of the request, -1 without one. */
  contentLength = -1;
  /** The request finished (its response ended or was given up); the stream closes once its frames are out. */
  finished = false;
  closed = false;
  /** Where its request is in the stub_status counters (`r->stat_reading`, `r->stat_writing`). */
  stage = RequestStage.None;
  /** Body reading mode once the request reads it: all at once (`no_flow_control`), or passed on through a buffer of `bufferBytes`. */
  readMode: 'none' | 'whole' | 'passed' = 'none';
  bufferBytes = 0;

  constructor(
    readonly id: number,
    readonly conn: Http2Connection,
    readonly node: PriorityNode,
    sendWindow: number,
    recvWindow: number,
  ) {
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
  }
}

/**
 * The body of a stream's request, as the handlers read it. Until a handler
 * reads it, DATA goes to the stream's preread buffer (the window the client
 * got, `http2_body_preread_size`); reading it whole (`readWhole`, a buffered
 * body) opens the stream's window all the way (`no_flow_control`), reading
 * it as it comes (a body passed on) opens it a buffer at a time.
 */
export class Http2Body extends Readable implements DiscardableBody {
  /** `client_max_body_size` for a body without a length, checked as it arrives (0: no limit). */
  maxBytes = 0;

  /** `expectsData`: the HEADERS frame did not end the stream, so DATA frames are to come. */
  constructor(private readonly stream: Http2Stream, readonly expectsData: boolean) {
    super({ highWaterMark: 64 * 1024 });
    // a handler that reads the body hears of its failure; one that does not is not failed by it
    this.on('error', () => undefined);
  }

  /** `ngx_http_v2_read_request_body` for a body read whole: the stream's window opens all the way. */
  readWhole(): void {
    this.stream.conn.startReading(this.stream, 'whole');
  }

  override _read(): void {
    this.stream.conn.startReading(this.stream, 'passed');
  }

  /**
   * What was passed on left the buffer: the window opens again
   * (`ngx_http_v2_read_unbuffered_request_body`). Checked after each read,
   * not in `_read`: node calls `_read` before it takes the bytes it
   * returns, and not again until the next push, so a body buffered while
   * its reader waited (an upstream slower than the client) would keep the
   * client's window closed for good.
   */
  override read(size?: number): unknown {
    const chunk: unknown = super.read(size);
    if (this.readableLength === 0) this.stream.conn.bodyTaken(this.stream);
    return chunk;
  }

  /** `ngx_http_discard_request_body` for HTTP/2: DATA is dropped from now on. */
  discard(): number | undefined {
    this.stream.conn.discardBody(this.stream);
    return undefined;
  }

  /** The client went away (or reset the stream) before the body ended. */
  aborted(): void {
    if (this.readableEnded || this.destroyed) return;
    this.emit('aborted');
    this.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  }

  /** The body is refused as nginx refuses it: `status` (400, 413) with `message`, logged at `level`. */
  fail(status: number, message: string, level: LogLevel): void {
    this.destroy(Object.assign(new Error(message), { status, level }));
  }
}

/** The pieces of a header block being read: HEADERS and CONTINUATION frames until END_HEADERS. */
interface HeaderBlock {
  readonly sid: number;
  readonly parts: Buffer[];
  endStream: boolean;
  stream: Http2Stream | undefined;
  /** Octets of the HEADERS frame before its fragment (padding length, priority) and of padding after it. */
  readonly prefix: number;
  readonly padding: number;
  /** `client_header_timeout` while the block is incomplete (`ngx_http_v2_state_headers_save`). */
  timer: NodeJS.Timeout | undefined;
}

/** Refuses the request of the header block being read, with 400 and `message` (nginx reads the rest of the block for the table). */
function refuse(head: HeadBuilder, message: string): undefined {
  head.refusal = { status: 400, message, reading: 'request headers', lineUnread: true };
  return undefined;
}

/** A stream's request head being built from its header fields (`ngx_http_v2_state_process_header`). */
interface HeadBuilder {
  method: string | undefined;
  path: string | undefined;
  scheme: string | undefined;
  authority: string | undefined;
  readonly raw: string[];
  readonly cookies: string[];
  /** Fields as read, pseudo-headers included, for the access log of a stream ended by a connection error. */
  readonly seen: string[];
  refusal: Refusal | undefined;
  headerLimit: number;
}

const latin1 = (b: Buffer): string => b.toString('latin1');

/**
 * The connection's open streams by id (`h2c->streams_index`), kept on a
 * dictionary-mode object rather than a `Map`: under a steady turnover of
 * streams V8 replaces a `Map`'s hash table now and then and leaves the
 * references in the table it drops, which, once that table is in the old
 * generation, keep closed streams and everything their requests made alive
 * through scavenges until the next mark-compact (measured with 64 streams
 * in flight: 11% of the allocated bytes promoted against 0.5%).
 */
class OpenStreams {
  private readonly byId: Record<number, Http2Stream> = Object.create(null) as Record<number, Http2Stream>;

  get(id: number): Http2Stream | undefined {
    return this.byId[id];
  }

  set(stream: Http2Stream): void {
    this.byId[stream.id] = stream;
  }

  delete(id: number): void {
    delete this.byId[id];
  }

  /** The open streams, as an array of their own (the caller may close streams while it goes through it). */
  values(): Http2Stream[] {
    return Object.values(this.byId);
  }
}

const enum State { Preface, Frames, Closed }

/** An HTTP/2 connection: reads frames, runs streams, writes their responses. */
export class Http2Connection {
  private state = State.Preface;
  /** Bytes read and not yet taken: the start of a frame whose rest has not arrived. */
  private readonly pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes the incomplete DATA (or skipped) frame needs before it is looked at again (0: look at every read). */
  private needBytes = 0;
  private readonly hpack = new HpackDecoder();
  private readonly streams = new OpenStreams();
  private readonly nodes = new Map<number, PriorityNode>();
  /** Nodes of closed streams kept for the priority tree (`h2c->closed`), oldest first. */
  private readonly closedNodes: PriorityNode[] = [];
  /** The root of the priority tree (`NGX_HTTP_V2_ROOT`, `h2c->dependencies`). */
  private readonly rootNode: PriorityNode = { id: 0, weight: 256, parent: undefined, children: [], rank: 0, relWeight: 1, stream: undefined };
  private block: HeaderBlock | undefined;
  /** What the checks at the header of the frame being read decided (undefined: not checked yet). */
  private headVerdict: 'skip' | 'read' | undefined;
  /** Connection windows. */
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow = MAX_WINDOW;
  /** The client's SETTINGS: the initial stream window and the largest frame it takes. */
  private initWindow = DEFAULT_WINDOW;
  frameSize = DEFAULT_FRAME_SIZE;
  private lastSid = 0;
  /** Streams being processed (`h2c->processing`). */
  private processing = 0;
  /**
   * Streams opened since the connection last read all there was to read
   * (`h2c->new_streams`, zeroed by `ngx_http_v2_read_handler` at each read
   * event; here at each turn of the event loop that read something).
   */
  private newStreams = 0;
  private newStreamsResetScheduled = false;
  /** Streams refused with RST_STREAM on the connection (`h2c->refused_streams`). */
  private refusedStreams = 0;
  /**
   * Bytes read (`h2c->total_bytes`), and of them the header blocks of the
   * requests run and the DATA taken (`h2c->payload_bytes`): a connection
   * whose reads are more than 8 times its payload plus 1 MiB is a flood
   * (`ngx_http_v2_read_handler`: `http2 flood detected`, GOAWAY NO_ERROR).
   */
  private totalBytes = 0;
  private payloadBytes = 0;
  private settingsAck = false;
  /** GOAWAY was sent (`h2c->goaway`): no new stream is read. */
  private goaway = false;
  private priorityLimit: number;
  /** Control frames waiting for the socket, then the streams with DATA to send, in order of readiness. */
  private readonly control: Buffer[] = [];
  /**
   * An array made anew at each pump, not a `Set` cleared: V8's `Set.clear`
   * drops the table with its references in it, and once that table is in
   * the old generation the streams it names and their requests outlive
   * scavenges (64 streams in flight, 100 B responses: with this `Set` and
   * the streams in a `Map`, 17% of the allocated bytes were promoted and a
   * scavenge took 5 ms; with neither, 0.5% and 1 ms).
   */
  private ready: Http2Stream[] = [];
  private pumpScheduled = false;
  /** Bytes written to the socket (a running total), and over TLS what of them is in transit (`InTransit`). */
  private socketWrittenBytes = 0;
  private readonly socketInTransit: InTransit | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The socket errored or the connection is to close without GOAWAY (`c->error`). */
  private error = false;
  private lingering = false;
  /** Requests on the connection (`c->requests`). */
  requests = 0;
  private readonly acceptedAtMs: number;

  private readonly onData = (chunk: Buffer): void => this.received(chunk);
  private readonly onEnd = (): void => this.readEnded();
  private readonly onClose = (): void => this.socketClosed();
  private readonly onDrain = (): void => this.schedulePump();

  constructor(
    private readonly socket: Socket,
    private readonly owner: Http2Owner,
    /** Bytes already read (the front's first bytes: the preface, maybe more). */
    first: Buffer,
    acceptedAtMs: number,
  ) {
    this.acceptedAtMs = acceptedAtMs;
    this.socketInTransit = (socket as TLSSocket).encrypted ? new InTransit() : undefined;
    owner.stat.reusable(false);
    const { conf } = owner.server;
    this.priorityLimit = Math.max(conf.http2MaxConcurrentStreams, 100);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', () => {
      this.error = true;
    });
    socket.on('drain', this.onDrain);
    // ngx_http_v2_init: not idle until ngx_http_v2_handle_connection finds no stream; SETTINGS, the connection window opened all the way, client_header_timeout
    this.sendSettings();
    this.queueControl(FRAME.WINDOW_UPDATE, 0, 0, uint32(MAX_WINDOW - DEFAULT_WINDOW));
    this.armTimer(conf.clientHeaderTimeoutMs);
    socket.resume();
    if (first.length > 0) this.received(first);
    this.flushControl();
    this.handleConnection();
  }

  /**
   * Every stream in progress waits for the client to open a window, with
   * nothing else pending: nginx has no timer running for the connection.
   */
  get waitsForWindowOnly(): boolean {
    if (this.processing === 0 || this.socket.writableLength > 0) return false;
    for (const stream of this.streams.values()) {
      if (!stream.target?.hasOutput || !this.windowClosed(stream)) return false;
    }
    return true;
  }

  /** Whether `stream` may send no DATA now: its window or the connection's is used up. */
  windowClosed(stream: Http2Stream): boolean {
    return stream.sendWindow <= 0 || this.sendWindow <= 0;
  }

  /** No stream is in progress: the connection may be closed to make room. */
  get idle(): boolean {
    return this.processing === 0;
  }

  // ---- reading ----

  private received(chunk: Buffer): void {
    if (this.state === State.Closed) return;
    if (this.lingering) return;
    if (!this.newStreamsResetScheduled) {
      this.newStreamsResetScheduled = true;
      setImmediate(() => {
        this.newStreamsResetScheduled = false;
        this.newStreams = 0;
      });
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    this.totalBytes += chunk.length;
    if (this.pendingBytes < this.needBytes) return;
    this.process();
    if ((this.state as State) !== State.Closed && this.totalBytes / 8 > this.payloadBytes + FLOOD_SLACK_BYTES) {
      this.connectionError(H2_ERROR.NO_ERROR, 'http2 flood detected');
      return;
    }
    this.flushControl();
    this.schedulePump();
    this.handleConnection();
  }

  /** Runs the frames that are complete in what was read. */
  private process(): void {
    let pos = 0;
    const buf = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.needBytes = 0;
    while (this.state !== State.Closed) {
      if (this.state === State.Preface) {
        const n = Math.min(buf.length - pos, PREFACE.length);
        // ngx_http_v2_state_preface and _preface_end compare 16 then 8 octets
        const first = Math.min(n, 16);
        if (!buf.subarray(pos, pos + first).equals(PREFACE.subarray(0, first))
          || (n > 16 && !buf.subarray(pos + 16, pos + n).equals(PREFACE.subarray(16, n)))) {
          if (n >= 16) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'invalid connection preface');
        }
        if (n < PREFACE.length) break;
        pos += PREFACE.length;
        this.state = State.Frames;
        continue;
      }
      if (buf.length - pos < FRAME_HEADER_BYTES) break;
      const length = buf.readUIntBE(pos, 3);
      const type = buf[pos + 3]!;
      const flags = buf[pos + 4]!;
      const sid = buf.readUInt32BE(pos + 5) & 0x7fffffff;
      // what nginx checks at a frame's header is checked once, before its payload arrives
      if (this.headVerdict === undefined) {
        if (this.block && type !== FRAME.CONTINUATION) {
          return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent inappropriate frame while CONTINUATION was expected');
        }
        const verdict = this.frameHead(type, flags, sid, length);
        if (verdict === 'error') return;
        this.headVerdict = verdict;
      }
      const available = buf.length - pos - FRAME_HEADER_BYTES;
      if (type === FRAME.HEADERS && this.headVerdict === 'read' && !this.block) {
        // ngx_http_v2_state_headers: the stream starts once the padding and priority fields are in
        const prefix = (flags & FLAG.PADDED ? 1 : 0) + (flags & FLAG.PRIORITY ? 5 : 0);
        if (available < prefix) break;
        this.headersStart(flags, sid, length, buf.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + prefix));
        if ((this.state as State) === State.Closed) return;
      }
      if (available < length) {
        if (this.block && this.headVerdict === 'read') this.partialBlock(buf.subarray(pos + FRAME_HEADER_BYTES), length, type === FRAME.HEADERS);
        else this.needBytes = FRAME_HEADER_BYTES + length;
        break;
      }
      const payload = buf.subarray(pos + FRAME_HEADER_BYTES, pos + FRAME_HEADER_BYTES + length);
      pos += FRAME_HEADER_BYTES + length;
      const verdict = this.headVerdict;
      this.headVerdict = undefined;
      if (verdict === 'skip') continue;
      this.frame(type, flags, sid, payload);
    }
    this.pending.length = 0;
    this.pendingBytes = buf.length - pos;
    if (this.pendingBytes > 0) this.pending.push(buf.subarray(pos));
  }

  /**
   * The checks nginx makes on a frame's header alone, before its payload
   * (lengths, identifiers): `error` ended the connection, `skip` drops the
   * frame, `read` waits for its payload.
   */
  private frameHead(type: number, flags: number, sid: number, length: number): 'error' | 'skip' | 'read' {
    const fail = (code: number, message: string): 'error' => {
      this.connectionError(code, message);
      return 'error';
    };
    switch (type) {
      case FRAME.DATA:
        if (flags & FLAG.PADDED && length === 0) return fail(H2_ERROR.SIZE_ERROR, 'client sent padded DATA frame with incorrect length: 0');
        return 'read';
      case FRAME.HEADERS: {
        const size = (flags & FLAG.PADDED ? 1 : 0) + (flags & FLAG.PRIORITY ? 5 : 0);
        if (length < size) return fail(H2_ERROR.SIZE_ERROR, `client sent HEADERS frame with incorrect length ${length}`);
        if (length === size) return fail(H2_ERROR.SIZE_ERROR, 'client sent HEADERS frame with empty header block');
        return this.goaway ? 'skip' : 'read';
      }
      case FRAME.PRIORITY:
        if (length !== 5) return fail(H2_ERROR.SIZE_ERROR, `client sent PRIORITY frame with incorrect length ${length}`);
        return 'read';
      case FRAME.RST_STREAM:
        if (length !== 4) return fail(H2_ERROR.SIZE_ERROR, `client sent RST_STREAM frame with incorrect length ${length}`);
        return 'read';
      case FRAME.SETTINGS:
        if (sid !== 0) return fail(H2_ERROR.PROTOCOL_ERROR, 'client sent SETTINGS frame with incorrect identifier');
        if (flags === FLAG.ACK && length !== 0) return fail(H2_ERROR.SIZE_ERROR, 'client sent SETTINGS frame with the ACK flag and nonzero length');
        if (flags !== FLAG.ACK && length % 6 !== 0) return fail(H2_ERROR.SIZE_ERROR, `client sent SETTINGS frame with incorrect length ${length}`);
        return 'read';
      case FRAME.PUSH_PROMISE:
        return fail(H2_ERROR.PROTOCOL_ERROR, 'client sent PUSH_PROMISE frame');
      case FRAME.PING:
        if (length !== 8) return fail(H2_ERROR.SIZE_ERROR, `client sent PING frame with incorrect length ${length}`);
        return 'read';
      case FRAME.GOAWAY:
        if (length < 8) return fail(H2_ERROR.SIZE_ERROR, `client sent GOAWAY frame with incorrect length ${length}`);
        return 'read';
      case FRAME.WINDOW_UPDATE:
        if (length !== 4) return fail(H2_ERROR.SIZE_ERROR, `client sent WINDOW_UPDATE frame with incorrect length ${length}`);
        return 'read';
      case FRAME.CONTINUATION:
        if (!this.block) return fail(H2_ERROR.PROTOCOL_ERROR, 'client sent unexpected CONTINUATION frame');
        if (sid !== this.block.sid) return fail(H2_ERROR.PROTOCOL_ERROR, 'client sent CONTINUATION frame with incorrect identifier');
        return 'read';
      default:
        this.owner.log('info', `client sent frame with unknown type ${type}`);
        return 'skip';
    }
  }

  private frame(type: number, flags: number, sid: number, payload: Buffer): void {
    switch (type) {
      case FRAME.DATA: return this.dataFrame(flags, sid, payload);
      case FRAME.HEADERS: return this.headersFrame(flags, payload);
      case FRAME.CONTINUATION: return this.continuationFrame(flags, payload);
      case FRAME.PRIORITY: return this.priorityFrame(sid, payload);
      case FRAME.RST_STREAM: return this.rstStreamFrame(sid, payload);
      case FRAME.SETTINGS: return this.settingsFrame(flags, payload);
      case FRAME.PING: return this.pingFrame(flags, sid, payload);
      case FRAME.GOAWAY:
        if (sid !== 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent GOAWAY frame with incorrect identifier');
        return;
      case FRAME.WINDOW_UPDATE: return this.windowUpdateFrame(sid, payload);
      default:
    }
  }

  /** `ngx_http_v2_state_data` and `ngx_http_v2_state_read_data`. */
  private dataFrame(flags: number, sid: number, payload: Buffer): void {
    const size = payload.length;
    let data = payload;
    if (flags & FLAG.PADDED) {
      const padding = payload[0]!;
      if (padding >= size) {
        return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent padded DATA frame with incorrect length: ${size}, padding: ${padding}`);
      }
      data = payload.subarray(1, size - padding);
    }
    if (sid === 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent DATA frame with incorrect identifier');
    if (size > this.recvWindow) {
      return this.connectionError(H2_ERROR.FLOW_CTRL_ERROR,
        `client violated connection flow control: received DATA frame length ${size}, available window ${this.recvWindow}`);
    }
    this.recvWindow -= size;
    if (this.recvWindow < MAX_WINDOW / 4) {
      this.queueControl(FRAME.WINDOW_UPDATE, 0, 0, uint32(MAX_WINDOW - this.recvWindow));
      this.recvWindow = MAX_WINDOW;
    }
    const stream = this.streams.get(sid);
    if (!stream) return;
    if (size > stream.recvWindow) {
      this.owner.log('info', `client violated flow control for stream ${sid}: received DATA frame length ${size}, available window ${stream.recvWindow}`);
      this.terminateStream(stream, H2_ERROR.FLOW_CTRL_ERROR);
      return;
    }
    stream.recvWindow -= size;
    if (stream.readMode === 'whole' && stream.recvWindow < MAX_WINDOW / 4) {
      this.queueControl(FRAME.WINDOW_UPDATE, 0, sid, uint32(MAX_WINDOW - stream.recvWindow));
      stream.recvWindow = MAX_WINDOW;
    }
    if (stream.inClosed) {
      this.owner.log('info', `client sent DATA frame for half-closed stream ${sid}`);
      this.terminateStream(stream, H2_ERROR.STREAM_CLOSED);
      return;
    }
    if (flags & FLAG.END_STREAM) stream.inClosed = true;
    if (stream.skipData) return;
    this.payloadBytes += data.length;
    if (stream.readMode === 'none') {
      if (data.length > 0) {
        stream.preread.push(Buffer.from(data));
        stream.prereadBytes += data.length;
      }
      return;
    }
    this.bodyData(stream, data, stream.inClosed);
  }

  /**
   * Body data for a request that reads its body (`ngx_http_v2_process_request_body`,
   * `ngx_http_v2_filter_request_body`): the declared length holds, a body
   * without one stays within `client_max_body_size`.
   */
  private bodyData(stream: Http2Stream, data: Buffer, last: boolean): void {
    const body = stream.body!;
    if (data.length > 0) {
      stream.received += data.length;
      stream.requestLength += data.length;
      if (stream.contentLength !== -1) {
        if (stream.received > stream.contentLength) {
          stream.skipData = true;
          body.fail(400, 'client intended to send body data larger than declared', 'info');
          return;
        }
      } else if (body.maxBytes > 0 && stream.received > body.maxBytes) {
        stream.skipData = true;
        body.fail(413, `client intended to send too large chunked body: ${stream.received} bytes`, 'error');
        return;
      }
      body.push(data);
    }
    if (last) {
      if (stream.contentLength !== -1 && stream.contentLength !== stream.received) {
        stream.skipData = true;
        body.fail(400, `client prematurely closed stream: only ${stream.received} out of ${stream.contentLength} bytes of request body received`, 'info');
        return;
      }
      body.push(null);
      return;
    }
    if (stream.readMode === 'passed') this.reopenWindow(stream);
  }

  /**
   * The request starts reading its body (`ngx_http_v2_read_request_body`):
   * what was preread goes first; a body read whole gets the stream's window
   * opened to the largest (`no_flow_control`), one passed on gets a window
   * of its buffer (`client_body_buffer_size`, at least the preread size).
   */
  startReading(stream: Http2Stream, mode: 'whole' | 'passed'): void {
    if (stream.readMode !== 'none') {
      if (mode === 'passed' && stream.readMode === 'passed') this.reopenWindow(stream);
      return;
    }
    stream.readMode = mode;
    if (stream.skipData) return;
    const loc = stream.request?.loc ?? this.owner.server.conf;
    // ngx_http_v2_filter_request_body checks client_max_body_size on a body without a length, however it is read
    stream.body!.maxBytes ||= loc.clientMaxBodySizeBytes;
    const preread = this.owner.server.conf.http2BodyPrereadSizeBytes;
    let len = stream.contentLength < 0 || stream.contentLength > loc.clientBodyBufferSizeBytes
      ? loc.clientBodyBufferSizeBytes : stream.contentLength + 1;
    if (mode === 'passed') len = Math.min(Math.max(len, preread), MAX_WINDOW);
    stream.bufferBytes = len;
    const data = stream.preread.length === 1 ? stream.preread[0]! : Buffer.concat(stream.preread, stream.prereadBytes);
    const hadPreread = stream.prereadBytes > 0;
    stream.preread.length = 0;
    stream.prereadBytes = 0;
    if (stream.inClosed || hadPreread) {
      this.bodyData(stream, data, stream.inClosed);
      if (stream.inClosed || stream.skipData) return;
    }
    const size = mode === 'passed' ? len - preread : MAX_WINDOW - stream.recvWindow;
    if (size > 0) {
      this.queueControl(FRAME.WINDOW_UPDATE, 0, stream.id, uint32(size));
      stream.recvWindow += size;
      this.flushControl();
    }
  }

  /** The request's reader emptied the body's buffer: a body passed on gets its window back (`reopenWindow`). */
  bodyTaken(stream: Http2Stream): void {
    if (stream.readMode === 'passed') this.reopenWindow(stream);
  }

  /**
   * `ngx_http_v2_read_unbuffered_request_body`: once what was passed on
   * left the buffer, the stream's window opens again to the buffer's size.
   */
  private reopenWindow(stream: Http2Stream): void {
    const body = stream.body!;
    if (stream.inClosed || stream.skipData || body.readableLength > 0) return;
    const window = stream.bufferBytes;
    if (window <= stream.recvWindow) return;
    this.queueControl(FRAME.WINDOW_UPDATE, 0, stream.id, uint32(window - stream.recvWindow));
    stream.recvWindow = window;
    this.flushControl();
  }

  /** `ngx_http_discard_request_body` on HTTP/2: the stream's DATA is dropped. */
  discardBody(stream: Http2Stream): void {
    stream.skipData = true;
    stream.preread.length = 0;
    stream.prereadBytes = 0;
  }

  /**
   * `ngx_http_v2_state_headers`, at the HEADERS frame's header and its
   * padding and priority fields: the identifier is checked, the stream made
   * (or refused with RST_STREAM), and `keepalive_requests` and the like
   * decide whether GOAWAY names it as the last.
   */
  private headersStart(flags: number, sid: number, length: number, prefixBytes: Buffer): void {
    let pos = 0;
    let padding = 0;
    if (flags & FLAG.PADDED) {
      padding = prefixBytes[0]!;
      pos = 1;
      const rest = length - prefixBytes.length;
      if (padding > rest) {
        return this.connectionError(H2_ERROR.PROTOCOL_ERROR,
          `client sent padded HEADERS frame with incorrect length: ${rest}, padding: ${padding}`);
      }
    }
    let depend = 0;
    let excl = false;
    let weight = DEFAULT_WEIGHT;
    const priority = (flags & FLAG.PRIORITY) !== 0;
    if (priority) {
      const dependency = prefixBytes.readUInt32BE(pos);
      depend = dependency & 0x7fffffff;
      excl = dependency >>> 31 === 1;
      weight = prefixBytes[pos + 4]! + 1;
    }
    if (sid % 2 === 0 || sid <= this.lastSid) {
      return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent HEADERS frame with incorrect identifier ${sid}, the last was ${this.lastSid}`);
    }
    if (depend === sid) {
      return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent HEADERS frame for stream ${sid} with incorrect dependency`);
    }
    this.lastSid = sid;
    const endStream = (flags & FLAG.END_STREAM) !== 0;
    const { conf } = this.owner.server;
    let stream: Http2Stream | undefined;
    // ngx_http_v2_state_headers: a stream is refused past the concurrent streams, past twice as many new
    // ones in one read, or with data before SETTINGS were acknowledged; the connection ends (GOAWAY
    // NO_ERROR) once more streams were refused than max(http2_max_concurrent_streams, 100)
    const refusal = this.processing >= conf.http2MaxConcurrentStreams ? `concurrent streams exceeded ${this.processing}`
      : this.newStreams++ >= 2 * conf.http2MaxConcurrentStreams ? 'client sent too many streams at once'
        : !this.settingsAck && !endStream && conf.http2BodyPrereadSizeBytes < DEFAULT_WINDOW
          ? 'client sent stream with data before settings were acknowledged' : undefined;
    if (refusal !== undefined) {
      this.owner.log('info', refusal);
      if (this.refusedStreams++ > Math.max(conf.http2MaxConcurrentStreams, 100)) {
        return this.connectionError(H2_ERROR.NO_ERROR, 'client sent too many refused streams');
      }
      this.queueControl(FRAME.RST_STREAM, 0, sid, uint32(H2_ERROR.REFUSED_STREAM));
    } else {
      const node = this.nodeOf(sid, true)!;
      stream = new Http2Stream(sid, this, node, this.initWindow, conf.http2BodyPrereadSizeBytes);
      node.stream = stream;
      const closedAt = this.closedNodes.indexOf(node);
      if (closedAt !== -1) this.closedNodes.splice(closedAt, 1);
      if (priority || node.parent === undefined) {
        node.weight = weight;
        this.setDependency(node, depend, excl);
      }
      stream.inClosed = endStream;
      stream.requestLength = length - prefixBytes.length - padding;
      this.streams.set(stream);
      // ngx_http_v2_create_stream: the stream's request is counted (ngx_http_create_request)
      this.owner.stat.reusable(false);
      stream.stage = this.owner.stat.streamCreated();
      this.processing++;
      this.requests++;
      this.priorityLimit += conf.http2MaxConcurrentStreams;
      this.clearTimer();
      // keepalive_timeout 0, keepalive_requests or keepalive_time reached: GOAWAY names this stream as the last
      if (conf.keepaliveTimeoutMs === 0 || this.requests >= conf.keepaliveRequests || Date.now() - this.acceptedAtMs > conf.keepaliveTimeMs) {
        this.goaway = true;
        this.sendGoaway(H2_ERROR.NO_ERROR);
      }
    }
    this.block = { sid, parts: [], endStream, stream, prefix: prefixBytes.length, padding, timer: undefined };
  }

  /** The payload of the HEADERS frame whose start `headersStart` read. */
  private headersFrame(flags: number, payload: Buffer): void {
    const block = this.block!;
    block.parts.push(Buffer.from(payload.subarray(block.prefix, payload.length - block.padding)));
    if (flags & FLAG.END_HEADERS) this.headerBlockDone();
  }

  /**
   * A header block whose frame is not complete yet: its stream's
   * `client_header_timeout` runs (`ngx_http_v2_state_headers_save`), and
   * what arrived is decoded as far as it goes, for the errors nginx finds
   * before the rest comes (an integer or a field length too long).
   */
  private partialBlock(payload: Buffer, length: number, headers: boolean): void {
    const block = this.block!;
    if (block.stream && !block.timer) {
      const stream = block.stream;
      block.timer = setTimeout(() => this.headerTimedOut(block, stream), this.owner.server.conf.clientHeaderTimeoutMs);
      block.timer.unref?.();
    }
    const part = headers ? payload.subarray(block.prefix, length - block.padding) : payload;
    const error = this.hpack.probe(Buffer.concat([...block.parts, part]), this.owner.server.conf.largeClientHeaderBuffers.sizeBytes);
    if (error) {
      if (block.stream) {
        this.owner.unreadStream([]);
        this.removeStream(block.stream);
      }
      this.connectionError(error.code, error.message);
    }
  }

  /**
   * `client_header_timeout` passed with the stream's header block
   * incomplete (`ngx_http_v2_close_stream_handler`): `client timed out`,
   * RST_STREAM PROTOCOL_ERROR, and the rest of the block is read for the
   * connection's table only.
   */
  private headerTimedOut(block: HeaderBlock, stream: Http2Stream): void {
    block.timer = undefined;
    if (block.stream !== stream || stream.closed) return;
    block.stream = undefined;
    this.owner.unreadStream([], `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`, 408);
    this.queueControl(FRAME.RST_STREAM, 0, stream.id, uint32(H2_ERROR.PROTOCOL_ERROR));
    stream.rstSent = true;
    this.removeStream(stream);
    this.flushControl();
    this.handleConnection();
  }

  /** A CONTINUATION frame of the header block being read (`ngx_http_v2_handle_continuation`). */
  private continuationFrame(flags: number, payload: Buffer): void {
    const block = this.block!;
    block.parts.push(Buffer.from(payload));
    if (block.stream) block.stream.requestLength += payload.length;
    if (flags & FLAG.END_HEADERS) this.headerBlockDone();
  }

  /**
   * The header block is complete: its fields are decoded and checked as
   * `ngx_http_v2_state_process_header` does, then the request runs
   * (`ngx_http_v2_run_request`).
   */
  private headerBlockDone(): void {
    const block = this.block!;
    this.block = undefined;
    clearTimeout(block.timer);
    const stream = block.stream;
    const { conf } = this.owner.server;
    const head: HeadBuilder = {
      method: undefined, path: undefined, scheme: undefined, authority: undefined, raw: [], cookies: [], seen: [], refusal: undefined,
      headerLimit: conf.largeClientHeaderBuffers.sizeBytes * conf.largeClientHeaderBuffers.count,
    };
    const data = block.parts.length === 1 ? block.parts[0]! : Buffer.concat(block.parts);
    const error = this.hpack.decode(data, conf.largeClientHeaderBuffers.sizeBytes, (field) => this.headerField(head, stream, field.name, field.value));
    if (error) {
      if (stream) {
        // the stream's request ends with the connection (ngx_http_v2_finalize_connection closes it with 400)
        this.owner.unreadStream(head.seen);
        this.removeStream(stream);
      }
      return this.connectionError(error.code, error.message);
    }
    if (!stream) return;
    this.runRequest(stream, head, block.endStream);
  }

  /** One decoded header field of a stream (`ngx_http_v2_state_process_header`). */
  private headerField(head: HeadBuilder, stream: Http2Stream | undefined, nameBuf: Buffer, valueBuf: Buffer): HpackError | undefined {
    const len = nameBuf.length + valueBuf.length;
    if (len > head.headerLimit) return { message: 'client sent too large header', code: H2_ERROR.ENHANCE_YOUR_CALM };
    head.headerLimit -= len;
    if (!stream || head.refusal) return undefined;
    const name = latin1(nameBuf);
    const value = latin1(valueBuf);
    head.seen.push(name, value);
    // ngx_http_v2_validate_header
    const { conf } = this.owner.server;
    let invalid = false;
    for (let i = name.charCodeAt(0) === 58 ? 1 : 0; i < name.length; i++) {
      const ch = name.charCodeAt(i);
      if ((ch >= 0x61 && ch <= 0x7a) || ch === 0x2d || (ch >= 0x30 && ch <= 0x39) || (ch === 0x5f && conf.underscoresInHeaders)) continue;
      if (ch <= 0x20 || ch === 0x7f || ch === 0x3a || (ch >= 0x41 && ch <= 0x5a)) return refuse(head, `client sent invalid header name: "${name}"`);
      invalid = true;
    }
    for (let i = 0; i < value.length; i++) {
      const ch = value.charCodeAt(i);
      if (ch === 0 || ch === 0x0a || ch === 0x0d) return refuse(head, `client sent header "${name}" with invalid value: "${value}"`);
    }
    if (name.charCodeAt(0) === 58) return this.pseudoHeader(head, name, value);
    if (invalid && conf.ignoreInvalidHeaders) {
      this.owner.headerLog('info', `client sent invalid header: "${name}"`);
      return undefined;
    }
    if (name === 'cookie') head.cookies.push(value);
    else head.raw.push(name, value);
    return undefined;
  }

  /** `ngx_http_v2_pseudo_header`. */
  private pseudoHeader(head: HeadBuilder, name: string, value: string): undefined {
    switch (name) {
      case ':path':
        if (head.path !== undefined) return refuse(head, 'client sent duplicate :path header');
        if (value === '') return refuse(head, 'client sent empty :path header');
        if (!validPath(value)) return refuse(head, `client sent invalid :path header: "${value}"`);
        head.path = value;
        return undefined;
      case ':method':
        if (head.method !== undefined) return refuse(head, 'client sent duplicate :method header');
        if (value === '') return refuse(head, 'client sent empty :method header');
        if (!/^[A-Z_-]+$/.test(value)) return refuse(head, `client sent invalid method: "${value}"`);
        head.method = value;
        return undefined;
      case ':scheme':
        if (head.scheme !== undefined) return refuse(head, 'client sent duplicate :scheme header');
        if (value === '') return refuse(head, 'client sent empty :scheme header');
        if (!/^[a-zA-Z][a-zA-Z0-9+.-]*$/.test(value)) return refuse(head, `client sent invalid :scheme header: "${value}"`);
        head.scheme = value;
        return undefined;
      case ':authority':
        // ngx_http_v2_parse_authority (nginx 1.29.1): kept apart from Host until the block ends
        if (head.authority !== undefined) return refuse(head, 'client sent duplicate ":authority" header');
        head.authority = value;
        return undefined;
      default:
        return refuse(head, `client sent unknown pseudo-header "${name}"`);
    }
  }

  /** `ngx_http_v2_run_request`: the request line is made, the cookies joined, and the request served. */
  private runRequest(stream: Http2Stream, head: HeadBuilder, endStream: boolean): void {
    let refusal = head.refusal;
    if (!refusal) {
      const missing = head.method === undefined ? ':method' : head.scheme === undefined ? ':scheme' : head.path === undefined ? ':path' : undefined;
      if (missing) refusal = { status: 400, message: `client sent no ${missing} header`, reading: 'request headers', lineUnread: true };
    }
    if (!refusal && head.path!.startsWith('/')) {
      // ngx_http_v2_construct_request_line checks the URI (ngx_http_process_request_uri) before Host is made of :authority
      const q = head.path!.indexOf('?');
      if (normalizePath(q === -1 ? head.path! : head.path!.slice(0, q), true) === undefined) {
        refusal = { status: 400, message: 'client sent invalid request', reading: 'request headers', lineUnread: true };
      }
    }
    if (head.cookies.length > 0) head.raw.push('cookie', head.cookies.join('; '));
    if (!refusal) refusal = this.hostFromAuthority(head);
    const headers: IncomingHttpHeaders = {};
    for (let i = 0; i < head.raw.length; i += 2) {
      const name = head.raw[i]!;
      const value = head.raw[i + 1]!;
      const seen = headers[name];
      if (seen === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
      else if (Array.isArray(seen)) seen.push(value);
      else if (name !== 'host' && name !== 'content-length') headers[name] = `${seen}, ${value}`;
    }
    const cl = headers['content-length'];
    if (!refusal && typeof cl === 'string') {
      if (!/^\d{1,18}$/.test(cl)) {
        refusal = { status: 400, message: 'client sent invalid "Content-Length" header', reading: 'request headers' };
      } else {
        stream.contentLength = Number(cl);
      }
    }
    if (!refusal && stream.contentLength > 0 && endStream) {
      refusal = { status: 400, message: 'client prematurely closed stream', reading: 'request headers' };
    }
    if (refusal) stream.skipData = true;
    const body = new Http2Body(stream, !endStream && !refusal);
    stream.body = body;
    if (endStream || refusal) body.push(null);
    const target = new Http2Target(stream, head.method === 'HEAD');
    stream.target = target;
    const clientHead: ClientRequestHead = {
      method: head.method ?? '',
      requestUri: head.path ?? '',
      protocol: 'HTTP/2.0',
      headers,
      rawHeaders: head.raw,
      headLength: stream.requestLength,
      refusal,
    };
    this.payloadBytes += stream.requestLength;
    stream.requestLength = 0;
    // ngx_http_v2_run_request: ngx_http_process_request (a refused request is finalized while it is read)
    if (!refusal) stream.stage = this.owner.stat.streamProcessed(stream.stage);
    stream.request = this.owner.request(clientHead, body, target);
  }

  /**
   * `ngx_http_v2_construct_host_header` (nginx 1.29.1): `:authority` becomes
   * the Host header when there is none; a Host header must say the same,
   * and a request needs one or the other. `:authority` itself is a valid
   * host or refused (`ngx_http_v2_parse_authority`, `ngx_http_validate_host`).
   */
  private hostFromAuthority(head: HeadBuilder): Refusal | undefined {
    const hosts: string[] = [];
    for (let i = 0; i < head.raw.length; i += 2) if (head.raw[i] === 'host') hosts.push(head.raw[i + 1]!);
    if (head.authority === undefined) {
      return hosts.length === 0 ? { status: 400, message: 'client sent HTTP/2 request without ":authority" or "Host" header', reading: 'request headers' } : undefined;
    }
    if (validateHost(head.authority) === undefined) {
      return { status: 400, message: 'client sent invalid ":authority" header', reading: 'request headers', lineUnread: true };
    }
    if (hosts.length === 0) head.raw.push('host', head.authority);
    else if (hosts.length === 1 && hosts[0] !== head.authority) {
      return { status: 400, message: 'client sent ":authority" and "Host" headers with different values', reading: 'request headers' };
    }
    return undefined;
  }

  /** `ngx_http_v2_state_priority`. */
  private priorityFrame(sid: number, payload: Buffer): void {
    if (--this.priorityLimit === 0) return this.connectionError(H2_ERROR.ENHANCE_YOUR_CALM, 'client sent too many PRIORITY frames');
    const dependency = payload.readUInt32BE(0);
    const depend = dependency & 0x7fffffff;
    const excl = dependency >>> 31 === 1;
    const weight = payload[4]! + 1;
    if (sid === 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent PRIORITY frame with incorrect identifier');
    if (depend === sid) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent PRIORITY frame for stream ${sid} with incorrect dependency`);
    const node = this.nodeOf(sid, true)!;
    node.weight = weight;
    if (!node.stream) {
      const at = this.closedNodes.indexOf(node);
      if (at !== -1) this.closedNodes.splice(at, 1);
      this.closedNodes.push(node);
    }
    this.setDependency(node, depend, excl);
  }

  /** `ngx_http_v2_state_rst_stream`. */
  private rstStreamFrame(sid: number, payload: Buffer): void {
    const status = payload.readUInt32BE(0);
    if (sid === 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent RST_STREAM frame with incorrect identifier');
    const stream = this.streams.get(sid);
    if (!stream) return;
    stream.inClosed = true;
    stream.outClosed = true;
    const message = status === H2_ERROR.CANCEL ? `client canceled stream ${sid}`
      : status === H2_ERROR.REFUSED_STREAM ? `client refused stream ${sid}`
        : status === H2_ERROR.INTERNAL_ERROR ? `client terminated stream ${sid} due to internal error`
          : `client terminated stream ${sid} with status ${status}`;
    const r = stream.request;
    if (r && !stream.finished) {
      r.action ??= r.upstream ? 'sending to client' : 'sending response to client';
      this.owner.requestLog(r, 'info', message);
    } else {
      this.owner.log('info', message);
    }
    this.streamGone(stream);
  }

  /** `ngx_http_v2_state_settings` and `_settings_params`. */
  private settingsFrame(flags: number, payload: Buffer): void {
    if (flags === FLAG.ACK) {
      this.settingsAck = true;
      return;
    }
    let windowDelta: number | undefined;
    for (let p = 0; p + 6 <= payload.length; p += 6) {
      const id = payload.readUInt16BE(p);
      const value = payload.readUInt32BE(p + 2);
      switch (id) {
        case SETTINGS_PARAMS.INITIAL_WINDOW_SIZE:
          if (value > MAX_WINDOW) {
            return this.connectionError(H2_ERROR.FLOW_CTRL_ERROR, `client sent SETTINGS frame with incorrect INITIAL_WINDOW_SIZE value ${value}`);
          }
          windowDelta = value - this.initWindow;
          break;
        case SETTINGS_PARAMS.MAX_FRAME_SIZE:
          if (value > MAX_FRAME_SIZE || value < DEFAULT_FRAME_SIZE) {
            return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent SETTINGS frame with incorrect MAX_FRAME_SIZE value ${value}`);
          }
          this.frameSize = value;
          break;
        case SETTINGS_PARAMS.ENABLE_PUSH:
          if (value > 1) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, `client sent SETTINGS frame with incorrect ENABLE_PUSH value ${value}`);
          break;
        default:
      }
    }
    // the acknowledgement goes out before what is queued (ngx_http_v2_queue_ordered_frame)
    this.queueControl(FRAME.SETTINGS, FLAG.ACK, 0, Buffer.alloc(0));
    if (windowDelta) {
      this.initWindow += windowDelta;
      // ngx_http_v2_adjust_windows
      for (const stream of this.streams.values()) {
        if (windowDelta > 0 && stream.sendWindow > MAX_WINDOW - windowDelta) {
          this.terminateStream(stream, H2_ERROR.FLOW_CTRL_ERROR);
          continue;
        }
        stream.sendWindow += windowDelta;
        if (stream.sendWindow > 0) this.wantsToSend(stream);
      }
    }
  }

  /** `ngx_http_v2_state_ping`: answered with an acknowledgement carrying the same data. */
  private pingFrame(flags: number, sid: number, payload: Buffer): void {
    if (sid !== 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent PING frame with incorrect identifier');
    if (flags & FLAG.ACK) return;
    this.queueControl(FRAME.PING, FLAG.ACK, 0, Buffer.from(payload));
  }

  /** `ngx_http_v2_state_window_update`. */
  private windowUpdateFrame(sid: number, payload: Buffer): void {
    const window = payload.readUInt32BE(0) & 0x7fffffff;
    if (window === 0) return this.connectionError(H2_ERROR.PROTOCOL_ERROR, 'client sent WINDOW_UPDATE frame with incorrect window increment 0');
    if (sid !== 0) {
      const stream = this.streams.get(sid);
      if (!stream) return;
      if (window > MAX_WINDOW - stream.sendWindow) {
        this.owner.log('info', `client violated flow control for stream ${sid}: received WINDOW_UPDATE frame with window increment ${window} not allowed for window ${stream.sendWindow}`);
        this.terminateStream(stream, H2_ERROR.FLOW_CTRL_ERROR);
        return;
      }
      stream.sendWindow += window;
      this.wantsToSend(stream);
      return;
    }
    if (window > MAX_WINDOW - this.sendWindow) {
      return this.connectionError(H2_ERROR.FLOW_CTRL_ERROR,
        `client violated connection flow control: received WINDOW_UPDATE frame with window increment ${window} not allowed for window ${this.sendWindow}`);
    }
    this.sendWindow += window;
    for (const stream of this.streams.values()) this.wantsToSend(stream);
  }

  private readEnded(): void {
    if (this.state === State.Closed) return;
    if (this.lingering) {
      this.close();
      return;
    }
    // ngx_http_v2_read_handler: the client closed its side
    if (this.pendingBytes > 0 || this.block || this.processing > 0) this.owner.log('info', 'client prematurely closed connection');
    this.error = true;
    this.finalize(undefined);
  }

  private socketClosed(): void {
    this.clearTimer();
    if (this.state === State.Closed) return;
    this.error = true;
    this.finalize(undefined);
    this.state = State.Closed;
  }

  // ---- the priority tree (ngx_http_v2_get_node_by_id, ngx_http_v2_set_dependency) ----

  private nodeOf(id: number, alloc: boolean): PriorityNode | undefined {
    let node = this.nodes.get(id);
    if (node || !alloc) return node;
    if (this.closedNodes.length >= 32) {
      node = this.dropClosedNode();
      node.id = id;
      node.weight = DEFAULT_WEIGHT;
      node.parent = undefined;
      node.rank = 0;
      node.relWeight = 0;
      node.stream = undefined;
    } else {
      node = { id, weight: DEFAULT_WEIGHT, parent: undefined, children: [], rank: 0, relWeight: 0, stream: undefined };
    }
    this.nodes.set(id, node);
    return node;
  }

  /**
   * `ngx_http_v2_get_closed_node`: the oldest closed node leaves the tree,
   * its children going to its parent with their share of its weight; the
   * node is returned for a new stream, as nginx reuses its memory (a node
   * outlives 32 streams, long enough for V8 to have moved it to the old
   * generation, where a new node per stream was garbage waiting for a
   * mark-compact).
   */
  private dropClosedNode(): PriorityNode {
    const node = this.closedNodes.shift()!;
    this.nodes.delete(node.id);
    const parent = node.parent;
    if (parent) remove(parent.children, node);
    const total = node.children.reduce((sum, c) => sum + c.weight, 0);
    for (const child of node.children) {
      child.parent = parent;
      child.weight = Math.max(Math.floor((node.weight * child.weight) / total), 1);
    }
    if (parent) {
      node.rank = parent.rank;
      node.relWeight = parent.relWeight;
      this.updateChildren(node);
      parent.children.push(...node.children);
    }
    node.children.length = 0;
    return node;
  }

  /** `ngx_http_v2_node_children_update`: ranks and relative weights below `node`. */
  private updateChildren(node: PriorityNode): void {
    for (const child of node.children) {
      child.rank = node.rank + 1;
      child.relWeight = (node.relWeight / 256) * child.weight;
      this.updateChildren(child);
    }
  }

  /** `ngx_http_v2_set_dependency`: `node` depends on stream `depend` (0: the root), alone below it when `exclusive`. */
  private setDependency(node: PriorityNode, depend: number, exclusive: boolean): void {
    let parent = depend ? this.nodes.get(depend) : undefined;
    if (!parent) {
      parent = this.rootNode;
      if (depend !== 0) exclusive = false;
    } else if (node.parent !== undefined) {
      // the new parent is below the node: it takes the node's place first
      for (let next = parent.parent; next !== undefined && next !== this.rootNode && next.rank >= node.rank; next = next.parent) {
        if (next !== node) continue;
        remove(parent.parent!.children, parent);
        const siblings = node.parent.children;
        siblings.splice(siblings.indexOf(node) + 1, 0, parent);
        parent.parent = node.parent;
        parent.rank = node.parent.rank + 1;
        parent.relWeight = (node.parent.relWeight / 256) * parent.weight;
        if (!exclusive) this.updateChildren(parent);
        break;
      }
    }
    node.rank = parent.rank + 1;
    node.relWeight = (parent.relWeight / 256) * node.weight;
    if (parent !== this.rootNode && !parent.stream && remove(this.closedNodes, parent)) this.closedNodes.push(parent);
    const children = parent.children;
    if (exclusive) {
      const moved = children.splice(0);
      for (const child of moved) child.parent = node;
      node.children.push(...moved);
    }
    if (node.parent !== undefined) {
      remove(node.parent.children, node);
      remove(node.children, node);
    }
    children.push(node);
    node.parent = parent;
    this.updateChildren(node);
  }

  // ---- writing ----

  private sendSettings(): void {
    const { conf } = this.owner.server;
    const p = Buffer.alloc(18);
    p.writeUInt16BE(SETTINGS_PARAMS.MAX_STREAMS, 0);
    p.writeUInt32BE(conf.http2MaxConcurrentStreams, 2);
    p.writeUInt16BE(SETTINGS_PARAMS.INITIAL_WINDOW_SIZE, 6);
    p.writeUInt32BE(conf.http2BodyPrereadSizeBytes, 8);
    p.writeUInt16BE(SETTINGS_PARAMS.MAX_FRAME_SIZE, 12);
    p.writeUInt32BE(MAX_FRAME_SIZE, 14);
    this.queueControl(FRAME.SETTINGS, 0, 0, p);
  }

  private sendGoaway(code: number): void {
    const p = Buffer.alloc(8);
    p.writeUInt32BE(this.lastSid, 0);
    p.writeUInt32BE(code, 4);
    this.queueControl(FRAME.GOAWAY, 0, 0, p);
  }

  /** Queues a control frame; control frames go out before DATA waiting for the socket. */
  queueControl(type: number, flags: number, sid: number, payload: Buffer): void {
    if (this.state === State.Closed || this.error) return;
    this.control.push(frameHeader(payload.length, type, flags, sid), payload);
  }

  /** Writes the control frames queued. */
  flushControl(): void {
    if (this.control.length === 0 || this.socket.destroyed) {
      this.control.length = 0;
      return;
    }
    const data = Buffer.concat(this.control);
    this.control.length = 0;
    this.socketWrittenBytes += data.length;
    this.socket.write(data);
  }

  /** A stream has something to send (or its window opened): it is written at the next pump. */
  wantsToSend(stream: Http2Stream): void {
    if (!stream.target?.hasOutput) return;
    this.markReady(stream);
    this.schedulePump();
  }

  /** Puts `stream` among those the next pump writes, once. */
  private markReady(stream: Http2Stream): void {
    if (!this.ready.includes(stream)) this.ready.push(stream);
  }

  private schedulePump(): void {
    if (this.pumpScheduled || this.state === State.Closed) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /**
   * Writes the frames streams have ready, as `ngx_http_v2_send_chain` and
   * the output queue order them: streams by their place in the priority
   * tree (rank, then relative weight), each sending what its window and the
   * connection's allow, in frames of `http2_chunk_size` at most.
   */
  pump(): void {
    this.flushControl();
    if (this.state === State.Closed || this.socket.destroyed) return;
    const streams = this.ready.sort((a, b) => a.node.rank - b.node.rank || b.node.relWeight - a.node.relWeight);
    this.ready = [];
    this.socket.cork();
    for (const stream of streams) {
      if (this.socketBusy) {
        this.markReady(stream);
        continue;
      }
      this.writeStream(stream, false);
    }
    this.socket.uncork();
    if (this.lingeringPending()) return;
  }

  /**
   * Writes what `stream` has ready at once, as `ngx_http_v2_send_chain`
   * sends a stream's frames as its response gives them, when nothing holds
   * them back: the socket takes more and the windows are open (else the
   * stream waits for the pump, which orders the waiting streams by
   * priority). Written so that the buffers they came in are free again
   * where that costs no more than a copy (`writeReleasing`): a proxied
   * read's buffer may then be read into again (`Http2Target.tookWhole`).
   */
  sendNow(stream: Http2Stream): void {
    if (this.state === State.Closed || this.socket.destroyed || this.socketBusy || this.windowClosed(stream) || this.goaway) {
      this.wantsToSend(stream);
      return;
    }
    this.flushControl();
    this.writeStream(stream, true);
  }

  /**
   * Writes the frames `stream` has ready within the windows (the pump's step
   * for one stream); with `releasing`, through `writeReleasing`, which tells
   * the stream's response whether the buffers are free (`framesTaken`).
   */
  private writeStream(stream: Http2Stream, releasing: boolean): void {
    const target = stream.target;
    if (!target || stream.closed) return;
    const out = target.frames(Math.max(0, Math.min(this.sendWindow, stream.sendWindow)));
    for (const frame of out.frames) this.socketWrittenBytes += frame.length;
    if (releasing) target.framesTaken = writeReleasing(this.socket, out.frames);
    else {
      for (const frame of out.frames) this.socket.write(frame);
      target.framesTaken = false;
    }
    this.sendWindow -= out.dataBytes;
    stream.sendWindow -= out.dataBytes;
    if (target.hasOutput && !this.socketBusy && (this.sendWindow <= 0 || stream.sendWindow <= 0)) {
      // waits for WINDOW_UPDATE
    } else if (target.hasOutput) {
      this.markReady(stream);
    }
    target.afterWrite();
  }

  /** Whether the connection is to linger once what was written is out (GOAWAY sent, no stream left). */
  private lingeringPending(): boolean {
    if (this.goaway && this.processing === 0 && !this.lingering && this.state !== State.Closed) {
      this.lingeringClose();
      return true;
    }
    return false;
  }

  /** Bytes the socket holds that the client has not taken: over TLS, less those in transit (see `InTransit`). */
  get socketBusyBytes(): number {
    const held = this.socket.writableLength;
    return this.socketInTransit ? this.socketInTransit.busy(held, this.socketWrittenBytes) : held;
  }

  /** Whether the socket holds as much as the client has not taken as its high-water mark: streams wait for its `drain`. */
  private get socketBusy(): boolean {
    return this.socketBusyBytes >= this.socket.writableHighWaterMark;
  }

  /** The socket's `drain`, for targets waiting on it. */
  onSocketDrain(cb: () => void): void {
    this.socket.once('drain', cb);
  }

  /** `ngx_http_v2_terminate_stream`: RST_STREAM with `code`, and the stream's request ends as if the client left. */
  terminateStream(stream: Http2Stream, code: number): void {
    if (stream.rstSent) return;
    this.queueControl(FRAME.RST_STREAM, 0, stream.id, uint32(code));
    stream.rstSent = true;
    stream.skipData = true;
    this.streamGone(stream);
  }

  /** The stream ended from the client's side (reset, or the connection ended): its request hears of it. */
  private streamGone(stream: Http2Stream): void {
    stream.skipData = true;
    stream.body?.aborted();
    if (stream.target) stream.target.clientGone();
    else this.removeStream(stream);
  }

  /**
   * The request of a stream is over (`ngx_http_v2_close_stream`): a stream
   * whose response did not end is reset (INTERNAL_ERROR, or PROTOCOL_ERROR
   * after a timeout); one the client had not finished gets RST_STREAM
   * NO_ERROR.
   */
  closeStream(stream: Http2Stream, timedOut = false): void {
    if (stream.closed) return;
    timedOut ||= stream.request?.timedOut === true;
    if (!stream.rstSent && !this.error) {
      if (!stream.outClosed) {
        this.queueControl(FRAME.RST_STREAM, 0, stream.id, uint32(timedOut ? H2_ERROR.PROTOCOL_ERROR : H2_ERROR.INTERNAL_ERROR));
      } else if (!stream.inClosed) {
        this.queueControl(FRAME.RST_STREAM, 0, stream.id, uint32(H2_ERROR.NO_ERROR));
      }
      stream.rstSent = true;
    }
    this.removeStream(stream);
    this.flushControl();
    this.handleConnection();
  }

  private removeStream(stream: Http2Stream): void {
    if (stream.closed) return;
    stream.closed = true;
    stream.skipData = true;
    this.streams.delete(stream.id);
    const queued = this.ready.indexOf(stream);
    if (queued !== -1) this.ready.splice(queued, 1);
    stream.node.stream = undefined;
    this.closedNodes.push(stream.node);
    this.processing--;
    stream.stage = this.owner.stat.streamFreed(stream.stage);
  }

  /**
   * `ngx_http_v2_handle_connection`: without streams, a connection that sent
   * GOAWAY closes lingering; another waits for `keepalive_timeout` (the
   * client_header_timeout set at its start runs first).
   */
  private handleConnection(): void {
    if (this.processing > 0) return;
    // idle (and so while lingering, as ngx_http_v2_lingering_close marks it)
    this.owner.stat.reusable(true);
    if (this.state === State.Closed) return;
    if (this.owner.exiting && !this.goaway) {
      this.finalize(H2_ERROR.NO_ERROR);
      return;
    }
    if (this.goaway) {
      this.lingeringClose();
      return;
    }
    if (!this.timer) this.armTimer(this.owner.server.conf.keepaliveTimeoutMs);
  }

  private armTimer(ms: number): void {
    this.clearTimer();
    this.timer = setTimeout(() => this.timedOut(), ms);
    this.timer.unref?.();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * The connection's read timer expired: a partly read frame is `client
   * timed out` (GOAWAY PROTOCOL_ERROR, `ngx_http_v2_read_handler`); an idle
   * connection closes with GOAWAY NO_ERROR (`ngx_http_v2_idle_handler`).
   */
  private timedOut(): void {
    this.timer = undefined;
    if (this.processing > 0 || this.state === State.Closed) return;
    if (this.pendingBytes > 0 || this.block) {
      this.owner.log('info', `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
      this.finalize(H2_ERROR.PROTOCOL_ERROR);
      return;
    }
    this.finalize(H2_ERROR.NO_ERROR);
  }

  /**
   * Graceful shutdown or reload (`c->close` in `ngx_http_v2_read_handler`):
   * an idle connection ends with GOAWAY now, a busy one sends GOAWAY and
   * ends once its streams are done.
   */
  stop(): void {
    if (this.state === State.Closed || this.lingering) return;
    if (this.processing === 0) {
      this.finalize(H2_ERROR.NO_ERROR);
      return;
    }
    if (!this.goaway) {
      this.goaway = true;
      this.sendGoaway(H2_ERROR.NO_ERROR);
      this.flushControl();
    }
  }

  /** A connection error: nginx's info line, then GOAWAY with `code` (`ngx_http_v2_connection_error`). */
  private connectionError(code: number, message: string): void {
    if (message) this.owner.log('info', message);
    this.finalize(code);
  }

  /**
   * `ngx_http_v2_finalize_connection`: GOAWAY with `code` (none when the
   * socket failed), every stream's request ends, and the connection closes
   * lingering.
   */
  private finalize(code: number | undefined): void {
    if (this.state === State.Closed) return;
    this.clearTimer();
    if (code !== undefined && !this.error && !this.goaway) {
      this.goaway = true;
      this.sendGoaway(code);
    }
    this.flushControl();
    this.state = State.Closed;
    for (const stream of this.streams.values()) {
      stream.inClosed = true;
      this.streamGone(stream);
      this.removeStream(stream);
    }
    if (this.error) {
      this.socket.destroy();
      return;
    }
    this.lingeringClose();
  }

  /**
   * `ngx_http_v2_lingering_close`: what was written goes out, the write side
   * is shut, and what the client still sends is read and dropped until it
   * closes, nothing comes for `lingering_timeout`, or `lingering_time`
   * passed (`lingering_close off` closes at once).
   */
  private lingeringClose(): void {
    if (this.lingering) return;
    this.lingering = true;
    this.state = State.Closed;
    this.clearTimer();
    const { lingering } = this.owner.server.conf;
    if (lingering.close === 'off') {
      this.socket.end(() => this.socket.destroy());
      return;
    }
    this.socket.end();
    const deadline = Date.now() + lingering.timeMs;
    let seen = this.socket.bytesRead;
    const check = (): void => {
      if (this.socket.destroyed) return;
      const now = Date.now();
      if (this.socket.bytesRead === seen || now >= deadline) {
        this.socket.destroy();
        return;
      }
      seen = this.socket.bytesRead;
      setTimeout(check, Math.min(lingering.timeoutMs, deadline - now)).unref();
    };
    this.socket.off('end', this.onEnd);
    this.socket.once('end', () => this.socket.destroy());
    setTimeout(check, Math.min(lingering.timeoutMs, lingering.timeMs)).unref();
  }

  private close(): void {
    this.state = State.Closed;
    this.clearTimer();
    this.socket.destroy();
  }

  /** Closes the connection at once (worker_connections reuse, fast shutdown). */
  destroy(): void {
    this.error = true;
    this.finalize(undefined);
    this.socket.destroy();
  }
}

/** Takes `item` out of `list`; whether it was there. */
function remove<T>(list: T[], item: T): boolean {
  const at = list.indexOf(item);
  if (at === -1) return false;
  list.splice(at, 1);
  return true;
}

/**
 * Whether `:path` is a request target nginx's `ngx_http_parse_uri` takes:
 * an origin form starting with `/` or an absolute URI (not `*`), without
 * spaces or control characters.
 */
function validPath(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) return false;
  }
  return value.startsWith('/') || /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(value);
}
