/**
 * The autoindex content handler (`ngx_http_autoindex_handler`,
 * `src/http/modules/ngx_http_autoindex_module.c`): a directory URI the
 * index module found no index file for is answered, for GET and HEAD, with
 * the directory's entries (names starting with `.` left out), directories
 * first, then by the bytes of their names (`ngx_http_autoindex_cmp_entries`),
 * as an HTML page, XML, JSON or JSONP. The response has no length (it goes
 * in chunks, or until the connection closes) and no date of its own.
 */
import { lstat, opendir, stat } from 'node:fs/promises';
import type { Dir, Stats } from 'node:fs';
import { argument } from '../../config/modules/http-variables.js';
import { escapeJson } from '../../config/log-format.js';
import type { AutoindexFormat } from '../../config/route-table.js';
import { systemErrorText } from '../../os-errors.js';
import { preconditionStatus } from '../conditional.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { discardRequestBody } from '../request-body.js';
import { applyHeadersModule, keptHeaders } from '../respond.js';
import { escapeHtml, escapeUriComponent } from '../uri.js';
import { fsPath } from './send-file.js';

/** One listed entry (`ngx_http_autoindex_entry_t`): its name as a latin1 byte string, and what `stat` (or `lstat`) said. */
interface Entry {
  readonly name: string;
  readonly dir: boolean;
  readonly file: boolean;
  /** Seconds since the epoch. */
  readonly mtimeSec: number;
  readonly sizeBytes: number;
}

/** `NGX_HTTP_AUTOINDEX_NAME_LEN`: the width of the HTML listing's name column. */
const NAME_LEN = 50;

/** How many names one read of the directory takes (node's `Dir` reads 32 by default). */
const READ_BATCH = 256;

/**
 * How many entries are `stat`ed at once: the results are taken in the
 * directory's order, so the log lines and the first failure are nginx's,
 * while the thread pool works on several.
 */
const STAT_BATCH = 64;

/** The longest `callback` argument of JSONP. */
const CALLBACK_MAX_LEN = 128;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

const CONTENT_TYPES: Readonly<Record<AutoindexFormat, string>> = {
  html: 'text/html',
  json: 'application/json',
  jsonp: 'application/javascript',
  // the XML listing is UTF-8 whatever `charset` says
  xml: 'text/xml; charset=utf-8',
};

/**
 * Lists the directory of a URI ending in `/` when `autoindex` is on and the
 * method is GET or HEAD; undefined (nginx's `NGX_DECLINED`) otherwise. A
 * JSONP `callback` that is too long or not made of letters, digits, `_` and
 * `.` is 400; a directory that cannot be opened is 404 (ENOENT, ENOTDIR,
 * ENAMETOOLONG), 403 (EACCES) or 500, with `opendir() "DIR" failed`. An
 * entry `stat()` fails for with EACCES is left out; one it fails for
 * otherwise (but ENOENT and ELOOP: the `lstat()` of a broken link is
 * listed instead) closes the connection, as nginx's failure after its
 * header does. The not-modified filter's judgement of a response with no
 * date and no ETag applies: `If-Unmodified-Since` or an `If-Match` other
 * than `*` is 412, `If-None-Match: *` 304.
 */
