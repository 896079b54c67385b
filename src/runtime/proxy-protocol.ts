/**
 * The PROXY protocol on the listening side (`listen … proxy_protocol`),
 * as `ngx_proxy_protocol_read` in `src/core/ngx_proxy_protocol.c` reads it:
 * version 1 (`PROXY TCP4 SRC DST SPORT DPORT\r\n`, `PROXY UNKNOWN …\r\n`)
 * and version 2 (the binary header with its TLVs, which
 * `config/proxy-protocol-tlv.ts` looks up for `$proxy_protocol_tlv_NAME`).
 * Like nginx, the header is read from the bytes the first read returned: a
 * header split across reads is broken.
 */
import ipaddr from 'ipaddr.js';
import type { ProxyProtocolHeader } from '../config/proxy-protocol-tlv.js';

/**
 * The outcome of reading a header: the bytes it took, with what it said, or
 * nginx's error-log line (undefined where nginx closes the connection without one).
 */
export type ProxyProtocolRead =
  | { readonly ok: true; readonly length: number; readonly header: ProxyProtocolHeader | undefined }
  | { readonly ok: false; readonly error: string | undefined };

/** The v2 signature, `NGX_PROXY_PROTOCOL_V2_SIGNATURE`. */
const V2_SIGNATURE = Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1');
/** `sizeof(ngx_proxy_protocol_header_t)`: the signature, version/command, family/transport and length. */
const V2_HEADER_BYTES = 16;
/** The most bytes a header may take (`NGX_PROXY_PROTOCOL_MAX_HEADER`), what nginx peeks for on a TLS address. */
export const PROXY_PROTOCOL_MAX_HEADER = 4096;

const CR = 0x0d;
const LF = 0x0a;

/**
 * `ngx_proxy_protocol_read`: the header at the start of `buf`. A broken
 * header is `broken header: "FIRST LINE"` (up to the first CR or LF), a v2
 * header of another version `unknown PROXY protocol version: N`, one longer
 * than `buf` `header is too large`. `UNKNOWN` and v2 headers other than a
 * STREAM over IPv4/IPv6 are skipped and leave no addresses.
 */
export function readProxyProtocol(buf: Buffer): ProxyProtocolRead {
  if (buf.length >= V2_HEADER_BYTES && buf.subarray(0, 12).equals(V2_SIGNATURE)) return readV2(buf);
  const broken = (): ProxyProtocolRead => {
    let end = 0;
    while (end < buf.length && buf[end] !== CR && buf[end] !== LF) end++;
    return { ok: false, error: `broken header: "${buf.toString('latin1', 0, end)}"` };
  };
  if (buf.length < 8 || buf.toString('latin1', 0, 6) !== 'PROXY ') return broken();
  let p = 6;
  if (buf.length - p >= 7 && buf.toString('latin1', p, p + 7) === 'UNKNOWN') {
    for (p += 7; p < buf.length - 1; p++) if (buf[p] === CR && buf[p + 1] === LF) return { ok: true, length: p + 2, header: undefined };
    return broken();
  }
  if (buf.length - p < 5 || buf.toString('latin1', p, p + 3) !== 'TCP' || (buf[p + 3] !== 0x34 && buf[p + 3] !== 0x36) || buf[p + 4] !== 0x20) {
    return broken();
  }
  p += 5;
  const field = (accept: (ch: number) => boolean, sep: number): string | undefined => {
    const start = p;
    for (;;) {
      if (p === buf.length) return undefined;
      const ch = buf[p++]!;
      if (ch === sep) return buf.toString('latin1', start, p - 1);
      if (!accept(ch)) return undefined;
    }
  };
  // ngx_proxy_protocol_read_addr: hex digits, dots and colons; ngx_proxy_protocol_read_port: ngx_atoi up to the separator
  const addrChar = (ch: number): boolean => ch === 0x3a || ch === 0x2e || (ch >= 0x30 && ch <= 0x39) || ((ch | 0x20) >= 0x61 && (ch | 0x20) <= 0x66);
  const port = (sep: number): number | undefined => {
    const text = field(() => true, sep);
    return text !== undefined && /^\d+$/.test(text) && Number(text) <= 65535 ? Number(text) : undefined;
  };
  const srcAddr = field(addrChar, 0x20);
  const dstAddr = srcAddr === undefined ? undefined : field(addrChar, 0x20);
  const srcPort = dstAddr === undefined ? undefined : port(0x20);
  const dstPort = srcPort === undefined ? undefined : port(CR);
  if (dstPort === undefined || p === buf.length || buf[p++] !== LF) return broken();
  return { ok: true, length: p, header: { srcAddr: srcAddr!, srcPort: srcPort!, dstAddr: dstAddr!, dstPort, tlvs: Buffer.alloc(0) } };
}

/** `ngx_proxy_protocol_v2_read`. */
function readV2(buf: Buffer): ProxyProtocolRead {
  const version = buf[12]! >> 4;
  if (version !== 2) return { ok: false, error: `unknown PROXY protocol version: ${version}` };
  const len = buf.readUInt16BE(14);
  if (buf.length - V2_HEADER_BYTES < len) return { ok: false, error: 'header is too large' };
  const end = V2_HEADER_BYTES + len;
  const skipped: ProxyProtocolRead = { ok: true, length: end, header: undefined };
  // only the PROXY command over STREAM carries addresses
  if ((buf[12]! & 0x0f) !== 1 || (buf[13]! & 0x0f) !== 1) return skipped;
  const family = buf[13]! >> 4;
  const addrBytes = family === 1 ? 4 : family === 2 ? 16 : 0;
  if (addrBytes === 0) return skipped;
  if (len < 2 * addrBytes + 4) return { ok: false, error: undefined };
  let p = V2_HEADER_BYTES;
  const addr = (): string => {
    const bytes = [...buf.subarray(p, (p += addrBytes))];
    return addrBytes === 4 ? bytes.join('.') : (ipaddr.fromByteArray(bytes) as ipaddr.IPv6).toRFC5952String();
  };
  const srcAddr = addr();
  const dstAddr = addr();
  const srcPort = buf.readUInt16BE(p);
  const dstPort = buf.readUInt16BE(p + 2);
  p += 4;
  return { ok: true, length: end, header: { srcAddr, srcPort, dstAddr, dstPort, tlvs: Buffer.from(buf.subarray(p, end)) } };
}
