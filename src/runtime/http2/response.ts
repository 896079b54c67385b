/**
 * The response on an HTTP/2 stream, written as nginx's
 * `src/http/v2/ngx_http_v2_filter_module.c` writes it: a HEADERS frame (with
 * CONTINUATION frames past the client's frame size) whose block is encoded
 * as `ngx_http_v2_header_filter` encodes it (`:status` indexed when the
 * static table has it; `server`, `date`, `content-type`, `content-length`,
 * `last-modified` and `location` as literals with incremental indexing of
 * their static names; every other field a literal without indexing, names
 * lowercased, strings Huffman-coded where that is shorter), then DATA frames
 * of at most `http2_chunk_size` within the stream's and the connection's
 * windows (`ngx_http_v2_send_chain`), the last one carrying END_STREAM, or
 * a trailers HEADERS frame after them (`add_trailer`).
 */
import type { LocationConf } from '../../config/route-table.js';
import { callDrainWaiters, type ClientResponseTarget, type SendTimeout, SendTimer } from '../exchange.js';
import { httpDate } from '../http1/response.js';
import { InTransit } from '../in-transit.js';
import type { HttpRequestState } from '../request.js';
import { responseHeaders, responseTrailers } from '../respond.js';
import { FLAG, FRAME, frameHeader } from './frames.js';
import { HeaderBlockWriter, STATIC_TABLE } from './hpack.js';

/** Header fields `ngx_http_v2_header_filter` leaves out: HTTP/1.x connection fields, which HTTP/2 has none of. */
const HTTP1_ONLY = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** Static-table indices of the fields nginx writes with incremental indexing, in its order. */
const INDEXED_NAMES: readonly (readonly [string, number])[] = [
  ['server', 54], ['date', 33], ['content-type', 31], ['content-length', 28], ['last-modified', 44], ['location', 46],
];

/** `:status` values of the static table, by code (`NGX_HTTP_V2_STATUS_*_INDEX`). */
const STATUS_INDEX = new Map(STATIC_TABLE.flatMap(([n, v], i) => (n === ':status' ? [[Number(v), i + 1] as const] : [])));

/** Body bytes a stream holds before `write` asks the handler to wait. */
const HIGH_WATER_MARK = 64 * 1024;

/** The writer of header blocks (blocks are written one at a time, synchronously), and the one of `lastLiterals`. */
const writer = new HeaderBlockWriter();
const literalWriter = new HeaderBlockWriter();

/**
 * The last value written for each of `INDEXED_NAMES` and its encoding: a
 * `Date` stays the same for a second, a `Server` and most `Content-Type`s
 * for good, so their Huffman code is not made again for every response.
 */
const lastLiterals = INDEXED_NAMES.map(() => ({ value: '', encoded: undefined as Buffer | undefined }));

/** Writes `value` as a string literal, its encoding kept in `last` for the next response with the same value. */
function literalOf(last: { value: string; encoded: Buffer | undefined }, value: string): void {
  if (last.encoded === undefined || last.value !== value) {
    literalWriter.string(value, false);
    last.encoded = literalWriter.take();
    last.value = value;
  }
  writer.octets(last.encoded);
}

/**
 * The header block of a response, as `ngx_http_v2_header_filter` encodes
 * it; `passedServer` tells that `Server` came from the upstream
 * (`proxy_pass_header`) and so is one of the other fields.
 */
