/**
 * Writes to a client connection's TLS socket: what it would hold goes as a
 * copy, so that the buffers writes come in are free at once for the next
 * read into them (`writeReleasing`), and OpenSSL is handed a few records
 * at a time (`boundTlsWrites`).
 *
 * A write that a socket cannot hand on at once waits in the socket's queue,
 * and the buffer it came in waits with it: an upstream's read buffer
 * (`upstream/read-buffers.ts`) or a file's (`file-read-buffer.ts`) then
 * cannot be read into again, and the next read takes a new buffer, which
 * only V8's next collection frees. Over TLS a socket holds every write
 * after the first of a turn of node's event loop until that one ends
 * (`in-transit.ts`), however fast the client: an HTTP/2 connection
 * carrying many streams, or an HTTPS client taking a large response, held
 * most of its writes for a turn that way. Those writes go as copies
 * instead, into buffers of `COPY_BUFFER_BYTES` that every connection's
 * copies fill one after the other and that are used again once the
 * sockets have written them, as nginx's `ngx_ssl_send_chain` copies what
 * it sends over TLS into a buffer of its own (`ssl_buffer_size`). A plain
 * socket that holds writes has a client that is not taking them, which a
 * copy would not change: its writes keep their buffers, as before.
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { IN_TRANSIT_LIMIT_BYTES } from './in-transit.js';

/** The size of a buffer copies go into. */
const COPY_BUFFER_BYTES = 64 * 1024;

/** The most a client's TLS socket hands OpenSSL at once: four records of 16 KiB (`boundTlsWrites`). */
const TLS_WRITE_BYTES = 64 * 1024;

/**
 * Buffers the sockets are done with, kept for the next copies; more are
 * left to V8. As many as two turns' worth of response bodies fill, what a
 * client connection may hold in transit (`IN_TRANSIT_LIMIT_BYTES`).
 */
const FREE_BUFFERS_KEPT = IN_TRANSIT_LIMIT_BYTES / COPY_BUFFER_BYTES;

/** A buffer copies go into, and how many of its writes the sockets have not finished. */
interface CopyBuffer {
  readonly bytes: Buffer;
  unfinishedWrites: number;
  /** Full: once its writes are finished it goes back to `free`. */
  full: boolean;
}

const free: Buffer[] = [];
/** The buffer being filled, and the bytes of it in use. */
let current: CopyBuffer | undefined;
let used = 0;

/**
 * Writes `pieces` (in order) to a client connection's `socket` and tells
 * whether the buffers they came in are free again once this returns: a
 * plain socket's when the kernel took them all; a TLS socket's always,
 * since TLS encrypts (copies) what it is handed at once, and what the
 * socket would hold, behind a write not yet finished or past what OpenSSL
 * is handed at once (`boundTlsWrites`), goes as a copy (`writeCopies`). A
 * plain socket that holds writes has a client that is not taking them,
 * which a copy would not change.
 */
export function writeReleasing(socket: Socket, pieces: readonly Buffer[]): boolean {
  const tls = (socket as TLSSocket).encrypted === true;
  // more than OpenSSL is handed at once waits in part (`boundTlsWrites`): a copy too
  if (tls && (socket.writableLength > 0 || socket.writableCorked > 0 || pieces.reduce((n, piece) => n + piece.length, 0) > TLS_WRITE_BYTES)) {
    writeCopies(socket, pieces);
    return true;
  }
  if (pieces.length === 1) socket.write(pieces[0]!);
  else {
    // one write of them all
    socket.cork();
    for (const piece of pieces) socket.write(piece);
    socket.uncork();
  }
  return tls || socket.writableLength === 0;
}

/**
 * Writes copies of `pieces` (in order) to `socket`, in one write or, where
 * they cross from one copy buffer into the next, a few.
 */
function writeCopies(socket: Socket, pieces: readonly Buffer[]): void {
  let start = used;
  for (const piece of pieces) {
    let offset = 0;
    while (offset < piece.length) {
      if (current === undefined || used === COPY_BUFFER_BYTES) {
        if (current !== undefined) {
          write(socket, current, start, used);
          current.full = true;
          if (current.unfinishedWrites === 0) release(current);
        }
        current = { bytes: free.pop() ?? Buffer.allocUnsafe(COPY_BUFFER_BYTES), unfinishedWrites: 0, full: false };
        used = 0;
        start = 0;
      }
      const n = Math.min(piece.length - offset, COPY_BUFFER_BYTES - used);
      piece.copy(current.bytes, used, offset, offset + n);
      used += n;
      offset += n;
    }
  }
  if (current !== undefined) write(socket, current, start, used);
}

