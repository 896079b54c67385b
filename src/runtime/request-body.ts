/**
 * Reading a client request body whole before it is proxied, as nginx does
 * with `proxy_request_buffering on` (`ngx_http_read_client_request_body` in
 * `src/http/ngx_http_request_body.c`): in memory while it fits nginx's body
 * buffer, beyond that in a temporary file under `client_body_temp_path`,
 * announced by the warning `a client request body is buffered to a
 * temporary file PATH` (with `client_body_in_file_only`, always in a file,
 * announced at notice level). A body without a declared length (chunked, or
 * HTTP/2 without `Content-Length`) larger than `client_max_body_size` is
 * refused with 413; a client that sends nothing for `client_body_timeout`
 * gets 408 (the connection is closed without a response).
 */
import type { Readable } from 'node:stream';
import { unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { systemErrorText } from '../os-errors.js';
import { logRequest } from './context.js';
import type { Exchange } from './exchange.js';
import type { HttpRequestState } from './request.js';
import type { TempFile } from './temp-files.js';
import type { LogLevel } from '../log/levels.js';

/**
 * Whether `r` comes with a body, as nginx sees it: a `Content-Length` other
 * than 0 or a `Transfer-Encoding` (HTTP/1.x), or an HTTP/2 stream whose
 * HEADERS frame did not end it (`body`: the stream's request).
 */
export function requestHasBody(r: HttpRequestState, body: Readable | undefined): boolean {
  // ngx_http_read_client_request_body reads an HTTP/2 body until the stream ends, whatever its length says
  if (r.protocol === 'HTTP/2.0' && body !== undefined && 'expectsData' in body) return (body as Readable & { expectsData: boolean }).expectsData;
  const length = r.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return r.headers['transfer-encoding'] !== undefined;
}

/**
 * Whether `r`'s body comes without a length, as a chunked one does: nginx
 * takes an HTTP/2 request without `Content-Length` whose HEADERS frame did
 * not end the stream as chunked (`ngx_http_v2_run_request` sets
 * `r->headers_in.chunked`).
 */
export function bodyOfUnknownLength(r: HttpRequestState, body: Readable | undefined): boolean {
  return r.headers['transfer-encoding'] !== undefined || (r.headers['content-length'] === undefined && http2BodyOfUnknownLength(r, body));
}

function http2BodyOfUnknownLength(r: HttpRequestState, body: Readable | undefined): boolean {
  if (r.protocol !== 'HTTP/2.0' || body === undefined) return false;
  return (body as Readable & { expectsData?: boolean }).expectsData === true;
}

/**
 * A request body a handler may discard instead of reading (an HTTP/1.x
 * connection's, an HTTP/2 stream's).
 */
export interface DiscardableBody {
  /**
   * `ngx_http_discard_request_body`: the body is read and dropped from now
   * on. Returns 400 when what has arrived is an invalid chunked body.
   */
  discard(): number | undefined;
  /**
   * A client waiting for `100 Continue` before it sends the body does not
   * get it: the response does not want the body (an HTTP/1.1 body).
   */
  forgoContinue?(): void;
  /**
   * The body is about to be read whole (`ngx_http_read_client_request_body`
   * without `request_body_no_buffering`): an HTTP/2 stream opens its window
   * all the way for it.
   */
  readWhole?(): void;
  /**
   * Whether the connection has read the body's end, so that the data being
   * delivered is its last piece (an HTTP/1.x body; reads nothing).
   */
  readonly endRead?: boolean;
}

/**
 * Discards the body of `ex`'s request, as nginx does before a response of
 * its own (`return`, static files, error pages). Returns 400, with nginx's
 * error line `client sent invalid chunked body`, when the body is invalid.
 */
export function discardRequestBody(ex: Exchange): number | undefined {
  const body = ex.body as (Readable & Partial<DiscardableBody>) | undefined;
  if (ex.r.parent || typeof body?.discard !== 'function') return undefined;
  const failed = body.discard();
  if (failed !== undefined) logRequest(ex.cx, ex.r, 'error', 'client sent invalid chunked body');
  return failed;
}

/**
 * Tells a client waiting for `100 Continue` (`Expect: 100-continue`) that
 * it will not get it for this request: nginx sets `r->expect_tested` for a
 * special response and for an `error_page` with a code of its own other
 * than 200 (`ngx_http_special_response_handler`, `ngx_http_send_error_page`),
 * so the error goes out without the interim response.
 */
export function forgoContinue(ex: Exchange): void {
  const body = ex.body as (Readable & Partial<DiscardableBody>) | undefined;
  if (!ex.r.parent) body?.forgoContinue?.();
}

/** A request body read whole. */
export type RequestBody =
  | { readonly kind: 'memory'; readonly data: Buffer }
  | {
    readonly kind: 'file'; readonly file: TempFile; readonly size: number;
    /** `client_body_in_file_only clean`: the file is removed once the response starts (and at the latest when the request ends). */
    readonly clean: boolean;
  };

/**
 * Removes the temp file of a `client_body_in_file_only clean` body, as
 * nginx does when the upstream's response header goes to the client
 * (`ngx_http_upstream_send_response` runs the file's pool cleanup).
 */
export function removeCleanBody(body: RequestBody | undefined): void {
  if (body?.kind !== 'file' || !body.clean) return;
  try {
    // at once, as nginx's unlink(): the client may look for the file as soon as it has the response
    unlinkSync(body.file.path);
  } catch {
    // already removed
  }
}

/** Why a body could not be read: a status to answer with, or the client went away (0). */
export interface BodyFailure {
  readonly status: number;
}

/** The body as a stream for the upstream request; the caller closes the file afterwards. */
export function bodyStream(body: RequestBody): Buffer | Readable {
  if (body.kind === 'memory') return body.data;
  if (body.size === 0) return Buffer.alloc(0);
  return body.file.handle.createReadStream({ start: 0, end: body.size - 1, autoClose: false });
}

/**
 * Bounds how long a body being written upstream may wait
 * (`proxy_send_timeout`, `ngx_http_upstream_send_request_handler`): the
 * writer pauses `stream` while the connection takes no more (undici does on
 * a full socket buffer), and `onTimeout` is called when it stays paused for
 * `timeoutMs`. A client that is slow to send is not the upstream's fault:
 * only pauses count.
 */
export function watchSendTimeout(stream: Readable, timeoutMs: number, onTimeout: () => void): void {
  let timer: NodeJS.Timeout | undefined;
  const disarm = (): void => clearTimeout(timer);
  stream.on('pause', () => {
    disarm();
    // a pipe pauses its source once more as it comes apart, when the upstream took the whole body: nothing waits then
    if (stream.readableEnded || stream.destroyed) return;
    timer = setTimeout(onTimeout, timeoutMs);
  });
  stream.on('resume', disarm);
  stream.once('close', disarm);
  stream.once('end', disarm);
}

/**
 * `client_body_timeout` for a body passed on as it arrives
 * (`proxy_request_buffering off`, `ngx_http_read_unbuffered_request_body`):
 * `onTimeout` is called when no data came for `timeoutMs` while the body was
 * wanted; time spent paused because the upstream takes no more does not
 * count. The stream is paused here: its consumer resumes it (undici does as
 * it starts writing the body), so that watching takes no data away.
 */
export function watchReadTimeout(stream: Readable, timeoutMs: number, onTimeout: () => void): void {
  stream.pause();
  const timer: NodeJS.Timeout = setTimeout(() => {
    if (stream.readableEnded || stream.destroyed) return;
    if (stream.isPaused()) timer.refresh();
    else onTimeout();
  }, timeoutMs);
  const disarm = (): void => clearTimeout(timer);
  stream.on('data', () => timer.refresh());
  stream.once('end', disarm);
  stream.once('close', disarm);
}

/**
 * The bytes a body may take in memory when it is not kept in a file only;
 * beyond them it goes to a temp file. nginx sizes its body buffer so that a
 * body of known length smaller than `client_body_buffer_size` and a quarter
 * fits whole (over HTTP/2, one no larger than the buffer,
 * `ngx_http_v2_read_request_body`); otherwise the buffer is
 * `client_body_buffer_size`, and once it is full with more to come, the body
 * goes to the file. (nginx also keeps in memory what arrived with the
 * request header, up to `client_header_buffer_size`: a body at most that
 * much larger than this limit may stay in memory in nginx.)
 */
function bufferLimit(r: HttpRequestState): number {
  const { loc } = r;
  const buffer = loc.clientBodyBufferSizeBytes;
  const declared = r.headers['content-length'];
  if (declared === undefined || r.headers['transfer-encoding'] !== undefined) return buffer;
  const length = Number(declared);
  if (r.protocol === 'HTTP/2.0') return length <= buffer ? length : buffer;
  return length < buffer + (buffer >> 2) ? length : buffer;
}

/** Streams whose data `keepPassedBody` already keeps. */
const kept = new WeakSet<Readable>();

/**
 * `$request_body` of a body passed on as it arrives (`proxy_request_buffering
 * off`): nginx's body buffers still hold it once read when it fits them
 * (`r->request_body->bufs`), so it is kept here up to the same size, and
 * is the request's body once complete; a larger one is not kept.
 */
export function keepPassedBody(r: HttpRequestState, stream: Readable): void {
  if (kept.has(stream)) return;
  kept.add(stream);
  const limit = bufferLimit(r);
  let chunks: Buffer[] | undefined = [];
  let size = 0;
  // the stream is paused (watchReadTimeout): a listener added now takes nothing from the upstream request
  stream.on('data', (chunk: Buffer) => {
    if (!chunks) return;
    size += chunk.length;
    if (size <= limit) chunks.push(chunk);
    else chunks = undefined;
  });
  stream.once('end', () => {
    if (chunks) r.requestBody = { kind: 'memory', data: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) };
  });
}

