/**
 * Sending a file as nginx's static handler does (`ngx_http_static_module.c`
 * with the not-modified and range filters), for the static handler and
 * `gzip_static`.
 */
import type { Stats } from 'node:fs';
import { closeSync, openSync, read, readSync } from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { promisify } from 'node:util';
import { systemErrorText } from '../../os-errors.js';
import { preconditionStatus, rangesFor, type ByteRange } from '../conditional.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { WORKER_READ_BYTES, workerReadBuffer, wroteReadBuffer } from '../file-read-buffer.js';
import { discardRequestBody } from '../request-body.js';
import { applyHeadersModule, contentTypeFor, keepForRangeNotSatisfiable, keptHeaders, lastModifiedSec } from '../respond.js';

/** A path as the file system expects it: URIs are byte strings (latin1). */
export const fsPath = (path: string): Buffer => Buffer.from(path, 'latin1');

/** Bytes a body starts with before a part of the file (the FLV header before `start`, an MP4's new `moov`). */
export interface FilePrefix {
  readonly bytes: Buffer;
  /** Where in the file the body goes on after `bytes`. */
  readonly fileStart: number;
  /** Where in the file the body ends (the file's end when undefined). */
  readonly fileEnd?: number;
  /**
   * Offsets in `bytes` where nginx's answer has an empty memory buffer: its
   * output chain logs `zero size buf in output` for each one it is given
   * (those inside the range sent; the range filter drops the others).
   */
  readonly zeroSizeAt?: readonly number[];
}

/** How `sendFile` sends a file beyond what the static handler does. */
export interface SendFileOptions {
  /** A `gzip_static` file, sent with `Content-Encoding: gzip`. */
  readonly gzipped?: boolean;
  /** The body is these bytes and then a part of the file: length, `ETag` and ranges are that body's. */
  readonly prefix?: FilePrefix;
  /** `r->single_range`: one range at most; more leave the response whole. */
  readonly singleRange?: boolean;
  /** The error log's `while …` once the response is sent (`log->action`; the static handler's by default). */
  readonly action?: string;
}

/**
 * Sends a file as nginx's static handler and its header filters do: the
 * request body discarded (a `100 Continue` sent to a client waiting for
 * it), the not-modified filter (304, 412), then the range filter (206 with one range
 * or `multipart/byteranges`, 416 with a `Content-Range` of `*` and the size).
 * A `gzipped` file has `Content-Encoding: gzip` (a 304 has none:
 * `ngx_http_not_modified_header_filter`). With a `prefix` the body is its
 * bytes and then the file from its `fileStart` to its `fileEnd`: length,
 * `ETag` and ranges are that body's.
 */
