/**
 * A raw HTTP/2 client for tests that need what node:http2's client will not
 * do or does not show: more streams than the server allows, header fields
 * of an exact size on the wire, the SETTINGS, RST_STREAM and GOAWAY frames a
 * server sends (RFC 9113 section 4 and 6). Header blocks are written as HPACK
 * literals without indexing (RFC 7541 section 6.2.2), raw or Huffman-coded
 * strings; responses are not decoded, only their frames recorded.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

/** The client connection preface (RFC 9113 section 3.4). */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Frame types (RFC 9113 section 6). */
export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
const FRAME_NAMES: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(FRAME).map(([name, type]) => [type, name]));
/** Error codes (RFC 9113 section 7). */
export const H2_ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, REFUSED_STREAM: 7, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const;
/** HEADERS flags. */
export const END_STREAM = 0x1;
export const END_HEADERS = 0x4;
const ACK = 0x1;

/** One frame received. */
export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
}

/** An HPACK integer with an N-bit prefix (RFC 7541 section 5.1). */
function hpackInt(value: number, prefixBits: number, firstByte: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const out = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** Huffman codes of RFC 7541 Appendix B for `a`–`z` (all 5 or 6 bits): enough for test values. */
const HUFFMAN: Readonly<Record<string, readonly [number, number]>> = {
  a: [0x3, 5], b: [0x23, 6], c: [0x4, 5], d: [0x24, 6], e: [0x5, 5], f: [0x25, 6], g: [0x26, 6], h: [0x27, 6], i: [0x6, 5],
  j: [0x74, 7], k: [0x75, 7], l: [0x28, 6], m: [0x29, 6], n: [0x2a, 6], o: [0x7, 5], p: [0x2b, 6], q: [0x76, 7], r: [0x2c, 6],
  s: [0x8, 5], t: [0x9, 5], u: [0x2d, 6], v: [0x77, 7], w: [0x78, 7], x: [0x79, 7], y: [0x7a, 7], z: [0x7b, 7],
};

/** A string Huffman-coded (lower-case letters only), padded with 1 bits. */
function huffman(s: string): Buffer {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const ch of s) {
    const code = HUFFMAN[ch];
    if (!code) throw new Error(`no test Huffman code for ${JSON.stringify(ch)}`);
    acc = (acc << code[1]) | code[0];
    bits += code[1];
    while (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
    acc &= (1 << bits) - 1;
  }
  if (bits > 0) out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) & 0xff);
  return Buffer.from(out);
}

/** An HPACK string literal, raw or Huffman-coded. */
function hpackString(s: string, huff: boolean): Buffer {
  const bytes = huff ? huffman(s) : Buffer.from(s, 'latin1');
  return Buffer.concat([Buffer.from(hpackInt(bytes.length, 7, huff ? 0x80 : 0)), bytes]);
}

/** A header field as sent: name, value, and whether the value is Huffman-coded. */
export type Field = readonly [name: string, value: string, huffmanValue?: boolean];

/** A header block of literal fields without indexing, with new names. */
export function headerBlock(fields: readonly Field[]): Buffer {
  return Buffer.concat(fields.map(([n, v, h]) => Buffer.concat([Buffer.from([0]), hpackString(n, false), hpackString(v, h ?? false)])));
}

/** The pseudo-headers of a GET. */
export const getFields = (path: string, authority: string, scheme = 'http'): Field[] =>
  [[':method', 'GET'], [':path', path], [':scheme', scheme], [':authority', authority]];

/** A frame's bytes. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/**
 * A header block as a HEADERS frame with END_STREAM and as many
 * CONTINUATION frames as the default maximum frame size (16384) needs.
 */
export function headerFrames(stream: number, block: Buffer): Buffer {
  const max = 16_384;
  const parts: Buffer[] = [];
  for (let at = 0; at < block.length || at === 0; at += max) {
    const last = at + max >= block.length;
    parts.push(frame(at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION, (at === 0 ? END_STREAM : 0) | (last ? END_HEADERS : 0), stream, block.subarray(at, at + max)));
  }
  return Buffer.concat(parts);
}

/**
 * How a client starts its connection: `settings`, the preface and an empty
 * SETTINGS frame in one write (RFC 9113 section 3.4); `ack-first`, the
 * preface alone and, once the server's SETTINGS arrived, their
 * acknowledgement as its first frame (nginx-tests' client does this);
 * `headers-first`, the preface and then requests, no SETTINGS at all.
 */
export type ClientStart = 'settings' | 'ack-first' | 'headers-first';

