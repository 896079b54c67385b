/**
 * `gzip_static` (`src/http/modules/ngx_http_gzip_static_module.c`): a GET or
 * HEAD for `FILE` is answered with `FILE.gz`, when it exists, with
 * `Content-Encoding: gzip`: with `on` for a client that takes gzip
 * (`ngx_http_gzip_ok`), with `always` for every client (the gunzip filter
 * may then decompress it). A missing `.gz` leaves the request to the
 * static handler.
 */
import { statSync } from 'node:fs';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { gzipOk } from '../filters/gzip.js';
import { sendFile } from './send-file.js';

/** Serves `FILE.gz` for the request's URI, or returns undefined for the static handler to go on. */
export async function gzipStatic(ex: Exchange): Promise<Outcome | undefined> {
  const { r } = ex;
  const mode = r.loc.gzip.static;
  const ok = mode === 'on' ? gzipOk(r, []) : true;
  if (!r.loc.gzip.vary && !ok) return undefined;
  const path = `${r.mapUriToPath(r.uri)}.gz`;
  let st;
  try {
    // in the worker, as nginx's ngx_open_cached_file takes it (static.ts, statOrError)
    st = statSync(Buffer.from(path, 'latin1'));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code !== 'ENOENT' && e.code !== 'ENOTDIR' && e.code !== 'ENAMETOOLONG') {
      logRequest(ex.cx, r, e.code === 'EACCES' ? 'error' : 'crit', `open() "${path}" failed (${systemErrorText(e)})`);
    }
    return undefined;
  }
  if (mode === 'on') {
    r.gzipVary = true;
    if (!ok) return undefined;
  }
  if (st.isDirectory()) return undefined;
  if (!st.isFile()) {
    logRequest(ex.cx, r, 'crit', `"${path}" is not a regular file`);
    return statusOutcome(404);
  }
  return sendFile(ex, path, st, { gzipped: true });
}