export async function sendFile(ex: Exchange, path: string, st: Stats, opts: SendFileOptions = {}): Promise<Outcome> {
  const { r, out } = ex;
  const { gzipped = false, prefix } = opts;
  // ngx_http_static_handler discards the body once it has the file to send
  const failed = discardRequestBody(ex);
  if (failed !== undefined) return statusOutcome(failed);
  const mtimeSec = Math.floor(st.mtimeMs / 1000);
  const lastModified = new Date(mtimeSec * 1000).toUTCString();
  const size = prefix ? prefix.bytes.length + (prefix.fileEnd ?? st.size) - prefix.fileStart : st.size;
  const etag = r.loc.etag ? `"${mtimeSec.toString(16)}-${size.toString(16)}"` : undefined;
  const final = r.errStatus || 200;
  const main = final === 200 && !r.parent;
  const condition = main ? preconditionStatus(r, mtimeSec, etag) : 200;
  if (condition === 412) return statusOutcome(412);
  const headers = keptHeaders(r);
  if (condition === 304) {
    headers.push(['Last-Modified', lastModified]);
    if (etag) headers.push(['ETag', etag]);
    applyHeadersModule(r, 304, headers);
    out.head(r, 304, headers);
    out.end();
    return DONE;
  }
  // ngx_http_set_content_type keeps a type set before (X-Accel-Redirect)
  const kept = headers.find(([name]) => name.toLowerCase() === 'content-type');
  const type = kept?.[1] ?? contentTypeFor(r);
  if (!kept) headers.push(['Content-Type', type]);
  headers.push(['Content-Length', String(size)]);
  if (final === 200) headers.push(['Last-Modified', lastModified]);
  if (etag) headers.push(['ETag', etag]);
  if (gzipped) headers.push(['Content-Encoding', 'gzip']);
  // the headers filter runs before the range filter, which sees what add_header set
  applyHeadersModule(r, 200, headers);
  const sentEtag = headers.find(([name]) => name.toLowerCase() === 'etag')?.[1];
  const ranges = main ? rangesFor(r, size, lastModifiedSec(headers), typeof sentEtag === 'string' ? sentEtag : undefined, opts.singleRange) : 'skip';
  if (ranges === 416) {
    // the file's Last-Modified is a time nginx's header filter writes for 200, 206 and 304 only, not an entry an error_page keeps
    keepForRangeNotSatisfiable(r, headers.filter(([name]) => name.toLowerCase() !== 'last-modified'), size);
    return statusOutcome(416);
  }
  let parts: { readonly head: string; readonly range: ByteRange }[] | undefined;
  let trailer = '';
  let length = size;
  let status = 200;
  const set = (name: string, value: string): void => {
    const at = headers.findIndex(([n]) => n.toLowerCase() === name.toLowerCase());
    if (at === -1) headers.push([name, value]);
    else headers[at]![1] = value;
  };
  if (Array.isArray(ranges) && ranges.length === 1) {
    // ngx_http_range_singlepart_header
    const [range] = ranges as [ByteRange];
    status = 206;
    length = range.end - range.start;
    parts = [{ head: '', range }];
    headers.push(['Content-Range', `bytes ${range.start}-${range.end - 1}/${size}`]);
  } else if (Array.isArray(ranges)) {
    // ngx_http_range_multipart_header: a boundary numbered as temp files are
    status = 206;
    const boundary = String(ex.cx.tempFiles.next()).padStart(20, '0');
    parts = ranges.map((range) => ({
      head: `\r\n--${boundary}\r\n${type ? `Content-Type: ${type}\r\n` : ''}Content-Range: bytes ${range.start}-${range.end - 1}/${size}\r\n\r\n`,
      range,
    }));
    trailer = `\r\n--${boundary}--\r\n`;
    length = parts.reduce((n, part) => n + part.head.length + part.range.end - part.range.start, trailer.length);
    set('Content-Type', `multipart/byteranges; boundary=${boundary}`);
  } else if (ranges === undefined && final === 200) headers.push(['Accept-Ranges', 'bytes']);
  // (add_trailer drops the length for a chunked response)
  const lengthAt = headers.findIndex(([n]) => n.toLowerCase() === 'content-length');
  if (lengthAt !== -1) headers[lengthAt]![1] = String(length);
  r.action = opts.action ?? 'sending response to client';
  out.head(r, status, headers);
  if (out.headOnly || length === 0) {
    out.end();
    return DONE;
  }
  for (const part of parts ?? [{ head: '', range: { start: 0, end: size } }]) {
    if (part.head && !write(ex, Buffer.from(part.head, 'latin1'))) return DONE;
    if (!(await streamBody(ex, path, part.range, prefix))) return DONE;
  }
  if (trailer && !write(ex, Buffer.from(trailer, 'latin1'))) return DONE;
  out.end();
  return DONE;
}

/** Streams a range of the body: of the prefix's bytes, then of the file from its `fileStart`; false as `streamFile`. */
async function streamBody(ex: Exchange, path: string, range: ByteRange, prefix: FilePrefix | undefined): Promise<boolean> {
  if (!prefix) return streamFile(ex, path, range);
  for (const at of prefix.zeroSizeAt ?? []) {
    if (range.start < at && at < range.end) logZeroSizeBuf(ex, at);
  }
  const own = prefix.bytes.length;
  const head = prefix.bytes.subarray(Math.min(range.start, own), Math.min(range.end, own));
  if (head.length > 0 && !write(ex, head)) return false;
  return streamFile(ex, path, { start: Math.max(range.start - own, 0) + prefix.fileStart, end: Math.max(range.end - own, 0) + prefix.fileStart });
}

/**
 * `ngx_output_chain`'s alert for an empty memory buffer (temporary, not in
 * a file). nginx prints the buffer's address; jinx prints its offset in
 * the body in the address's place.
 */
function logZeroSizeBuf(ex: Exchange, at: number): void {
  const address = at.toString(16).toUpperCase().padStart(16, '0');
  logRequest(ex.cx, ex.r, 'alert', `zero size buf in output t:1 r:0 f:0 0000000000000000 ${address}-${address} 0000000000000000 0-0`);
}

/** Writes bytes of the body; false when the client is gone. */
function write(ex: Exchange, bytes: Buffer): boolean {
  if (ex.out.gone) return false;
  ex.r.bodyBytesSent += bytes.length;
  ex.out.write(bytes);
  return true;
}

/**
 * A part of a file up to this size is read with one read: its bytes are all
 * at hand when the client's window opens, so HTTP/2 DATA frames are cut where
 * nginx cuts them (nginx reads on as the window opens; a second read that a
 * busy disk finishes late would cut a frame short).
 */
const ONE_READ_MAX_BYTES = 128 * 1024;

