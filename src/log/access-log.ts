/**
 * The access log: each request's line, rendered by its compiled `log_format`
 * (`config/log-format.ts`), written to a sonic-boom stream per file; gzip
 * buffers (`ngx_http_log_gzip`) and files named by variables
 * (`ngx_http_log_script_write`, with `open_log_file_cache`) as nginx writes
 * them (`src/http/modules/ngx_http_log_module.c`).
 */
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { SonicBoom, writeBytes } from './sonic.js';
import type { AccessLogTarget } from '../config/route-table.js';
import type { OpenLogFileCacheDef } from '../config/modules/log.js';
import type { RequestView } from '../config/request-view.js';
import { systemErrorText } from '../os-errors.js';
import type { LogLevel } from '../log-levels.js';

/** What writing to an access-log file needs of its target (an http `access_log` or a stream one). */
export type LogFileTarget = Pick<AccessLogTarget, 'path' | 'gzipLevel' | 'bufferBytes' | 'flushMs'>;

/** Where the access log reports a file it could not write: the request's error log. */
export type AccessLogErrorSink = (level: LogLevel, message: string) => void;

/**
 * A `gzip` access-log buffer (`ngx_http_log_buf_t` with `gzip`): lines are
 * kept until the next would not fit, the flush timer fires, or the log is
 * reopened or closed; each flush is one gzip member, compressed with the
 * window nginx sizes to the data (`ngx_http_log_gzip`).
 */
class GzipLogBuffer {
  private readonly pending: Buffer[] = [];
  private pendingBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(readonly stream: SonicBoom, private readonly target: LogFileTarget) {}

  write(line: string): void {
    const bytes = Buffer.from(line, 'latin1');
    if (this.pendingBytes + bytes.length > this.target.bufferBytes) this.flush();
    // a line longer than the buffer is written on its own
    if (bytes.length > this.target.bufferBytes) {
      this.stream.write(this.compress(bytes) as unknown as string);
      return;
    }
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.target.flushMs > 0 && !this.timer) this.timer = setTimeout(() => this.flush(), this.target.flushMs).unref();
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pendingBytes === 0) return;
    const data = Buffer.concat(this.pending, this.pendingBytes);
    this.pending.length = 0;
    this.pendingBytes = 0;
    this.stream.write(this.compress(data) as unknown as string);
  }

  private compress(data: Buffer): Buffer {
    let windowBits = 15;
    let memLevel = 8;
    while (data.length < (1 << (windowBits - 1)) - 262 && windowBits > 9) {
      windowBits--;
      memLevel--;
    }
    return gzipSync(data, { level: this.target.gzipLevel, windowBits, memLevel });
  }
}

/** A file descriptor of `open_log_file_cache` (`ngx_cached_open_file_t`). */
interface CachedLogFile {
  fd: number | undefined;
  uses: number;
  accessedMs: number;
  openedMs: number;
}

/**
 * The descriptors of log files named by variables (`ngx_open_file_cache`):
 * at most `maxFiles` entries, the least recently written dropped first; a
 * descriptor is kept once its file was written `minUses` times and used
 * without looking at the name again for `validMs`; entries not written for
 * `inactiveMs` are closed.
 */
class LogFileCache {
  private readonly files = new Map<string, CachedLogFile>();

  constructor(private readonly def: OpenLogFileCacheDef) {}

  /** Appends `bytes` to `path`; throws the error of `open()`. */
  write(path: string, bytes: Buffer): void {
    const now = Date.now();
    this.expire(now);
    let file = this.files.get(path);
    if (file) {
      this.files.delete(path);
      file.uses++;
      if (file.fd !== undefined && now - file.openedMs >= this.def.validMs) {
        closeSync(file.fd);
        file.fd = undefined;
      }
    }
    if (file?.fd === undefined) {
      // (an entry whose file can no longer be opened is dropped: ngx_open_cached_file's `failed`)
      const fd = openSync(path, 'a', 0o644);
      if (!file) {
        if (this.files.size >= this.def.maxFiles) this.drop(this.files.keys().next().value!);
        file = { fd: undefined, uses: 1, accessedMs: now, openedMs: now };
      }
      file.fd = fd;
      file.openedMs = now;
    }
    file.accessedMs = now;
    this.files.set(path, file);
    try {
      writeSync(file.fd!, bytes);
    } finally {
      // ngx_close_cached_file: a file used fewer than min_uses times is not kept open
      if (file.uses < this.def.minUses) {
        closeSync(file.fd!);
        file.fd = undefined;
      }
    }
  }

  close(): void {
    for (const path of [...this.files.keys()]) this.drop(path);
  }

  private expire(now: number): void {
    for (const [path, file] of this.files) {
      if (now - file.accessedMs <= this.def.inactiveMs) break;
      this.drop(path);
    }
  }

  private drop(path: string): void {
    const file = this.files.get(path);
    if (file?.fd !== undefined) closeSync(file.fd);
    this.files.delete(path);
  }
}

