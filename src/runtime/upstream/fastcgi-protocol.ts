/**
 * The FastCGI wire protocol as nginx speaks it (FastCGI Specification 1.0;
 * `ngx_http_fastcgi_module.c`): records with an 8-byte header and content of
 * at most 65535 bytes padded to a multiple of 8, name-value pairs with 1- or
 * 4-byte lengths, and the reading of a response.
 *
 * The response reader follows nginx's buffers, because they decide what the
 * error log shows and which status the client gets: the header is read into
 * one buffer of `fastcgi_buffer_size` bytes (`ngx_http_fastcgi_process_header`),
 * emptied each time STDERR before the header fills it (the allowance for many
 * PHP warnings), and a header that does not fit is `upstream sent too big
 * header`; the body goes through the event pipe's buffers
 * (`ngx_http_fastcgi_input_filter`): what is left of the header buffer, then
 * `fastcgi_buffers`-sized ones, each filtered once full (or at the end). A
 * STDERR record is logged in one `FastCGI sent in stderr: "…"` line per
 * buffer it spans, with trailing CR, LF, `.` and spaces cut off, its newlines
 * kept as they are.
 */

import { CgiResponseError, HeaderLineParser, headerBuffer, NO_BYTES, type CgiResponseReader, type CgiResponseSink } from './cgi-response.js';

/** Record types. */
export const FCGI = {
  BEGIN_REQUEST: 1,
  ABORT_REQUEST: 2,
  END_REQUEST: 3,
  PARAMS: 4,
  STDIN: 5,
  STDOUT: 6,
  STDERR: 7,
  DATA: 8,
} as const;

/** The responder role and the keep-connection flag of BEGIN_REQUEST. */
export const FCGI_RESPONDER = 1;
export const FCGI_KEEP_CONN = 1;

/** nginx sends one request per connection at a time, always with id 1. */
export const REQUEST_ID = 1;

const HEADER_BYTES = 8;
const MAX_CONTENT = 65535;
const ZERO_PADDING = Buffer.alloc(8);

/** Appends the records carrying `content` (split at 65535 bytes; one empty record for empty content). */
export function encodeRecords(type: number, requestId: number, content: Buffer, out: Buffer[]): void {
  let offset = 0;
  do {
    const len = Math.min(MAX_CONTENT, content.length - offset);
    const pad = (8 - (len % 8)) % 8;
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header[0] = 1;
    header[1] = type;
    header.writeUInt16BE(requestId, 2);
    header.writeUInt16BE(len, 4);
    header[6] = pad;
    header[7] = 0;
    out.push(header);
    if (len > 0) out.push(content.subarray(offset, offset + len));
    if (pad > 0) out.push(ZERO_PADDING.subarray(0, pad));
    offset += len;
  } while (offset < content.length);
}

/** The BEGIN_REQUEST record body: role, flags, five reserved bytes. */
export function beginRequestBody(keepConn: boolean): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt16BE(FCGI_RESPONDER, 0);
  b[2] = keepConn ? FCGI_KEEP_CONN : 0;
  return b;
}

function encodeLength(n: number, out: Buffer[]): void {
  if (n < 128) {
    out.push(Buffer.from([n]));
    return;
  }
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE((n | 0x80000000) >>> 0, 0);
  out.push(b);
}

/** Encodes name-value pairs as the content of PARAMS records. Names and values are byte strings. */
export function encodeParams(pairs: readonly (readonly [string, string])[]): Buffer {
  const out: Buffer[] = [];
  for (const [name, value] of pairs) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    encodeLength(n.length, out);
    encodeLength(v.length, out);
    out.push(n, v);
  }
  return Buffer.concat(out);
}

/**
 * A STDERR record before the end of the header had a `fastcgi_catch_stderr`
 * string: the response is an invalid header (nginx logs nothing more than
 * the stderr line).
 */
export class StderrCaught extends Error {}

/** Settings of the reader: `fastcgi_buffer_size`, the size of one of `fastcgi_buffers`, `fastcgi_keep_conn`, `fastcgi_catch_stderr`. */
export interface ReaderSettings {
  readonly bufferSize: number;
  readonly bodyBufferSize: number;
  readonly keepConn: boolean;
  readonly catchStderr?: readonly string[];
}