/**
 * Larger parts are read `FIRST_READ_BYTES` at a time. In node's thread pool
 * (`aio threads`) each read is a trip to a pool thread and back (on one
 * CPU, a context switch each way), so there reads grow, twice as large
 * after each read the client had taken whole when the next one began, up
 * to `MAX_READ_BYTES`: a 1 MiB file went out at 536 requests a second in
 * 64 KiB reads, 802-857 in 256 KiB ones (README, Performance, "Large
 * static files"). Read in the worker, 64 KiB reads did 1,239-1,446 against
 * 1,210-1,226 growing ones, 142-148 MiB peak against 155-157 (16 clients,
 * each read then a new buffer; now the worker's own, file-read-buffer.ts).
 * One read is in memory at a time, so a client that stops reading holds
 * at most one read beside its socket buffers.
 */
const FIRST_READ_BYTES = WORKER_READ_BYTES;
const MAX_READ_BYTES = 256 * 1024;

/**
 * Bytes of a file sent to one client before the rest waits for the next
 * turn of the event loop: nginx's `ngx_http_write_filter` sends at most
 * `sendfile_max_chunk` (2m by default, with or without sendfile) in one
 * `send_chain` and then delays the connection's next write by a 1 ms timer,
 * so that a client taking a large file as fast as it is read does not hold
 * the worker (jinx waits for the next turn instead of 1 ms).
 */
const MAX_CHUNK_BYTES = 2 * 1024 * 1024;

/** `fs.read` through node's thread pool (`aio threads`). */
const readInPool = promisify(read);

/**
 * Streams a part of a file to the client, a read at a time, waiting for
 * the client to drain when the connection says so; false when the client
 * went away or the file could not be opened or read (the connection is then
 * aborted, with nginx's `read() "…" failed`).
 *
 * The file is opened in the worker, as nginx opens it, and read there too
 * unless the location has `aio threads` (`ngx_http_static_handler`,
 * `ngx_output_chain` → `ngx_read_file`: a blocking `pread` without aio):
 * a read of pages the kernel has cached takes microseconds, where a trip
 * through node's thread pool costs a context switch each way on a busy
 * CPU (a 2 KB file 1.5-2.4× the requests a second, README, Performance,
 * "Large static files"). Past `MAX_CHUNK_BYTES` in one turn the rest
 * waits for the next turn, as nginx's does. With `aio threads`
 * each read goes to node's thread pool, for storage slow enough that a
 * blocking read would hold every connection of the worker.
 */
async function streamFile(ex: Exchange, path: string, range: ByteRange): Promise<boolean> {
  const { r, out } = ex;
  if (range.end <= range.start) return true;
  const size = range.end - range.start;
  const inPool = r.loc.aioThreads;
  let fd: number | undefined;
  try {
    fd = openSync(fsPath(path), 'r');
    let readBytes = size <= ONE_READ_MAX_BYTES ? size : FIRST_READ_BYTES;
    const maxReadBytes = inPool ? MAX_READ_BYTES : FIRST_READ_BYTES;
    let turnBytes = 0;
    for (let at = range.start; at < range.end;) {
      if (out.gone) return false;
      const want = Math.min(readBytes, range.end - at);
      const buffer = inPool ? Buffer.allocUnsafe(want) : workerReadBuffer(want);
      const bytesRead = inPool ? (await readInPool(fd, buffer, 0, want, at)).bytesRead : readSync(fd, buffer, 0, want, at);
      // a file cut short since its stat: what there was went out
      if (bytesRead === 0) return true;
      if (out.gone) return false;
      at += bytesRead;
      r.bodyBytesSent += bytesRead;
      const wait = !out.write(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
      if (!inPool) wroteReadBuffer(buffer, out);
      turnBytes += bytesRead;
      if (wait) {
        if (!(await drained(out))) return false;
        turnBytes = 0;
      }
      if (out.bufferedBytes === 0) readBytes = Math.min(readBytes * 2, maxReadBytes);
      if (turnBytes >= MAX_CHUNK_BYTES && at < range.end) {
        await nextTurn();
        turnBytes = 0;
      }
    }
    return true;
  } catch (err) {
    logRequest(ex.cx, r, 'crit', `read() "${path}" failed (${systemErrorText(err as Error)})`);
    out.abort();
    return false;
  } finally {
    if (fd !== undefined) {
      try {
        closeSync(fd);
      } catch {
        // a close that fails (EIO on a network file system) releases the descriptor all the same
      }
    }
  }
}

/** Resolves once the client took what it was given (true), or went away (false). */
function drained(out: Exchange['out']): Promise<boolean> {
  return new Promise((resolve) => out.onDrain(() => resolve(!out.gone)));
}