export async function autoindex(ex: Exchange): Promise<Outcome | undefined> {
  const { r } = ex;
  const conf = r.loc.autoindex;
  if ((r.method !== 'GET' && r.method !== 'HEAD') || !conf.enable) return undefined;
  const failed = discardRequestBody(ex);
  if (failed !== undefined) return statusOutcome(failed);
  let path = r.mapUriToPath(r.uri);
  if (path.length > 1) path = path.slice(0, -1);
  let format = conf.format;
  let callback = '';
  if (format === 'jsonp') {
    callback = argument(r.args, 'callback') ?? '';
    const invalid = callback.length > CALLBACK_MAX_LEN ? 'too long' : /[^A-Za-z0-9_.]/.test(callback) ? 'invalid' : undefined;
    if (invalid) {
      logRequest(ex.cx, r, 'info', `client sent ${invalid} callback name: "${callback}"`);
      return statusOutcome(400);
    }
    if (callback === '') format = 'json';
  }
  let dir: Dir;
  try {
    // the names as bytes: node takes the encoding 'buffer' though its types say otherwise
    dir = await opendir(fsPath(path), { encoding: 'buffer' as BufferEncoding, bufferSize: READ_BATCH });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const status = code === 'ENOENT' || code === 'ENOTDIR' || code === 'ENAMETOOLONG' ? 404 : code === 'EACCES' ? 403 : 500;
    logRequest(ex.cx, r, status === 500 ? 'crit' : 'error', `opendir() "${path}" failed (${systemErrorText(err)})`);
    return statusOutcome(status);
  }
  // the not-modified filter judges the header: a listing has neither date nor ETag
  const condition = (r.errStatus || 200) === 200 && !r.parent ? preconditionStatus(r, undefined, undefined) : 200;
  const headerOnly = ex.out.headOnly || condition !== 200;
  let entries: Entry[] | undefined;
  try {
    if (!headerOnly) entries = await readEntries(ex, dir, path);
  } finally {
    await dir.close().catch(() => undefined);
  }
  if (condition === 412) return statusOutcome(412);
  if (!headerOnly && !entries) return { kind: 'close' };
  const headers = keptHeaders(r).filter(([name]) => name.toLowerCase() !== 'content-type');
  if (condition === 304) {
    applyHeadersModule(r, 304, headers);
    ex.out.head(r, 304, headers);
    ex.out.end();
    return DONE;
  }
  headers.push(['Content-Type', CONTENT_TYPES[format]]);
  applyHeadersModule(r, 200, headers);
  ex.out.head(r, 200, headers);
  if (ex.out.headOnly || !entries) {
    ex.out.end();
    return DONE;
  }
  entries.sort(compareEntries);
  const text = format === 'html' ? htmlListing(r.uri, entries, utf8Charset(headers), conf.localtime, conf.exactSize)
    : format === 'xml' ? xmlListing(entries)
    : jsonListing(entries, format === 'jsonp' ? callback : undefined);
  const body = Buffer.from(text, 'latin1');
  r.bodyBytesSent = body.length;
  ex.out.end(body);
  return DONE;
}

/** What `stat` (or, for a broken link, `lstat`) said of an entry, or which of them failed. */
export type Looked = Stats | { readonly call: 'stat' | 'lstat'; readonly err: NodeJS.ErrnoException };

/** `ngx_de_info`, and `ngx_de_link_info` when the target is missing or loops (ENOENT, ELOOP). */
export async function lookAt(filename: string): Promise<Looked> {
  try {
    return await stat(fsPath(filename));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ELOOP') return { call: 'stat', err: err as NodeJS.ErrnoException };
  }
  try {
    return await lstat(fsPath(filename));
  } catch (err) {
    return { call: 'lstat', err: err as NodeJS.ErrnoException };
  }
}

/**
 * Reads the directory's names (those starting with `.` left out) and
 * `stat`s each; an entry `stat` refuses (EACCES) is logged and left out;
 * undefined after a failure that ends the response (logged).
 */
async function readEntries(ex: Exchange, dir: Dir, path: string): Promise<Entry[] | undefined> {
  const { r } = ex;
  const names: string[] = [];
  try {
    for (let dirent = await dir.read(); dirent !== null; dirent = await dir.read()) {
      const name = (dirent.name as unknown as Buffer).toString('latin1');
      if (!name.startsWith('.')) names.push(name);
    }
  } catch (err) {
    logRequest(ex.cx, r, 'crit', `readdir() "${path}" failed (${systemErrorText(err)})`);
    return undefined;
  }
  const entries: Entry[] = [];
  for (let i = 0; i < names.length; i += STAT_BATCH) {
    const batch = names.slice(i, i + STAT_BATCH);
    const looked = await Promise.all(batch.map((name) => lookAt(`${path}/${name}`)));
    for (let j = 0; j < batch.length; j++) {
      const st = looked[j]!;
      if ('call' in st) {
        logRequest(ex.cx, r, 'crit', `${st.call}() "${path}/${batch[j]!}" failed (${systemErrorText(st.err)})`);
        if (st.call === 'stat' && st.err.code === 'EACCES') continue;
        return undefined;
      }
      entries.push({ name: batch[j]!, dir: st.isDirectory(), file: st.isFile(), mtimeSec: Math.floor(st.mtimeMs / 1000), sizeBytes: st.size });
    }
  }
  return entries;
}

