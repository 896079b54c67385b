/**
 * Request-target and Host handling as nginx does it: the URI is
 * percent-decoded and normalized (`ngx_http_parse_complex_uri`), the Host is
 * validated and lowercased (`ngx_http_validate_host`), and a URI passed to an
 * upstream is escaped again (`ngx_escape_uri` with `NGX_ESCAPE_URI`).
 */

/**
 * Decodes and normalizes a path: `%XX` decoded, `//` merged (when
 * `mergeSlashes`), `.` and `..` segments resolved. Returns undefined for an
 * invalid URI (bad `%` escape, a NUL, `..` above the root), which nginx answers
 * with 400.
 */
export function normalizePath(raw: string, mergeSlashes: boolean): string | undefined {
  if (!raw.startsWith('/')) return undefined;
  let decoded: string;
  if (raw.includes('%')) {
    const bytes: number[] = [];
    for (let i = 0; i < raw.length; i++) {
      const c = raw.charCodeAt(i);
      if (c === 0x25) {
        const hex = raw.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(hex)) return undefined;
        const v = parseInt(hex, 16);
        if (v === 0) return undefined;
        bytes.push(v);
        i += 2;
      } else if (c < 0x80) bytes.push(c);
      else for (const b of Buffer.from(raw[i]!)) bytes.push(b);
    }
    decoded = Buffer.from(bytes).toString('latin1');
  } else decoded = raw;
  if (!/\/\.|\/\//.test(decoded)) return decoded;
  const segments = decoded.split('/');
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const seg = segments[i]!;
    const last = i === segments.length - 1;
    if (seg === '.') {
      if (last) out.push('');
      continue;
    }
    if (seg === '..') {
      if (out.length === 0) return undefined;
      out.pop();
      if (last) out.push('');
      continue;
    }
    if (seg === '' && mergeSlashes && !last) continue;
    out.push(seg);
  }
  return '/' + out.join('/');
}

/** Bytes of an RFC 3986 reg-name besides letters and digits: unreserved, `%` of pct-encoded, sub-delims. */
const REG_NAME = new Set([...'-._~%!$&\'()*+,;=']);
/** Bytes of an IP literal (`[…]`) besides letters and digits, as nginx's request-line parser takes them. */
const IP_LITERAL = new Set([...':-._~!$&\'()*+,;=']);

const isAlnum = (code: number): boolean =>
  (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a);

/**
 * Validates a Host value as nginx 1.30's `ngx_http_validate_host` does (for
 * a Host header, an absolute request target and HTTP/2's `:authority`) and
 * returns the name nginx uses: lowercased, port and one trailing dot
 * removed. The name is a reg-name (letters, digits, unreserved,
 * pct-encoded, sub-delims) or an IP literal in brackets; no two dots in a
 * row; the port, if any, digits up to 65535. Undefined when invalid (nginx:
 * 400 "client sent invalid host header").
 */
export function validateHost(host: string): string | undefined {
  let hostLen = host.length;
  let dotPos = host.length;
  let port = 0;
  let state: 'usual' | 'literal' | 'after-literal' | 'port' = 'usual';
  for (let i = 0; i < host.length; i++) {
    const ch = host[i]!;
    const code = host.charCodeAt(i);
    if (state === 'port') {
      if (code < 0x30 || code > 0x39) return undefined;
      port = port * 10 + (code - 0x30);
      if (port > 65_535) return undefined;
      continue;
    }
    if (ch === '.') {
      if (dotPos === i - 1 || state === 'after-literal') return undefined;
      dotPos = i;
      continue;
    }
    if (ch === ':') {
      if (state === 'literal') continue;
      hostLen = state === 'usual' ? i : hostLen;
      state = 'port';
      continue;
    }
    if (state === 'after-literal') return undefined;
    if (ch === '[') {
      if (i !== 0) return undefined;
      state = 'literal';
      continue;
    }
    if (ch === ']') {
      if (state !== 'literal') return undefined;
      hostLen = i + 1;
      state = 'after-literal';
      continue;
    }
    if (isAlnum(code) || (state === 'usual' ? REG_NAME : IP_LITERAL).has(ch)) continue;
    return undefined;
  }
  if (state === 'literal') return undefined;
  if (dotPos === hostLen - 1) hostLen--;
  if (hostLen <= 0) return undefined;
  return host.slice(0, hostLen).toLowerCase();
}

/**
 * `$request_port`: the port after a valid host (`example.com:8080`,
 * `[::1]:443`) as a number from 1 to 65535, or '' when there is none.
 */
export function hostPort(host: string): string {
  const after = host.startsWith('[') ? host.indexOf(']') + 1 : host.indexOf(':');
  if (after <= 0 || host[after] !== ':' || after + 1 === host.length) return '';
  // (read digit by digit: every request with a port in its Host header comes here)
  let port = 0;
  for (let i = after + 1; i < host.length; i++) {
    const digit = host.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return '';
    port = port * 10 + digit;
    if (port > 65_535) return '';
  }
  return port >= 1 ? String(port) : '';
}

/** Bytes `NGX_ESCAPE_URI` escapes besides controls and non-ASCII (nginx 1.30's `ngx_escape_uri`, RFC 3986's disallowed set plus `#`, `%`, `?`). */
const URI_ESCAPED = ' "#%<>?\\^`{|}';
/** Bytes `NGX_ESCAPE_ARGS` escapes besides controls and non-ASCII: those of `NGX_ESCAPE_URI` and `&`, `+`, `;`. */
const ARGS_ESCAPED = `${URI_ESCAPED}&+;`;

