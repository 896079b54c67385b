/**
 * memcached's text protocol as nginx speaks it (`ngx_http_memcached_module.c`):
 * `get KEY` with the key escaped, and the answer `VALUE KEY FLAGS LENGTH`,
 * the value and `END`, or `END` alone for a key memcached does not have.
 * The reader hands the answer on as the header nginx makes of it (200
 * typed by the location, or 404) and the value as the body.
 */
import { CgiResponseError, KeptHeaderBuffer, NO_BYTES, type CgiResponseReader, type CgiResponseSink } from './cgi-response.js';

/** What follows a value: CRLF `END` CRLF. */
const TRAILER = Buffer.from('\r\nEND\r\n', 'latin1');

/** `NGX_ESCAPE_MEMCACHED`: control characters, space and `%` as `%XX`. */
export function escapeMemcachedKey(key: string): string {
  return key.replace(/[\x00-\x20%]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

/** The request for a key (already escaped). */
export function memcachedGet(key: string): Buffer {
  return Buffer.from(`get ${key}\r\n`, 'latin1');
}

/** What the header of a value is turned into: its type, and the flags that mean gzip. */
export interface ValueHeader {
  /** The escaped key the request asked for. */
  readonly key: string;
  /** The location's type for the URI (`ngx_http_set_content_type`). */
  readonly contentType: string;
  /** `memcached_gzip_flag`; 0: flags are not read. */
  readonly gzipFlag: number;
}

/**
 * Reads memcached's answer (`ngx_http_memcached_process_header`,
 * `ngx_http_memcached_filter`): the first line in one buffer of
 * `memcached_buffer_size` bytes, then the value to its length and the
 * trailer, which must be `CRLF END CRLF` (`memcached sent invalid trailer`).
 * The connection may serve another request once the trailer, or `END`
 * alone, was read.
 */
export class MemcachedResponseReader implements CgiResponseReader {
  private phase: 'header' | 'body' | 'trailer' | 'done' = 'header';
  /** The header buffer of the read being taken. */
  private buf: Buffer = NO_BYTES;
  private readonly headerBuf: KeptHeaderBuffer;
  private last = 0;
  /** Bytes of the value still to come, then of the trailer. */
  private rest = 0;

  constructor(bufferSizeBytes: number, private readonly value: ValueHeader, private readonly sink: CgiResponseSink) {
    this.headerBuf = new KeptHeaderBuffer(bufferSizeBytes);
  }

  push(chunk: Buffer): void {
    if (this.phase === 'header') {
      this.buf = this.headerBuf.forRead();
      const n = Math.min(chunk.length, this.buf.length - this.last);
      chunk.copy(this.buf, this.last, 0, n);
      this.last += n;
      const lf = this.buf.subarray(0, this.last).indexOf(0x0a);
      if (lf === -1) {
        if (this.last === this.buf.length) throw new CgiResponseError('upstream sent too big header', 'header-too-big');
        this.buf = this.headerBuf.keep(this.buf, this.last);
        return;
      }
      const after = Buffer.from(this.buf.subarray(lf + 1, this.last));
      this.header(lf);
      this.buf = NO_BYTES;
      if (after.length > 0) this.data(after);
      if (n < chunk.length) this.data(chunk.subarray(n));
      return;
    }
    this.data(chunk);
  }

  eof(): void {
    if (this.phase === 'body' || this.phase === 'trailer') throw new CgiResponseError('upstream prematurely closed connection', 'premature-close');
  }

  /**
   * The first line, ending at `lf`: a value's header, `END`, or nginx's
   * refusal (`memcached sent invalid response: "…"`, `… invalid key …`,
   * `… invalid flags …`, `… invalid length …`).
   * @throws CgiResponseError
   */
  private header(lf: number): void {
    const { key, contentType, gzipFlag } = this.value;
    if (lf === 0 || this.buf[lf - 1] !== 0x0d) throw new CgiResponseError(`memcached sent invalid response: "${this.buf.toString('latin1', 0, lf)}"`);
    const line = this.buf.toString('latin1', 0, lf - 1);
    const invalid = (what: string): never => {
      throw new CgiResponseError(`memcached sent invalid ${what} in response "${line}" for key "${key}"`);
    };
    if (line === 'END') {
      this.sink.log('info', `key: "${key}" was not found by memcached`);
      const reading = this.sink.header([], this.buf.length - lf - 1, { code: 404, text: '404 Not Found', end: lf + 1 });
      this.phase = 'done';
      if (reading !== 'stop') this.sink.end(true);
      return;
    }
    if (!line.startsWith('VALUE ')) throw new CgiResponseError(`memcached sent invalid response: "${line}"`);
    if (!line.startsWith(key, 6)) invalid('key');
    let p = 6 + key.length;
    if (line[p++] !== ' ') throw new CgiResponseError(`memcached sent invalid response: "${line}"`);
    const space = line.indexOf(' ', p);
    if (space === -1) throw new CgiResponseError(`memcached sent invalid response: "${line}"`);
    const headers: [string, string][] = [['Content-Type', contentType]];
    if (gzipFlag) {
      const flags = line.slice(p, space);
      if (!/^\d+$/.test(flags)) invalid('flags');
      if (Number(flags) & gzipFlag) headers.push(['Content-Encoding', 'gzip']);
    }
    const length = line.slice(space + 1);
    if (!/^\d+$/.test(length)) invalid('length');
    headers.push(['Content-Length', length]);
    this.rest = Number(length);
    const reading = this.sink.header(headers, this.buf.length - lf - 1, { code: 200, text: '200 OK', end: lf + 1 });
    if (reading === 'stop') {
      this.phase = 'done';
      return;
    }
    this.phase = this.rest > 0 ? 'body' : 'trailer';
    if (this.phase === 'trailer') this.rest = TRAILER.length;
  }

  /** Value and trailer bytes. */
  private data(chunk: Buffer): void {
    let at = 0;
    if (this.phase === 'body') {
      const n = Math.min(this.rest, chunk.length);
      this.sink.body(chunk.subarray(0, n));
      at = n;
      if ((this.rest -= n) > 0) return;
      this.phase = 'trailer';
      this.rest = TRAILER.length;
    }
    if (this.phase !== 'trailer' || at === chunk.length) return;
    const got = chunk.subarray(at, at + this.rest);
    const expected = TRAILER.subarray(TRAILER.length - this.rest, TRAILER.length - this.rest + got.length);
    if (!got.equals(expected)) {
      this.sink.log('error', 'memcached sent invalid trailer');
      this.phase = 'done';
      this.sink.end(false);
      return;
    }
    if ((this.rest -= got.length) === 0) {
      this.phase = 'done';
      this.sink.end(true);
    }
  }
}
