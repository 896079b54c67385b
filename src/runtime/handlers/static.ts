/**
 * Static content: `try_files` (`ngx_http_core_try_files_phase`), `index`
 * (`ngx_http_index_module.c`) and files (`ngx_http_static_module.c`), with
 * nginx's statuses and error-log lines: 404 with `open() "PATH" failed (2: …)`,
 * 403 `directory index of "DIR/" is forbidden`, 301 to `URI/` for a directory,
 * 405 for methods other than GET, HEAD (and POST to a directory index).
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import type { HttpRequestState } from '../request.js';
import { applyHeadersModule, contentTypeFor } from '../respond.js';
import { escapeUri } from '../uri.js';

/** What the static handler decided. */
export type StaticResult =
  | { readonly kind: 'sent' }
  | { readonly kind: 'code'; readonly code: number }
  | { readonly kind: 'redirect'; readonly uri: string; readonly args: string }
  | { readonly kind: 'moved'; readonly location: string };

/** What `try_files` decided. */
export type TryFilesResult =
  | { readonly kind: 'found' }
  | { readonly kind: 'code'; readonly code: number }
  | { readonly kind: 'redirect'; readonly uri: string; readonly args: string }
  | { readonly kind: 'named'; readonly name: string };

/** A path as the file system expects it: URIs are byte strings (latin1). */
const fsPath = (path: string): Buffer => Buffer.from(path, 'latin1');

async function statOrError(path: string): Promise<Stats | NodeJS.ErrnoException> {
  try {
    return await stat(fsPath(path));
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}

/** The file path for a URI, with `root` or `alias` (`ngx_http_map_uri_to_path`). */
export function mapUriToPath(r: HttpRequestState, uri: string): string {
  const root = r.loc.root.path.evaluate(r);
  if (!r.loc.root.alias) return root + uri;
  if (r.loc.root.aliasRegex) return root;
  const prefix = r.location && r.location.match !== 'named' && !r.location.regex ? r.location.name : '';
  return root + (uri.startsWith(prefix) ? uri.slice(prefix.length) : uri);
}

/**
 * `try_files`: the first existing file (or directory, for an item ending in
 * `/`) becomes the URI and the request goes on to the content phase; else
 * the last item: `=CODE`, or an internal redirect.
 */
export async function tryFiles(ex: Exchange): Promise<TryFilesResult> {
  const { r } = ex;
  const tf = r.loc.tryFiles!;
  for (const item of tf.files) {
    const name = item.value.evaluate(r);
    const st = await statOrError(mapUriToPath(r, name));
    if (st instanceof Error) continue;
    if (st.isDirectory() !== item.testDir) continue;
    r.uri = name;
    return { kind: 'found' };
  }
  if ('code' in tf.fallback) return { kind: 'code', code: tf.fallback.code };
  const target = tf.fallback.uri.evaluate(r);
  if (target.startsWith('@')) return { kind: 'named', name: target };
  const q = target.indexOf('?');
  return { kind: 'redirect', uri: q === -1 ? target : target.slice(0, q), args: q === -1 ? r.args : target.slice(q + 1) };
}

/** Serves the request from the file system. */
export async function serveStatic(ex: Exchange): Promise<StaticResult> {
  const { r } = ex;
  const method = r.method;
  if (r.uri.endsWith('/')) return index(ex);
  if (method !== 'GET' && method !== 'HEAD' && method !== 'POST') return { kind: 'code', code: 405 };
  const path = mapUriToPath(r, r.uri);
  const st = await statOrError(path);
  if (st instanceof Error) return fileError(ex, st, path);
  if (st.isDirectory()) {
    // the URI escaped again (ngx_http_static_handler)
    return { kind: 'moved', location: escapeUri(r.uri) + '/' + (r.args ? `?${r.args}` : '') };
  }
  if (!st.isFile()) {
    logRequest(ex.cx, r, 'crit', `"${path}" is not a regular file`);
    return { kind: 'code', code: 404 };
  }
  if (method === 'POST') return { kind: 'code', code: 405 };
  return sendFile(ex, path, st);
}

function fileError(ex: Exchange, err: NodeJS.ErrnoException, path: string): StaticResult {
  const { r } = ex;
  const code = err.code === 'ENOENT' || err.code === 'ENOTDIR' || err.code === 'ENAMETOOLONG' ? 404 : err.code === 'EACCES' ? 403 : 500;
  if (code !== 404 || r.loc.logNotFound) {
    logRequest(ex.cx, r, code === 500 ? 'crit' : 'error', `open() "${path}" failed (${systemErrorText(err)})`);
  }
  return { kind: 'code', code };
}

/** The index module: the first existing index file is served through an internal redirect. */
async function index(ex: Exchange): Promise<StaticResult> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD' && r.method !== 'POST') return { kind: 'code', code: 405 };
  const dir = mapUriToPath(r, r.uri);
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
          return { kind: 'code', code: 403 };
        }
        if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir + name}" is not found (${systemErrorText(st)})`);
        return { kind: 'code', code: 404 };
      }
      if (!dirTested) {
        const d = await statOrError(dir);
        if (d instanceof Error && d.code === 'ENOENT') {
          if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir + name}" is not found (${systemErrorText(d)})`);
          return { kind: 'code', code: 404 };
        }
        if (d instanceof Error && d.code !== 'EACCES') {
          logRequest(ex.cx, r, 'crit', `stat() "${dir}" failed (${systemErrorText(d)})`);
          return { kind: 'code', code: 500 };
        }
        if (!(d instanceof Error) && !d.isDirectory()) {
          logRequest(ex.cx, r, 'alert', `"${dir}" is not a directory`);
          return { kind: 'code', code: 500 };
        }
        dirTested = true;
      }
      continue;
    }
    return { kind: 'redirect', uri: r.uri + name, args: r.args };
  }
  const d = await statOrError(dir);
  if (d instanceof Error) {
    if (r.loc.logNotFound) logRequest(ex.cx, r, 'error', `"${dir}" is not found (${systemErrorText(d)})`);
    return { kind: 'code', code: 404 };
  }
  logRequest(ex.cx, r, 'error', `directory index of "${dir}" is forbidden`);
  return { kind: 'code', code: 403 };
}

