/**
 * The MP4 module's content handler (`ngx_http_mp4_handler`): GET and HEAD
 * of a file; with `start=SECONDS` and/or `end=SECONDS` in the arguments
 * (`ngx_http_mp4_atofp`: milliseconds kept) the body is the movie cropped
 * to that span (`mp4-file.ts`: `ftyp`, the new `moov`, an `mdat` header,
 * then the samples' range of the file), its `Content-Length` and `ETag`
 * those of that body, whose single range may be asked for; else the file
 * as the static handler sends it. A file nginx cannot crop is a 500 with
 * nginx's `[error]` line. A URI ending in `/`, or one that is not a
 * regular file, is left to the static and index handlers (nginx's
 * `NGX_DECLINED`), as is a directory's redirect.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { argument } from '../../config/modules/http-variables.js';
import { logRequest } from '../context.js';
import { statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { discardRequestBody } from '../request-body.js';
import { cropMp4, Mp4Error, mp4Atofp, type Mp4Crop, type Mp4Span } from './mp4-file.js';
import { fsPath, sendFile } from './send-file.js';
import { fileError, serveStatic, statOrError } from './static.js';

/**
 * The span `start` and `end` ask for, as `ngx_http_mp4_handler` reads them:
 * an `end` above 0 without a valid `start` starts at 0, one at or before
 * the start is ignored; undefined when neither asks for cropping.
 */
function mp4Span(args: string): Mp4Span | undefined {
  let startMs = -1n;
  let lengthMs = 0n;
  const start = argument(args, 'start');
  if (start !== undefined) startMs = mp4Atofp(start, 3);
  const end = argument(args, 'end');
  if (end !== undefined) {
    const endMs = mp4Atofp(end, 3);
    if (endMs > 0n) {
      if (startMs < 0n) startMs = 0n;
      if (endMs > startMs) lengthMs = endMs - startMs;
    }
  }
  return startMs < 0n ? undefined : { startMs, lengthMs };
}

/** Opens a file for reading, or returns the error `open()` failed with. */
async function openOrError(path: string): Promise<FileHandle | NodeJS.ErrnoException> {
  try {
    return await open(fsPath(path), 'r');
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}

/** Serves an `mp4` location's request. */
export async function mp4Request(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD') return statusOutcome(405);
  if (r.uri.endsWith('/')) return serveStatic(ex);
  // ngx_http_mp4_handler discards the body before it opens the file
  const failed = discardRequestBody(ex);
  if (failed !== undefined) return statusOutcome(failed);
  const path = r.mapUriToPath(r.uri);
  const st = await r.untimed(() => statOrError(path));
  if (st instanceof Error) return fileError(ex, st, path);
  if (!st.isFile()) return serveStatic(ex);
  // nginx opens the file (an unreadable one is its 403) and reads the atoms within its turn
  const fd = await r.untimed(() => openOrError(path));
  if (fd instanceof Error) return fileError(ex, fd, path);
  const span = mp4Span(r.args);
  let crop: Mp4Crop = { kind: 'whole' };
  try {
    if (span !== undefined) crop = await r.untimed(() => cropMp4(fd, path, st.size, span, r.loc.mp4));
  } catch (err) {
    if (!(err instanceof Mp4Error)) throw err;
    logRequest(ex.cx, r, err.level, err.message);
    return statusOutcome(500);
  } finally {
    await fd.close();
  }
  return sendFile(ex, path, st, {
    prefix: crop.kind === 'cropped' ? { bytes: crop.header, zeroSizeAt: crop.zeroSizeAt, fileStart: crop.fileStart, fileEnd: crop.fileEnd } : undefined,
    // r->single_range: a request with a span gets one range at most
    singleRange: span !== undefined,
    action: 'sending mp4 to client',
  });
}