export function encodeResponseHead(status: number, list: readonly (readonly [string, string | string[]])[], passedServer: boolean, date: string | undefined): Buffer {
  const index = STATUS_INDEX.get(status);
  if (index !== undefined) writer.octet(0x80 | index);
  else {
    writer.octet(0x40 | 8);
    writer.raw(String(status).padStart(3, '0').slice(-3));
  }
  const done = new Uint8Array(list.length);
  for (let n = 0; n < INDEXED_NAMES.length; n++) {
    const [lower, idx] = INDEXED_NAMES[n]!;
    if (lower === 'date' && date !== undefined) {
      writer.int(0x40, 6, idx);
      literalOf(lastLiterals[n]!, date);
      continue;
    }
    if (lower === 'server' && passedServer) continue;
    for (let i = 0; i < list.length; i++) {
      const [name, value] = list[i]!;
      if (name.length !== lower.length || name.toLowerCase() !== lower) continue;
      done[i] = 1;
      const values = typeof value === 'string' ? undefined : value;
      for (let k = 0; k < (values ? values.length : 1); k++) {
        const v = values ? values[k]! : (value as string);
        writer.int(0x40, 6, idx);
        // ngx_http_v2_header_filter writes the length raw
        if (lower === 'content-length') writer.raw(v);
        else literalOf(lastLiterals[n]!, v);
      }
      if (lower === 'date') break;
    }
  }
  for (let i = 0; i < list.length; i++) {
    if (done[i]) continue;
    const [name, value] = list[i]!;
    if (HTTP1_ONLY.has(name.toLowerCase())) continue;
    const values = typeof value === 'string' ? undefined : value;
    for (let k = 0; k < (values ? values.length : 1); k++) {
      writer.octet(0);
      writer.string(name, true);
      writer.string(values ? values[k]! : (value as string), false);
    }
  }
  return writer.take();
}

/** A header block of trailer fields (`ngx_http_v2_create_trailers_frame`), or undefined when there are none. */
function encodeTrailers(trailers: readonly [string, string][]): Buffer | undefined {
  if (trailers.length === 0) return undefined;
  for (const [name, value] of trailers) {
    writer.octet(0);
    writer.string(name, true);
    writer.string(value, false);
  }
  return writer.take();
}

/**
 * What a response reads and sets of its stream and the stream's connection
 * (`Http2Stream` and `Http2Connection` of connection.ts, which creates the
 * response: typed here so that this file does not import that one).
 */
interface ResponseStream {
  readonly id: number;
  readonly requestLength: number;
  outClosed: boolean;
  finished: boolean;
  readonly conn: {
    readonly frameSize: number;
    readonly socketBusyBytes: number;
    wantsToSend(stream: ResponseStream): void;
    sendNow(stream: ResponseStream): void;
    windowClosed(stream: ResponseStream): boolean;
    onSocketDrain(cb: () => void): void;
    closeStream(stream: ResponseStream, timedOut?: boolean): void;
  };
}

/** The response to one stream's request. */
export class Http2Target implements ClientResponseTarget {
  /** The encoded header block, once `head` was called; `headFin` when it ends the stream. */
  private headBlock: Buffer | undefined;
  private headFin = false;
  private headSent = false;
  /** `103 Early Hints` header blocks to write before the response's head. */
  private readonly hints: Buffer[] = [];
  private readonly pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Body bytes the handler wrote, and the length the header declared (-1: none). */
  private written = 0;
  private declared = -1;
  private ended = false;
  /** The frame with END_STREAM was written (or the stream was reset). */
  private finSent = false;
  private trailersOf: HttpRequestState | undefined;
  /** The response was cut short: what was given goes out, then the stream is reset. */
  private cutShort = false;
  /** The trailers' block once made (null: not yet). */
  private trailerBlock: Buffer | undefined | null = null;
  private abortListener: ((err: NodeJS.ErrnoException | undefined) => void) | undefined;
  private readonly closeListeners: ((completed: boolean) => void)[] = [];
  private closedOnce = false;
  private gone_ = false;
  private needDrain = false;
  /** `afterWrite` waits for the connection's socket to drain (one listener at a time). */
  private waitsForSocket = false;
  /** What of `written` is in transit, made when first asked. */
  private inTransit: InTransit | undefined;
  /** `onDrain`'s callbacks, called when the handler may write again or the response is over. */
  private drainWaiters: (() => void)[] | undefined;
  private sendTimeout: SendTimeout | undefined;
  /** `send_timeout`'s timer, made when a write first leaves data waiting. */
  private sendTimer: SendTimer | undefined;
  private conf: LocationConf | undefined;
  /** Frames written for the response, headers included (`$bytes_sent`: nginx counts each frame's header and payload). */
  bytesSent = 0;
  /**
   * The connection's last write of this stream's frames is done with the
   * buffers they came in (the socket took them, or copies went:
   * `Http2Connection.sendNow`); set by the connection at each write.
   */
  framesTaken = false;

  constructor(private readonly stream: ResponseStream, readonly headOnly: boolean) {}

  get requestBodyBytes(): number {
    return this.stream.requestLength;
  }

