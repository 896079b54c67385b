/**
 * The response header of a FastCGI, uwsgi or SCGI server as nginx reads it:
 * header lines (`ngx_http_parse_header_line` with underscores allowed, as
 * the three modules call it), the optional HTTP status line uwsgi and SCGI
 * servers may send first (`ngx_http_parse_status_line`), and the error a
 * response nginx refuses ends with, in nginx's words.
 */

/** A response nginx refuses, in nginx's words (the message of its error-log line); `code` is its row in upstream/errors.ts's `FAILURES`. */
export class CgiResponseError extends Error {
  constructor(message: string, readonly code: 'invalid-header' | 'premature-close' | 'header-too-big' = 'invalid-header') {
    super(message);
  }
}

/** States of a header line (`ngx_http_parse_header_line`). */
const enum Hs { Start, Name, SpaceBeforeValue, Value, SpaceAfterValue, IgnoreLine, AlmostDone, HeaderAlmostDone }

/** No bytes: the piece a parser holds before its first, the header buffer of a reader before its first read or past its header. */
export const NO_BYTES = Buffer.alloc(0);

let sharedHeader = NO_BYTES;

/**
 * The worker's header buffer (nginx's `u->buffer`), `sizeBytes` of it
 * (`*_buffer_size`), for a reader to read a header into while it takes one
 * read, so that a response whose header comes in one read (nearly all)
 * allocates none. Another reader's read overwrites it: a reader that reads
 * again what an earlier read brought (uwsgi's and SCGI's status line,
 * memcached's first line) moves it to a buffer of its own when a read ends
 * inside the header; FastCGI's reader parses each read to its end. Grows to
 * the largest size asked for.
 */
export function headerBuffer(sizeBytes: number): Buffer {
  if (sharedHeader.length < sizeBytes) sharedHeader = Buffer.allocUnsafe(sizeBytes);
  return sharedHeader.length === sizeBytes ? sharedHeader : sharedHeader.subarray(0, sizeBytes);
}

/**
 * The header buffer of a reader that reads its first line again from its
 * start at each read (uwsgi's and SCGI's status line, memcached's first
 * line): the worker's (`headerBuffer`) until a read ends inside the header,
 * then one of the reader's own, `sizeBytes` long.
 */
export class KeptHeaderBuffer {
  private own: Buffer | undefined;

  constructor(private readonly sizeBytes: number) {}

  /** The buffer a read's header bytes go into. */
  forRead(): Buffer {
    return this.own ?? headerBuffer(this.sizeBytes);
  }

  /** A read ended inside the header: the first `last` bytes of `buf` (`forRead`'s) move to the reader's own buffer, which is returned. */
  keep(buf: Buffer, last: number): Buffer {
    if (this.own === undefined) {
      this.own = Buffer.allocUnsafe(this.sizeBytes);
      buf.copy(this.own, 0, 0, last);
    }
    return this.own;
  }
}
const CR = 0x0d;
const LF = 0x0a;

/** Characters of a header name nginx takes as they are (its `lowcase` table, and `_`). */
const NAME_CHAR = new Uint8Array(256);
for (const c of '-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_') NAME_CHAR[c.charCodeAt(0)] = 1;

/**
 * Header lines read piece by piece (`ngx_http_parse_header_line`): a line
 * may end in one piece and start in an earlier one (FastCGI records, reads
 * of a socket). `lines` are the lines read, as byte strings, the value
 * without its leading and trailing spaces; a line without a colon is a
 * name with an empty value; a line `HTTP/…` is skipped.
 */
export class HeaderLineParser {
  readonly lines: [string, string][] = [];
  private hs = Hs.Start;
  /** Bytes of the line being parsed that came in earlier pieces, and their number. */
  private line: Buffer[] = [];
  private lineLength = 0;
  /** Offset in the line where its value ends (nginx's `r->header_end`). */
  private headerEnd = 0;
  /** The piece being parsed. */
  private buf: Buffer = NO_BYTES;

