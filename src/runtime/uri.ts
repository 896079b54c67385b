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

/**
 * Validates a Host value and returns the name nginx uses: lowercased, port
 * and one trailing dot removed. Undefined when invalid (nginx: 400
 * "client sent invalid host header").
 */
export function validateHost(host: string): string | undefined {
  let hostLen = host.length;
  let dotPos = host.length;
  let state: 'usual' | 'literal' | 'rest' = 'usual';
  for (let i = 0; i < host.length; i++) {
    const ch = host[i]!;
    const code = host.charCodeAt(i);
    if (ch === '.') {
      if (dotPos === i - 1) return undefined;
      dotPos = i;
    } else if (ch === ':') {
      if (state === 'usual') {
        hostLen = i;
        state = 'rest';
      }
    } else if (ch === '[') {
      if (i === 0) state = 'literal';
    } else if (ch === ']') {
      if (state === 'literal') {
        hostLen = i + 1;
        state = 'rest';
      }
    } else if (ch === '/' || ch === '\\' || code <= 0x20 || code === 0x7f) return undefined;
  }
  if (state === 'literal') return undefined;
  if (dotPos === hostLen - 1) hostLen--;
  if (hostLen <= 0) return undefined;
  return host.slice(0, hostLen).toLowerCase();
}

/**
 * `$request_port`: the port after a valid host (`example.com:8080`,
 * `[::1]:443`) as a number, or '' when there is none.
 */
export function hostPort(host: string): string {
  const after = host.startsWith('[') ? host.indexOf(']') + 1 : host.indexOf(':');
  if (after <= 0 || host[after] !== ':') return '';
  const port = host.slice(after + 1);
  return /^\d+$/.test(port) ? String(Number(port)) : '';
}

const URI_UNSAFE = /[\x00-\x20#%?\x7f-\uffff]/;

/** Escapes a decoded URI for an upstream request line (`NGX_ESCAPE_URI`: controls, space, `#`, `%`, `?`, non-ASCII). */
export function escapeUri(uri: string): string {
  if (!URI_UNSAFE.test(uri)) return uri;
  let out = '';
  for (const byte of Buffer.from(uri, 'latin1')) {
    const ch = String.fromCharCode(byte);
    out += byte <= 0x20 || byte >= 0x7f || ch === '#' || ch === '%' || ch === '?'
      ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
      : ch;
  }
  return out;
}
