/**
 * A client certificate as the `$ssl_client_*` variables print it, read from
 * its DER bytes the way OpenSSL prints it for nginx
 * (`ngx_ssl_get_subject_dn`, `ngx_ssl_get_serial_number`,
 * `ngx_ssl_get_client_v_start` … in `src/event/ngx_event_openssl.c`):
 * distinguished names in RFC 2253 form (`X509_NAME_print_ex` with
 * `XN_FLAG_RFC2253`) and in the legacy one-line form (`X509_NAME_oneline`),
 * the serial number (`i2a_ASN1_INTEGER`), and validity times
 * (`ASN1_TIME_print`).
 */
import { children, element, oidText, type Element } from './der.js';
import { attributeName } from './openssl-names.js';

/** One attribute of a name: its type, the RDN (SET) it belongs to, its value element. */
interface NameEntry {
  readonly oid: string;
  readonly set: number;
  readonly valueTag: number;
  readonly value: Buffer;
  /** The value's whole DER encoding, for `#…` dumps. */
  readonly encoded: Buffer;
}

function nameEntries(der: Buffer, name: Element): NameEntry[] {
  const out: NameEntry[] = [];
  children(der, name).forEach((rdn, set) => {
    for (const ava of children(der, rdn)) {
      const [type, value] = children(der, ava);
      if (!type || !value) throw new RangeError('bad attribute');
      out.push({
        oid: oidText(der.subarray(type.contentStart, type.end)),
        set,
        valueTag: value.tag,
        value: der.subarray(value.contentStart, value.end),
        encoded: der.subarray(value.start, value.end),
      });
    }
  });
  return out;
}

/** Bytes per character of the string types `do_print_ex` prints (`tag2nbyte`); 0 = UTF8String; absent = dumped. */
const CHAR_WIDTH: ReadonlyMap<number, number> = new Map([[12, 0], [18, 1], [19, 1], [20, 1], [22, 1], [23, 1], [24, 1], [26, 1], [28, 4], [30, 2]]);

const hex2 = (b: number): string => (b < 16 ? '0' : '') + b.toString(16).toUpperCase();

/** The characters `ASN1_STRFLGS_ESC_2253` escapes with a backslash. */
const RFC2253_SPECIAL = new Set([',', '+', '"', '\\', '<', '>', ';']);

/**
 * `do_esc_char` with `ASN1_STRFLGS_RFC2253`: one byte, escaped; `first` and
 * `last` tell where it is (`#` and space are escaped at the start, space at
 * the end; a one-character value counts as last only, as in OpenSSL).
 */
function escape2253(b: number, first: boolean, last: boolean): string {
  if (b > 0x7f || b < 0x20 || b === 0x7f) return `\\${hex2(b)}`;
  const ch = String.fromCharCode(b);
  if (RFC2253_SPECIAL.has(ch) || (first && (ch === '#' || ch === ' ')) || (last && ch === ' ')) return `\\${ch}`;
  return ch;
}

/** UTF-8 bytes of one code point (`UTF8_putc`). */
function utf8(c: number): number[] {
  if (c < 0x80) return [c];
  if (c < 0x800) return [0xc0 | (c >> 6), 0x80 | (c & 0x3f)];
  if (c < 0x10000) return [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)];
  return [0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)];
}

/**
 * An attribute value as `do_print_ex` prints it with `ASN1_STRFLGS_RFC2253`:
 * string types converted to UTF-8 (a UTF8String taken byte by byte), then
 * escaped; other types, and values of unknown attribute types, as `#` and
 * the hex of their DER encoding.
 */
function value2253(e: NameEntry, known: boolean): string {
  const width = CHAR_WIDTH.get(e.valueTag);
  if (!known || width === undefined || (width > 1 && e.value.length % width !== 0)) {
    return `#${e.encoded.toString('hex').toUpperCase()}`;
  }
  const chars: number[] = [];
  const step = width === 0 ? 1 : width;
  for (let i = 0; i < e.value.length; i += step) {
    let c = 0;
    for (let k = 0; k < step; k++) c = c * 256 + e.value[i + k]!;
    chars.push(c);
  }
  let out = '';
  chars.forEach((c, i) => {
    const last = i === chars.length - 1;
    const first = i === 0 && !last;
    const bytes = width === 0 ? [c] : utf8(c);
    for (const b of bytes) out += escape2253(b, first, last);
  });
  return out;
}

/**
 * A name in RFC 2253 form (`X509_NAME_print_ex(…, XN_FLAG_RFC2253)`): the
 * attributes last to first, RDNs separated by `,`, the members of a
 * multi-valued RDN by `+`, types by their OpenSSL short names (dotted
 * numbers for types OpenSSL does not know).
 */
function rfc2253(entries: readonly NameEntry[]): string {
  let out = '';
  let prev = -1;
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (prev !== -1) out += prev === e.set ? '+' : ',';
    prev = e.set;
    const short = attributeName(e.oid);
    out += `${short ?? e.oid}=${value2253(e, short !== undefined)}`;
  }
  return out;
}

/**
 * A name in the legacy form (`X509_NAME_oneline`): `/TYPE=value` for each
 * attribute in order, `+` before the further members of a multi-valued RDN,
 * `/` and `+` in values escaped with a backslash, bytes outside `' '`…`'~'`
 * as `\xHH`.
 */