/**
 * Opens the body's temp file; with `client_body_in_file_only clean` its
 * name is removed when the request ends. The caller owns the handle.
 */
async function openBodyFile(ex: Exchange, keeping: BodyKeeping): Promise<TempFile | BodyFailure> {
  const { r, cx } = ex;
  const { loc } = r;
  const persistent = keeping.inFileOnly !== 'off';
  let file: TempFile;
  try {
    file = await cx.tempFiles.create(loc.clientBodyTempPath, persistent);
  } catch (err) {
    logRequest(cx, r, 'crit', `open() "${(err as NodeJS.ErrnoException).path ?? loc.clientBodyTempPath.dir}" failed (${systemErrorText(err)})`);
    return { status: 500 };
  }
  // a request that ended while the file was being made has no more use for it (its reader closes it)
  if (!r.ended && keeping.announced) logRequest(cx, r, persistent ? 'notice' : 'warn', `a client request body is buffered to a temporary file ${file.path}`);
  if (keeping.inFileOnly === 'clean') r.atEnd(() => void unlink(file.path).catch(() => undefined));
  return file;
}

/** Writes all of `data` at `position`. */
async function write(file: TempFile, data: Buffer, position: number): Promise<void> {
  for (let done = 0; done < data.length;) {
    const { bytesWritten } = await file.handle.write(data, done, data.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * Stops reading a body that is refused: the rest is read and dropped while
 * the response goes out (nginx discards it, then closes lingering).
 */
function discard(it: AsyncIterator<Buffer>, source: Readable, failure: BodyFailure): BodyFailure {
  void it.return?.();
  source.resume();
  return failure;
}

/**
 * Reads the body of `ex` completely. A body in a file comes with its open
 * handle, which the caller closes once the request no longer needs it;
 * whatever else ends the reading (the client went away, the request ended,
 * a timeout, a refusal) closes the file here.
 */
export async function readRequestBody(ex: Exchange, keeping?: BodyKeeping): Promise<RequestBody | BodyFailure> {
  const opened: { file?: TempFile } = {};
  let read: RequestBody | BodyFailure | undefined;
  try {
    read = await readInto(ex, opened, keeping ?? { inFileOnly: ex.r.loc.clientBodyInFileOnly, announced: true });
    return read;
  } finally {
    if (opened.file && (read === undefined || 'status' in read)) void opened.file.handle.close().catch(() => undefined);
  }
}

/**
 * Where a body is kept: in a file only (`client_body_in_file_only`, or the
 * WebDAV module's PUT, `clean`), and whether that file is announced in the
 * error log (nginx's `request_body_file_log_level`, 0 for the WebDAV module).
 */
export interface BodyKeeping {
  readonly inFileOnly: 'off' | 'on' | 'clean';
  readonly announced: boolean;
}

/** `readRequestBody`, with the temp file it opens in `opened.file` as soon as it is open. */
async function readInto(ex: Exchange, opened: { file?: TempFile }, keeping: BodyKeeping): Promise<RequestBody | BodyFailure> {
  const { r, cx } = ex;
  const source = ex.body!;
  const limit = keeping.inFileOnly !== 'off' ? -1 : bufferLimit(r);
  const max = r.loc.clientMaxBodySizeBytes;
  // a length declared too large was refused before; one not declared is counted here (an HTTP/1.x
  // connection checks each chunk's size itself, as nginx's chunked filter does)
  const undeclared = r.headers['content-length'] === undefined;
  if ('maxBytes' in source) (source as Readable & { maxBytes: number }).maxBytes = max;
  (source as Readable & Partial<DiscardableBody>).readWhole?.();
  const countHere = undeclared && !('maxBytes' in source);
  const chunks: Buffer[] = [];
  let size = 0;
  let file: TempFile | undefined;
  // nginx's read timer: armed again whenever data arrives; when it expires it
  // wakes the read in progress (a promise of its own per read: racing each
  // read against one long-lived promise would keep every chunk reachable)
  let expired = false;
  let wake: (() => void) | undefined;
  const timer = setTimeout(() => {
    expired = true;
    wake?.();
  }, r.loc.clientBodyTimeoutMs);
  // the request ended meanwhile (its client went away, its stream was reset): reading stops
  let over = false;
  r.atEnd(() => {
    over = true;
    wake?.();
  });
  const it = source.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer>;
  // nginx: the read returned 0 or failed; the request ends as a 400 without a
  // response. Noted as the stream aborts, before the access log is written.
  let gone = false;
  const clientGone = (): void => {
    if (gone) return;
    gone = true;
    logRequest(cx, r, 'info', 'client prematurely closed connection');
    r.status = 400;
  };
  source.once('aborted', clientGone);
  try {
    if (limit < 0) {
      const made = await openBodyFile(ex, keeping);
      if ('status' in made) return discard(it, source, made);
      file = opened.file = made;
    }
    for (;;) {
      const next = expired || over ? undefined : await new Promise<IteratorResult<Buffer> | undefined>((resolve, reject) => {
        wake = () => resolve(undefined);
        it.next().then(resolve, reject);
      });
      wake = undefined;
      if (over) return discard(it, source, { status: 0 });
      if (!next) {
        r.timedOut = true;
        return { status: 408 };
      }
      if (next.done) break;
      timer.refresh();
      const chunk = next.value;
      if (max > 0 && countHere && size + chunk.length > max) {
        // nginx checks the total of an HTTP/2 body without a length
        logRequest(cx, r, 'error', `client intended to send too large chunked body: ${size + chunk.length} bytes`);
        return discard(it, source, { status: 413 });
      }
      if (!file && size + chunk.length <= limit) {
        chunks.push(chunk);
        size += chunk.length;
        continue;
      }
      if (!file) {
        const made = await openBodyFile(ex, keeping);
        if ('status' in made) return discard(it, source, made);
        file = opened.file = made;
        await write(file, Buffer.concat(chunks, size), 0);
        chunks.length = 0;
      }
      await write(file, chunk, size);
      size += chunk.length;
    }
  } catch (err) {
    // a body nginx refuses (an invalid chunked body): its status, with nginx's info line
    const status = (err as { status?: number }).status;
    if (status !== undefined && !gone) {
      logRequest(cx, r, (err as { level?: LogLevel }).level ?? 'error', (err as Error).message);
      return { status };
    }
    clientGone();
    return { status: 0 };
  } finally {
    clearTimeout(timer);
    source.off('aborted', clientGone);
  }
  // the length read is the request's from now on (`$content_length` of a chunked body)
  r.bodyLength = size;
  if (file) {
    r.requestBody = { kind: 'file', path: file.path };
    return { kind: 'file', file, size, clean: keeping.inFileOnly === 'clean' };
  }
  const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  r.requestBody = { kind: 'memory', data };
  return { kind: 'memory', data };
}
