/**
 * Static content: `try_files` (`ngx_http_core_try_files_phase`), `index`
 * (`ngx_http_index_module.c`) and files (`ngx_http_static_module.c`), with
 * nginx's statuses and error-log lines: 404 with `open() "PATH" failed (2: …)`,
 * a directory listing (`autoindex.ts`) or 403 `directory index of "DIR/" is
 * forbidden` when there is no index file, 301 to `URI/` for a directory,
 * 405 for methods other than GET, HEAD (and POST to a directory index).
 */
import { statSync, type Stats } from 'node:fs';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { escapeUri } from '../uri.js';
import { autoindex } from './autoindex.js';
import { davRequest } from './dav.js';
import { randomIndex } from './random-index.js';
import { gzipStatic } from './gzip-static.js';
import { fsPath, sendFile } from './send-file.js';

/** What `try_files` decided: a file was found (the request goes on to the content phase), or how the request ends. */
export type TryFilesResult = { readonly kind: 'found' } | Outcome;

/**
 * A file's status, or the error `stat()` failed with: taken in the worker,
 * as nginx takes it (`ngx_open_cached_file` → `ngx_file_info`, with or
 * without aio), not through node's thread pool.
 */
export async function statOrError(path: string): Promise<Stats | NodeJS.ErrnoException> {
  try {
    return statSync(fsPath(path));
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}

/**
 * `try_files`: the first existing file (or directory, for an item ending in
 * `/`) becomes the URI and the request goes on to the content phase; else
 * the last item: `=CODE`, or an internal redirect.
 */
export async function tryFiles(ex: Exchange): Promise<TryFilesResult> {
  const { r } = ex;
  const tf = r.loc.tryFiles!;
  const { alias, aliasRegex, aliasLength } = r.loc.root;
  for (const item of tf.files) {
    let name = item.value.evaluate(r);
    // ngx_http_try_files_handler: an alias replaces the location's part of a value made with variables
    if (alias && !aliasRegex && item.value.constant === undefined && name.startsWith(r.uri.slice(0, aliasLength))) {
      name = name.slice(aliasLength);
    }
    const st = await statOrError(r.documentRoot() + name);
    if (st instanceof Error) continue;
    if (st.isDirectory() !== item.testDir) continue;
    if (!alias) r.uri = name;
    else if (aliasRegex) {
      if (!item.testDir) {
        r.uri = name;
        r.addUriToAlias = true;
      }
    } else r.uri = r.uri.slice(0, aliasLength) + name;
    return { kind: 'found' };
  }
  if ('code' in tf.fallback) return statusOutcome(tf.fallback.code);
  const target = tf.fallback.uri.evaluate(r);
  if (target.startsWith('@')) return { kind: 'named', name: target };
  const q = target.indexOf('?');
  return { kind: 'redirect', uri: q === -1 ? target : target.slice(0, q), args: q === -1 ? r.args : target.slice(q + 1) };
}

/**
 * Serves the request from the file system (`ngx_http_static_handler`,
 * `ngx_http_index_handler`); the body is discarded once a file or a
 * listing is to be sent (send-file.ts, autoindex.ts), so that a 404 or 405
 * goes out without a `100 Continue` first, as nginx's.
 */
export async function serveStatic(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  const method = r.method;
  // the index, random index and autoindex modules decline the methods of WebDAV, which the WebDAV module runs before static
  if (r.loc.dav.methods.has(method)) return davRequest(ex);
  // the content phase runs random_index's handler before the index module's
  if (r.uri.endsWith('/')) return (await randomIndex(ex)) ?? index(ex);
  if (r.loc.gzip.static !== 'off' && (method === 'GET' || method === 'HEAD')) {
    const precompressed = await gzipStatic(ex);
    if (precompressed) return precompressed;
  }
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') return statusOutcome(405);
  const path = r.mapUriToPath(r.uri);
  // nginx opens the file within its turn: the wait for libuv's threads is not the request's time
  const st = await r.untimed(() => statOrError(path));
  if (st instanceof Error) return fileError(ex, st, path);
  // ngx_http_static_handler: the URI escaped (NGX_ESCAPE_URI), a slash, the arguments as they came
  if (st.isDirectory()) return statusOutcome(301, escapeUri(r.uri) + '/' + (r.args ? `?${r.args}` : ''));
  if (!st.isFile()) {
    logRequest(ex.cx, r, 'crit', `"${path}" is not a regular file`);
    return statusOutcome(404);
  }
  if (method === 'POST') return statusOutcome(405);
  return sendFile(ex, path, st);
}

/** nginx's answer to a file it could not open: 404, 403 or 500, and its `open() "PATH" failed` line (none for a 404 with `log_not_found off`). */
export function fileError(ex: Exchange, err: NodeJS.ErrnoException, path: string): Outcome {
  const { r } = ex;
  const code = err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'ENAMETOOLONG' ? 404 : err.code === 'EACCES' ? 403 : 500;
  if (code !== 404 || r.loc.logNotFound) {
    logRequest(ex.cx, r, code === 500 ? 'crit' : 'error', `open() "${path}" failed (${systemErrorText(err)})`);
  }
  return statusOutcome(code);
}

/**
 * The index module: the first existing index file is served through an
 * internal redirect; without one, the directory's listing (autoindex) or 403.
 */
async function index(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD' && r.method !== 'POST') return statusOutcome(405);
  const dir = r.mapUriToPath(r.uri);
  let dirTested = false;
  const names = r.loc.index;
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!.evaluate(r);
    if (name.startsWith('/')) return { kind: 'redirect', uri: name, args: r.args };
    const st = await statOrError(dir + name);
    if (st instanceof Error) {
      if (st.code === 'EACCES' || st.code === 'ENOTDIR') {
        if (st.code === 'EACCES') {
          logRequest(ex.cx, r, 'error', `"${dir + name}" is forbidden (${systemErrorText(st)})`);
          return statusOutcome(403);
        }
        if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir + name}" is not found (${systemErrorText(st)})`);
        return statusOutcome(404);
      }
      if (!dirTested) {
        const d = await statOrError(dir);
        if (d instanceof Error && d.code === 'ENOENT') {
          if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir + name}" is not found (${systemErrorText(d)})`);
          return statusOutcome(404);
        }
        if (d instanceof Error && d.code !== 'EACCES') {
          logRequest(ex.cx, r, 'crit', `stat() "${dir}" failed (${systemErrorText(d)})`);
          return statusOutcome(500);
        }
        if (!(d instanceof Error) && !d.isDirectory()) {
          logRequest(ex.cx, r, 'alert', `"${dir}" is not a directory`);
          return statusOutcome(500);
        }
        dirTested = true;
      }
      continue;
    }
    return { kind: 'redirect', uri: r.uri + name, args: r.args };
  }
  // the content phase's next handler (ngx_http_autoindex_handler), then ngx_http_core_content_phase's refusal
  const listed = await autoindex(ex);
  if (listed) return listed;
  const d = await statOrError(dir);
  if (d instanceof Error) {
    if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir}" is not found (${systemErrorText(d)})`);
    return statusOutcome(404);
  }
  logRequest(ex.cx, r, 'error', `directory index of "${dir}" is forbidden`);
  return statusOutcome(403);
}
