/**
 * Buffering of an upstream response on its way to a slower client, as
 * nginx's event pipe does with `proxy_buffering on` (`src/event/ngx_event_pipe.c`),
 * for `proxy_pass` and `fastcgi_pass` alike: the upstream is read as fast as
 * it sends; at most `proxy_busy_buffers_size` is handed to the client
 * connection at a time; what the client has not taken yet is kept in memory
 * up to the size of `proxy_buffers`, and beyond that written to one
 * temporary file, `proxy_temp_file_write_size` bytes at a time (logged once:
 * `an upstream response is buffered to a temporary file PATH`), which is then
 * sent from disk. The upstream is paused instead when the file would grow
 * past `proxy_max_temp_file_size` (0: no file), when the disk falls behind,
 * and always with `proxy_buffering off`, until the client catches up; the
 * memory a response takes stays bounded either way.
 *
 * With buffering, the body reaches the client in whole buffers, as the event
 * pipe passes on only filled ones (`ngx_event_pipe_read_upstream`): the first
 * is what is left of the header buffer (`proxy_buffer_size`) after the
 * header, the next ones are `proxy_buffers`-sized; a partly filled buffer
 * waits for more data or the end of the response, so a response cut in the
 * middle loses it. A chunked response is the exception: nginx parses a
 * partly filled buffer as soon as it holds a whole chunk (its `p->length` is
 * the rest of the chunk), so each chunk passes as it arrives (server-sent
 * events, SockJS streams).
 */
import type { ResponseTarget } from './exchange.js';
import { workerReadBuffer, wroteReadBuffer } from './file-read-buffer.js';
import type { TempFile, TempFiles, TempPath } from './temp-files.js';
import { inReadBuffer } from './upstream/read-buffers.js';

/** How a response may be buffered. */
export interface SpoolSettings {
  readonly buffering: boolean;
  /** Size of one memory buffer (`proxy_buffers` size). */
  readonly bufferBytes: number;
  /** Bytes kept in memory for the client before spooling (`proxy_buffers` number × size). */
  readonly memoryBytes: number;
  /** Bytes handed to the client connection and not yet sent, at most (`proxy_busy_buffers_size`). */
  readonly busyBytes: number;
  readonly tempPath: TempPath;
  /** Largest temp file (`proxy_max_temp_file_size`); 0 disables temp files. */
  readonly maxTempFileBytes: number;
  /** Bytes written to the temp file at a time (`proxy_temp_file_write_size`). */
  readonly tempFileWriteBytes: number;
}

/** What the spool needs from its owner. */
export interface SpoolHooks {
  /** Called once, when the response starts going to a temp file (the file is being created). */
  onTempFile(path: string): void;
  pauseUpstream(): void;
  resumeUpstream(): void;
  /** A temp file could not be written or read; the response is cut. */
  onFileError(err: Error, path: string | undefined): void;
}

/**
 * `X-Accel-Buffering: yes|no` from the upstream turns buffering on or off for
 * its response (`ngx_http_upstream_process_buffering`); other values keep it.
 */
export function accelBuffering(value: string, current: boolean): boolean {
  const v = value.toLowerCase();
  return v === 'yes' ? true : v === 'no' ? false : current;
}

/** Bytes read back from the temp file at a time. */
const READ_CHUNK_BYTES = 64 * 1024;

/** A piece of body the spool keeps past the call that gave it: copied when it lies in an upstream connection's read buffer, which is filled again. */
function kept(piece: Buffer): Buffer {
  return inReadBuffer(piece) ? Buffer.from(piece) : piece;
}