  /**
   * Parses `buf` from `from` to `end`: returns the offset after the empty
   * line ending the header, or -1 when the piece ended first (what it had
   * of a line is kept for the next piece).
   * @throws CgiResponseError `upstream sent invalid header: "…\xNN..."` for a line nginx does not accept
   */
  parse(buf: Buffer, from: number, end: number): number {
    this.buf = buf;
    let lineStart = from;
    for (let p = from; p < end; p++) {
      /** Offset in the line of byte `p`. */
      const at = this.lineLength + p - lineStart;
      const ch = buf[p]!;
      switch (this.hs) {
        case Hs.Start:
          if (ch === CR || ch === LF) this.headerEnd = at;
          if (ch === CR) this.hs = Hs.HeaderAlmostDone;
          else if (ch === LF) return p + 1;
          else if (NAME_CHAR[ch] || (ch > 0x20 && ch !== 0x7f && ch !== 0x3a)) this.hs = Hs.Name;
          else this.invalidHeader(lineStart, p, at);
          break;
        case Hs.Name:
          if (NAME_CHAR[ch]) break;
          if (ch === CR || ch === LF) this.headerEnd = at;
          if (ch === 0x3a) this.hs = Hs.SpaceBeforeValue;
          else if (ch === CR) this.hs = Hs.AlmostDone;
          else if (ch === LF) lineStart = this.endLine(lineStart, p);
          else if (ch === 0x2f && this.lineIs(lineStart, p, 'HTTP')) this.hs = Hs.IgnoreLine;
          else if (ch <= 0x20 || ch === 0x7f) this.invalidHeader(lineStart, p, at);
          break;
        case Hs.SpaceBeforeValue:
        case Hs.Value:
        case Hs.SpaceAfterValue:
          if (ch === 0) this.invalidHeader(lineStart, p, at);
          if ((ch === CR || ch === LF) && this.hs !== Hs.SpaceAfterValue) this.headerEnd = at;
          if (ch === CR) this.hs = Hs.AlmostDone;
          else if (ch === LF) lineStart = this.endLine(lineStart, p);
          else if (ch === 0x20) {
            if (this.hs === Hs.Value) {
              this.headerEnd = at;
              this.hs = Hs.SpaceAfterValue;
            }
          } else this.hs = Hs.Value;
          break;
        case Hs.IgnoreLine:
          if (ch === LF) {
            this.hs = Hs.Start;
            this.line = [];
            this.lineLength = 0;
            lineStart = p + 1;
          }
          break;
        case Hs.AlmostDone:
          if (ch === LF) lineStart = this.endLine(lineStart, p);
          else if (ch !== CR) this.invalidHeader(lineStart, p, this.headerEnd);
          break;
        case Hs.HeaderAlmostDone:
          if (ch !== LF) this.invalidHeader(lineStart, p, this.headerEnd);
          return p + 1;
      }
    }
    if (lineStart < end) {
      this.line.push(Buffer.from(buf.subarray(lineStart, end)));
      this.lineLength += end - lineStart;
    }
    return -1;
  }

  /** The bytes of the line being parsed: its earlier parts, then the piece from `lineStart` up to `p`. */
  private lineBytes(lineStart: number, p: number): Buffer {
    return Buffer.concat([...this.line, this.buf.subarray(lineStart, p)]);
  }

  /** Whether the line so far is `text`. */
  private lineIs(lineStart: number, p: number, text: string): boolean {
    return this.lineLength + p - lineStart === text.length && this.lineBytes(lineStart, p).toString('latin1') === text;
  }

  /** Takes the header line ending with the LF at `p` (its value ends at nginx's `header_end`); returns where the next line starts. */
  private endLine(lineStart: number, p: number): number {
    // a line in one piece is read from it; one over several pieces is joined first
    const bytes = this.lineLength === 0 ? this.buf.toString('latin1', lineStart, lineStart + this.headerEnd)
      : this.lineBytes(lineStart, p).toString('latin1', 0, this.headerEnd);
    if (this.lineLength > 0) {
      this.line = [];
      this.lineLength = 0;
    }
    this.hs = Hs.Start;
    const colon = bytes.indexOf(':');
    if (colon === -1) this.lines.push([bytes, '']);
    else {
      let value = colon + 1;
      while (bytes.charCodeAt(value) === 0x20) value++;
      this.lines.push([bytes.slice(0, colon), bytes.slice(value)]);
    }
    return p + 1;
  }