/** A connection that writes frames and records every frame received. */
export class RawH2 {
  readonly frames: Frame[] = [];
  private buffered = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private acked = 0;
  closed = false;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (c: Buffer) => this.read(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  /**
   * Connects (h2c with prior knowledge, or TLS with ALPN `h2` and SNI
   * `servername`) and starts as `start` says (by default the preface with
   * an empty SETTINGS frame). The server's SETTINGS are acknowledged only
   * when `ackSettings` is called, or with `ack-first`.
   */
  static async open(port: number, tls?: { servername: string }, start: ClientStart = 'settings'): Promise<RawH2> {
    const socket = tls
      ? tlsConnect({ host: '127.0.0.1', port, servername: tls.servername, ALPNProtocols: ['h2'], rejectUnauthorized: false })
      : netConnect({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => {
      socket.once(tls ? 'secureConnect' : 'connect', () => resolve());
      socket.once('error', reject);
    });
    const conn = new RawH2(socket);
    if (start === 'settings') {
      socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
      return conn;
    }
    socket.write(PREFACE);
    if (start === 'ack-first') {
      await conn.until((f) => f.some((x) => x.type === FRAME.SETTINGS && (x.flags & ACK) === 0));
      conn.ackSettings();
    }
    return conn;
  }

  private read(chunk: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= 9) {
      const length = this.buffered.readUIntBE(0, 3);
      if (this.buffered.length < 9 + length) break;
      this.frames.push({
        type: this.buffered[3]!, flags: this.buffered[4]!, stream: this.buffered.readUInt32BE(5) & 0x7fffffff,
        payload: this.buffered.subarray(9, 9 + length),
      });
      this.buffered = this.buffered.subarray(9 + length);
    }
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until `done` holds for the frames received (or the connection closed, or `timeoutMs` passed). */
  async until(done: (frames: readonly Frame[]) => boolean, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done(this.frames) && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Acknowledges each SETTINGS frame the server sent so far and not yet acknowledged, as a client must. */
  ackSettings(): void {
    const sent = this.frames.filter((f) => f.type === FRAME.SETTINGS && (f.flags & ACK) === 0).length;
    for (; this.acked < sent; this.acked++) this.socket.write(frame(FRAME.SETTINGS, ACK, 0));
  }

  /** Sends a request's header block, ending the stream. */
  request(stream: number, fields: readonly Field[]): void {
    this.requests([[stream, fields]]);
  }

  /** Sends several requests in one write. */
  requests(list: readonly (readonly [stream: number, fields: readonly Field[]])[]): void {
    this.socket.write(Buffer.concat(list.map(([s, f]) => headerFrames(s, headerBlock(f)))));
  }

  /** Sends one frame as given. */
  send(type: number, flags: number, stream: number, payload: Buffer): void {
    this.socket.write(frame(type, flags, stream, payload));
  }

  /** Resets a stream (RST_STREAM with `code`). */
  reset(stream: number, code: number): void {
    const payload = Buffer.alloc(4);
    payload.writeUInt32BE(code);
    this.socket.write(frame(FRAME.RST_STREAM, 0, stream, payload));
  }

  /** Every frame received as `TYPE:FLAGS:STREAM`, in order (payloads left out). */
  summary(): string[] {
    return this.frames.map((f) => `${FRAME_NAMES[f.type] ?? f.type}:${f.flags}:${f.stream}`);
  }

  /** The last value of each setting the server sent, by identifier (RFC 9113 section 6.5.2). */
  settings(): Map<number, number> {
    const out = new Map<number, number>();
    for (const f of this.frames) {
      if (f.type !== FRAME.SETTINGS || (f.flags & ACK) !== 0) continue;
      for (let i = 0; i + 6 <= f.payload.length; i += 6) out.set(f.payload.readUInt16BE(i), f.payload.readUInt32BE(i + 2));
    }
    return out;
  }

  /** What became of each stream: `response` (HEADERS seen) or `rst:CODE`, in stream order. */
  outcomes(): Record<number, string> {
    const out: Record<number, string> = {};
    for (const f of this.frames) {
      if (f.stream === 0 || out[f.stream]?.startsWith('rst:')) continue;
      if (f.type === FRAME.HEADERS && out[f.stream] === undefined) out[f.stream] = 'response';
      else if (f.type === FRAME.RST_STREAM) out[f.stream] = `rst:${f.payload.readUInt32BE(0)}`;
    }
    return out;
  }

  /** The streams the server ended (END_STREAM on HEADERS or DATA), in order. */
  ended(): number[] {
    return this.frames.filter((f) => (f.type === FRAME.HEADERS || f.type === FRAME.DATA) && (f.flags & END_STREAM) !== 0).map((f) => f.stream);
  }

  /** The GOAWAY frames received: last stream identifier and error code. */
  goaways(): { lastStream: number; code: number }[] {
    return this.frames.filter((f) => f.type === FRAME.GOAWAY)
      .map((f) => ({ lastStream: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) }));
  }

  /** Closes the connection. */
  close(): void {
    this.socket.destroy();
  }
}