/** Moves one response body from the upstream to the client. */
export class ResponseSpool {
  /** Chunks to send before the temp file's data, and chunks that arrived after it was full. */
  private readonly head: Buffer[] = [];
  private readonly tail: Buffer[] = [];
  private queuedBytes = 0;
  private file: TempFile | undefined;
  private fileCreating: Promise<TempFile | undefined> | undefined;
  /** Data appended to the file and not yet written, and its size. */
  private readonly unwritten: Buffer[] = [];
  private unwrittenBytes = 0;
  private writing = false;
  /** Bytes appended to the file, bytes confirmed written, bytes read back. */
  private fileAppended = 0;
  private fileWritten = 0;
  private fileRead = 0;
  private pumping = false;
  private upstreamDone = false;
  /** Set by `endCut`: the response ends by closing the connection. */
  private cut = false;
  /** The upstream is paused for lack of memory, or because the disk is behind. */
  private pausedForMemory = false;
  private pausedForDisk = false;
  private closed = false;
  private resolveDone: () => void = () => undefined;
  /** Chunks of the buffer being filled (buffering only), and how many more bytes fill it. */
  private readonly filling: Buffer[] = [];
  private fillingBytes = 0;
  private room: number;
  private drainArmed = false;
  /** Pieces passed straight on and not written yet (`gathersReads`), and their size. */
  private readonly gathered: Buffer[] = [];
  private gatheredBytes = 0;
  /** A piece written since the last `flush` lies in a read's buffer and the client's connection keeps it. */
  private keptReadPiece = false;
  /**
   * Bytes handed to the client connection at most: `proxy_busy_buffers_size`,
   * but no less than the connection's high-water mark, below which no
   * `drain` would say that the client took them.
   */
  private readonly busyBytes: number;
  /** Resolves once the body has been handed to the client and the response ended (or aborted). */
  readonly done = new Promise<void>((resolve) => {
    this.resolveDone = resolve;
  });

  /**
   * `headerBufferRoomBytes`: what the header left free of its buffer, the
   * room of the first body buffer. `eachChunk`: the upstream response is
   * chunked, and each piece passes on as it comes. `gathersReads`: the
   * owner pushes a read in many pieces (FastCGI's records, cut at its
   * buffers) and calls `flush` after each read; the pieces go to the client
   * together, as nginx's event pipe hands the client's connection all its
   * filled buffers at once (`ngx_event_pipe_write_to_downstream`), not a
   * write each (such an owner does not call `pushLast`).
   */
  constructor(
    private readonly out: ResponseTarget,
    private readonly settings: SpoolSettings,
    private readonly tempFiles: TempFiles,
    private readonly hooks: SpoolHooks,
    headerBufferRoomBytes: number,
    private readonly eachChunk = false,
    private readonly gathersReads = false,
  ) {
    this.room = headerBufferRoomBytes > 0 ? headerBufferRoomBytes : settings.bufferBytes;
    this.busyBytes = Math.max(settings.busyBytes, out.highWaterMark);
  }

  /** Pumps again when the client has taken its buffered data (or is gone). */
  private armDrain(): void {
    if (this.drainArmed) return;
    this.drainArmed = true;
    this.out.onDrain(() => {
      this.drainArmed = false;
      this.pump();
    });
  }

  /** Data is waiting for the temp file to be created, written or read back. */
  private get fileBacklog(): boolean {
    return this.fileCreating !== undefined || this.fileRead < this.fileAppended;
  }

  /** Takes one chunk from the upstream. */
  push(chunk: Buffer): void {
    if (this.closed) return;
    if (!this.settings.buffering || this.eachChunk) {
      this.forward(chunk);
      return;
    }
    this.fillingBytes += chunk.length;
    if (this.fillingBytes < this.room) {
      this.filling.push(kept(chunk));
      return;
    }
    this.filling.push(chunk);
    // pass on every filled buffer, in the pieces it came in (not copied into one); the rest waits
    const unit = this.settings.bufferBytes;
    const full = this.room + Math.floor((this.fillingBytes - this.room) / unit) * unit;
    const pieces = this.filling.splice(0, this.filling.length);
    this.fillingBytes -= full;
    this.room = unit - this.fillingBytes;
    let left = full;
    for (const piece of pieces) {
      if (left === 0) this.filling.push(kept(piece));
      else if (piece.length <= left) {
        left -= piece.length;
        this.forward(piece);
      } else {
        this.forward(piece.subarray(0, left));
        this.filling.push(kept(piece.subarray(left)));
        left = 0;
      }
    }
  }

