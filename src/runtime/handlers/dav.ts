/**
 * The WebDAV handler (`src/http/modules/ngx_http_dav_module.c`), for the
 * methods `dav_methods` names in a location without a content handler of
 * its own: PUT writes the body (read whole into a temp file) in place of
 * the file the URI maps to, DELETE removes a file or (URI ending in `/`) a
 * directory tree, MKCOL makes a directory, COPY and MOVE copy or move a
 * file or tree to the `Destination` header's URI of the same server. Each
 * failure answers with nginx's status and error-log line; the permissions
 * of what is made are `dav_access`'s.
 */
import { chmod, lstat, mkdir, open, opendir, rename, rmdir, stat, unlink, utimes } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { dirname } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { LogLevel } from '../../log/levels.js';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { parseHttpTime } from '../conditional.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { bodyOfUnknownLength, readRequestBody } from '../request-body.js';
import { absoluteLocation, applyHeadersModule, keptHeaders } from '../respond.js';
import { escapeUri, parseUnsafeUri } from '../uri.js';

/** A `Depth` header nginx does not take (`NGX_HTTP_DAV_INVALID_DEPTH`). */
const INVALID = -2;
/** `Depth: infinity`. */
const INFINITY = -1;

/** `ngx_dir_access`: a directory's permissions from a file's, searchable where readable. */
const dirAccess = (mode: number): number => mode | ((mode & 0o444) >> 2);

/** The methods of `dav_methods`: the handler of the request's method. */
export function davRequest(ex: Exchange): Promise<Outcome> {
  switch (ex.r.method) {
    case 'PUT': return put(ex);
    case 'DELETE': return remove(ex);
    case 'MKCOL': return mkcol(ex);
    default: return copyOrMove(ex);
  }
}

/** Logs `message` at error level and answers `status`. */
function refuse(ex: Exchange, status: number, message: string): Outcome {
  logRequest(ex.cx, ex.r, 'error', message);
  return statusOutcome(status);
}

/**
 * `ngx_http_dav_error`: the line `FAILED "PATH" failed (ERRNO: TEXT)` at
 * error level for a missing path (answered `notFound`), no permission
 * (403) or an existing one (405), at crit for a full disk (507) and the
 * rest (500). A `notFound` of 0 only logs (a failure inside a tree).
 */
function davError(ex: Exchange, err: unknown, notFound: number, failed: string, path: string): Outcome {
  const code = (err as NodeJS.ErrnoException).code;
  let status = 500;
  let level: LogLevel = 'crit';
  if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG') [status, level] = [notFound, 'error'];
  else if (code === 'EACCES' || code === 'EPERM') [status, level] = [403, 'error'];
  else if (code === 'EEXIST') [status, level] = [405, 'error'];
  else if (code === 'ENOSPC') status = 507;
  logRequest(ex.cx, ex.r, level, `${failed} "${path}" failed (${systemErrorText(err)})`);
  return statusOutcome(status);
}

/** Whether the request has a body (`content_length_n > 0` or chunked): DELETE, MKCOL, COPY and MOVE refuse one. */
function hasBody(ex: Exchange): boolean {
  return Number(ex.r.headers['content-length'] ?? 0) > 0 || bodyOfUnknownLength(ex.r, ex.body);
}