/** States of the record reader (`ngx_http_fastcgi_state_e`). */
const enum St { Version, Type, IdHi, IdLo, LengthHi, LengthLo, PaddingLength, Reserved, Data, Padding }

const CR = 0x0d;
const LF = 0x0a;

/** The end of a STDERR piece once trailing CR, LF, `.` and spaces are cut; the first byte always stays. */
export function stderrEnd(buf: Buffer, start: number, end: number): number {
  let m = end - 1;
  while (start < m) {
    const c = buf[m]!;
    if (c !== LF && c !== CR && c !== 0x2e && c !== 0x20) break;
    m--;
  }
  return end > start ? m + 1 : start;
}

/**
 * Reads one FastCGI response from the bytes of a connection. `push` each
 * chunk as it arrives and `eof` when the connection closes; the sink gets
 * the stderr lines, the header, the body and the end.
 * @throws CgiResponseError from `push` for what nginx refuses
 */
export class ResponseReader implements CgiResponseReader {
  private state = St.Version;
  private type = 0;
  private length = 0;
  private padding = 0;
  private phase: 'header' | 'body' | 'done' = 'header';

  // the header buffer (nginx's u->buffer): bytes [0, last), read up to pos. Each read is parsed to its end before the
  // next (a header line it cuts is copied by HeaderLineParser), nothing before pos is read again: the worker's
  // shared header buffer (`headerBuffer`) serves every reader
  private buf: Buffer = NO_BYTES;
  private pos = 0;
  private last = 0;
  private stdoutSeen = false;
  /** The header lines, a line split over STDOUT records or reads joined. */
  private readonly headerLines = new HeaderLineParser();

  // the body: room left in the pipe buffer being filled, and the STDERR piece waiting for it to fill
  private buffered = true;
  private room = 0;
  private pendingStderr: Buffer[] = [];
  /** Body bytes the response's `Content-Length` still promises, -1 when it has none (nginx's `f->rest`). */
  private rest = -1;
  /** STDOUT data not handed to the sink yet (`emit`): `heldIn[heldStart, heldEnd)`. */
  private heldIn: Buffer | undefined;
  private heldStart = 0;
  private heldEnd = 0;

  constructor(private readonly settings: ReaderSettings, private readonly sink: CgiResponseSink) {}

  /** Takes the next bytes read from the connection; its STDOUT goes to the sink before the call returns (or throws). */
  push(chunk: Buffer): void {
    try {
      this.take(chunk);
    } finally {
      this.flushBody();
    }
  }

  private take(chunk: Buffer): void {
    let offset = 0;
    if (this.phase === 'header') this.buf = headerBuffer(this.settings.bufferSize);
    while (offset < chunk.length && this.phase === 'header') {
      const n = Math.min(chunk.length - offset, this.buf.length - this.last);
      chunk.copy(this.buf, this.last, offset, offset + n);
      this.last += n;
      offset += n;
      if (!this.processHeader()) {
        if (this.last === this.buf.length) throw new CgiResponseError('upstream sent too big header', 'header-too-big');
        continue;
      }
      // the header is done: the rest of the header buffer is the first body buffer
      const room = this.buf.length - this.pos;
      const first = Buffer.from(this.buf.subarray(this.pos, this.last));
      this.buf = NO_BYTES;
      const reading = this.sink.header(this.headerLines.lines, room, undefined);
      if (reading === 'stop') {
        this.phase = 'done';
        return;
      }
      this.phase = 'body';
      this.buffered = reading.buffered;
      this.rest = reading.contentLength;
      this.room = room;
      this.body(first);
    }
    if (offset < chunk.length && this.phase === 'body') this.body(chunk.subarray(offset));
  }

  /** The connection closed: a partly filled body buffer is filtered (`ngx_event_pipe_read_upstream` at EOF). */
  eof(): void {
    if (this.phase === 'body') this.flushStderr();
  }

