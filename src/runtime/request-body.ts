/**
 * Reading a client request body whole before it is proxied, as nginx does
 * with `proxy_request_buffering on` (`ngx_http_read_client_request_body` in
 * `src/http/ngx_http_request_body.c`): up to `client_body_buffer_size` in
 * memory, beyond that in a temporary file under `client_body_temp_path`,
 * announced by the warning `a client request body is buffered to a
 * temporary file PATH`. A chunked body larger than `client_max_body_size`
 * is refused with 413.
 */
import type { Readable } from 'node:stream';
import { systemErrorText } from '../os-errors.js';
import { logRequest } from './context.js';
import type { Exchange } from './exchange.js';
import type { TempFile } from './temp-files.js';

/** A request body read whole. */
export type RequestBody =
  | { readonly kind: 'memory'; readonly data: Buffer }
  | { readonly kind: 'file'; readonly file: TempFile; readonly size: number };

/** Why a body could not be read: a status to answer with, or the client went away (0). */
export interface BodyFailure {
  readonly status: number;
}

/** The body as a stream for the upstream request; the caller closes the file afterwards. */
export function bodyStream(body: RequestBody): Buffer | Readable {
  if (body.kind === 'memory') return body.data;
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
    timer = setTimeout(onTimeout, timeoutMs);
  });
  stream.on('resume', disarm);
  stream.once('close', disarm);
  stream.once('end', disarm);
}

/** Reads the body of `ex` completely. */
export async function readRequestBody(ex: Exchange): Promise<RequestBody | BodyFailure> {
  const { r, cx } = ex;
  const source = ex.body!;
  const limit = r.loc.clientBodyBufferSizeBytes;
  const max = r.loc.clientMaxBodySizeBytes;
  const chunks: Buffer[] = [];
  let size = 0;
  let file: TempFile | undefined;
  let written = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (max > 0 && size > max) {
        logRequest(cx, r, 'error', `client intended to send too large chunked body: ${size} bytes`);
        await file?.handle.close();
        return { status: 413 };
      }
      if (!file && size <= limit) {
        chunks.push(chunk);
        continue;
      }
      if (!file) {
        try {
          file = await cx.tempFiles.create(r.loc.clientBodyTempPath);
        } catch (err) {
          logRequest(cx, r, 'crit', `open() "${(err as NodeJS.ErrnoException).path ?? r.loc.clientBodyTempPath.dir}" failed (${systemErrorText(err)})`);
          return { status: 500 };
        }
        logRequest(cx, r, 'warn', `a client request body is buffered to a temporary file ${file.path}`);
        const head = Buffer.concat(chunks);
        chunks.length = 0;
        await file.handle.write(head, 0, head.length, 0);
        written = head.length;
      }
      await file.handle.write(chunk, 0, chunk.length, written);
      written += chunk.length;
    }
  } catch {
    await file?.handle.close().catch(() => undefined);
    return { status: 0 };
  }
  // the length read is the request's from now on (`$content_length` of a chunked body)
  r.bodyLength = size;
  if (file) return { kind: 'file', file, size };
  return { kind: 'memory', data: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) };
}
