/**
 * The worker's buffer for the file reads it does itself (`aio off`,
 * nginx's default: `ngx_read_file`, a blocking `pread` in the worker):
 * static files (handlers/send-file.ts) and cache entries
 * (cache/upstream-cache.ts) are read into it again and again while each
 * connection takes each read whole (`ResponseTarget.tookWhole`: the kernel
 * took the bytes, or TLS copied them). A read a connection keeps (a slow
 * client, a body filter, HTTP/2's flow control, `limit_rate`) stays that
 * connection's, and the next read takes a new buffer. Without it each
 * 64 KiB read was a fresh buffer whose memory came back only at V8's next
 * scavenge: 16 clients of a 1 MiB file peaked ~80 MiB higher, at 0.6× the
 * requests a second (README, Performance, "Static files read in the worker").
 * The spool copies the pieces of a FastCGI read into it too, to write them
 * at once (spool.ts, `flush`; README, Performance, "FastCGI, uwsgi and SCGI
 * responses").
 */
/** The buffer's size: reads of a file in the worker are at most this long (send-file.ts's `FIRST_READ_BYTES`). */
export const WORKER_READ_BYTES = 64 * 1024;

let scratch: Buffer | undefined;

/** A buffer of `bytes` to read a file into in the worker: the first `bytes` of the worker's buffer (at most `WORKER_READ_BYTES`), else a new one. */
export function workerReadBuffer(bytes: number): Buffer {
  if (bytes > WORKER_READ_BYTES) return Buffer.allocUnsafe(bytes);
  scratch ??= Buffer.allocUnsafe(WORKER_READ_BYTES);
  return scratch.subarray(0, bytes);
}

/**
 * Call right after `buffer` (from `workerReadBuffer`) was written to `out`, a
 * `ResponseTarget` (exchange.ts; typed here by the one method read, so this
 * module imports nothing of the runtime): when the connection keeps it, the
 * worker's next read takes a new buffer.
 */
export function wroteReadBuffer(buffer: Buffer, out: { tookWhole?(): boolean }): void {
  if (scratch !== undefined && buffer.buffer === scratch.buffer && !out.tookWhole?.()) scratch = undefined;
}
