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
  if (after <= 0 || host[after] !== ':') return '';
  const port = Number(host.slice(after + 1));
  return /^\d+$/.test(host.slice(after + 1)) && port >= 1 && port <= 65_535 ? String(port) : '';
}

/**
 * Bytes `NGX_ESCAPE_URI` escapes (nginx 1.30's table, `ngx_escape_uri`):
 * what RFC 3986 does not allow in a path (controls, space, `"`, `<`, `>`,
 * `\`, `^`, `` ` ``, `{`, `|`, `}`, DEL and non-ASCII), and `#`, `%`, `?`.
 */
const URI_UNSAFE = /[\x00-\x20"#%<>?\\^`{|}\x7f-\uffff]/;

/**
 * Escapes a decoded URI as `ngx_escape_uri(…, NGX_ESCAPE_URI)` does, for an
 * upstream request line and the `Location` of a redirect to a directory
 * (`ngx_http_static_handler`, `ngx_http_core_find_config_handler`): each
 * byte of `URI_UNSAFE` as `%XX`.
 */
export function escapeUri(uri: string): string {
  if (!URI_UNSAFE.test(uri)) return uri;
  let out = '';
  for (const byte of Buffer.from(uri, 'latin1')) {
    const ch = String.fromCharCode(byte);
    out += URI_UNSAFE.test(ch) ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}` : ch;
  }
  return out;
}
