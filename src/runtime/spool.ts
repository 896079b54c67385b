/**
 * Buffering of an upstream response on its way to a slower client, as
 * nginx's event pipe does with `proxy_buffering on` (`src/event/ngx_event_pipe.c`):
 * the upstream is read as fast as it sends; what the client has not taken
 * yet is kept in memory up to the size of `proxy_buffers`, and beyond that
 * written to one temporary file (logged once: `an upstream response is
 * buffered to a temporary file PATH`), which is then sent from disk. With
 * `proxy_buffering off`, or when `proxy_max_temp_file_size` is reached, the
 * upstream is paused instead until the client catches up.
 *
 * With buffering, the body reaches the client in whole buffers, as the event
 * pipe passes on only filled ones (`ngx_event_pipe_read_upstream`): the first
 * is what is left of the header buffer (`proxy_buffer_size`) after the
 * header, the next ones are `proxy_buffers`-sized; a partly filled buffer
 * waits for more data or the end of the response, so a response cut in the
 * middle loses it.
 */
import type { ResponseTarget } from './exchange.js';
import type { TempFile, TempFiles, TempPath } from './temp-files.js';

/** How a response may be buffered. */
export interface SpoolSettings {
  readonly buffering: boolean;
  /** Size of one memory buffer (`proxy_buffers` size). */
  readonly bufferBytes: number;
  /** Bytes kept in memory for the client before spooling (`proxy_buffers` number × size). */
  readonly memoryBytes: number;
  readonly tempPath: TempPath;
  /** Largest temp file (`proxy_max_temp_file_size`); 0 disables temp files. */
  readonly maxTempFileBytes: number;
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

const READ_CHUNK_BYTES = 64 * 1024;

/** Moves one response body from the upstream to the client. */
export class ResponseSpool {
  /** Chunks to send before the temp file's data, and chunks that arrived after it was full. */
  private readonly head: Buffer[] = [];
  private readonly tail: Buffer[] = [];
  private queuedBytes = 0;
  private file: TempFile | undefined;
  private fileCreating: Promise<TempFile | undefined> | undefined;
  /** Bytes appended to the file, bytes confirmed written, bytes read back. */
  private fileAppended = 0;
  private fileWritten = 0;
  private fileRead = 0;
  private writes: Promise<void> = Promise.resolve();
  private pumping = false;
  private upstreamDone = false;
  /** Set by `endCut`: the response ends by closing the connection. */
  private cut = false;
  private paused = false;
  private closed = false;
  private resolveDone: () => void = () => undefined;
  /** Chunks of the buffer being filled (buffering only), and how many more bytes fill it. */
  private readonly filling: Buffer[] = [];
  private fillingBytes = 0;
  private room: number;
  /** Resolves once the body has been handed to the client and the response ended (or aborted). */
  readonly done = new Promise<void>((resolve) => {
    this.resolveDone = resolve;
  });

  /**
   * `headerBufferRoomBytes`: what the header left free of its buffer, the
   * room of the first body buffer.
   */
  constructor(
    private readonly out: ResponseTarget,
    private readonly settings: SpoolSettings,
    private readonly tempFiles: TempFiles,
    private readonly hooks: SpoolHooks,
    headerBufferRoomBytes: number,
  ) {
    this.room = headerBufferRoomBytes > 0 ? headerBufferRoomBytes : settings.bufferBytes;
  }

  private drainArmed = false;

  /** Pumps again when the client has taken its buffered data. */
  private armDrain(): void {
    if (this.drainArmed) return;
    this.drainArmed = true;
    this.out.onDrain(() => {
      this.drainArmed = false;
      this.pump();
    });
  }

  private get fileBacklog(): boolean {
    return this.fileCreating !== undefined || this.fileRead < this.fileAppended;
  }

  /** Takes one chunk from the upstream. */
  push(chunk: Buffer): void {
    if (this.closed) return;
    if (!this.settings.buffering) {
      this.forward(chunk);
      return;
    }
    this.filling.push(chunk);
    this.fillingBytes += chunk.length;
    if (this.fillingBytes < this.room) return;
    // pass on every filled buffer; the rest waits
    const unit = this.settings.bufferBytes;
    const full = this.room + Math.floor((this.fillingBytes - this.room) / unit) * unit;
    const all = this.filling.length === 1 ? this.filling[0]! : Buffer.concat(this.filling, this.fillingBytes);
    this.filling.length = 0;
    this.fillingBytes -= full;
    this.room = unit - this.fillingBytes;
    if (this.fillingBytes > 0) this.filling.push(all.subarray(full));
    this.forward(full === all.length ? all : all.subarray(0, full));
  }

