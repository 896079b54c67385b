/**
 * The request headers of the uwsgi and SCGI protocols as nginx writes them
 * (`ngx_http_uwsgi_create_request`, `ngx_http_scgi_create_request`); the
 * body follows either as it is, and the response is read by
 * cgi-response.ts's `StreamResponseReader`.
 */

/** A request nginx does not send, in nginx's words (logged at `alert`; the request ends with 500). */
export class CgiRequestError extends Error {}

/** The largest uwsgi packet: its size is a 16-bit field. */
const UWSGI_MAX_BYTES = 65535;

/**
 * The uwsgi packet: `modifier1`, the size of what follows (16 bits, little
 * endian), `modifier2`; then each parameter as a 16-bit little-endian
 * length and the name, the same for the value; then `extra`
 * (`uwsgi_string`). Names, values and `extra` are byte strings.
 * @throws CgiRequestError `uwsgi request is too big: N` past 65535 bytes
 */
export function encodeUwsgiPacket(modifier1: number, modifier2: number, params: readonly (readonly [string, string])[], extra: string): Buffer {
  const parts: Buffer[] = [];
  let size = 0;
  const field = (text: string): void => {
    const bytes = Buffer.from(text, 'latin1');
    const length = Buffer.allocUnsafe(2);
    length.writeUInt16LE(bytes.length & 0xffff, 0);
    parts.push(length, bytes);
    size += 2 + bytes.length;
  };
  for (const [name, value] of params) {
    field(name);
    field(value);
  }
  const tail = Buffer.from(extra, 'latin1');
  size += tail.length;
  if (size > UWSGI_MAX_BYTES) throw new CgiRequestError(`uwsgi request is too big: ${size}`);
  const head = Buffer.allocUnsafe(4);
  head[0] = modifier1;
  head.writeUInt16LE(size, 1);
  head[3] = modifier2;
  return Buffer.concat([head, ...parts, tail]);
}

/**
 * The SCGI header, a netstring: `LENGTH:` then `CONTENT_LENGTH` NUL the
 * body's length NUL, each parameter as name NUL value NUL, and `,`. Names
 * and values are byte strings.
 */
export function encodeScgiHeader(contentLength: number, params: readonly (readonly [string, string])[]): Buffer {
  const pairs = [['CONTENT_LENGTH', String(contentLength)] as const, ...params].map(([name, value]) => `${name}\0${value}\0`).join('');
  const bytes = Buffer.from(pairs, 'latin1');
  return Buffer.concat([Buffer.from(`${bytes.length}:`, 'latin1'), bytes, Buffer.from(',', 'latin1')]);
}