function write(socket: Socket, buffer: CopyBuffer, start: number, end: number): void {
  if (end === start) return;
  buffer.unfinishedWrites++;
  // called once the socket is done with the bytes, or with an error when it was destroyed first (the buffer is then
  // left to V8: the socket may still hold it)
  socket.write(buffer.bytes.subarray(start, end), (err) => {
    buffer.unfinishedWrites--;
    if (!err && buffer.full && buffer.unfinishedWrites === 0) release(buffer);
  });
}

function release(buffer: CopyBuffer): void {
  if (free.length < FREE_BUFFERS_KEPT) free.push(buffer.bytes);
}

/** A write as node's `Writable` hands it to `_writev`. */
interface QueuedWrite {
  chunk: Buffer | string;
  encoding: BufferEncoding;
}

/** A batch of writes for `_writev`, marked as node's `Writable` marks one whose chunks are all Buffers. */
type WriteBatch = QueuedWrite[] & { allBuffers?: boolean };

/**
 * Makes a client's TLS `socket` hand OpenSSL at most `TLS_WRITE_BYTES` at
 * a time, one piece after the other, where node's `Writable` hands it all
 * the writes queued behind the one in flight at once. node encrypts all of
 * a write into memory (its `NodeBIO`) before it writes any of it to the
 * socket, and that buffer grows to the largest write the connection was
 * handed: with large responses, hundreds of KiB a connection, kept while
 * the connection lasts (75 MiB for 64 HTTPS clients of 1 MiB responses).
 * nginx's OpenSSL writes its records to the socket itself, `ssl_buffer_size`
 * (16k) at a time. The socket's `_write` and `_writev` (node's stream
 * implementation methods) are wrapped: a longer write is cut into pieces
 * written in order, and the write ends (its callback) when the last one
 * does, or with the first error.
 */
export function boundTlsWrites(socket: TLSSocket): void {
  const own = socket as unknown as {
    _write(chunk: Buffer | string, encoding: BufferEncoding, cb: (err?: Error | null) => void): void;
    _writev(chunks: WriteBatch, cb: (err?: Error | null) => void): void;
  };
  const write = own._write.bind(socket);
  const writev = own._writev.bind(socket);
  const inPieces = (batches: WriteBatch[], cb: (err?: Error | null) => void): void => {
    let i = 0;
    const next = (err?: Error | null): void => {
      if (err) return cb(err);
      const batch = batches[i++];
      if (batch === undefined) return cb();
      if (batch.length === 1) write(batch[0]!.chunk, batch[0]!.encoding, next);
      else writev(batch, next);
    };
    next();
  };
  own._write = (chunk, encoding, cb) => {
    if (typeof chunk === 'string' || chunk.length <= TLS_WRITE_BYTES) write(chunk, encoding, cb);
    else inPieces(batchesOf([{ chunk, encoding }]), cb);
  };
  own._writev = (chunks, cb) => {
    if (bytesOf(chunks) <= TLS_WRITE_BYTES) writev(chunks, cb);
    else inPieces(batchesOf(chunks), cb);
  };
}

/** The bytes `writes` hold. */
function bytesOf(writes: readonly QueuedWrite[]): number {
  let bytes = 0;
  for (const w of writes) bytes += typeof w.chunk === 'string' ? Buffer.byteLength(w.chunk, w.encoding) : w.chunk.length;
  return bytes;
}

/** `writes` in batches of at most `TLS_WRITE_BYTES` (a string is never cut, a Buffer is where it must be). */
function batchesOf(writes: readonly QueuedWrite[]): WriteBatch[] {
  const batches: WriteBatch[] = [];
  let batch: WriteBatch = [];
  let bytes = 0;
  const close = (): void => {
    if (batch.length === 0) return;
    batch.allBuffers = batch.every((w) => typeof w.chunk !== 'string');
    batches.push(batch);
    batch = [];
    bytes = 0;
  };
  for (const w of writes) {
    if (typeof w.chunk === 'string') {
      const length = Buffer.byteLength(w.chunk, w.encoding);
      if (bytes > 0 && bytes + length > TLS_WRITE_BYTES) close();
      batch.push(w);
      bytes += length;
      continue;
    }
    let rest = w.chunk;
    while (rest.length > 0) {
      if (bytes >= TLS_WRITE_BYTES) close();
      const n = Math.min(rest.length, TLS_WRITE_BYTES - bytes);
      batch.push({ chunk: rest.subarray(0, n), encoding: w.encoding });
      bytes += n;
      rest = rest.subarray(n);
    }
  }
  close();
  return batches;
}
