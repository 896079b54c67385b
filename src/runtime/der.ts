/**
 * The little of DER (ITU-T X.690) jinx reads itself: certificates for the
 * `$ssl_client_*` variables, serialized TLS sessions for `$ssl_session_id`.
 */

/** One DER element: its tag, where its header starts, and its contents. */
export interface Element {
  readonly tag: number;
  readonly start: number;
  readonly contentStart: number;
  readonly end: number;
}

/**
 * The element whose header starts at `at` (single-byte tags, definite
 * lengths: all DER has), ending no later than `limit`.
 * @throws RangeError when the bytes are not DER
 */
export function element(der: Buffer, at: number, limit = der.length): Element {
  if (at + 2 > limit) throw new RangeError('truncated DER');
  const tag = der[at]!;
  let len = der[at + 1]!;
  let p = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || p + n > limit) throw new RangeError('bad DER length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[p++]!;
  }
  if (p + len > limit) throw new RangeError('truncated DER');
  return { tag, start: at, contentStart: p, end: p + len };
}

/**
 * The elements inside a constructed element, in order.
 * @throws RangeError when they are not DER
 */
export function children(der: Buffer, parent: Element): Element[] {
  const out: Element[] = [];
  for (let at = parent.contentStart; at < parent.end;) {
    const e = element(der, at, parent.end);
    out.push(e);
    at = e.end;
  }
  return out;
}

/** Dotted text of an OBJECT IDENTIFIER's contents (`OBJ_obj2txt` with numbers). */
export function oidText(bytes: Buffer): string {
  const arcs: number[] = [];
  let v = 0;
  for (const b of bytes) {
    v = v * 128 + (b & 0x7f);
    if (b & 0x80) continue;
    if (arcs.length === 0) arcs.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
    else arcs.push(v);
    v = 0;
  }
  return arcs.join('.');
}