  /**
   * nginx's `upstream sent invalid header: "…\xNN..."`: the line up to
   * `header_end` (offset `end` in the line), and the byte there.
   */
  private invalidHeader(lineStart: number, p: number, end: number): never {
    const bytes = this.lineBytes(lineStart, p + 1);
    const text = bytes.toString('latin1', 0, end);
    const hex = bytes[end]!.toString(16).padStart(2, '0');
    throw new CgiResponseError(`upstream sent invalid header: "${text}\\x${hex}..."`);
  }
}

/** An HTTP status line as `ngx_http_parse_status_line` takes it: the code, and the line from the code to its end (`200 OK`). */
export interface StatusLine {
  readonly code: number;
  readonly text: string;
  /** The offset after the line's LF. */
  readonly end: number;
}

const isDigit = (ch: number): boolean => ch >= 0x30 && ch <= 0x39;

/**
 * `ngx_http_parse_status_line` over `buf[0, end)`: `HTTP/MAJOR.MINOR CODE
 * [TEXT]` ended by LF or CRLF. Returns the line, `again` when the bytes so
 * far may still become one, or `none` when they cannot (uwsgi and SCGI
 * servers then send CGI header lines from the first byte on).
 */
export function parseStatusLine(buf: Buffer, end: number): StatusLine | 'again' | 'none' {
  let p = 0;
  const expect = (text: string): boolean | 'again' => {
    for (const c of text) {
      if (p === end) return 'again';
      if (buf[p++] !== c.charCodeAt(0)) return false;
    }
    return true;
  };
  const http = expect('HTTP/');
  if (http !== true) return http === 'again' ? 'again' : 'none';
  // major: a digit 1-9, then digits up to 99; a dot; minor: digits up to 99
  for (const [first, sep] of [[0x31, 0x2e], [0x30, 0x20]] as const) {
    if (p === end) return 'again';
    let n = buf[p]! - 0x30;
    if (buf[p]! < first || !isDigit(buf[p]!)) return 'none';
    for (p++; ; p++) {
      if (p === end) return 'again';
      const ch = buf[p]!;
      if (ch === sep) break;
      if (!isDigit(ch)) return 'none';
      n = n * 10 + ch - 0x30;
      if (n > 99) return 'none';
    }
    p++;
  }
  while (p < end && buf[p] === 0x20) p++;
  const start = p;
  for (let i = 0; i < 3; i++, p++) {
    if (p === end) return 'again';
    if (!isDigit(buf[p]!)) return 'none';
  }
  const code = Number(buf.toString('latin1', start, p));
  if (p === end) return 'again';
  const after = buf[p]!;
  if (after !== 0x20 && after !== 0x2e && after !== CR && after !== LF) return 'none';
  for (; p < end; p++) {
    const ch = buf[p]!;
    if (ch === LF) return { code, text: buf.toString('latin1', start, p), end: p + 1 };
    if (ch === CR) {
      if (p + 1 === end) return 'again';
      if (buf[p + 1] !== LF) return 'none';
      return { code, text: buf.toString('latin1', start, p), end: p + 2 };
    }
  }
  return 'again';
}

/** What a response reader hands on, in the order it reads it. */
export interface CgiResponseSink {
  /** FastCGI's STDERR: the text of one `FastCGI sent in stderr: "…"` line (a byte string). */
  stderr(text: string): void;
  /** A line to log (`upstream sent more data than specified in "Content-Length" header` at warn). */
  log(level: 'error' | 'warn' | 'info', message: string): void;
  /**
   * The header is complete: its lines as sent (byte strings), what is left
   * of the header buffer after it (where the body starts), and the HTTP
   * status line a uwsgi or SCGI server sent first. Returns how to read the
   * body, or `stop` when no more is read.
   */
  header(lines: [string, string][], room: number, statusLine: StatusLine | undefined): BodyReading | 'stop';
  /** Body bytes after the header. */
  body(data: Buffer): void;
  /**
   * The response is complete before its connection's end (FastCGI's
   * END_REQUEST with `keep_conn`, or the body's `Content-Length` reached).
   * `reusable`: the connection may serve another request (nginx's
   * `u->keepalive`).
   */
  end(reusable: boolean): void;
}

/** How the body is read, decided from the header. */
export interface BodyReading {
  /** The body's length (its `Content-Length`, 0 for a 204 or 304 of uwsgi or SCGI), -1 when it ends with the connection. */
  readonly contentLength: number;
  /** `*_buffering` (or `X-Accel-Buffering`): the event pipe's buffers; off: each read is filtered at once. */
  readonly buffered: boolean;
}