/**
 * Whether a conditional request is answered 304 (`ngx_http_not_modified_header_filter`):
 * `If-Modified-Since` must equal the file's time exactly (`if_modified_since exact`)
 * and `If-None-Match` must name its ETag (or be `*`), each when present.
 */
function notModified(r: HttpRequestState, lastModified: string, etag: string): boolean {
  const ims = r.headers['if-modified-since'];
  const inm = r.headers['if-none-match'];
  if (ims === undefined && inm === undefined) return false;
  if (ims !== undefined && ims !== lastModified) return false;
  if (inm !== undefined) {
    const tags = inm.split(',').map((t) => t.trim().replace(/^W\//, ''));
    if (!tags.includes('*') && !tags.includes(etag)) return false;
  }
  return true;
}

async function sendFile(ex: Exchange, path: string, st: Stats): Promise<StaticResult> {
  const { r, out } = ex;
  const lastModified = new Date(Math.floor(st.mtimeMs / 1000) * 1000).toUTCString();
  const etag = `"${Math.floor(st.mtimeMs / 1000).toString(16)}-${st.size.toString(16)}"`;
  const final = r.errStatus || 200;
  const unchanged = final === 200 && (r.method === 'GET' || r.method === 'HEAD') && notModified(r, lastModified, etag);
  const status = unchanged ? 304 : 200;
  const headers: [string, string][] = [];
  if (!unchanged) headers.push(['Content-Type', contentTypeFor(r)], ['Content-Length', String(st.size)]);
  if (final === 200) headers.push(['Last-Modified', lastModified]);
  headers.push(['ETag', etag]);
  if (!unchanged && final === 200) headers.push(['Accept-Ranges', 'bytes']);
  applyHeadersModule(r, status, headers);
  out.head(r, status, headers);
  if (unchanged || out.headOnly || st.size === 0) {
    out.end();
    return { kind: 'sent' };
  }
  await new Promise<void>((resolve) => {
    const stream = createReadStream(fsPath(path));
    // the client went away (or send_timeout passed): the file is closed
    const stop = (): void => {
      stream.destroy();
      resolve();
    };
    stream.on('data', (chunk) => {
      if (out.gone) return stop();
      r.bodyBytesSent += chunk.length;
      if (!out.write(chunk as Buffer)) {
        stream.pause();
        out.onDrain(() => (out.gone ? stop() : stream.resume()));
      }
    });
    stream.on('end', () => {
      out.end();
      resolve();
    });
    stream.on('error', (err) => {
      logRequest(ex.cx, r, 'crit', `read() "${path}" failed (${systemErrorText(err)})`);
      out.abort();
      resolve();
    });
  });
  return { kind: 'sent' };
}