  /**
   * The header phase over the bytes in the header buffer
   * (`ngx_http_fastcgi_process_header`); true once the header is complete.
   */
  private processHeader(): boolean {
    for (;;) {
      if (this.state < St.Data) {
        const end = this.readRecordHeader(this.buf, this.pos, this.last);
        this.pos = end;
        if (this.state < St.Data) return false;
        if (this.type !== FCGI.STDOUT && this.type !== FCGI.STDERR) {
          throw new CgiResponseError(`upstream sent unexpected FastCGI record: ${this.type}`);
        }
        if (this.type === FCGI.STDOUT && this.length === 0) throw new CgiResponseError('upstream prematurely closed FastCGI stdout', 'premature-close');
      }
      if (this.state === St.Padding) {
        if (this.pos + this.padding < this.last) {
          this.state = St.Version;
          this.pos += this.padding;
          continue;
        }
        if (this.pos + this.padding === this.last) {
          this.state = St.Version;
          this.pos = this.last;
          return false;
        }
        this.padding -= this.last - this.pos;
        this.pos = this.last;
        return false;
      }
      if (this.type === FCGI.STDERR) {
        if (this.length === 0) {
          this.state = St.Padding;
          continue;
        }
        const msg = this.pos;
        if (this.pos + this.length <= this.last) {
          this.pos += this.length;
          this.length = 0;
          this.state = St.Padding;
        } else {
          this.length -= this.last - this.pos;
          this.pos = this.last;
        }
        const text = this.buf.toString('latin1', msg, stderrEnd(this.buf, msg, this.pos));
        this.sink.stderr(text);
        if (this.settings.catchStderr?.some((pattern) => text.includes(pattern))) throw new StderrCaught();
        if (this.pos === this.last) {
          // nothing of the header yet: the buffer is emptied for more stderr
          if (!this.stdoutSeen) this.pos = this.last = 0;
          return false;
        }
        continue;
      }
      // STDOUT: header lines, up to the end of this record or of the bytes read
      this.stdoutSeen = true;
      const end = Math.min(this.last, this.pos + this.length);
      const start = this.pos;
      const after = this.headerLines.parse(this.buf, this.pos, end);
      this.pos = after === -1 ? end : after;
      this.length -= this.pos - start;
      if (this.length === 0) this.state = St.Padding;
      if (after !== -1) return true;
      if (this.pos === this.last) return false;
    }
  }

  /**
   * Reads record-header bytes of `buf` from `from` to `to`
   * (`ngx_http_fastcgi_process_record`); returns where it stopped: after the
   * header (state Data), or at `to`.
   */
  private readRecordHeader(buf: Buffer, from: number, to: number): number {
    for (let p = from; p < to; p++) {
      const ch = buf[p]!;
      switch (this.state) {
        case St.Version:
          if (ch !== 1) throw new CgiResponseError(`upstream sent unsupported FastCGI protocol version: ${ch}`);
          this.state = St.Type;
          break;
        case St.Type:
          if (ch !== FCGI.STDOUT && ch !== FCGI.STDERR && ch !== FCGI.END_REQUEST) {
            throw new CgiResponseError(`upstream sent invalid FastCGI record type: ${ch}`);
          }
          this.type = ch;
          this.state = St.IdHi;
          break;
        case St.IdHi:
          if (ch !== 0) throw new CgiResponseError(`upstream sent unexpected FastCGI request id high byte: ${ch}`);
          this.state = St.IdLo;
          break;
        case St.IdLo:
          if (ch !== REQUEST_ID) throw new CgiResponseError(`upstream sent unexpected FastCGI request id low byte: ${ch}`);
          this.state = St.LengthHi;
          break;
        case St.LengthHi:
          this.length = ch << 8;
          this.state = St.LengthLo;
          break;
        case St.LengthLo:
          this.length |= ch;
          this.state = St.PaddingLength;
          break;
        case St.PaddingLength:
          this.padding = ch;
          this.state = St.Reserved;
          break;
        default:
          this.state = St.Data;
          return p + 1;
      }
    }
    return to;
  }

  /**
   * Body bytes, cut at the event pipe's buffer boundaries: a buffer is
   * filtered once full (or at the end), so a STDERR piece is logged when its
   * buffer is full; without buffering each read is filtered as it comes.
   */
  private body(data: Buffer): void {
    let offset = 0;
    while (offset < data.length && this.phase === 'body') {
      const n = this.buffered ? Math.min(data.length - offset, this.room) : data.length - offset;
      this.filter(data, offset, offset + n);
      offset += n;
      if (!this.buffered) this.flushStderr();
      else if ((this.room -= n) === 0) {
        this.room = this.settings.bodyBufferSize;
        this.flushStderr();
      }
    }
  }