  /**
   * Whether the spool keeps none of what it was given (nothing queued, no
   * temp file): what it passed on went to the client's target, and what
   * waits for its buffer to fill is a copy when it came in an upstream
   * connection's read buffer (`kept`).
   */
  keepsNothing(): boolean {
    return this.queuedBytes === 0 && this.gatheredBytes === 0 && this.file === undefined && this.fileCreating === undefined;
  }

  /**
   * Writes the pieces gathered since the last call (`gathersReads`) to the
   * client in one write; called after each read, and before anything else
   * is written, so that the body keeps its order. True when the client's
   * connection keeps no piece of a read's buffer (`inReadBuffer`) from the
   * writes since the last call: more pieces than one are copied into the
   * worker's buffer (used again once the client took it whole), one goes as
   * it is.
   */
  flush(): boolean {
    this.writeGathered();
    const whole = !this.keptReadPiece;
    this.keptReadPiece = false;
    return whole;
  }

  private writeGathered(): void {
    if (this.gatheredBytes === 0) return;
    const pieces = this.gathered.splice(0);
    const bytes = this.gatheredBytes;
    this.gatheredBytes = 0;
    if (this.closed) return;
    let data = pieces[0]!;
    if (pieces.length > 1) {
      data = workerReadBuffer(bytes);
      let at = 0;
      for (const piece of pieces) at += piece.copy(data, at);
    }
    const taken = this.out.write(data);
    if (pieces.length > 1) wroteReadBuffer(data, this.out);
    else if (inReadBuffer(data) && !this.out.tookWhole?.()) this.keptReadPiece = true;
    if (!taken) this.armDrain();
  }

  /** Passes body data on: to the client, a memory queue or (unless `last`) the temp file. */
  private forward(chunk: Buffer, last = false): void {
    const { memoryBytes } = this.settings;
    const busyBytes = this.busyBytes;
    const idle = !this.fileBacklog && this.tail.length === 0;
    if (idle && this.head.length === 0 && this.out.bufferedBytes < busyBytes) {
      if (!this.gathersReads) {
        if (!this.out.write(chunk)) this.armDrain();
        return;
      }
      // what a read brought goes in one write, as a read of proxy_pass's goes whole
      this.gathered.push(chunk);
      this.gatheredBytes += chunk.length;
      return;
    }
    if (idle && this.out.bufferedBytes + this.queuedBytes + chunk.length <= memoryBytes) {
      this.enqueue(this.head, chunk);
      this.armDrain();
      return;
    }
    if (last) {
      this.enqueue(this.head, chunk);
      this.armDrain();
      return;
    }
    const canSpool = this.settings.buffering && this.settings.maxTempFileBytes > 0 && this.tail.length === 0
      && this.fileAppended + chunk.length <= this.settings.maxTempFileBytes;
    if (canSpool) {
      this.append(chunk);
      this.armDrain();
      return;
    }
    this.enqueue(this.fileBacklog ? this.tail : this.head, chunk);
    this.armDrain();
    if (!this.pausedForMemory) {
      this.pausedForMemory = true;
      this.updatePause(false);
    }
  }

  /**
   * Takes the chunk that completes the body (its `Content-Length` is
   * reached): when nothing is queued it goes out with the end of the
   * response, so a small response leaves in one write with its header.
   */
  pushLast(chunk: Buffer): void {
    if (this.closed) return;
    if (this.fillingBytes > 0 || this.pumping || this.head.length > 0 || this.tail.length > 0 || this.file || this.fileCreating) {
      this.push(chunk);
      return;
    }
    this.upstreamDone = true;
    this.closed = true;
    this.out.end(chunk);
    this.release();
  }

