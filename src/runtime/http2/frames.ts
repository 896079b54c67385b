/**
 * HTTP/2 frame layout (RFC 9113 section 4 and 6) and the constants of
 * `src/http/v2/ngx_http_v2.c` and `ngx_http_v2.h` that both directions use.
 */

/** A frame header's length in octets. */
export const FRAME_HEADER_BYTES = 9;

/** Frame types (RFC 9113 section 6). */
export const FRAME = {
  DATA: 0x0, HEADERS: 0x1, PRIORITY: 0x2, RST_STREAM: 0x3, SETTINGS: 0x4, PUSH_PROMISE: 0x5, PING: 0x6, GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8, CONTINUATION: 0x9,
} as const;

/** Frame flags (END_STREAM and ACK share a bit on different frame types). */
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

/** SETTINGS parameters (RFC 9113 section 6.5.2). */
export const SETTINGS_PARAMS = { HEADER_TABLE_SIZE: 0x1, ENABLE_PUSH: 0x2, MAX_STREAMS: 0x3, INITIAL_WINDOW_SIZE: 0x4, MAX_FRAME_SIZE: 0x5 } as const;

/** `NGX_HTTP_V2_MAX_WINDOW`: the largest window. */
export const MAX_WINDOW = 2 ** 31 - 1;
/** `NGX_HTTP_V2_DEFAULT_WINDOW`: the initial window before SETTINGS say otherwise. */
export const DEFAULT_WINDOW = 65_535;
/** `NGX_HTTP_V2_DEFAULT_FRAME_SIZE`: the frame size before the client's SETTINGS. */
export const DEFAULT_FRAME_SIZE = 16_384;
/** `NGX_HTTP_V2_MAX_FRAME_SIZE`: the largest frame (nginx offers it in its SETTINGS). */
export const MAX_FRAME_SIZE = 2 ** 24 - 1;
/** `NGX_HTTP_V2_DEFAULT_WEIGHT`. */
export const DEFAULT_WEIGHT = 16;

/** A frame header (`ngx_http_v2_write_len_and_type`, the flags, `ngx_http_v2_write_sid`). */
export function frameHeader(length: number, type: number, flags: number, sid: number): Buffer {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(sid & 0x7fffffff, 5);
  return b;
}

/** A 4-octet big-endian payload (RST_STREAM's code, WINDOW_UPDATE's increment). */
export function uint32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0, 0);
  return b;
}