/** A 256-entry table: whether `ngx_escape_uri` escapes each byte for the given set. */
function escapeTable(set: string): Uint8Array {
  const t = new Uint8Array(256);
  for (let b = 0; b < 256; b++) t[b] = b < 0x20 || b >= 0x7f || set.includes(String.fromCharCode(b)) ? 1 : 0;
  return t;
}

const URI_TABLE = escapeTable(URI_ESCAPED);
const ARGS_TABLE = escapeTable(ARGS_ESCAPED);
const HEX = '0123456789ABCDEF';

function escapeWith(table: Uint8Array, s: string): string {
  let i = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c >= 0x100 || table[c]) break;
    i++;
  }
  if (i === s.length) return s;
  let out = s.slice(0, i);
  for (const byte of Buffer.from(s.slice(i), 'latin1')) {
    out += table[byte] ? `%${HEX[byte >> 4]}${HEX[byte & 15]}` : String.fromCharCode(byte);
  }
  return out;
}

/**
 * Escapes a decoded URI (a latin1 byte string) as `ngx_escape_uri` with
 * `NGX_ESCAPE_URI` does: controls, space, non-ASCII bytes and
 * `"`, `#`, `%`, `<`, `>`, `?`, backslash, `^`, backquote, `{`, `|`, `}` become `%XX` (the URI of an upstream request line, the
 * `Location` of a directory redirect).
 */
export function escapeUri(uri: string): string {
  return escapeWith(URI_TABLE, uri);
}

/**
 * Escapes a value for the query string as `ngx_escape_uri` with
 * `NGX_ESCAPE_ARGS` does: `NGX_ESCAPE_URI`'s bytes and `&`, `+`, `;` (a
 * regex capture copied into a rewrite's arguments).
 */
export function escapeArgs(value: string): string {
  return escapeWith(ARGS_TABLE, value);
}

/** `NGX_ESCAPE_URI_COMPONENT`: every byte but letters, digits, `-`, `.`, `_` and `~`. */
const URI_COMPONENT_TABLE = (() => {
  const t = new Uint8Array(256).fill(1);
  for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~') t[ch.charCodeAt(0)] = 0;
  return t;
})();

/**
 * Escapes a latin1 byte string as `ngx_escape_uri` with
 * `NGX_ESCAPE_URI_COMPONENT` does: all but letters, digits, `-`, `.`, `_`
 * and `~` become `%XX` (a file name in autoindex's links).
 */
export function escapeUriComponent(value: string): string {
  return escapeWith(URI_COMPONENT_TABLE, value);
}

/** `ngx_escape_html`: `<`, `>`, `&` and `"` as entities. */
export function escapeHtml(s: string): string {
  return s.replace(/[<>&"]/g, (c) => (c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '&' ? '&amp;' : '&quot;'));
}

const hexDigit = (c: number): number => (c >= 0x30 && c <= 0x39 ? c - 0x30 : (c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 0x57 : -1);

/**
 * `ngx_unescape_uri` with no flags: every `%XX` decoded; of a malformed
 * escape the `%` is dropped, and a bad second digit drops both digits too.
 */
export function unescapeUri(s: string): string {
  if (!s.includes('%')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '%') {
      out += s[i];
      continue;
    }
    const hi = hexDigit(s.charCodeAt(i + 1));
    if (hi === -1) {
      if (i + 1 < s.length) out += s[i + 1];
      i++;
      continue;
    }
    const lo = hexDigit(s.charCodeAt(i + 2));
    if (lo !== -1) out += String.fromCharCode(hi * 16 + lo);
    i += 2;
  }
  return out;
}

/**
 * Whether `s` starts with a `..` segment or, before `end`, has a `/..`
 * segment; a segment ends at `/` or at the end of `s` (`ngx_http_parse_unsafe_uri`).
 */
function climbs(s: string, end: number): boolean {
  if (s.startsWith('..') && (s.length === 2 || s[2] === '/')) return true;
  for (let i = s.indexOf('/'); i !== -1 && i < end; i = s.indexOf('/', i + 1)) {
    if (s[i + 1] === '.' && s[i + 2] === '.' && (i + 3 === s.length || s[i + 3] === '/')) return true;
  }
  return false;
}

/**
 * Splits and checks a URI given by an upstream (`X-Accel-Redirect`) as
 * `ngx_http_parse_unsafe_uri` does: the arguments after the first `?`, the
 * path unescaped; `unsafe` (what nginx logs) when it is empty, starts with
 * `?`, has a NUL or climbs with `..`, before or after unescaping.
 */
export function parseUnsafeUri(value: string): { uri: string; args: string } | { unsafe: string } {
  if (value === '' || value.startsWith('?')) return { unsafe: value };
  const q = value.indexOf('?');
  const end = q === -1 ? value.length : q;
  const path = value.slice(0, end);
  if (path.includes('\0') || climbs(value, end)) return { unsafe: value };
  const uri = unescapeUri(path);
  if (uri !== path && (uri.includes('\0') || climbs(uri, uri.length))) return { unsafe: uri };
  return { uri, args: q === -1 ? '' : value.slice(q + 1) };
}
