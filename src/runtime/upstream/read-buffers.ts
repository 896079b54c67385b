/**
 * Reads of an HTTP/1.x upstream connection (TCP or unix socket, plain or
 * TLS) into a buffer of its own, filled again while nothing kept what the
 * last read brought, as nginx reads an upstream into its `proxy_buffer_size` and
 * `proxy_buffers` again and again. node otherwise reads every 64 KiB of a
 * socket into a new buffer that only V8's next scavenge frees, and V8
 * scavenges for such buffers only once they hold 32 MiB: proxied 1 MiB
 * responses kept 40-50 MiB of spent reads in memory (README, Memory).
 *
 * The socket is made with node's `onread` (its `callback` gets each read,
 * its `buffer` gives the buffer of the next). The callback hands the read
 * to undici's parser at once (`execute`, what undici's `readMore` does with
 * each chunk it reads from the socket's stream on the stream's `readable`
 * event, a tick later), so that, before the next read's buffer is chosen,
 * all of it was parsed and handed on; the stream is skipped, and with it
 * two ticks a read. When the parser cannot take it now (not attached yet,
 * paused, gone after a `101`) or older bytes wait in the stream, the read
 * is pushed into the stream instead, where undici (or the tunnel) reads it
 * as before. The buffer is the connection's again for the next read only
 * when:
 *
 * - the stream holds none of it (undici, paused by a handler that cannot
 *   take more, puts back what it did not parse; a `101` leaves the rest to
 *   the tunnel);
 * - undici's parser holds no part of a header (a header cut by the read's
 *   end waits there for the rest);
 * - every piece of body undici handed to a handler (`TrackedHandler`,
 *   `deliveredReadBuffer`) was let go of by it (`releasedReadBuffer`): the
 *   proxy's handler lets go of a piece the client's connection took whole
 *   with nothing else keeping it (no cache file to write it to, nothing
 *   queued in the spool, which copies what it keeps of such a buffer; see
 *   `inReadBuffer`).
 *
 * Otherwise the read stays with whoever keeps it, and the next read takes
 * a new buffer. A connection reads as much as its location's `proxy_buffers`
 * hold (number × size; nginx's default 8 × 4 KiB reads 32 KiB at a time,
 * as nginx fills its 8 buffers in one pass), at least 16 KiB and at most
 * node's 64 KiB (`upstreamReadBytes`): with 64 KiB reads, 64 connections
 * proxying 1 MiB responses held 4-8 MiB more at their peak, at 1.1-1.3×
 * the requests a second (README, Memory). A read shorter than
 * `COPY_BELOW_BYTES` is copied out at once instead, and the buffer is free
 * again. A response that spent the turn's budget stops its socket's
 * reading for the turn (`holdReadsForTurn`) rather than pausing undici.
 * Handlers' `onHeaders` and `onComplete` get header and trailer Buffers in
 * the read too: they must not keep them (the proxy's turns them into
 * strings at once).
 */
import type { Socket } from 'node:net';
import undiciSymbols from 'undici/lib/core/symbols.js';

/** The most a connection reads at once: what node reads a socket in. */
const MAX_READ_BYTES = 64 * 1024;

/** The least a connection reads at once: shorter reads are copied out of the buffer anyway (`COPY_BELOW_BYTES`). */
const MIN_READ_BYTES = 16 * 1024;

/**
 * A read shorter than this is copied out of the buffer (into a buffer of
 * its size, or a slice of node's pool for a few KiB), as node itself cuts
 * each read down to its size: a small piece that a slow client keeps does
 * not hold the whole buffer, and a piece that holds it fills a quarter of it
 * at least.
 */
export const COPY_BELOW_BYTES = 16 * 1024;

/** A read being parsed: its buffer, the body pieces handed to handlers, and those they let go of. */
interface Delivery {
  readonly buffer: ArrayBufferLike;
  delivered: number;
  released: number;
}

/** What undici's HTTP/1.1 parser of a socket offers (undici/lib/dispatcher/client-h1.js). */
interface UndiciParser {
  /** Header names and values of the head being read, as Buffers in the reads. */
  readonly headers: readonly Buffer[];
  /** A handler paused the response (its `onData` returned false). */
  readonly paused: boolean;
  /** The parser's memory in undici's llhttp (null once destroyed). */
  readonly ptr: number | null;
  /** Parses `data`; puts back into the socket's stream what it did not parse when a handler paused it. */
  execute(data: Buffer): void;
}

let delivery: Delivery | undefined;
/** The socket whose read `parseRead` is handing to undici's parser right now. */
let parsing: Socket | undefined;
/** Sockets that stop reading after the read being parsed, until a later turn of the event loop (`holdReadsForTurn`). */
const held = new WeakSet<Socket>();
/** The buffer of the next read of the socket whose read was just parsed, when it is free again. */
let next: Buffer | undefined;

function parserOf(socket: Socket): UndiciParser | null | undefined {
  return (socket as unknown as Record<symbol, UndiciParser | null | undefined>)[undiciSymbols.kParser];
}

/**
 * How much an upstream connection of a location reads at once: its
 * `proxy_buffers` (`memoryBytes`: number × size), within 16 and 64 KiB;
 * over TLS 16 KiB, as node hands decrypted bytes over in pieces of at most
 * that (`kClearOutChunkSize`, src/crypto/crypto_tls.h): a larger buffer
 * would never fill.
 */
