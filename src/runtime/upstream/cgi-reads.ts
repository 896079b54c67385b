/**
 * Reads of FastCGI, uwsgi, SCGI and memcached connections into a buffer of
 * their own, filled again while nothing kept what the last read brought,
 * as nginx reads such a connection into its `fastcgi_buffers` (`uwsgi_`,
 * `scgi_`, `memcached_buffer_size`) again and again (`ngx_event_pipe_read_upstream`).
 * The same for these connections as read-buffers.ts is for `proxy_pass`'s:
 * node otherwise reads every 64 KiB of a socket into a new buffer that only
 * V8's next garbage collection frees; 64 clients of 1 MiB FastCGI responses
 * spent a sixth of their CPU time in collections (README, Performance,
 * "FastCGI, uwsgi and SCGI responses").
 *
 * A connection is made with `cgiOnRead` (node's `onread`); the request
 * being served on it takes each read with `takeReads`, and says, once it
 * handled the read, whether anything kept a piece of it (the spool's queue
 * or temp file, the client's connection, the cache's file, a tunnel): if
 * nothing did, the next read goes into the same buffer. Meanwhile pieces of
 * the read are `inReadBuffer`, so the spool copies what it keeps waiting
 * for its buffer to fill. A read shorter than `COPY_BELOW_BYTES` is copied
 * out at once, and the buffer is free again. Between requests (a kept
 * connection, a tunnel after a `101`) nothing takes the reads: they go to
 * the socket's stream, as copies, for its `data` listeners.
 */
import type { Socket } from 'node:net';
import { COPY_BELOW_BYTES, parsingReadBuffer, upstreamReadBytes, type UpstreamOnRead } from './read-buffers.js';

/** Takes one read; true when nothing kept a piece of it past the call. */
export type ReadTaker = (chunk: Buffer) => boolean;

const takers = new WeakMap<Socket, ReadTaker>();
/** The buffer of the next read of the socket whose read was just taken, when it is free again. */
let next: Buffer | undefined;

const onReads = new Map<number, UpstreamOnRead>();

/**
 * node's `onread` option (`net.connect`, `tls.connect`) of a FastCGI, uwsgi,
 * SCGI or memcached connection of a location whose buffers hold
 * `memoryBytes` (number × size): reads of `upstreamReadBytes` (16 to 64
 * KiB; 16 KiB over TLS). One object per size.
 */
export function cgiOnRead(memoryBytes: number, tls: boolean): UpstreamOnRead {
  const readBytes = upstreamReadBytes(memoryBytes, tls);
  let onRead = onReads.get(readBytes);
  if (!onRead) onReads.set(readBytes, (onRead = { buffer: () => nextBuffer(readBytes), callback: takeRead }));
  return onRead;
}

/** Hands each read of `socket` (made with `cgiOnRead`) to `take`, until `stopTakingReads`. */
export function takeReads(socket: Socket, take: ReadTaker): void {
  takers.set(socket, take);
}

/** The reads of `socket` go to its stream again (its `data` listeners). */
export function stopTakingReads(socket: Socket): void {
  takers.delete(socket);
}

function nextBuffer(readBytes: number): Buffer {
  const buffer = next?.length === readBytes ? next : Buffer.allocUnsafe(readBytes);
  next = undefined;
  return buffer;
}

/** `onread`'s callback, called as a method of the socket with the bytes read into `buffer`. */
function takeRead(this: Socket, bytesRead: number, buffer: Buffer): boolean {
  next = undefined;
  const take = takers.get(this);
  if (take === undefined || bytesRead < COPY_BELOW_BYTES) {
    const bytes = Buffer.from(buffer.subarray(0, bytesRead));
    next = buffer;
    if (take !== undefined) {
      take(bytes);
      return true;
    }
    this.push(bytes);
    return this.readableLength < this.readableHighWaterMark;
  }
  let free = false;
  parsingReadBuffer(buffer, () => {
    free = take(buffer.subarray(0, bytesRead));
  });
  if (free && !this.destroyed) next = buffer;
  return true;
}
