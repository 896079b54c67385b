/**
 * Address and CIDR parsing for `allow`, `deny` and `set_real_ip_from`, with
 * nginx's `ngx_ptocidr` rules (`src/core/ngx_inet.c`): host bits set in a
 * CIDR are cleared with the warning `low address bits of X are meaningless`.
 */
import ipaddr from 'ipaddr.js';

/** An address range: family, network bytes and prefix length. */
export interface Cidr {
  readonly family: 'ipv4' | 'ipv6';
  readonly bytes: readonly number[];
  readonly prefixLength: number;
}

/** Result of parsing: the range, and whether host bits had to be cleared. */
export interface ParsedCidr {
  readonly cidr: Cidr;
  readonly lowBitsSet: boolean;
}

/** Parses `ADDR` or `ADDR/LEN`; undefined when invalid. */
export function parseCidr(text: string): ParsedCidr | undefined {
  const slash = text.indexOf('/');
  const addrText = slash === -1 ? text : text.slice(0, slash);
  if (!ipaddr.isValid(addrText)) return undefined;
  const addr = ipaddr.parse(addrText);
  const family = addr.kind();
  const max = family === 'ipv4' ? 32 : 128;
  let prefixLength = max;
  if (slash !== -1) {
    const lenText = text.slice(slash + 1);
    if (!/^\d+$/.test(lenText)) return undefined;
    prefixLength = Number(lenText);
    if (prefixLength > max) return undefined;
  }
  const bytes = addr.toByteArray();
  const masked = maskBytes(bytes, prefixLength);
  const lowBitsSet = masked.some((b, i) => b !== bytes[i]);
  return { cidr: { family, bytes: masked, prefixLength }, lowBitsSet };
}

function maskBytes(bytes: readonly number[], prefixLength: number): number[] {
  return bytes.map((b, i) => {
    const bits = Math.max(0, Math.min(8, prefixLength - i * 8));
    return bits === 8 ? b : b & (0xff << (8 - bits)) & 0xff;
  });
}

/**
 * Whether `addr` (an IP literal, IPv4-mapped IPv6 included) is inside `cidr`.
 * Unparsable addresses are outside every range.
 */
export function cidrContains(cidr: Cidr, addr: string): boolean {
  if (!ipaddr.isValid(addr)) return false;
  let parsed = ipaddr.parse(addr);
  if (parsed.kind() === 'ipv6' && cidr.family === 'ipv4' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  if (parsed.kind() !== cidr.family) return false;
  const bytes = parsed.toByteArray();
  const masked = maskBytes(bytes, cidr.prefixLength);
  return masked.every((b, i) => b === cidr.bytes[i]);
}
