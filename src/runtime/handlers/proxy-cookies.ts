/**
 * Rewriting the `Set-Cookie` headers of a proxied response
 * (`ngx_http_proxy_rewrite_cookie` in `src/http/modules/ngx_http_proxy_module.c`):
 * `proxy_cookie_domain` and `proxy_cookie_path` replace the value of the
 * `Domain` and `Path` attributes, `proxy_cookie_flags` adds or removes
 * `Secure`, `HttpOnly` and `SameSite`. A header no rule changed is passed as
 * received; one that changed is written back attribute by attribute,
 * joined with `; `.
 */
import type { CookieFlags, CookieMatch, CookieRewrite, ProxyConf } from '../../config/route-table.js';
import type { HttpRequestState } from '../request.js';

/** One `NAME[=VALUE]` of a cookie; a removed attribute has no name. */
interface Attribute {
  name: string | undefined;
  value: string | undefined;
}

/**
 * `ngx_http_proxy_parse_cookie`: the `;`-separated attributes, blanks
 * around names and values cut; the first is the cookie itself.
 */
function parseCookie(header: string): Attribute[] {
  const out: Attribute[] = [];
  for (let start = 0; ;) {
    let last = header.indexOf(';', start);
    if (last === -1) last = header.length;
    while (start < last && header[start] === ' ') start++;
    let p = start;
    while (p < last && header[p] !== '=') p++;
    const name = header.slice(start, p).replace(/ +$/, '');
    let value: string | undefined;
    if (p < last) {
      p++;
      while (p < last && header[p] === ' ') p++;
      value = header.slice(p, last).replace(/ +$/, '');
    }
    out.push({ name, value });
    if (last === header.length) return out;
    start = last + 1;
  }
}

/** Runs a rule's regex on `text`; a match sets the request's captures, as `ngx_http_regex_exec` does. */
function regexMatch(r: HttpRequestState, regex: RegExp, text: string): boolean {
  const m = regex.exec(text);
  if (m) r.captures = m;
  return m !== null;
}

/**
 * The first rule that matches `value` rewrites it
 * (`ngx_http_proxy_rewrite_cookie_value`): a domain compares whole and
 * case-insensitively after a leading `.` (kept), a path as a prefix, a regex
 * replaces the whole value. Undefined when no rule matched.
 */
function rewriteValue(r: HttpRequestState, value: string, rules: readonly CookieRewrite[], attribute: 'domain' | 'path'): string | undefined {
  for (const rule of rules) {
    const m = rule.match;
    if (m.kind === 'regex') {
      if (regexMatch(r, m.regex, value)) return rule.replacement.evaluate(r);
      continue;
    }
    const pattern = m.value.evaluate(r);
    if (attribute === 'path') {
      if (value.startsWith(pattern)) return rule.replacement.evaluate(r) + value.slice(pattern.length);
      continue;
    }
    const dot = value.startsWith('.') ? 1 : 0;
    if (value.length - dot === pattern.length && value.slice(dot).toLowerCase() === pattern.toLowerCase()) {
      return value.slice(0, dot) + rule.replacement.evaluate(r);
    }
  }
  return undefined;
}

// the bits of ngx_http_proxy_cookie_flags_masks
const SECURE_ON = 0x2;
const SECURE_OFF = 0x4;
const HTTPONLY_ON = 0x10;
const HTTPONLY_OFF = 0x20;
const SAMESITE_STRICT = 0x80;
const SAMESITE_LAX = 0x100;
const SAMESITE_NONE = 0x200;
const SAMESITE_OFF = 0x400;

const FLAG_MASKS: ReadonlyMap<string, number> = new Map([
  ['secure', SECURE_ON], ['nosecure', SECURE_OFF], ['httponly', HTTPONLY_ON], ['nohttponly', HTTPONLY_OFF],
  ['samesite=strict', SAMESITE_STRICT], ['samesite=lax', SAMESITE_LAX], ['samesite=none', SAMESITE_NONE], ['nosamesite', SAMESITE_OFF],
]);