/** `ngx_http_autoindex_cmp_entries`: directories first, then by the names' bytes (`strcmp`). */
function compareEntries(a: Entry, b: Entry): number {
  if (a.dir !== b.dir) return a.dir ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Whether the response's charset, as the charset filter left the `Content-Type`, is `utf-8` (any case). */
function utf8Charset(headers: readonly [string, string | string[]][]): boolean {
  const type = headers.find(([name]) => name.toLowerCase() === 'content-type')?.[1];
  if (typeof type !== 'string') return false;
  const at = type.indexOf('; charset=');
  return at !== -1 && type.slice(at + 10).toLowerCase() === 'utf-8';
}

/**
 * `ngx_utf8_decode`: the code point of the UTF-8 sequence at `at` and where
 * it ends; a code point above 0x10FFFF means an invalid sequence (a
 * continuation byte is any byte from 0x80, as nginx has it).
 */
function utf8Decode(bytes: Buffer, at: number): { readonly code: number; readonly end: number } {
  let u = bytes[at]!;
  let len: number;
  let valid: number;
  if (u >= 0xf0) {
    u &= 0x07;
    valid = 0xffff;
    len = 3;
  } else if (u >= 0xe0) {
    u &= 0x0f;
    valid = 0x7ff;
    len = 2;
  } else if (u >= 0xc2) {
    u &= 0x1f;
    valid = 0x7f;
    len = 1;
  } else {
    return { code: 0xffffffff, end: at + 1 };
  }
  if (bytes.length - at - 1 < len) return { code: 0xfffffffe, end: at };
  let p = at + 1;
  for (; len > 0; len--) {
    const c = bytes[p++]!;
    if (c < 0x80) return { code: 0xffffffff, end: p };
    u = u * 64 + (c & 0x3f);
  }
  return { code: u > valid ? u : 0xffffffff, end: p };
}

/** `ngx_utf8_length`: the characters of a UTF-8 name, or its bytes when it is not valid UTF-8. */
function utf8Length(bytes: Buffer): number {
  let len = 0;
  for (let p = 0; p < bytes.length; len++) {
    if (bytes[p]! < 0x80) {
      p++;
      continue;
    }
    const { code, end } = utf8Decode(bytes, p);
    if (code > 0x10ffff) return bytes.length;
    p = end;
  }
  return len;
}

/** The bytes of the first `chars` characters of a valid UTF-8 name (`ngx_utf8_cpystrn`). */
function utf8Prefix(bytes: Buffer, chars: number): Buffer {
  let p = 0;
  for (let n = 0; n < chars && p < bytes.length; n++) p = bytes[p]! < 0x80 ? p + 1 : utf8Decode(bytes, p).end;
  return bytes.subarray(0, p);
}

const pad2 = (n: number): string => String(n).padStart(2, '0');

/**
 * `ngx_http_autoindex_html`: the page with a line per entry: the link (the
 * name escaped as a URI component), the name (HTML-escaped) cut to 50
 * characters (`..>` after 47 for a longer one; characters are UTF-8
 * characters when the response's charset is utf-8) and padded to them, the
 * date `dd-Mon-yyyy hh:mm` (UTC, or the server's time zone with
 * `autoindex_localtime`), the size (bytes in 19 columns, or rounded to K,
 * M, G in 7 with `autoindex_exact_size off`).
 */
function htmlListing(uri: string, entries: readonly Entry[], utf8: boolean, localtime: boolean, exactSize: boolean): string {
  const title = escapeHtml(uri);
  let out = `<html>\r\n<head><title>Index of ${title}</title></head>\r\n<body>\r\n<h1>Index of ${title}</h1><hr><pre><a href="../">../</a>\r\n`;
  // nginx's ngx_timeofday()->gmtoff: the offset in effect now, for every date
  const offsetSec = localtime ? -new Date().getTimezoneOffset() * 60 : 0;
  for (const e of entries) {
    const bytes = Buffer.from(e.name, 'latin1');
    let len = utf8 ? utf8Length(bytes) : bytes.length;
    const shown = len > NAME_LEN ? NAME_LEN - 3 : NAME_LEN;
    const name = bytes.length !== len ? utf8Prefix(bytes, shown).toString('latin1') : e.name.slice(0, shown);
    out += `<a href="${escapeUriComponent(e.name)}${e.dir ? '/' : ''}">${escapeHtml(name)}`;
    if (len > NAME_LEN) out += '..&gt;</a>';
    else {
      if (e.dir && len < NAME_LEN) {
        out += '/';
        len++;
      }
      out += `</a>${' '.repeat(NAME_LEN - len)}`;
    }
    const t = new Date((e.mtimeSec + offsetSec) * 1000);
    out += ` ${pad2(t.getUTCDate())}-${MONTHS[t.getUTCMonth()]}-${t.getUTCFullYear()} ${pad2(t.getUTCHours())}:${pad2(t.getUTCMinutes())} `;
    out += exactSize ? (e.dir ? '-' : String(e.sizeBytes)).padStart(19) : e.dir ? '      -' : humanSize(e.sizeBytes);
    out += '\r\n';
  }
  return `${out}</pre><hr></body>\r\n</html>\r\n`;
}

/** A size as `autoindex_exact_size off` shows it: `%6i%c` rounded to K (from 10000 bytes), M or G, else ` %6i`. */
function humanSize(sizeBytes: number): string {
  for (const [scale, unit] of [['G', 1024 ** 3], ['M', 1024 ** 2], ['K', 1024]] as const) {
    if (sizeBytes >= (scale === 'K' ? 10000 : unit)) {
      const rounded = Math.floor(sizeBytes / unit) + (sizeBytes % unit >= unit / 2 ? 1 : 0);
      return `${String(rounded).padStart(6)}${scale}`;
    }
  }
  return ` ${String(sizeBytes).padStart(6)}`;
}

/** The type of an entry in JSON and XML. */
const entryType = (e: Entry): string => (e.dir ? 'directory' : e.file ? 'file' : 'other');

/**
 * `ngx_http_autoindex_json`: an array of `{ "name", "type", "mtime" (the
 * HTTP date), "size" (files only) }`; with a callback, wrapped in
 * `/* callback *\/ NAME(…);`.
 */
function jsonListing(entries: readonly Entry[], callback: string | undefined): string {
  const items = entries.map((e) => {
    const size = e.file ? `", "size":${e.sizeBytes}` : '"';
    return `\r\n{ "name":"${escapeJson(e.name)}", "type":"${entryType(e)}", "mtime":"${new Date(e.mtimeSec * 1000).toUTCString()}${size} }`;
  });
  const list = `[${items.join(',')}\r\n]`;
  return callback === undefined ? list : `/* callback */\r\n${callback}(${list});`;
}

/** `ngx_http_autoindex_xml`: `<list>` of `<TYPE mtime="…Z" size="…">NAME</TYPE>` (size for files only). */
function xmlListing(entries: readonly Entry[]): string {
  let out = '<?xml version="1.0"?>\r\n<list>\r\n';
  for (const e of entries) {
    const type = entryType(e);
    const mtime = new Date(e.mtimeSec * 1000).toISOString().slice(0, 19);
    out += `<${type} mtime="${mtime}Z${e.file ? `" size="${e.sizeBytes}` : ''}">${escapeHtml(e.name)}</${type}>\r\n`;
  }
  return `${out}</list>\r\n`;
}