  private enqueue(queue: Buffer[], chunk: Buffer): void {
    queue.push(chunk);
    this.queuedBytes += chunk.length;
  }

  /** Appends a chunk to the temp file, creating it first. */
  private append(chunk: Buffer): void {
    if (!this.file && !this.fileCreating) {
      const path = this.tempFiles.reserve(this.settings.tempPath);
      this.hooks.onTempFile(path);
      this.fileCreating = this.tempFiles.open(path, this.settings.tempPath).then((f) => {
        this.file = f;
        this.fileCreating = undefined;
        if (this.closed) void f.handle.close().catch(() => undefined);
        else void this.writeOut();
        return f;
      }, (err: Error) => {
        this.fileCreating = undefined;
        this.fail(err, undefined);
        return undefined;
      });
    }
    this.unwritten.push(chunk);
    this.unwrittenBytes += chunk.length;
    this.fileAppended += chunk.length;
    if (!this.pausedForDisk && this.unwrittenBytes > Math.max(this.settings.memoryBytes, this.settings.tempFileWriteBytes)) {
      this.pausedForDisk = true;
      this.updatePause(false);
    }
    void this.writeOut();
  }

  /** Writes what was appended, `tempFileWriteBytes` at a time, one write after the other. */
  private async writeOut(): Promise<void> {
    const f = this.file;
    if (this.writing || !f) return;
    this.writing = true;
    const unit = this.settings.tempFileWriteBytes;
    try {
      while (this.unwrittenBytes > 0 && !this.closed) {
        const parts: Buffer[] = [];
        let size = 0;
        while (size < unit && this.unwritten.length > 0) {
          const next = this.unwritten[0]!;
          const take = Math.min(next.length, unit - size);
          parts.push(take === next.length ? next : next.subarray(0, take));
          if (take === next.length) this.unwritten.shift();
          else this.unwritten[0] = next.subarray(take);
          size += take;
        }
        this.unwrittenBytes -= size;
        for (let at = 0; at < parts.length;) {
          const { bytesWritten } = await f.handle.writev(parts.slice(at), this.fileWritten);
          this.fileWritten += bytesWritten;
          // a short write leaves the rest of the parts for the next call
          let left = bytesWritten;
          while (at < parts.length && left >= parts[at]!.length) left -= parts[at++]!.length;
          if (left > 0) parts[at] = parts[at]!.subarray(left);
        }
        if (this.pausedForDisk && this.unwrittenBytes <= Math.max(this.settings.memoryBytes, this.settings.tempFileWriteBytes) / 2) {
          this.pausedForDisk = false;
          this.updatePause(true);
        }
        this.pump();
      }
    } catch (err) {
      this.fail(err as Error, f.path);
    } finally {
      this.writing = false;
    }
  }

  /** Pauses the upstream while memory or the disk is short, resumes it when neither is. */
  private updatePause(relief: boolean): void {
    if (!relief) this.hooks.pauseUpstream();
    else if (!this.pausedForMemory && !this.pausedForDisk) this.hooks.resumeUpstream();
  }

  /**
   * The upstream closed the connection before the end of the body: what was
   * received goes to the client, held data too (nginx passes buffers on at
   * the upstream's EOF), then the connection is closed.
   */
  endCut(): void {
    this.cut = true;
    this.end();
  }

  /**
   * The upstream has sent everything. The partly filled buffer goes out
   * last; nginx writes to a temp file only to free buffers for reading the
   * upstream, so at its end no file is started: the buffer waits in memory.
   */
  end(): void {
    if (this.closed) return;
    if (this.fillingBytes > 0) {
      const rest = this.filling.length === 1 ? this.filling[0]! : Buffer.concat(this.filling, this.fillingBytes);
      this.filling.length = 0;
      this.fillingBytes = 0;
      if (this.file || this.fileCreating || this.tail.length > 0) this.enqueue(this.fileBacklog ? this.tail : this.head, rest);
      else this.forward(rest, true);
    }
    this.upstreamDone = true;
    if (!this.pumping && this.head.length === 0 && this.tail.length === 0 && !this.file && !this.fileCreating) this.finish();
    else this.pump();
  }

