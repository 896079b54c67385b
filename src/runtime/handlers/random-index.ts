/**
 * `random_index on` (`ngx_http_random_index_handler`,
 * `src/http/modules/ngx_http_random_index_module.c`): a GET, HEAD or POST of
 * a URI ending in `/` goes, by an internal redirect with its arguments, to a
 * file of the directory picked at random. Names starting with `.` are left
 * out, and so is what is not a regular file (a link counts as its target).
 */
import type { Dir } from 'node:fs';
import { opendir } from 'node:fs/promises';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { lookAt } from './autoindex.js';
import { fsPath } from './send-file.js';

/**
 * The redirect to a file picked at random; undefined (nginx's
 * `NGX_DECLINED`: the index module goes on) when `random_index` is off, the
 * method another, or the directory has no file. A directory that cannot be
 * opened is 404 (ENOENT, ENOTDIR, ENAMETOOLONG), 403 (EACCES) or 500, with
 * `opendir() "DIR" failed`; an entry `stat()` (or, for a broken link,
 * `lstat()`) fails for is 500 with a `[crit]` line.
 */
export async function randomIndex(ex: Exchange): Promise<Outcome | undefined> {
  const { r } = ex;
  if (!r.loc.randomIndex || (r.method !== 'GET' && r.method !== 'HEAD' && r.method !== 'POST')) return undefined;
  // the directory's path without its final slash
  const path = r.mapUriToPath(r.uri).slice(0, -1);
  let dir: Dir;
  try {
    // the names as bytes: node takes the encoding 'buffer' though its types say otherwise
    dir = await opendir(fsPath(path), { encoding: 'buffer' as BufferEncoding });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const status = code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG' ? 404 : code === 'EACCES' ? 403 : 500;
    logRequest(ex.cx, r, status === 500 ? 'crit' : 'error', `opendir() "${path}" failed (${systemErrorText(err)})`);
    return statusOutcome(status);
  }
  const files: string[] = [];
  try {
    for (let dirent = await dir.read(); dirent !== null; dirent = await dir.read()) {
      const name = (dirent.name as unknown as Buffer).toString('latin1');
      if (name.startsWith('.')) continue;
      if (dirent.isFile()) {
        files.push(name);
        continue;
      }
      // a link, or a type the directory does not tell: what stat() says of it
      if (dirent.isDirectory()) continue;
      const st = await lookAt(`${path}/${name}`);
      if ('call' in st) {
        logRequest(ex.cx, r, 'crit', `${st.call}() "${path}/${name}" failed (${systemErrorText(st.err)})`);
        return statusOutcome(500);
      }
      if (st.isFile()) files.push(name);
    }
  } catch (err) {
    logRequest(ex.cx, r, 'crit', `readdir() "${path}" failed (${systemErrorText(err)})`);
    return statusOutcome(500);
  } finally {
    await dir.close().catch(() => undefined);
  }
  if (files.length === 0) return undefined;
  return { kind: 'redirect', uri: r.uri + files[Math.floor(Math.random() * files.length)]!, args: r.args };
}