/** A request header of the WebDAV module's (`Depth`, `Destination`, `Overwrite`). */
function header(ex: Exchange, name: string): string | undefined {
  const value = ex.r.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** `ngx_http_dav_depth`: `0`, `1`, `infinity`, `dflt` without the header, `INVALID` (logged) for anything else. */
function depth(ex: Exchange, dflt: number): number {
  const value = header(ex, 'depth');
  if (value === undefined) return dflt;
  if (value === '0' || value === '1') return Number(value);
  if (value === 'infinity') return INFINITY;
  logRequest(ex.cx, ex.r, 'error', `client sent invalid "Depth" header: "${value}"`);
  return INVALID;
}

/** Sends a PUT's answer as nginx does (`r->header_only`): the status, a `Location` and no body for a file made. */
function sendPutStatus(ex: Exchange, status: number): Outcome {
  const { r, out } = ex;
  const headers: [string, string][] = keptHeaders(r);
  if (status === 201) headers.push(['Location', absoluteLocation(r, escapeUri(r.uri))], ['Content-Length', '0']);
  applyHeadersModule(r, status, headers);
  out.head(r, status, headers);
  out.end();
  return DONE;
}

/**
 * PUT (`ngx_http_dav_put_handler`): the body read into a temp file, which
 * `ngx_ext_rename_file` makes the file: its permissions `dav_access`, its
 * time the request's `Date`, the directories on its way made with
 * `create_full_put_path`. 201 with `Location` for a new file, 204 for one
 * replaced; 409 for a collection.
 */
async function put(ex: Exchange): Promise<Outcome> {
  const { r, cx } = ex;
  if (r.uri.endsWith('/')) return refuse(ex, 409, 'cannot PUT to a collection');
  if (r.headers['content-range'] !== undefined) return refuse(ex, 501, 'PUT with range is unsupported');
  // a subrequest has no body of its own
  if (ex.body === undefined) return refuse(ex, 500, 'PUT request body is unavailable');
  // without a length nor chunks nginx reads no body, and has no file to put
  if (r.headers['content-length'] === undefined && !bodyOfUnknownLength(r, ex.body)) return refuse(ex, 500, 'PUT request body must be in a file');
  const body = await readRequestBody(ex, { inFileOnly: 'clean', announced: false });
  if ('status' in body) return body.status === 0 ? { kind: 'close' } : statusOutcome(body.status);
  if (body.kind !== 'file') return refuse(ex, 500, 'PUT request body must be in a file');
  const temp = body.file.path;
  await body.file.handle.close().catch(() => undefined);
  const path = r.mapUriToPath(r.uri);
  const existing = await stat(path).catch(() => undefined);
  if (existing?.isDirectory()) {
    logRequest(cx, r, 'error', `"${path}" could not be created (21: Is a directory)`);
    await deleteOrLog(ex, temp);
    return statusOutcome(409);
  }
  const { accessMode, createFullPutPath } = r.loc.dav;
  const date = r.headers.date === undefined ? undefined : parseHttpTime(r.headers.date);
  const renamed = await extRename(ex, temp, path, {
    accessMode, pathAccessMode: accessMode, timeSec: date === undefined || Number.isNaN(date) || date < 0 ? undefined : date,
    createPath: createFullPutPath, deleteFile: true,
  });
  if (!renamed) return statusOutcome(500);
  return sendPutStatus(ex, existing ? 204 : 201);
}

/** Removes `path`, logging nginx's crit line when that fails. */
async function deleteOrLog(ex: Exchange, path: string): Promise<void> {
  await unlink(path).catch((err: unknown) => logRequest(ex.cx, ex.r, 'crit', `unlink() "${path}" failed (${systemErrorText(err)})`));
}

/** What `ngx_ext_rename_file` is asked to do besides renaming. */
interface RenameOptions {
  /** Permissions given to the file first (0: left as they are). */
  readonly accessMode: number;
  /** Permissions of the directories made on the way (as a file's; `ngx_dir_access` adds search). */
  readonly pathAccessMode: number;
  /** The time given to the file first, in seconds. */
  readonly timeSec: number | undefined;
  /** Make the missing directories on the way. */
  readonly createPath: boolean;
  /** Remove `from` when the rename fails. */
  readonly deleteFile: boolean;
}

/**
 * `ngx_ext_rename_file` (`src/core/ngx_file.c`): renames `from` to `to`,
 * making the directories on the way when asked and copying across file
 * systems; a failure is logged at crit (`rename() "FROM" to "TO" failed`).
 * Returns whether the file is in place.
 */
async function extRename(ex: Exchange, from: string, to: string, o: RenameOptions): Promise<boolean> {
  const crit = (message: string): void => logRequest(ex.cx, ex.r, 'crit', message);
  const failed = (err: unknown): string => `failed (${systemErrorText(err)})`;
  const deleteFrom = async (): Promise<void> => {
    if (o.deleteFile) await deleteOrLog(ex, from);
  };
  /** Resolves to the error of `op`, undefined when it succeeded. */
  const attempt = (op: Promise<unknown>): Promise<unknown> => op.then(() => undefined, (err: unknown) => err ?? new Error('failed'));
  const chmodFailure = o.accessMode ? await attempt(chmod(from, o.accessMode)) : undefined;
  const timeFailure = chmodFailure === undefined && o.timeSec !== undefined ? await attempt(utimes(from, o.timeSec, o.timeSec)) : undefined;
  if (chmodFailure !== undefined || timeFailure !== undefined) {
    crit(chmodFailure !== undefined ? `chmod() "${from}" ${failed(chmodFailure)}` : `utimes() "${from}" ${failed(timeFailure)}`);
    await deleteFrom();
    return false;
  }
  let failure = await attempt(rename(from, to));
  if (failure === undefined) return true;
  if ((failure as NodeJS.ErrnoException).code === 'ENOENT' && o.createPath) {
    const made = await attempt(mkdir(dirname(to), { recursive: true, mode: dirAccess(o.pathAccessMode) }));
    if (made !== undefined) {
      crit(`mkdir() "${to}" ${failed(made)}`);
      await deleteFrom();
      return false;
    }
    failure = await attempt(rename(from, to));
    if (failure === undefined) return true;
  }
  if ((failure as NodeJS.ErrnoException).code === 'EXDEV') {
    const st = await stat(from).catch(() => undefined);
    if (st && await copyFile(ex, from, to, st.mode & 0o777, st.mtimeMs / 1000)) {
      await deleteOrLog(ex, from);
      return true;
    }
  }
  // nginx removes the file before it says why the rename failed
  await deleteFrom();
  crit(`rename() "${from}" to "${to}" ${failed(failure)}`);
  return false;
}

/**
 * `ngx_copy_file`: `to` made (or emptied) with `mode` (the umask applies, as
 * to nginx's open), the bytes copied, its time set; a failure is logged at
 * crit. Returns whether it was copied.
 */
async function copyFile(ex: Exchange, from: string, to: string, mode: number, mtimeSec: number): Promise<boolean> {
  let step = `open() "${from}"`;
  try {
    const src = await open(from, 'r');
    step = `open() "${to}"`;
    const dst = await open(to, 'w', mode).catch(async (err: unknown) => {
      await src.close();
      throw err;
    });
    step = `write() "${to}"`;
    // the streams close their files when done or failed
    await pipeline(src.createReadStream(), dst.createWriteStream());
    step = `utimes() "${to}"`;
    await utimes(to, mtimeSec, mtimeSec);
    return true;
  } catch (err) {
    logRequest(ex.cx, ex.r, 'crit', `${step} failed (${systemErrorText(err)})`);
    return false;
  }
}

/**
 * DELETE (`ngx_http_dav_delete_handler`): a file (`Depth` 0 or infinity),
 * or a directory tree for a URI ending in `/` (`Depth` infinity), no
 * shallower than `min_delete_depth`. 204 once removed.
 */
async function remove(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (hasBody(ex)) return refuse(ex, 415, 'DELETE with body is unsupported');
  const min = r.loc.dav.minDeleteDepth;
  if (min > 0) {
    let d = 0;
    let deep = false;
    for (let i = 0; i < r.uri.length && !deep;) {
      if (r.uri[i++] === '/' && ++d >= min && i < r.uri.length) deep = true;
    }
    if (!deep) return refuse(ex, 409, `insufficient URI depth:${d} to DELETE`);
  }
  const path = r.mapUriToPath(r.uri);
  let st: Stats;
  try {
    st = await lstat(path);
  } catch (err) {
    return davError(ex, err, (err as NodeJS.ErrnoException).code === 'ENOTDIR' ? 409 : 404, 'lstat()', path);
  }
  if (st.isDirectory()) {
    if (!r.uri.endsWith('/')) return refuse(ex, 409, `DELETE "${path}" failed (21: Is a directory)`);
    if (depth(ex, INFINITY) !== INFINITY) return refuse(ex, 400, '"Depth" header must be infinity');
    return (await deletePath(ex, path.slice(0, -1), true)) ?? statusOutcome(204);
  }
  const dep = depth(ex, 0);
  if (dep !== 0 && dep !== INFINITY) return refuse(ex, 400, '"Depth" header must be 0 or infinity');
  return (await deletePath(ex, path, false)) ?? statusOutcome(204);
}

/**
 * `ngx_http_dav_delete_path`: a file, or a directory after its tree (each
 * entry that cannot be removed is logged and passed over). Returns the
 * answer when the path itself could not be removed.
 */
async function deletePath(ex: Exchange, path: string, dir: boolean): Promise<Outcome | undefined> {
  if (dir) {
    const walked = await walkTree(ex, path, {
      file: (entry) => unlink(entry).then(() => undefined, (err: unknown) => void davError(ex, err, 0, 'unlink()', entry)),
      preTree: () => Promise.resolve(),
      postTree: (entry) => rmdir(entry).then(() => undefined, (err: unknown) => void davError(ex, err, 0, 'rmdir()', entry)),
      special: (entry) => unlink(entry).then(() => undefined, (err: unknown) => void davError(ex, err, 0, 'unlink()', entry)),
    });
    if (!walked) return statusOutcome(500);
  }
  try {
    await (dir ? rmdir(path) : unlink(path));
    return undefined;
  } catch (err) {
    return davError(ex, err, 404, dir ? 'rmdir()' : 'unlink()', path);
  }
}

/** What `ngx_walk_tree` does with each entry, given its path and its `lstat`. */
interface TreeHandlers {
  file(path: string, st: Stats): Promise<void>;
  preTree(path: string, st: Stats): Promise<void>;
  postTree(path: string, st: Stats): Promise<void>;
  /** Neither a file nor a directory (a symbolic link …). */
  special(path: string, st: Stats): Promise<void>;
}

/**
 * `ngx_walk_tree` (`src/core/ngx_file.c`): the entries of `dir` in the
 * order the directory lists them, each directory walked between its
 * `preTree` and `postTree`; an entry that cannot be read is logged at crit
 * and passed over. Returns false when a directory could not be opened
 * (logged at crit; one that no longer exists is empty).
 */
async function walkTree(ex: Exchange, dir: string, h: TreeHandlers): Promise<boolean> {
  let entries;
  try {
    entries = await opendir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    logRequest(ex.cx, ex.r, 'crit', `opendir() "${dir}" failed (${systemErrorText(err)})`);
    return false;
  }
  for await (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    let st: Stats;
    try {
      st = await lstat(path);
    } catch (err) {
      logRequest(ex.cx, ex.r, 'crit', `stat() "${path}" failed (${systemErrorText(err)})`);
      continue;
    }
    if (st.isFile()) await h.file(path, st);
    else if (st.isDirectory()) {
      await h.preTree(path, st);
      if (!await walkTree(ex, path, h)) return false;
      await h.postTree(path, st);
    } else await h.special(path, st);
  }
  return true;
}

/**
 * MKCOL (`ngx_http_dav_mkcol_handler`): the directory a URI ending in `/`
 * maps to, with `dav_access` (searchable where readable); 201 with
 * `Location`.
 */
async function mkcol(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (hasBody(ex)) return refuse(ex, 415, 'MKCOL with body is unsupported');
  if (!r.uri.endsWith('/')) return refuse(ex, 409, 'MKCOL can create a collection only');
  const path = r.mapUriToPath(r.uri).slice(0, -1);
  try {
    await mkdir(path, { mode: dirAccess(r.loc.dav.accessMode) });
  } catch (err) {
    return davError(ex, err, 409, 'mkdir()', path);
  }
  return statusOutcome(201, escapeUri(r.uri));
}

/** `ngx_http_dav_merge_slashes`. */
const mergeSlashes = (path: string): string => path.replace(/\/{2,}/g, '/');

/**
 * The URI of a `Destination` header (`ngx_http_dav_copy_move_handler`): a
 * path, or `http://` (`https://` over TLS) and the request's own host
 * before it (compared as nginx compares it: as a prefix, the port left
 * out). Returns the answer when nginx refuses it.
 */
function destination(ex: Exchange): { uri: string; value: string } | Outcome {
  const { r } = ex;
  const value = header(ex, 'destination');
  if (value === undefined) return refuse(ex, 400, 'client sent no "Destination" header');
  const invalid = (): Outcome => refuse(ex, 400, `client sent invalid "Destination" header: "${value}"`);
  let start = 0;
  if (!value.startsWith('/')) {
    const host = r.requestHost;
    if (host === '') return refuse(ex, 400, 'client sent no "Host" header');
    const scheme = r.scheme === 'https' ? 'https://' : 'http://';
    if (!value.startsWith(scheme)) return invalid();
    if (!value.startsWith(host, scheme.length)) {
      return refuse(ex, 400, `"Destination" URI "${value}" is handled by different repository than the source URI`);
    }
    start = value.indexOf('/', scheme.length + host.length);
    if (start === -1) return invalid();
  }
  const parsed = parseUnsafeUri(value.slice(start));
  if ('unsafe' in parsed) {
    logRequest(ex.cx, r, 'error', `unsafe URI "${parsed.unsafe}" was detected`);
    return invalid();
  }
  return { uri: parsed.uri, value };
}

/**
 * COPY and MOVE (`ngx_http_dav_copy_move_handler`): the file or tree the
 * URI maps to, to the one the `Destination` URI maps to in the same
 * location, replaced unless `Overwrite: F` (412); 201 for a tree or a file
 * made, 204 for a file replaced.
 */
async function copyOrMove(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  const method = r.method;
  if (hasBody(ex)) return refuse(ex, 415, 'COPY and MOVE with body are unsupported');
  const dest = destination(ex);
  if ('kind' in dest) return dest;
  const collection = r.uri.endsWith('/');
  if (collection !== dest.value.endsWith('/')) {
    return refuse(ex, 409, `both URI "${r.uri}" and "Destination" URI "${dest.value}" should be either collections or non-collections`);
  }
  const { alias, aliasRegex, aliasLength } = r.loc.root;
  if (alias && !aliasRegex && (aliasLength > dest.uri.length || dest.uri.slice(0, aliasLength) !== r.uri.slice(0, aliasLength))) {
    return refuse(ex, 400, `"Destination" URI "${dest.value}" must be within location prefix when using "alias"`);
  }
  const dep = depth(ex, INFINITY);
  if (dep !== INFINITY && method === 'MOVE') return refuse(ex, 400, '"Depth" header must be infinity');
  if (dep !== INFINITY && dep !== 0) return refuse(ex, 400, '"Depth" header must be 0 or infinity');
  const over = header(ex, 'overwrite');
  if (over !== undefined && !/^[TtFf]$/.test(over)) return refuse(ex, 400, `client sent invalid "Overwrite" header: "${over}"`);
  let overwrite = over === undefined || over === 'T' || over === 't';
  const path = mergeSlashes(r.mapUriToPath(r.uri));
  let to = mergeSlashes(r.mapUriToPath(dest.uri));
  const slash = to.endsWith('/');
  if (slash) to = to.slice(0, -1);
  // ngx_http_dav_validate_paths: not onto itself, nor a collection into itself
  const len = path.length > 1 && path.endsWith('/') ? path.length - 1 : path.length;
  if (len === to.length && path.startsWith(to)) {
    return refuse(ex, 403, `both URI "${r.uri}" and "Destination" URI "${dest.value}" point to the same location`);
  }
  const n = Math.min(len, to.length);
  if (slash && path.slice(0, n) === to.slice(0, n) && (len < to.length ? to[len] === '/' : path[to.length] === '/')) {
    return refuse(ex, 403, `"${r.uri}" could not be ${method}ed to collection "${dest.value}"`);
  }
  let targetIsDir = false;
  try {
    const target = await lstat(to);
    if (target.isDirectory() && !slash) return refuse(ex, 409, `"${r.uri}" could not be ${method}ed to collection "${dest.value}"`);
    if (!overwrite) {
      logRequest(ex.cx, r, 'error', `"${to}" could not be created (17: File exists)`);
      return statusOutcome(412);
    }
    targetIsDir = target.isDirectory();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return davError(ex, err, 404, 'lstat()', to);
    overwrite = false;
  }
  let source: Stats;
  try {
    source = await lstat(path);
  } catch (err) {
    return davError(ex, err, 404, 'lstat()', path);
  }
  if (source.isDirectory()) {
    if (!collection) return refuse(ex, 400, `"${r.uri}" is collection`);
    if (overwrite) {
      const failed = await deletePath(ex, to, targetIsDir);
      if (failed) return failed;
    }
    const from = path.slice(0, -1);
    if (method === 'MOVE' && await rename(from, to).then(() => true, () => false)) return statusOutcome(201);
    try {
      await mkdir(to, { mode: source.mode & 0o777 });
    } catch (err) {
      return davError(ex, err, 404, 'mkdir()', to);
    }
    const dirOf = (entry: string): string => to + entry.slice(from.length);
    const walked = await walkTree(ex, from, {
      file: (entry, st) => copyFile(ex, entry, dirOf(entry), st.mode & 0o777, st.mtimeMs / 1000).then(() => undefined),
      preTree: (entry, st) => mkdir(dirOf(entry), { mode: dirAccess(st.mode & 0o777) }).then(() => undefined, (err: unknown) => void davError(ex, err, 0, 'mkdir()', dirOf(entry))),
      postTree: (entry, st) => utimes(dirOf(entry), st.mtimeMs / 1000, st.mtimeMs / 1000).then(() => undefined, (err: unknown) => {
        logRequest(ex.cx, r, 'alert', `utimes() "${dirOf(entry)}" failed (${systemErrorText(err)})`);
      }),
      special: () => Promise.resolve(),
    });
    if (!walked) return statusOutcome(500);
    if (method === 'MOVE') return (await deletePath(ex, from, true)) ?? statusOutcome(201);
    return statusOutcome(201);
  }
  if (method === 'MOVE') {
    const { accessMode } = r.loc.dav;
    const moved = await extRename(ex, path, to, { accessMode: 0, pathAccessMode: accessMode, timeSec: undefined, createPath: true, deleteFile: false });
    return statusOutcome(moved ? 204 : 500);
  }
  return statusOutcome(await copyFile(ex, path, to, source.mode & 0o777, source.mtimeMs / 1000) ? 204 : 500);
}