/** Reads one response from the bytes of a connection: `push` each chunk as it arrives, `eof` when the connection closes. */
export interface CgiResponseReader {
  /** @throws CgiResponseError for what nginx refuses */
  push(chunk: Buffer): void;
  /** @throws CgiResponseError when the response was not complete */
  eof(): void;
}

/**
 * A uwsgi or SCGI response (`ngx_http_uwsgi_process_status_line` and
 * `…_process_header`, the event pipe's `ngx_event_pipe_copy_input_filter`):
 * the header in one buffer of `*_buffer_size` bytes (`upstream sent too big
 * header` when it does not fit), an HTTP status line first or not, then
 * header lines; the body as it comes, held to its length when the header
 * gives one: more is cut with nginx's warning, less before the connection
 * closes is `upstream prematurely closed connection`.
 */
export class StreamResponseReader implements CgiResponseReader {
  private phase: 'header' | 'body' | 'done' = 'header';
  /** The header buffer of the read being taken. */
  private buf: Buffer = NO_BYTES;
  private readonly headerBuf: KeptHeaderBuffer;
  private last = 0;
  /** The status line once read; `none` once the bytes cannot be one. */
  private statusLine: StatusLine | 'none' | undefined;
  private readonly headerLines = new HeaderLineParser();
  /** Where the header lines not parsed yet start in `buf`. */
  private pos = 0;
  /** Body bytes still to come, -1 when the body ends with the connection (nginx's `p->length`). */
  private rest = -1;

  constructor(bufferSizeBytes: number, private readonly sink: CgiResponseSink) {
    this.headerBuf = new KeptHeaderBuffer(bufferSizeBytes);
  }

  push(chunk: Buffer): void {
    if (this.phase === 'body') {
      this.body(chunk);
      return;
    }
    if (this.phase === 'done') return;
    this.buf = this.headerBuf.forRead();
    try {
      this.pushHeader(chunk);
    } finally {
      if (this.phase === 'header') this.buf = this.headerBuf.keep(this.buf, this.last);
    }
  }

  private pushHeader(chunk: Buffer): void {
    const n = Math.min(chunk.length, this.buf.length - this.last);
    chunk.copy(this.buf, this.last, 0, n);
    this.last += n;
    if (this.statusLine === undefined) {
      const line = parseStatusLine(this.buf, this.last);
      if (line === 'again') {
        if (this.last === this.buf.length) throw new CgiResponseError('upstream sent too big header', 'header-too-big');
        return;
      }
      this.statusLine = line;
      this.pos = line === 'none' ? 0 : line.end;
    }
    const after = this.headerLines.parse(this.buf, this.pos, this.last);
    if (after === -1) {
      this.pos = this.last;
      if (this.last === this.buf.length) throw new CgiResponseError('upstream sent too big header', 'header-too-big');
      return;
    }
    const rest = Buffer.from(this.buf.subarray(after, this.last));
    const room = this.buf.length - after;
    this.buf = NO_BYTES;
    const reading = this.sink.header(this.headerLines.lines, room, this.statusLine === 'none' ? undefined : this.statusLine);
    if (reading === 'stop') {
      this.phase = 'done';
      return;
    }
    this.phase = 'body';
    this.rest = reading.contentLength;
    if (this.rest === 0) {
      this.finish();
      return;
    }
    if (rest.length > 0) this.body(rest);
    if (n < chunk.length) this.push(chunk.subarray(n));
  }

  eof(): void {
    if (this.phase === 'body' && this.rest > 0) throw new CgiResponseError('upstream prematurely closed connection', 'premature-close');
  }

  /** Body bytes, held to the length (`ngx_event_pipe_copy_input_filter`, `ngx_http_upstream_non_buffered_filter`). */
  private body(data: Buffer): void {
    if (this.phase !== 'body') return;
    if (this.rest >= 0 && data.length > this.rest) {
      if (this.rest > 0) this.sink.body(data.subarray(0, this.rest));
      this.sink.log('warn', 'upstream sent more data than specified in "Content-Length" header');
      this.finish();
      return;
    }
    this.sink.body(data);
    if (this.rest > 0 && (this.rest -= data.length) === 0) this.finish();
  }

  private finish(): void {
    this.phase = 'done';
    this.sink.end(false);
  }
}
