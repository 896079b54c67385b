/**
 * The FLV module's content handler (`ngx_http_flv_handler`): GET and HEAD
 * of a file; with `start=OFFSET` in the arguments (digits only, below the
 * file's size) the body is the 13-byte FLV header and the file from OFFSET
 * (its `Content-Length` and `ETag` those of that body, whose ranges may be
 * asked for), else the file as the static handler sends it. A URI ending in
 * `/`, or one that is not a regular file, is left to the static and index
 * handlers (nginx's `NGX_DECLINED`), as is a directory's redirect.
 */
import { argument } from '../../config/modules/http-variables.js';
import { statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { sendFile } from './send-file.js';
import { fileError, serveStatic, statOrError } from './static.js';

/** `ngx_flv_header`: signature, version 1, audio and video, header size 9, first previous-tag size 0. */
const FLV_HEADER = Buffer.from('FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00', 'latin1');

/** The `start` argument as `ngx_atoof` reads it: digits only; 0 when there are others, or at or past the file's end. */
function startOf(args: string, sizeBytes: number): number {
  const text = argument(args, 'start');
  if (text === undefined || !/^\d+$/.test(text)) return 0;
  const start = Number(text);
  return start < sizeBytes ? start : 0;
}

/** Serves a `flv` location's request. */
export async function flvRequest(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD') return statusOutcome(405);
  if (r.uri.endsWith('/')) return serveStatic(ex);
  const path = r.mapUriToPath(r.uri);
  const st = await r.untimed(() => statOrError(path));
  if (st instanceof Error) return fileError(ex, st, path);
  if (!st.isFile()) return serveStatic(ex);
  const start = startOf(r.args, st.size);
  return sendFile(ex, path, st, { prefix: start === 0 ? undefined : { bytes: FLV_HEADER, fileStart: start } });
}
