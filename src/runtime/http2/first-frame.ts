/**
 * The start of an HTTP/2 connection as nginx takes it. RFC 9113 section 3.4
 * has a client send a SETTINGS frame right after its connection preface;
 * nghttp2 (node:http2) holds a client to that and answers any other first
 * frame with GOAWAY PROTOCOL_ERROR, where nginx (`ngx_http_v2_state_preface`
 * going on to `ngx_http_v2_state_head`) reads whatever frame comes. Before
 * nghttp2 gets a connection, the first frame after the preface is looked
 * at: a SETTINGS frame goes through untouched, on the socket itself; any
 * other (a SETTINGS acknowledgement, a HEADERS frame) gets an empty SETTINGS
 * frame put in front of it, and the acknowledgement nghttp2 sends for that
 * one is taken out of what it writes, so that the client sees what nginx
 * would send it. A client that sends its preface alone and waits for the
 * server's SETTINGS before sending more is served through the same shim,
 * which waits for the first frame's header without holding nghttp2's
 * SETTINGS back.
 */
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';

/** The client connection preface (RFC 9113 section 3.4). */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** A frame header's length in bytes (RFC 9113 section 4.1). */
const FRAME_HEADER_BYTES = 9;
const SETTINGS = 0x4;
const ACK = 0x1;
/** A SETTINGS frame without parameters, on stream 0. */
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]);

/**
 * What the bytes a connection started with call for: `more` (part of the
 * preface: the rest will follow without the server's word), `wait` (the
 * preface, not yet the first frame's header: the client may be waiting for
 * the server's SETTINGS), `as-is` (a SETTINGS frame first, or no preface:
 * nghttp2 takes them as they are), `settings-first` (another frame first).
 */
export type FirstFrameVerdict = 'more' | 'wait' | 'as-is' | 'settings-first';

/** Judges the bytes a connection started with (see `FirstFrameVerdict`). */
export function firstFrameVerdict(bytes: Buffer): FirstFrameVerdict {
  const prefaceBytes = Math.min(bytes.length, CLIENT_PREFACE.length);
  if (!bytes.subarray(0, prefaceBytes).equals(CLIENT_PREFACE.subarray(0, prefaceBytes))) return 'as-is';
  if (bytes.length < CLIENT_PREFACE.length) return 'more';
  if (bytes.length < CLIENT_PREFACE.length + FRAME_HEADER_BYTES) return 'wait';
  const type = bytes[CLIENT_PREFACE.length + 3]!;
  const flags = bytes[CLIENT_PREFACE.length + 4]!;
  return type === SETTINGS && (flags & ACK) === 0 ? 'as-is' : 'settings-first';
}

/**
 * A connection's bytes between its socket and nghttp2, for a client whose
 * first frame is not SETTINGS or not known yet: reading, the first frame
 * gets an empty SETTINGS frame in front of it when it is not SETTINGS;
 * writing, nghttp2's acknowledgement of that frame is left out. Past those
 * two, bytes pass through unchanged. node:http2 runs a session over it as
 * over any stream without a native handle (`JSStreamSocket`).
 */
export class FirstFrameShim extends Duplex {
  /** Bytes read before the first frame's header was complete; undefined once it was judged. */
  private head: Buffer | undefined;
  /** Whether nghttp2 will acknowledge a SETTINGS frame the client did not send (the next ACK it writes is dropped). */
  private dropAck = false;
  /** Whether nghttp2's frames are still followed (until the first frame is judged, then until that ACK is dropped). */
  private watching = true;
  /** Bytes of the frame being written that are left to pass, while looking for that ACK. */
  private passBytes = 0;
  /** The start of a frame header being written, split across writes. */
  private partialHeader: Buffer = Buffer.alloc(0);

  /**
   * @param transport the client's socket (TCP, or TLS after the handshake),
   *   its 'data' listeners removed; the shim reads it from now on
   * @param first the bytes already read from it
   */
  constructor(readonly transport: Socket, first: Buffer) {
    super({ allowHalfOpen: true });
    this.head = first;
    transport.on('data', (chunk: Buffer) => this.fromClient(chunk));
    transport.on('end', () => {
      if (this.head) this.judge(true);
      this.push(null);
    });
    transport.on('close', () => this.destroy());
    transport.on('error', (err) => this.destroy(err));
    this.judge(false);
  }

  private fromClient(chunk: Buffer): void {
    if (this.head) {
      this.head = Buffer.concat([this.head, chunk]);
      this.judge(false);
    } else if (!this.push(chunk)) {
      this.transport.pause();
    }
  }

  /** Hands nghttp2 the bytes read so far once the first frame is known (or the client ended before it). */
  private judge(ended: boolean): void {
    const head = this.head!;
    const verdict = firstFrameVerdict(head);
    if ((verdict === 'more' || verdict === 'wait') && !ended) return;
    this.head = undefined;
    this.watching = verdict === 'settings-first';
    if (verdict === 'settings-first') {
      this.dropAck = true;
      this.push(Buffer.concat([CLIENT_PREFACE, EMPTY_SETTINGS, head.subarray(CLIENT_PREFACE.length)]));
    } else if (!this.push(head)) {
      this.transport.pause();
    }
  }

  override _read(): void {
    this.transport.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.transport.write(this.watching ? this.withoutFirstAck(chunk) : chunk, cb);
  }

  /**
   * `chunk` less the acknowledgement of the SETTINGS frame the shim put in,
   * following nghttp2's frames from its first byte (nothing is acknowledged
   * before the first frame is judged: nghttp2 has read nothing until then).
   */
  private withoutFirstAck(chunk: Buffer): Buffer {
    const parts: Buffer[] = [];
    let at = 0;
    while (at < chunk.length && this.watching) {
      if (this.passBytes > 0) {
        const n = Math.min(this.passBytes, chunk.length - at);
        parts.push(chunk.subarray(at, at + n));
        this.passBytes -= n;
        at += n;
        continue;
      }
      const need = FRAME_HEADER_BYTES - this.partialHeader.length;
      const piece = chunk.subarray(at, at + need);
      at += piece.length;
      this.partialHeader = Buffer.concat([this.partialHeader, piece]);
      if (this.partialHeader.length < FRAME_HEADER_BYTES) break;
      const header = this.partialHeader;
      this.partialHeader = Buffer.alloc(0);
      if (this.dropAck && header[3] === SETTINGS && (header[4]! & ACK) !== 0) {
        this.dropAck = false;
        this.watching = false;
        continue;
      }
      parts.push(header);
      this.passBytes = header.readUIntBE(0, 3);
    }
    parts.push(chunk.subarray(at));
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.transport.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.transport.destroy();
    cb(err);
  }
}

/**
 * Reads the start of an HTTP/2 connection (`first`: bytes already read, its
 * 'data' listeners removed, paused) until its first frame calls for
 * something, then hands `serve` the socket (its bytes put back) or a shim.
 */
export function startHttp2(socket: Socket, first: Buffer, serve: (transport: Socket | Duplex) => void): void {
  let head = first;
  const go = (): void => {
    const verdict = firstFrameVerdict(head);
    if (verdict === 'more') {
      socket.once('data', (chunk: Buffer) => {
        socket.pause();
        head = Buffer.concat([head, chunk]);
        go();
      });
      socket.resume();
      return;
    }
    if (verdict === 'as-is') {
      socket.unshift(head);
      serve(socket);
      return;
    }
    serve(new FirstFrameShim(socket, head));
  };
  go();
}