  /** Logs the STDERR piece read so far (after the STDOUT before it). */
  private flushStderr(): void {
    if (this.pendingStderr.length === 0) return;
    this.flushBody();
    const piece = this.pendingStderr.length === 1 ? this.pendingStderr[0]! : Buffer.concat(this.pendingStderr);
    this.pendingStderr = [];
    this.sink.stderr(piece.toString('latin1', 0, stderrEnd(piece, 0, piece.length)));
  }

  /** The body records in `data[from, to)` (`ngx_http_fastcgi_input_filter`). */
  private filter(data: Buffer, from: number, to: number): void {
    let pos = from;
    for (;;) {
      if (this.phase !== 'body') return;
      if (this.state < St.Data) {
        if (pos === to) return;
        pos = this.readRecordHeader(data, pos, to);
        if (this.state < St.Data) return;
        if (this.type === FCGI.STDOUT && this.length === 0) {
          this.state = St.Padding;
          if (this.rest > 0) throw new CgiResponseError('upstream prematurely closed FastCGI stdout', 'premature-close');
          continue;
        }
        if (this.type === FCGI.END_REQUEST) {
          if (this.rest > 0) throw new CgiResponseError('upstream prematurely closed FastCGI request', 'premature-close');
          if (!this.settings.keepConn) {
            // without fastcgi_keep_conn, nginx 1.30 reads on to the connection's end, which ends the response
            this.flushStderr();
            this.phase = 'done';
            return;
          }
        }
      }
      if (this.state === St.Padding) {
        if (this.type === FCGI.END_REQUEST) {
          // the connection is kept only when nothing follows the end of the request
          if (pos + this.padding <= to) this.finish(pos + this.padding === to);
          else this.padding -= to - pos;
          return;
        }
        if (pos + this.padding > to) {
          this.padding -= to - pos;
          return;
        }
        pos += this.padding;
        this.state = St.Version;
        continue;
      }
      if (this.length === 0) {
        this.state = St.Padding;
        continue;
      }
      if (pos === to) return;
      const n = Math.min(this.length, to - pos);
      if (this.type === FCGI.STDERR) this.pendingStderr.push(Buffer.from(data.subarray(pos, pos + n)));
      else if (this.type === FCGI.STDOUT) this.stdout(data, pos, pos + n);
      pos += n;
      this.length -= n;
      if (this.length === 0) {
        if (this.type === FCGI.STDERR) this.flushStderr();
        this.state = St.Padding;
      }
    }
  }

  /** STDOUT data, `data[from, to)`, held to the response's `Content-Length` as nginx does. */
  private stdout(data: Buffer, from: number, to: number): void {
    if (this.rest === 0) {
      this.flushBody();
      this.sink.log('warn', 'upstream sent more data than specified in "Content-Length" header');
      this.finish(false);
      return;
    }
    if (this.rest > 0 && to - from > this.rest) {
      this.emit(data, from, from + this.rest);
      this.rest = 0;
      this.flushBody();
      this.sink.log('warn', 'upstream sent more data than specified in "Content-Length" header');
      this.finish(false);
      return;
    }
    if (this.rest > 0) this.rest -= to - from;
    this.emit(data, from, to);
  }

  /**
   * Holds STDOUT data, `data[from, to)`, for the sink, joined to the bytes
   * held when it follows them in the same piece: cut only at the pipe's
   * buffer boundaries (`body`), it reaches the sink a record's content at a
   * time, not a buffer's.
   */
  private emit(data: Buffer, from: number, to: number): void {
    if (this.heldIn === data && this.heldEnd === from) {
      this.heldEnd = to;
      return;
    }
    this.flushBody();
    this.heldIn = data;
    this.heldStart = from;
    this.heldEnd = to;
  }

  /** Hands the held STDOUT data to the sink. */
  private flushBody(): void {
    const held = this.heldIn;
    if (held === undefined) return;
    this.heldIn = undefined;
    this.sink.body(this.heldStart === 0 && this.heldEnd === held.length ? held : held.subarray(this.heldStart, this.heldEnd));
  }

  private finish(reusable: boolean): void {
    this.flushBody();
    this.flushStderr();
    this.phase = 'done';
    this.sink.end(reusable);
  }
}
