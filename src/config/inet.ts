/**
 * nginx's own address parsers (`src/core/ngx_inet.c`), byte for byte:
 * `ngx_inet_addr`, `ngx_inet6_addr`, `ngx_ptocidr`, `ngx_parse_addr`,
 * `ngx_parse_addr_port` and `ngx_cidr_match`. They accept exactly what nginx
 * accepts (`1..2.3` is 1.0.2.3, `255.255.255.255` is refused as
 * `INADDR_NONE`, no `inet_aton` short forms), which the `geo` module's
 * tables and its `X-Forwarded-For` walk depend on.
 */

/** An address: 4 bytes (IPv4) or 16 bytes (IPv6), network order. */
export type InetAddr = Uint8Array;

/** A network as `ngx_ptocidr` reads it: address and mask, both of the family's length. */
export interface InetCidr {
  readonly addr: InetAddr;
  readonly mask: InetAddr;
}

/**
 * `ngx_inet_addr`: four decimal octets, each at most 255, empty octets
 * counting as 0; the 32-bit address, or undefined (`INADDR_NONE`, which
 * `255.255.255.255` also is).
 */
export function inetAddr(text: string): number | undefined {
  let addr = 0;
  let octet = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      octet = octet * 10 + (c - 48);
      if (octet > 255) return undefined;
      continue;
    }
    if (c !== 46) return undefined;
    addr = ((addr << 8) + octet) >>> 0;
    octet = 0;
    dots++;
  }
  if (dots !== 3) return undefined;
  addr = ((addr << 8) + octet) >>> 0;
  return addr === 0xffffffff ? undefined : addr;
}

const v4Bytes = (n: number): InetAddr => Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);

/**
 * `ngx_inet6_addr`: up to eight groups of at most four hex digits, one `::`,
 * an IPv4 tail in `ngx_inet_addr`'s form after at least one group or `::`.
 * The 16 bytes, or undefined.
 */
export function inet6Addr(text: string): InetAddr | undefined {
  if (text.length === 0) return undefined;
  const out = new Uint8Array(16);
  let o = 0;
  let zero = -1;
  let digit = -1;
  let nibbles = 0;
  let word = 0;
  let n = 8;
  let i = text[0] === ':' ? 1 : 0;
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (c === ':') {
      if (nibbles) {
        digit = i + 1;
        out[o++] = word >> 8;
        out[o++] = word & 0xff;
        if (--n) {
          nibbles = 0;
          word = 0;
          continue;
        }
      } else if (zero === -1) {
        digit = i + 1;
        zero = o;
        continue;
      }
      return undefined;
    }
    if (c === '.' && nibbles) {
      if (n < 2 || digit === -1) return undefined;
      const v4 = inetAddr(text.slice(digit));
      if (v4 === undefined) return undefined;
      word = v4;
      out[o++] = (word >>> 24) & 0xff;
      out[o++] = (word >>> 16) & 0xff;
      n--;
      word &= 0xffff;
      break;
    }
    if (++nibbles > 4) return undefined;
    const h = /^[0-9a-fA-F]$/.test(c) ? parseInt(c, 16) : -1;
    if (h < 0) return undefined;
    word = word * 16 + h;
  }
  if (nibbles === 0 && zero === -1) return undefined;
  out[o++] = word >> 8;
  out[o++] = word & 0xff;
  if (--n) {
    if (zero === -1) return undefined;
    // the groups after "::" move to the end, zeros fill the gap
    const tail = out.slice(zero, o);
    out.fill(0, zero);
    out.set(tail, 16 - tail.length);
    return out;
  }
  return zero === -1 ? out : undefined;
}

/** `ngx_parse_addr`: an IPv4 or IPv6 address without port or brackets. */
export function parseAddr(text: string): InetAddr | undefined {
  const v4 = inetAddr(text);
  return v4 !== undefined ? v4Bytes(v4) : inet6Addr(text);
}

/** `ngx_atoi` for the short numbers here (ports, prefix lengths): digits only, not empty. */
function atoi(text: string): number | undefined {
  return /^[0-9]+$/.test(text) && text.length < 19 ? Number(text) : undefined;
}

/** `ngx_parse_addr_port`: an address, `[ADDR]`, or `ADDR:PORT`, `[ADDR]:PORT` with a port from 1 to 65535. */
export function parseAddrPort(text: string): InetAddr | undefined {
  const plain = parseAddr(text);
  if (plain) return plain;
  let host: string;
  let colon: number;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    // nginx 1.30 also takes `[ADDR]` without a port, IPv4 in brackets included
    if (close === text.length - 1) return parseAddr(text.slice(1, close));
    if (close === -1 || text[close + 1] !== ':') return undefined;
    colon = close + 1;
    host = text.slice(1, close);
  } else {
    colon = text.indexOf(':');
    if (colon === -1) return undefined;
    host = text.slice(0, colon);
  }
  const port = atoi(text.slice(colon + 1));
  if (port === undefined || port < 1 || port > 65535) return undefined;
  return parseAddr(host);
}

/** What `ngx_ptocidr` made of a network: the network, and whether host bits had to be cleared (`NGX_DONE`). */
export interface ParsedInetCidr {
  readonly cidr: InetCidr;
  readonly lowBits: boolean;
}

/**
 * `ngx_ptocidr`: `ADDR` (a single address) or `ADDR/LEN`; host bits set
 * past the prefix are cleared and reported. Undefined when invalid.
 */
export function ptocidr(text: string): ParsedInetCidr | undefined {
  const slash = text.indexOf('/');
  const addr = parseAddr(slash === -1 ? text : text.slice(0, slash));
  if (!addr) return undefined;
  const mask = new Uint8Array(addr.length).fill(0xff);
  if (slash === -1) return { cidr: { addr, mask }, lowBits: false };
  let shift = atoi(text.slice(slash + 1));
  if (shift === undefined || shift > addr.length * 8) return undefined;
  let lowBits = false;
  for (let i = 0; i < addr.length; i++) {
    const s = Math.min(8, shift);
    shift -= s;
    mask[i] = (0xff << (8 - s)) & 0xff;
    if ((addr[i]! & mask[i]!) !== addr[i]) {
      lowBits = true;
      addr[i]! &= mask[i]!;
    }
  }
  return { cidr: { addr, mask }, lowBits };
}

/** Whether an IPv6 address is IPv4-mapped (`::ffff:a.b.c.d`, `IN6_IS_ADDR_V4MAPPED`). */
export function isV4Mapped(a: InetAddr): boolean {
  return a.length === 16 && a[10] === 0xff && a[11] === 0xff && a.subarray(0, 10).every((b) => b === 0);
}

/**
 * `ngx_cidr_match`: whether an address is in one of the networks; an
 * IPv4-mapped IPv6 address is matched as IPv4; `unix` (a unix domain socket's
 * peer) matches no network.
 */
export function cidrMatch(a: InetAddr | 'unix', cidrs: readonly InetCidr[]): boolean {
  if (a === 'unix') return false;
  const addr = isV4Mapped(a) ? a.subarray(12) : a;
  return cidrs.some((c) => c.addr.length === addr.length && c.addr.every((b, i) => (addr[i]! & c.mask[i]!) === b));
}