  /** Passes body data on: to the client, a memory queue or the temp file. */
  private forward(chunk: Buffer): void {
    const memory = this.settings.memoryBytes;
    const idle = !this.fileBacklog && this.tail.length === 0;
    if (idle && this.head.length === 0 && this.out.bufferedBytes < memory) {
      if (!this.out.write(chunk)) this.armDrain();
      return;
    }
    if (idle && this.out.bufferedBytes + this.queuedBytes + chunk.length <= memory) {
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
    if (!this.paused) {
      this.paused = true;
      this.hooks.pauseUpstream();
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

  private append(chunk: Buffer): void {
    if (!this.file && !this.fileCreating) {
      const path = this.tempFiles.reserve(this.settings.tempPath);
      this.hooks.onTempFile(path);
      this.fileCreating = this.tempFiles.open(path, this.settings.tempPath).then((f) => {
        this.file = f;
        this.fileCreating = undefined;
        return f;
      }, (err: Error) => {
        this.fileCreating = undefined;
        this.fail(err);
        return undefined;
      });
    }
    const at = this.fileAppended;
    this.fileAppended += chunk.length;
    this.writes = this.writes.then(async () => {
      const f = this.file ?? (await this.fileCreating);
      if (!f || this.closed) return;
      await f.handle.write(chunk, 0, chunk.length, at);
      this.fileWritten = at + chunk.length;
      this.pump();
    }).catch((err: Error) => this.fail(err));
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

  /** The upstream has sent everything. */
  end(): void {
    if (this.closed) return;
    if (this.fillingBytes > 0) {
      const rest = this.filling.length === 1 ? this.filling[0]! : Buffer.concat(this.filling, this.fillingBytes);
      this.filling.length = 0;
      this.fillingBytes = 0;
      this.forward(rest);
    }
    this.upstreamDone = true;
    if (!this.pumping && this.head.length === 0 && this.tail.length === 0 && !this.file && !this.fileCreating) this.finish();
    else this.pump();
  }

  /** Sends what the client can take: queued chunks, the temp file, then chunks queued after it. */
  private pump(): void {
    if (this.pumping || this.closed) return;
    this.pumping = true;
    void this.pumpAsync().finally(() => {
      this.pumping = false;
      if (!this.closed && this.out.bufferedBytes < this.settings.memoryBytes && this.hasMore()) this.pump();
    });
  }

  private hasMore(): boolean {
    return this.head.length > 0 || this.fileRead < this.fileWritten || (!this.fileBacklog && this.tail.length > 0);
  }

  private async pumpAsync(): Promise<void> {
    for (;;) {
      if (this.closed) return;
      if (this.out.bufferedBytes >= this.settings.memoryBytes) {
        this.armDrain();
        return;
      }
      const next = this.head.shift();
      if (next) {
        this.queuedBytes -= next.length;
        this.out.write(next);
        this.maybeResume();
        continue;
      }
      if (this.file && this.fileRead < this.fileWritten) {
        const len = Math.min(READ_CHUNK_BYTES, this.fileWritten - this.fileRead);
        const buf = Buffer.allocUnsafe(len);
        let n: number;
        try {
          ({ bytesRead: n } = await this.file.handle.read(buf, 0, len, this.fileRead));
        } catch (err) {
          this.fail(err as Error);
          return;
        }
        this.fileRead += n;
        this.out.write(n === len ? buf : buf.subarray(0, n));
        continue;
      }
      if (!this.fileBacklog && this.tail.length > 0) {
        this.head.push(...this.tail.splice(0));
        continue;
      }
      if (this.upstreamDone && !this.fileBacklog) this.finish();
      return;
    }
  }

  private maybeResume(): void {
    if (this.paused && this.queuedBytes < this.settings.memoryBytes / 2) {
      this.paused = false;
      this.hooks.resumeUpstream();
    }
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.cut) this.out.abort('flush');
    else this.out.end();
    this.release();
  }

  /** Closes the temp file if there is one, then resolves `done`. */
  private release(): void {
    if (!this.file && !this.fileCreating) this.resolveDone();
    else void this.closeFile().then(this.resolveDone);
  }

  private fail(err: Error): void {
    if (this.closed) return;
    this.hooks.onFileError(err, this.file?.path);
    this.abort();
  }

  /** Stops: the client or the upstream went away. The temp file is closed. */
  abort(): void {
    if (this.closed) return;
    this.closed = true;
    this.head.length = 0;
    this.tail.length = 0;
    this.release();
  }

  private async closeFile(): Promise<void> {
    const f = this.file ?? (await this.fileCreating?.catch(() => undefined));
    this.file = undefined;
    await this.writes.catch(() => undefined);
    await f?.handle.close().catch(() => undefined);
  }
}