export function upstreamReadBytes(memoryBytes: number, tls: boolean): number {
  return tls ? MIN_READ_BYTES : Math.min(Math.max(memoryBytes, MIN_READ_BYTES), MAX_READ_BYTES);
}

/** node's `onread` option of a connection (`net.connect`): `buffer` gives the buffer of its next read, `callback` gets each read. */
export interface UpstreamOnRead {
  buffer(): Buffer;
  callback(this: Socket, bytesRead: number, buffer: Buffer): boolean;
}

const onReads = new Map<number, UpstreamOnRead>();

/**
 * node's `onread` option of an upstream connection reading `readBytes` at
 * a time (`upstreamReadBytes`), for undici's connector; one object per
 * size. `buffer` is called right after each `callback` (and once as the
 * socket starts), for the buffer of that socket's next read.
 */
export function upstreamOnRead(readBytes: number): UpstreamOnRead {
  let onRead = onReads.get(readBytes);
  if (!onRead) onReads.set(readBytes, (onRead = { buffer: () => nextBuffer(readBytes), callback: parseRead }));
  return onRead;
}

/** The buffer of a socket's next read: the one its last read was parsed from when that is free again, else a new one. */
function nextBuffer(readBytes: number): Buffer {
  const buffer = next?.length === readBytes ? next : Buffer.allocUnsafe(readBytes);
  next = undefined;
  return buffer;
}

/** `onread`'s callback: called as a method of the socket, with the bytes read into `buffer`; false stops reading until the stream is read. */
function parseRead(this: Socket, bytesRead: number, buffer: Buffer): boolean {
  const socket = this;
  next = undefined;
  const small = bytesRead < COPY_BELOW_BYTES;
  const bytes = small ? Buffer.from(buffer.subarray(0, bytesRead)) : buffer.subarray(0, bytesRead);
  const parser = parserOf(socket);
  if (!parser || parser.paused || parser.ptr === null || socket.readableLength > 0 || delivery !== undefined) {
    // no parser to take it now (not yet attached, paused, gone after a 101), or older bytes wait in the stream: the
    // read queues behind them, read by undici (or the tunnel) from the stream
    socket.push(bytes);
    if (small) next = buffer;
    return !held.has(socket) && socket.readableLength < socket.readableHighWaterMark;
  }
  parsing = socket;
  if (small) {
    try {
      parser.execute(bytes);
    } finally {
      parsing = undefined;
    }
    next = buffer;
  } else {
    const d: Delivery = { buffer: buffer.buffer, delivered: 0, released: 0 };
    delivery = d;
    try {
      parser.execute(bytes);
    } finally {
      delivery = undefined;
      parsing = undefined;
    }
    const after = parserOf(socket);
    if (!socket.destroyed && socket.readableLength === 0 && d.delivered === d.released && (!after || after.headers.length === 0)) next = buffer;
  }
  // a handler that cannot take more (a slow client) paused undici, which put back what it had not parsed: the socket
  // is not read until undici resumes and reads its stream, which starts reading again; a response that spent the
  // turn's budget holds the socket until a later turn (holdReadsForTurn)
  if (parserOf(socket)?.paused || held.has(socket)) return false;
  return socket.readableLength < socket.readableHighWaterMark;
}

/**
 * For a handler whose response has spent the turn's budget (turn-budget.ts)
 * while undici parses a read of `parseRead`: the socket stops reading once
 * that read is parsed, and `budget` starts it again in a later turn
 * (`socket.read(0)`, as undici's own `resume` reads its stream). undici's
 * parser is not paused, so what node has read already (over TLS, all it
 * decrypted of the last read) is still parsed into the connection's
 * buffer. False when the data did not come from `parseRead` (undici read
 * it from the socket's stream): the caller pauses undici instead.
 */
export function holdReadsForTurn(budget: { wait(resume: () => void): void }): boolean {
  const socket = parsing;
  if (!socket) return false;
  if (!held.has(socket)) {
    held.add(socket);
    budget.wait(() => {
      held.delete(socket);
      if (!socket.destroyed) socket.read(0);
    });
  }
  return true;
}

/** Whether `chunk` lies in the read being parsed right now: whoever keeps a part of it past its handler's call must keep a copy, or not release it. */
export function inReadBuffer(chunk: Buffer): boolean {
  return delivery !== undefined && chunk.buffer === delivery.buffer;
}

/**
 * Runs `parse` over a read into `buffer` that a connection's own parser
 * takes (cgi-reads.ts: FastCGI, uwsgi, SCGI, memcached): meanwhile pieces
 * of it are `inReadBuffer`, so whoever keeps one past the call keeps a copy.
 */
export function parsingReadBuffer(buffer: Buffer, parse: () => void): void {
  delivery = { buffer: buffer.buffer, delivered: 0, released: 0 };
  try {
    parse();
  } finally {
    delivery = undefined;
  }
}

/** A piece of body from the read being parsed goes to a handler (undici's `onData`). */
export function deliveredReadBuffer(chunk: Buffer): void {
  if (inReadBuffer(chunk)) delivery!.delivered++;
}

/** The handler let go of `chunk`: nothing reads it after this call returns. */
export function releasedReadBuffer(chunk: Buffer): void {
  if (inReadBuffer(chunk)) delivery!.released++;
}