/** Whether a rule's cookie matches the cookie's name (a name compares case-insensitively). */
function cookieMatches(r: HttpRequestState, match: CookieMatch, name: string): boolean {
  if (match.kind === 'regex') return regexMatch(r, match.regex, name);
  const pattern = match.value.evaluate(r);
  return pattern.length === name.length && pattern.toLowerCase() === name.toLowerCase();
}

/**
 * `ngx_http_proxy_rewrite_cookie_flags` and `…_edit_cookie_flags`: the
 * flags of the first rule whose cookie matches; an attribute already there
 * stays as written unless its value differs (`SameSite`) or a `no…` flag
 * removes it; missing ones are added in the order Secure, HttpOnly,
 * SameSite. Returns whether a rule with a known flag applied.
 */
function editFlags(r: HttpRequestState, attrs: Attribute[], rules: readonly CookieFlags[]): boolean {
  const rule = rules.find((f) => cookieMatches(r, f.cookie, attrs[0]!.name!));
  if (!rule) return false;
  let flags = 0;
  for (const f of rule.flags) {
    const text = f.evaluate(r);
    if (text !== '') flags |= FLAG_MASKS.get(text.toLowerCase()) ?? 0;
  }
  if (flags === 0) return false;
  for (const a of attrs.slice(1)) {
    const key = a.name?.toLowerCase();
    if (key === 'secure') {
      if (flags & SECURE_ON) flags &= ~SECURE_ON;
      else if (flags & SECURE_OFF) a.name = undefined;
    } else if (key === 'httponly') {
      if (flags & HTTPONLY_ON) flags &= ~HTTPONLY_ON;
      else if (flags & HTTPONLY_OFF) a.name = undefined;
    } else if (key === 'samesite') {
      const wanted = flags & SAMESITE_STRICT ? 'Strict' : flags & SAMESITE_LAX ? 'Lax' : flags & SAMESITE_NONE ? 'None' : undefined;
      if (wanted) {
        flags &= ~(flags & SAMESITE_STRICT ? SAMESITE_STRICT : flags & SAMESITE_LAX ? SAMESITE_LAX : SAMESITE_NONE);
        if (a.value?.toLowerCase() !== wanted.toLowerCase()) [a.name, a.value] = ['SameSite', wanted];
      } else if (flags & SAMESITE_OFF) a.name = undefined;
    }
  }
  if (flags & SECURE_ON) attrs.push({ name: 'Secure', value: undefined });
  if (flags & HTTPONLY_ON) attrs.push({ name: 'HttpOnly', value: undefined });
  const samesite = flags & SAMESITE_STRICT ? 'Strict' : flags & SAMESITE_LAX ? 'Lax' : flags & SAMESITE_NONE ? 'None' : undefined;
  if (samesite) attrs.push({ name: 'SameSite', value: samesite });
  return true;
}

/** Whether a location rewrites cookies at all (nginx's `u->rewrite_cookie`). */
export function rewritesCookies(p: ProxyConf): boolean {
  return p.cookieDomains !== undefined || p.cookiePaths !== undefined || p.cookieFlags !== undefined;
}

/** The `Set-Cookie` value after the location's cookie rules, or undefined when none changed it. */
export function rewriteSetCookie(r: HttpRequestState, p: ProxyConf, header: string): string | undefined {
  const attrs = parseCookie(header);
  if (attrs[0]!.value === undefined) return undefined;
  let changed = false;
  for (const a of attrs.slice(1)) {
    if (a.value === undefined) continue;
    const key = a.name!.toLowerCase();
    const rules = key === 'domain' ? p.cookieDomains : key === 'path' ? p.cookiePaths : undefined;
    if (!rules) continue;
    const rewritten = rewriteValue(r, a.value, rules, key as 'domain' | 'path');
    if (rewritten === undefined) continue;
    a.value = rewritten;
    changed = true;
  }
  if (p.cookieFlags && editFlags(r, attrs, p.cookieFlags)) changed = true;
  if (!changed) return undefined;
  let out = '';
  attrs.forEach((a, i) => {
    if (a.name === undefined) return;
    if (i > 0) out += '; ';
    out += a.value === undefined ? a.name : `${a.name}=${a.value}`;
  });
  return out;
}