  get started(): boolean {
    return this.headBlock !== undefined;
  }

  watchSend(timeout: SendTimeout): void {
    this.sendTimeout = timeout;
  }

  /** `http2_chunk_size` of the location the response was made in (8k by default). */
  private get chunkSize(): number {
    return this.conf?.http2ChunkSizeBytes ?? 8192;
  }

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
    if (this.gone_ || this.headBlock !== undefined) return;
    const passedServer = headers.some(([n]) => n.length === 6 && n.toLowerCase() === 'server');
    const { wire, list: all } = responseHeaders(r, status, headers);
    // ngx_http_v2_header_filter: a 204 has no type (an upstream's goes too, where HTTP/1.x keeps it)
    const list = wire === 204 ? all.filter(([n]) => n.toLowerCase() !== 'content-type') : all;
    if (wire === 204) r.sentHeaders.delete('content-type');
    let date: string | undefined;
    if (!list.some(([n]) => n.length === 4 && n.toLowerCase() === 'date')) {
      date = httpDate();
      r.sentHeaders.set('date', date);
    }
    this.conf = r.loc;
    let fin = this.headOnly || wire === 204 || wire === 304;
    if (!fin && !r.expectTrailers && list.some(([n, v]) => n.toLowerCase() === 'content-length' && v === '0')) fin = true;
    if (!fin && (r.expectTrailers || r.upstreamTrailers)) this.trailersOf = r;
    this.headFin = fin;
    const length = list.find(([n]) => n.toLowerCase() === 'content-length')?.[1];
    if (typeof length === 'string' && /^\d+$/.test(length)) this.declared = Number(length);
    this.headBlock = encodeResponseHead(wire, list, passedServer, date);
    this.stream.conn.wantsToSend(this.stream);
  }

  flushHead(): void {
    if (this.headBlock !== undefined) this.stream.conn.wantsToSend(this.stream);
  }

  /** `ngx_http_v2_early_hints_filter`: a HEADERS frame with `:status 103` and the headers (connection-specific ones left out). */
  earlyHints(headers: readonly (readonly [string, string])[]): void {
    if (this.gone_ || this.headBlock !== undefined) return;
    this.hints.push(encodeResponseHead(103, headers, true, undefined));
    this.stream.conn.wantsToSend(this.stream);
  }

  write(chunk: Buffer | string): boolean {
    if (this.gone_ || this.ended || this.headFin || this.finSent || this.cutShort) return !this.gone_;
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    if (data.length === 0) return !this.needDrain;
    this.pending.push(data);
    this.pendingBytes += data.length;
    this.written += data.length;
    // a frame's worth or more goes out at once when it can (a proxied read's buffer is then free again: `tookWhole`);
    // less waits for the connection's pump, which writes every stream's small frames together
    if (data.length >= this.chunkSize) this.stream.conn.sendNow(this.stream);
    else this.stream.conn.wantsToSend(this.stream);
    if (this.pendingBytes >= HIGH_WATER_MARK) {
      this.needDrain = true;
      this.blocked();
      return false;
    }
    return true;
  }

  end(chunk?: Buffer | string): void {
    if (this.ended) return;
    if (chunk !== undefined) this.write(chunk);
    this.ended = true;
    this.abortListener = undefined;
    if (this.gone_ || this.finSent) {
      this.finish(!this.gone_);
      return;
    }
    this.stream.conn.wantsToSend(this.stream);
  }

  /**
   * `send_timeout` while written data waits for the socket (`ngx_http_writer`);
   * a stream waiting for the client's window has no timer (the write event
   * is `delayed`), so the timer starts over then.
   */
  private blocked(): void {
    const timeout = this.sendTimeout;
    if (!timeout) return;
    this.sendTimer ??= new SendTimer({
      ms: () => timeout.ms(),
      expired: () => {
        if (this.stream.conn.windowClosed(this.stream)) this.sendTimer!.blocked();
        else timeout.expired();
      },
    });
    this.sendTimer.blocked();
  }

  /** The handler may write again, or the response is over: the send timer stops waiting, `onDrain`'s callbacks run. */
  private drained(): void {
    this.sendTimer?.unblocked();
    callDrainWaiters(this.drainWaiters);
  }

  /** Whether frames wait to be written: the header block, body bytes, or the end of the stream. */
  get hasOutput(): boolean {
    if (this.gone_ || this.finSent) return false;
    if (this.hints.length > 0) return true;
    if (this.headBlock !== undefined && !this.headSent) return true;
    if (this.cutShort) return this.pendingBytes > 0;
    return this.headSent && (this.pendingBytes > 0 || (this.ended && !this.headFin));
  }

  /**
   * The frames to write now, DATA within `window` octets
   * (`ngx_http_v2_send_chain`): the header block first, body bytes in
   * frames of the chunk size (and the client's frame size) at most, END_STREAM
   * on the last (or an empty DATA frame, or the trailers, once the response ended).
   */
  frames(window: number): { frames: Buffer[]; dataBytes: number } {
    const frames: Buffer[] = [];
    let dataBytes = 0;
    const { conn, id } = this.stream;
    for (const block of this.hints) frames.push(...this.headerFrames(FRAME.HEADERS, block, false));
    this.hints.length = 0;
    if (this.headBlock !== undefined && !this.headSent) {
      this.headSent = true;
      frames.push(...this.headerFrames(FRAME.HEADERS, this.headBlock, this.headFin));
      if (this.headFin) this.finSent = true;
    }
    const frameSize = Math.min(this.chunkSize, conn.frameSize);
    while (this.pendingBytes > 0 && window > 0 && !this.finSent) {
      const size = Math.min(frameSize, window, this.pendingBytes);
      const payload = this.take(size);
      // the last DATA frame ends the stream, as soon as what the header declared was written
      // (nginx's output chain then carries last_buf with the data), unless trailers follow
      const last = !this.cutShort && this.pendingBytes === 0 && (this.ended || this.written === this.declared) && this.trailers() === undefined;
      frames.push(frameHeader(size, FRAME.DATA, last ? FLAG.END_STREAM : 0, id), payload);
      this.bytesSent += 9 + size;
      dataBytes += size;
      window -= size;
      if (last) this.finSent = true;
    }
    if (this.ended && !this.cutShort && this.pendingBytes === 0 && !this.finSent && this.headSent) {
      const trailers = this.trailers();
      if (trailers) frames.push(...this.headerFrames(FRAME.HEADERS, trailers, true));
      else {
        frames.push(frameHeader(0, FRAME.DATA, FLAG.END_STREAM, id));
        this.bytesSent += 9;
      }
      this.finSent = true;
    }
    return { frames, dataBytes };
  }

  /**
   * The trailers' header block, made once when the body ends
   * (`ngx_http_v2_create_trailers_frame`): undefined without `add_trailer`
   * fields that apply, and then the last DATA frame ends the stream.
   */
  private trailers(): Buffer | undefined {
    if (!this.trailersOf) return undefined;
    if (this.trailerBlock === null) this.trailerBlock = encodeTrailers(responseTrailers(this.trailersOf));
    return this.trailerBlock;
  }

  /** A header block in a HEADERS frame and CONTINUATION frames past the client's frame size (`ngx_http_v2_create_headers_frame`). */
  private headerFrames(type: number, block: Buffer, fin: boolean): Buffer[] {
    const { conn, id } = this.stream;
    const out: Buffer[] = [];
    let rest = block;
    let flags = fin ? FLAG.END_STREAM : 0;
    for (;;) {
      const size = Math.min(rest.length, conn.frameSize);
      if (size === rest.length) flags |= FLAG.END_HEADERS;
      out.push(frameHeader(size, type, flags, id), rest.subarray(0, size));
      rest = rest.subarray(size);
      if (rest.length === 0) break;
      type = FRAME.CONTINUATION;
      flags = 0;
    }
    this.bytesSent += 9 + block.length;
    return out;
  }

  private take(size: number): Buffer {
    const first = this.pending[0]!;
    if (first.length === size) {
      this.pending.shift();
      this.pendingBytes -= size;
      return first;
    }
    if (first.length > size) {
      this.pending[0] = first.subarray(size);
      this.pendingBytes -= size;
      return first.subarray(0, size);
    }
    const out = Buffer.allocUnsafe(size);
    let o = 0;
    while (o < size) {
      const b = this.pending[0]!;
      const n = Math.min(b.length, size - o);
      b.copy(out, o, 0, n);
      o += n;
      if (n === b.length) this.pending.shift();
      else this.pending[0] = b.subarray(n);
    }
    this.pendingBytes -= size;
    return out;
  }

  /** After the connection wrote this stream's frames: a handler waiting to write hears `drain`; a finished response closes the stream. */
  afterWrite(): void {
    if (this.needDrain && this.pendingBytes < HIGH_WATER_MARK && this.stream.conn.socketBusyBytes < HIGH_WATER_MARK) {
      this.needDrain = false;
      this.drained();
    } else if (this.needDrain && this.pendingBytes < HIGH_WATER_MARK && !this.waitsForSocket) {
      this.waitsForSocket = true;
      this.stream.conn.onSocketDrain(() => {
        this.waitsForSocket = false;
        this.afterWrite();
      });
    }
    if (this.finSent) {
      this.stream.outClosed = true;
      if (this.ended || this.cutShort) this.finish(true);
    } else if (this.cutShort && !this.hasOutput) {
      this.reset(false);
    }
  }

  /**
   * Gives up a response the client stopped taking (`send_timeout`): the
   * handler hears of it as of a client that left (with ETIMEDOUT), then the
   * stream is reset (PROTOCOL_ERROR, as nginx resets a stream that timed out).
   */
  timedOut(): void {
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.(Object.assign(new Error('client timed out'), { code: 'ETIMEDOUT' }));
    this.reset(true);
  }

  /** Body bytes the stream holds, less those written in this turn and the one before (see `InTransit`): they go at the connection's next pump. */
  get bufferedBytes(): number {
    return (this.inTransit ??= new InTransit()).busy(this.pendingBytes, this.written);
  }

  /** Nothing written waits in the buffers it came in: the stream holds none of it, and its frames were taken (`framesTaken`). */
  tookWhole(): boolean {
    return this.pendingBytes === 0 && this.framesTaken;
  }

  get gone(): boolean {
    return this.gone_;
  }

  get highWaterMark(): number {
    return HIGH_WATER_MARK;
  }

  onDrain(cb: () => void): void {
    if (this.gone_ || !this.needDrain) {
      queueMicrotask(cb);
      return;
    }
    (this.drainWaiters ??= []).push(cb);
  }

  /**
   * Resets the stream (RST_STREAM INTERNAL_ERROR, as nginx resets a stream it
   * gives up); the connection stays. With `flush` (a response cut short
   * upstream), the header and body given so far go out first.
   */
  abort(how?: 'flush' | 'reset'): void {
    if (how === 'flush' && !this.gone_ && !this.ended && this.headBlock !== undefined && (!this.headSent || this.pendingBytes > 0)) {
      this.cutShort = true;
      this.abortListener = undefined;
      this.stream.conn.wantsToSend(this.stream);
      return;
    }
    this.reset(false);
  }

  /** Resets the stream: RST_STREAM INTERNAL_ERROR, or PROTOCOL_ERROR after a timeout (`ngx_http_v2_close_stream`). */
  private reset(timedOut: boolean): void {
    if (this.closedOnce) return;
    this.abortListener = undefined;
    this.ended = true;
    this.gone_ = true;
    this.pending.length = 0;
    this.pendingBytes = 0;
    this.finish(false, timedOut);
  }

  onAbort(cb: (err: NodeJS.ErrnoException | undefined) => void): void {
    this.abortListener = cb;
  }

  readonly tunnelable = false;

  tunnel(): undefined {
    return undefined;
  }

  whenClosed(cb: (completed: boolean) => void): void {
    this.closeListeners.push(cb);
  }

  /** The client reset the stream or the connection ended: the handler hears of it, and the response is over. */
  clientGone(): void {
    if (this.closedOnce) return;
    this.gone_ = true;
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.(Object.assign(new Error('stream reset'), { code: 'ECONNRESET' }));
    if (this.ended || listener === undefined) this.finish(false);
  }

  /** The response is over: the stream closes and the request is logged. */
  private finish(completed: boolean, timedOut = false): void {
    if (this.closedOnce) return;
    this.closedOnce = true;
    this.drained();
    this.sendTimer?.stop();
    this.stream.finished = true;
    this.stream.conn.closeStream(this.stream, timedOut);
    for (const cb of this.closeListeners.splice(0)) cb(completed);
  }
}
