/**
 * What a TLS client offered in its ClientHello (RFC 8446 section 4.1.2),
 * read from the first bytes of the connection: the cipher suites
 * (`SSL_get0_raw_cipherlist`, nginx's `$ssl_ciphers`), the groups of
 * `supported_groups` (`SSL_get1_curves`, `$ssl_curves`) and of `key_share`,
 * and the SNI name. Node.js hands none of these to a server (nor the SNI
 * name of a resumed TLS 1.2 session).
 */

/** What the parts of a ClientHello that could be read list; undefined when absent or cut off. */
export interface ClientHello {
  /** `legacy_version`: 0x0303 from every TLS 1.2 and 1.3 client. */
  readonly legacyVersion: number;
  readonly cipherSuites: readonly number[] | undefined;
  readonly supportedGroups: readonly number[] | undefined;
  /** Groups of the client's key shares (TLS 1.3), in its order. */
  readonly keyShareGroups: readonly number[] | undefined;
  /** The host name of `server_name` (SNI). */
  readonly serverName: string | undefined;
}

const HANDSHAKE = 0x16;
const CLIENT_HELLO = 0x01;
const EXT_SERVER_NAME = 0x0000;
const EXT_SUPPORTED_GROUPS = 0x000a;
const EXT_KEY_SHARE = 0x0033;

/** The payload of the handshake records at the start of `bytes`, as far as they are there. */
function handshakeBytes(bytes: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at + 5 <= bytes.length && bytes[at] === HANDSHAKE;) {
    const len = bytes.readUInt16BE(at + 3);
    parts.push(bytes.subarray(at + 5, Math.min(at + 5 + len, bytes.length)));
    at += 5 + len;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** A list of 16-bit values with a 16-bit length in front, at `at`; undefined when cut off. */
function u16List(b: Buffer, at: number, end: number): number[] | undefined {
  if (at + 2 > end) return undefined;
  const len = b.readUInt16BE(at);
  if (at + 2 + len > end || len % 2 !== 0) return undefined;
  const out: number[] = [];
  for (let p = at + 2; p < at + 2 + len; p += 2) out.push(b.readUInt16BE(p));
  return out;
}

/** A ClientHello cut off before its cipher suites. */
const cutOff = (legacyVersion: number): ClientHello => ({
  legacyVersion, cipherSuites: undefined, supportedGroups: undefined, keyShareGroups: undefined, serverName: undefined,
});

/**
 * Reads a ClientHello from the bytes a TLS connection started with; what is
 * cut off or malformed is left undefined. Undefined when the bytes are not
 * a ClientHello at all, or too short to show its version.
 */
export function parseClientHello(bytes: Buffer): ClientHello | undefined {
  const hs = handshakeBytes(bytes);
  if (hs.length < 6 || hs[0] !== CLIENT_HELLO) return undefined;
  const end = Math.min(hs.length, 4 + hs.readUIntBE(1, 3));
  const legacyVersion = hs.readUInt16BE(4);
  // legacy_version, random
  let at = 4 + 2 + 32;
  if (at + 1 > end) return cutOff(legacyVersion);
  at += 1 + hs[at]!; // legacy_session_id
  const cipherSuites = u16List(hs, at, end);
  if (!cipherSuites) return cutOff(legacyVersion);
  at += 2 + cipherSuites.length * 2;
  let supportedGroups: number[] | undefined;
  let keyShareGroups: number[] | undefined;
  let serverName: string | undefined;
  if (at + 1 <= end) {
    at += 1 + hs[at]!; // legacy_compression_methods
    const extEnd = at + 2 <= end ? Math.min(end, at + 2 + hs.readUInt16BE(at)) : at;
    for (let p = at + 2; p + 4 <= extEnd;) {
      const type = hs.readUInt16BE(p);
      const len = hs.readUInt16BE(p + 2);
      const body = p + 4;
      if (body + len > extEnd) break;
      if (type === EXT_SERVER_NAME && len >= 5 && hs[body + 2] === 0 && body + 5 + hs.readUInt16BE(body + 3) <= body + len) {
        serverName = hs.toString('latin1', body + 5, body + 5 + hs.readUInt16BE(body + 3));
      } else if (type === EXT_SUPPORTED_GROUPS) supportedGroups = u16List(hs, body, body + len);
      else if (type === EXT_KEY_SHARE && len >= 2) {
        const shares: number[] = [];
        const sharesEnd = Math.min(body + len, body + 2 + hs.readUInt16BE(body));
        for (let s = body + 2; s + 4 <= sharesEnd; s += 4 + hs.readUInt16BE(s + 2)) shares.push(hs.readUInt16BE(s));
        keyShareGroups = shares;
      }
      p = body + len;
    }
  }
  return { legacyVersion, cipherSuites, supportedGroups, keyShareGroups, serverName };
}