/** The open access-log files of a running configuration. */
export class AccessLogFiles {
  private readonly streams = new Map<string, SonicBoom>();
  private readonly gzipBuffers = new Map<string, GzipLogBuffer>();
  private readonly fileCaches = new Map<OpenLogFileCacheDef, LogFileCache>();

  private stream(t: LogFileTarget): SonicBoom {
    let s = this.streams.get(t.path);
    if (!s) {
      const minLength = t.gzipLevel === 0 ? t.bufferBytes : 0;
      // (sonic-boom wants its largest write above the buffered length)
      s = new SonicBoom({
        dest: t.path, append: true, mkdir: false, minLength, maxWrite: Math.max(16_384, minLength + 1),
        periodicFlush: minLength > 0 ? t.flushMs : 0, contentMode: 'buffer',
      });
      this.streams.set(t.path, s);
    }
    return s;
  }

  private gzipBuffer(t: LogFileTarget): GzipLogBuffer {
    let b = this.gzipBuffers.get(t.path);
    if (!b) this.gzipBuffers.set(t.path, (b = new GzipLogBuffer(this.stream(t), t)));
    return b;
  }

  /**
   * Opens every target's file now (as nginx does at start), so that a bad
   * path fails the start, not the first request; names with variables are
   * opened per line.
   * @throws Error with the system error of the first file that cannot be opened
   */
  open(targets: readonly (LogFileTarget & { readonly pathValue: unknown })[]): void {
    for (const t of targets) {
      if (t.pathValue) continue;
      touchForAppend(t.path);
      if (t.gzipLevel > 0) this.gzipBuffer(t);
      else this.stream(t);
    }
  }

  /**
   * Writes the request's line to each target whose `if=` condition holds;
   * `onError` gets what nginx logs when a file named by variables cannot be
   * written.
   */
  write(targets: readonly AccessLogTarget[], r: RequestView, onError: AccessLogErrorSink): void {
    for (const t of targets) {
      if (t.condition) {
        const c = t.condition.evaluate(r);
        if (c === '' || c === '0') continue;
      }
      const line = t.format.render(r) + '\n';
      if (t.pathValue) this.writeNamed(t, r, line, onError);
      else if (t.gzipLevel > 0) this.gzipBuffer(t).write(line);
      else writeBytes(this.stream(t), line);
    }
  }

  /**
   * Writes a line rendered already to a target's file (the stream module's
   * `ngx_stream_log_write`), through its buffer or gzip buffer.
   */
  writeLine(t: LogFileTarget, line: string): void {
    if (t.gzipLevel > 0) this.gzipBuffer(t).write(line);
    else writeBytes(this.stream(t), line);
  }

  /**
   * `ngx_http_log_script_write`: the document root must be a directory
   * (`testing "…" existence failed`, and the line is dropped), then the
   * file the value names is opened, written and closed, or kept open by
   * `open_log_file_cache` (`open() "…" failed` at level crit).
   */
  private writeNamed(t: AccessLogTarget, r: RequestView, line: string, onError: AccessLogErrorSink): void {
    const root = r.documentRoot();
    let failure: unknown;
    try {
      if (!statSync(root).isDirectory()) failure = Object.assign(new Error('ENOTDIR'), { code: 'ENOTDIR' });
    } catch (err) {
      failure = err;
    }
    if (failure) {
      onError('error', `testing "${root}" existence failed (${systemErrorText(failure)})`);
      return;
    }
    const path = t.pathValue!.evaluate(r);
    const bytes = Buffer.from(line, 'latin1');
    const cache = t.openFileCache && this.fileCache(t.openFileCache);
    try {
      if (cache) cache.write(path, bytes);
      else {
        const fd = openSync(path, 'a', 0o644);
        try {
          writeSync(fd, bytes);
        } finally {
          closeSync(fd);
        }
      }
    } catch (err) {
      onError('crit', `open() "${path}" failed (${systemErrorText(err)})`);
    }
  }

  private fileCache(def: OpenLogFileCacheDef): LogFileCache {
    let cache = this.fileCaches.get(def);
    if (!cache) this.fileCaches.set(def, (cache = new LogFileCache(def)));
    return cache;
  }

  /** `USR1`: pending gzip buffers written, files reopened, cached descriptors closed. */
  reopen(): void {
    for (const b of this.gzipBuffers.values()) b.flush();
    for (const s of this.streams.values()) s.reopen();
    for (const c of this.fileCaches.values()) c.close();
  }

  /**
   * Closes every file once the lines written so far are in it, in order:
   * `end()` lets a write in flight finish, then writes the rest (a
   * `flushSync()` during a write would put the lines queued behind it first).
   */
  close(): void {
    for (const b of this.gzipBuffers.values()) b.flush();
    this.gzipBuffers.clear();
    for (const s of this.streams.values()) s.end();
    this.streams.clear();
    for (const c of this.fileCaches.values()) c.close();
    this.fileCaches.clear();
  }
}

/** Opens and closes a file for appending, so that a missing directory is reported at start. */
function touchForAppend(path: string): void {
  closeSync(openSync(path, 'a'));
}
