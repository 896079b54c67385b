/**
 * The FastCGI wire protocol (FastCGI Specification 1.0, as nginx speaks it in
 * `ngx_http_fastcgi_module.c`): 8-byte record headers, content of at most
 * 65535 bytes padded to a multiple of 8, name-value pairs with 1- or 4-byte
 * lengths, and a streaming record parser.
 */

/** Record types. */
export const FCGI = {
  BEGIN_REQUEST: 1,
  ABORT_REQUEST: 2,
  END_REQUEST: 3,
  PARAMS: 4,
  STDIN: 5,
  STDOUT: 6,
  STDERR: 7,
  DATA: 8,
} as const;

/** The responder role and the keep-connection flag of BEGIN_REQUEST. */
export const FCGI_RESPONDER = 1;
export const FCGI_KEEP_CONN = 1;

const MAX_CONTENT = 65535;
const ZERO_PADDING = Buffer.alloc(8);

/** Appends the records carrying `content` (split at 65535 bytes; one empty record for empty content). */
export function encodeRecords(type: number, requestId: number, content: Buffer, out: Buffer[]): void {
  let offset = 0;
  do {
    const len = Math.min(MAX_CONTENT, content.length - offset);
    const pad = (8 - (len % 8)) % 8;
    const header = Buffer.allocUnsafe(8);
    header[0] = 1;
    header[1] = type;
    header.writeUInt16BE(requestId, 2);
    header.writeUInt16BE(len, 4);
    header[6] = pad;
    header[7] = 0;
    out.push(header);
    if (len > 0) out.push(content.subarray(offset, offset + len));
    if (pad > 0) out.push(ZERO_PADDING.subarray(0, pad));
    offset += len;
  } while (offset < content.length);
}

/** The BEGIN_REQUEST record body: role, flags, five reserved bytes. */
export function beginRequestBody(keepConn: boolean): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt16BE(FCGI_RESPONDER, 0);
  b[2] = keepConn ? FCGI_KEEP_CONN : 0;
  return b;
}

function encodeLength(n: number, out: Buffer[]): void {
  if (n < 128) {
    out.push(Buffer.from([n]));
    return;
  }
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE((n | 0x80000000) >>> 0, 0);
  out.push(b);
}

/** Encodes name-value pairs as the content of PARAMS records. Names and values are byte strings. */
export function encodeParams(pairs: readonly (readonly [string, string])[]): Buffer {
  const out: Buffer[] = [];
  for (const [name, value] of pairs) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    encodeLength(n.length, out);
    encodeLength(v.length, out);
    out.push(n, v);
  }
  return Buffer.concat(out);
}

/** One record received. */
export interface FastcgiRecord {
  readonly type: number;
  readonly requestId: number;
  readonly content: Buffer;
}

/** A malformed record stream, worded as nginx reports it. */
export class FastcgiProtocolError extends Error {}

/** Splits a byte stream into records; call `push` with each chunk read. */
export class RecordParser {
  private pending: Buffer = Buffer.alloc(0);

  /**
   * Returns the complete records in `data` (and earlier partial data).
   * @throws FastcgiProtocolError for a version other than 1 or an unknown type
   */
  push(data: Buffer): FastcgiRecord[] {
    let buf = this.pending.length === 0 ? data : Buffer.concat([this.pending, data]);
    const records: FastcgiRecord[] = [];
    while (buf.length >= 8) {
      if (buf[0] !== 1) throw new FastcgiProtocolError(`upstream sent unsupported FastCGI protocol version: ${buf[0]}`);
      const type = buf[1]!;
      if (type < FCGI.BEGIN_REQUEST || type > 11) throw new FastcgiProtocolError(`upstream sent invalid FastCGI record type: ${type}`);
      const len = buf.readUInt16BE(4);
      const total = 8 + len + buf[6]!;
      if (buf.length < total) break;
      records.push({ type, requestId: buf.readUInt16BE(2), content: buf.subarray(8, 8 + len) });
      buf = buf.subarray(total);
    }
    this.pending = buf.length > 0 ? Buffer.from(buf) : Buffer.alloc(0);
    return records;
  }
}

/**
 * The text nginx logs for a STDERR record: trailing CR, LF, `.` and spaces
 * removed (the first byte is always kept), as in `ngx_http_fastcgi_process_header`.
 */
export function stderrText(content: Buffer): string {
  let end = content.length - 1;
  while (end > 0) {
    const c = content[end]!;
    if (c !== 0x0a && c !== 0x0d && c !== 0x2e && c !== 0x20) break;
    end--;
  }
  return content.subarray(0, end + 1).toString('latin1');
}
