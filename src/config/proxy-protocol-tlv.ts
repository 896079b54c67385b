/**
 * The TLVs of a PROXY protocol v2 header as `$proxy_protocol_tlv_NAME` reads
 * them (`ngx_proxy_protocol_get_tlv` and `ngx_proxy_protocol_lookup_tlv` in
 * `src/core/ngx_proxy_protocol.c`), and the header's shape: the runtime
 * reads the header off the connection (`runtime/proxy-protocol.ts`).
 */

/** What a PROXY protocol header with addresses said (nginx's `ngx_proxy_protocol_t`). */
export interface ProxyProtocolHeader {
  /** The client's address as sent (v1: the text verbatim; v2: as `ngx_sock_ntop` prints it). */
  readonly srcAddr: string;
  readonly srcPort: number;
  readonly dstAddr: string;
  readonly dstPort: number;
  /** v2: the TLVs after the addresses, undecoded (empty for v1). */
  readonly tlvs: Buffer;
}

/** TLV names of `$proxy_protocol_tlv_NAME` (`ngx_proxy_protocol_tlv_entries`); `ssl_*` ones are inside the `ssl` TLV. */
const TLV_TYPES: ReadonlyMap<string, { readonly type: number; readonly inSsl: boolean }> = new Map([
  ['alpn', { type: 0x01, inSsl: false }],
  ['authority', { type: 0x02, inSsl: false }],
  ['unique_id', { type: 0x05, inSsl: false }],
  ['ssl', { type: 0x20, inSsl: false }],
  ['netns', { type: 0x30, inSsl: false }],
  ['ssl_version', { type: 0x21, inSsl: true }],
  ['ssl_cn', { type: 0x22, inSsl: true }],
  ['ssl_cipher', { type: 0x23, inSsl: true }],
  ['ssl_sig_alg', { type: 0x24, inSsl: true }],
  ['ssl_key_alg', { type: 0x25, inSsl: true }],
]);

/** The value of a TLV, nothing when absent, or an error-log line. */
export type TlvLookup = { readonly value: Buffer } | { readonly value: undefined; readonly error?: string };

/** `ngx_proxy_protocol_lookup_tlv`: the first TLV of `type` in a list. */
function lookupTlv(tlvs: Buffer, type: number): TlvLookup {
  let p = 0;
  while (p < tlvs.length) {
    if (tlvs.length - p < 3) return { value: undefined, error: 'broken PROXY protocol TLV' };
    const t = tlvs[p]!;
    const len = tlvs.readUInt16BE(p + 1);
    p += 3;
    if (tlvs.length - p < len) return { value: undefined, error: 'broken PROXY protocol TLV' };
    if (t === type) return { value: tlvs.subarray(p, p + len) };
    p += len;
  }
  return { value: undefined };
}

/**
 * `ngx_proxy_protocol_get_tlv`: `$proxy_protocol_tlv_NAME`, by name
 * (`alpn`, `authority`, `unique_id`, `ssl`, `netns`, `ssl_version`,
 * `ssl_cn`, `ssl_cipher`, `ssl_sig_alg`, `ssl_key_alg`, `ssl_verify` as a
 * decimal number) or by type (`0x..`). An unknown name is the error
 * `unknown PROXY protocol TLV "NAME"`, a bad type `invalid PROXY protocol TLV "NAME"`.
 */
export function proxyProtocolTlv(header: ProxyProtocolHeader, name: string): TlvLookup {
  let type: number;
  let inSsl = false;
  if (name.startsWith('0x')) {
    if (!/^[0-9a-f]+$/i.test(name.slice(2))) return { value: undefined, error: `invalid PROXY protocol TLV "${name}"` };
    type = parseInt(name.slice(2), 16);
  } else if (name === 'ssl_verify') {
    const ssl = lookupTlv(header.tlvs, 0x20);
    if (!ssl.value || ssl.value.length < 5) return ssl.value ? { value: undefined } : ssl;
    return { value: Buffer.from(String(ssl.value.readUInt32BE(1)), 'latin1') };
  } else {
    const known = TLV_TYPES.get(name);
    if (!known) return { value: undefined, error: `unknown PROXY protocol TLV "${name}"` };
    ({ type, inSsl } = known);
  }
  if (!inSsl) return lookupTlv(header.tlvs, type);
  const ssl = lookupTlv(header.tlvs, 0x20);
  if (!ssl.value || ssl.value.length < 5) return ssl.value ? { value: undefined } : ssl;
  return lookupTlv(ssl.value.subarray(5), type);
}