  /**
   * Sends what the client can take: queued chunks, the temp file, then
   * chunks queued after it. Synchronous but for the temp file's reads
   * (`pumpFile`): a drain that finds the data in memory costs no promise.
   * `pumping` while it runs (what it sets off, an upstream resumed, may
   * call it again: that call leaves the work to this one).
   */
  private pump(): void {
    if (this.pumping || this.closed) return;
    if (this.out.gone) {
      this.abort();
      return;
    }
    this.pumping = true;
    this.writeGathered();
    for (;;) {
      if (this.closed) break;
      const room = this.busyBytes - this.out.bufferedBytes;
      if (room <= 0) {
        this.armDrain();
        break;
      }
      if (this.head.length > 0) {
        // what fits in the room goes in one write (at least one chunk), as the event pipe writes its busy buffers together
        let count = 1;
        let bytes = this.head[0]!.length;
        while (count < this.head.length && bytes + this.head[count]!.length <= room) bytes += this.head[count++]!.length;
        const pieces = this.head.splice(0, count);
        this.queuedBytes -= bytes;
        this.out.write(count === 1 ? pieces[0]! : Buffer.concat(pieces, bytes));
        this.maybeResume();
        continue;
      }
      if (this.file && this.fileRead < this.fileWritten) {
        this.pumpFile(this.file);
        return;
      }
      if (!this.fileBacklog && this.tail.length > 0) {
        this.head.push(...this.tail.splice(0));
        continue;
      }
      if (this.upstreamDone && !this.fileBacklog) this.finish();
      break;
    }
    this.pumping = false;
  }

  /** Reads the temp file's next part and sends it, then pumps on (`pumping` until then). */
  private pumpFile(file: TempFile): void {
    const len = Math.min(READ_CHUNK_BYTES, this.fileWritten - this.fileRead);
    const buf = Buffer.allocUnsafe(len);
    file.handle.read(buf, 0, len, this.fileRead).then(({ bytesRead: n }) => {
      this.pumping = false;
      if (this.closed) return;
      this.fileRead += n;
      this.out.write(n === len ? buf : buf.subarray(0, n));
      this.pump();
    }, (err: Error) => {
      this.pumping = false;
      this.fail(err, file.path);
    });
  }

  private maybeResume(): void {
    if (this.pausedForMemory && this.queuedBytes < this.settings.memoryBytes / 2) {
      this.pausedForMemory = false;
      this.updatePause(true);
    }
  }

  private finish(): void {
    if (this.closed) return;
    this.writeGathered();
    this.closed = true;
    if (this.cut) this.out.abort('flush');
    else this.out.end();
    this.release();
  }

  /** Closes the temp file if there is one, then resolves `done`. */
  private release(): void {
    this.head.length = 0;
    this.tail.length = 0;
    this.gathered.length = 0;
    this.gatheredBytes = 0;
    this.unwritten.length = 0;
    this.queuedBytes = 0;
    this.unwrittenBytes = 0;
    const f = this.file;
    this.file = undefined;
    if (f) void f.handle.close().catch(() => undefined).then(this.resolveDone);
    else this.resolveDone();
  }

  private fail(err: Error, path: string | undefined): void {
    if (this.closed) return;
    this.hooks.onFileError(err, path);
    this.abort();
  }

  /**
   * Stops: the client or the upstream went away. The temp file is closed; a
   * paused upstream is resumed, what it still sends is dropped.
   */
  abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.release();
    if (this.pausedForMemory || this.pausedForDisk) {
      this.pausedForMemory = false;
      this.pausedForDisk = false;
      this.hooks.resumeUpstream();
    }
  }
}
