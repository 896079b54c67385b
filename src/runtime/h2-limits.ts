/**
 * nginx's limits on an HTTP/2 request's header block, which node:http2 does
 * not apply: `large_client_header_buffers` as `ngx_http_v2_state_field_len`
 * and `ngx_http_v2_state_process_header` (`src/http/v2/ngx_http_v2.c`) use
 * it since nginx 1.19.7.
 */

/**
 * Code lengths in bits of HPACK's Huffman code for each octet (RFC 7541
 * Appendix B), for the length of a string as a client sends it.
 */
const HUFFMAN_BITS = Uint8Array.from([
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
]);

/**
 * The length of a header string as an HPACK string literal's octets: the
 * Huffman-coded length when that is shorter, as nghttp2, curl, browsers and
 * Go's client choose (`nghttp2_hd_huff_encode_count`). node:http2 hands over
 * decoded strings only (one character per octet), so a client that sends a
 * raw string where Huffman would be shorter is measured short.
 */
export function hpackStringLength(s: string): number {
  let bits = 0;
  for (let i = 0; i < s.length; i++) bits += HUFFMAN_BITS[s.charCodeAt(i) & 0xff]!;
  return Math.min(s.length, Math.ceil(bits / 8));
}

/** nginx's info messages for a header block over `large_client_header_buffers`. */
export const TOO_LARGE_FIELD = 'client sent too large header field';
export const TOO_LARGE_HEADER = 'client sent too large header';

/** A header block over `large_client_header_buffers`: nginx's message, and how many fields it read before the one over. */
export interface HeaderBlockError {
  readonly message: string;
  /** Fields (name/value pairs) read before the one over the limit. */
  readonly fieldsBefore: number;
}

/**
 * Checks an HTTP/2 request's header fields (`rawHeaders`: names and values,
 * pseudo-headers first, each cookie field apart) in order, as nginx reads
 * them: a name or value longer on the wire than the buffer size is
 * `client sent too large header field` (`ngx_http_v2_state_field_len`);
 * names and values (decoded) adding up to more than `count` buffers is
 * `client sent too large header` (`ngx_http_v2_state_process_header`).
 * nginx answers either with GOAWAY ENHANCE_YOUR_CALM.
 * @returns the first field over a limit, or undefined
 */
export function headerBlockError(rawHeaders: readonly string[], buffers: { readonly count: number; readonly sizeBytes: number }): HeaderBlockError | undefined {
  const size = buffers.sizeBytes;
  let rest = size * buffers.count;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const value = rawHeaders[i + 1]!;
    // a string no longer than the buffer is within it however it was sent
    if ((name.length > size && hpackStringLength(name) > size) || (value.length > size && hpackStringLength(value) > size)) {
      return { message: TOO_LARGE_FIELD, fieldsBefore: i / 2 };
    }
    const len = name.length + value.length;
    if (len > rest) return { message: TOO_LARGE_HEADER, fieldsBefore: i / 2 };
    rest -= len;
  }
  return undefined;
}