function oneline(entries: readonly NameEntry[]): string {
  let out = '';
  let prev = -1;
  for (const e of entries) {
    out += `${prev === e.set ? '+' : '/'}${attributeName(e.oid) ?? e.oid}=`;
    prev = e.set;
    const q = e.value;
    // a GeneralString whose bytes are all in every fourth place is printed from those bytes only
    let keep = [true, true, true, true];
    if (e.valueTag === 27 && q.length % 4 === 0) {
      const nonzero = [false, false, false, false];
      q.forEach((b, j) => { if (b !== 0) nonzero[j & 3] = true; });
      keep = nonzero[0] || nonzero[1] || nonzero[2] ? keep : [false, false, false, true];
    }
    for (let j = 0; j < q.length; j++) {
      if (!keep[j & 3]) continue;
      const b = q[j]!;
      if (b < 0x20 || b > 0x7e) out += `\\x${hex2(b)}`;
      else out += (b === 0x2f || b === 0x2b ? '\\' : '') + String.fromCharCode(b);
    }
  }
  return out;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** A validity time: `ASN1_TIME_print`'s text and the moment in ms, or undefined when malformed. */
interface CertTime {
  readonly text: string;
  readonly ms: number;
}

/** UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSS[.f]Z`), printed as `Nov  2 02:54:13 2026 GMT`. */
function certTime(tag: number, raw: string): CertTime | undefined {
  const m = tag === 23 ? /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(raw) : /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\.\d+)?Z$/.exec(raw);
  if (!m) return undefined;
  let year = Number(m[1]);
  if (tag === 23) year += year < 50 ? 2000 : 1900;
  const [mon, day, h, min, s] = [Number(m[2]) - 1, Number(m[3]), m[4]!, m[5]!, m[6]!];
  if (mon < 0 || mon > 11) return undefined;
  const fraction = tag === 24 ? m[7] ?? '' : '';
  return {
    text: `${MONTHS[mon]} ${String(day).padStart(2, ' ')} ${h}:${min}:${s}${fraction} ${year} GMT`,
    ms: Date.UTC(year, mon, day, Number(h), Number(min), Number(s)),
  };
}

/** What the `$ssl_client_*` variables print of a certificate. */
export interface CertificateText {
  /** `$ssl_client_s_dn` and `$ssl_client_i_dn`. */
  readonly subject: string;
  readonly issuer: string;
  /** `$ssl_client_s_dn_legacy` and `$ssl_client_i_dn_legacy`. */
  readonly subjectLegacy: string;
  readonly issuerLegacy: string;
  /** `$ssl_client_serial`: upper-case hex. */
  readonly serial: string;
  readonly notBefore: CertTime | undefined;
  readonly notAfter: CertTime | undefined;
}

/**
 * Reads a certificate's names, serial number and validity from its DER
 * encoding (`Certificate` of RFC 5280).
 * @throws RangeError when the bytes are not a certificate
 */
export function certificateText(der: Buffer): CertificateText {
  const [tbs] = children(der, element(der, 0));
  if (!tbs) throw new RangeError('no tbsCertificate');
  const fields = children(der, tbs);
  const rest = fields[0]?.tag === 0xa0 ? fields.slice(1) : fields;
  const [serial, , issuer, validity, subject] = rest;
  if (!serial || serial.tag !== 0x02 || !issuer || !validity || !subject) throw new RangeError('bad tbsCertificate');
  const issuerEntries = nameEntries(der, issuer);
  const subjectEntries = nameEntries(der, subject);
  const [notBefore, notAfter] = children(der, validity).map((t) => certTime(t.tag, der.toString('latin1', t.contentStart, t.end)));
  return {
    subject: rfc2253(subjectEntries),
    issuer: rfc2253(issuerEntries),
    subjectLegacy: oneline(subjectEntries),
    issuerLegacy: oneline(issuerEntries),
    serial: serialText(der.subarray(serial.contentStart, serial.end)),
    notBefore,
    notAfter,
  };
}

/**
 * `i2a_ASN1_INTEGER`: the magnitude in upper-case hex, two digits a byte,
 * `-` before a negative number, `00` for an empty one.
 */
function serialText(content: Buffer): string {
  if (content.length === 0) return '00';
  if (content[0]! & 0x80) {
    // two's complement: the magnitude is the negation
    const mag = Buffer.from(content);
    let carry = 1;
    for (let i = mag.length - 1; i >= 0; i--) {
      const v = (~mag[i]! & 0xff) + carry;
      mag[i] = v & 0xff;
      carry = v >> 8;
    }
    let start = 0;
    while (start < mag.length - 1 && mag[start] === 0) start++;
    return `-${mag.subarray(start).toString('hex').toUpperCase()}`;
  }
  const start = content.length > 1 && content[0] === 0 ? 1 : 0;
  return content.subarray(start).toString('hex').toUpperCase();
}

/** `PEM_write_bio_X509`: the certificate in PEM, 64 characters a line, ending with a newline. */
export function pem(der: Buffer): string {
  const b64 = der.toString('base64');
  let out = '-----BEGIN CERTIFICATE-----\n';
  for (let i = 0; i < b64.length; i += 64) out += `${b64.slice(i, i + 64)}\n`;
  return `${out}-----END CERTIFICATE-----\n`;
}
