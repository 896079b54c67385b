/**
 * The file of one cache entry. nginx writes a binary header
 * (`ngx_http_file_cache_header_t`), `KEY: …`, then the upstream's response
 * header and body; jinx writes its own header, with the same facts, then the
 * body as the upstream sent it:
 *
 *     JINXCACHE 3 <length of the JSON, 10 digits> <validity, 12 digits> <updating, 10 digits> <error, 10 digits>\n
 *     {"key":…,"dateSec":…,"status":…,"reason":…,"headers":[…],"upstreamHeaders":[…],
 *      "lastModified":…,"etag":…}\n
 *     <body>
 *
 * The validity (seconds since the epoch) and how long past it the entry
 * may still be sent (`stale-while-revalidate=`, `stale-if-error=`) have a
 * fixed width in the first line, so that a revalidation rewrites only that
 * line (`ngx_http_file_cache_update_header`). Entries of version 2 (the
 * validity alone) are read as ones without those two.
 *
 * `headers` are those the client gets before the headers module
 * (`add_header`) runs; `upstreamHeaders` as received, for `$upstream_http_*`.
 */
import { closeSync, fstatSync, openSync, read, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { workerReadBuffer } from '../file-read-buffer.js';

/**
 * How long an entry is fresh, and how long after that it may still be sent
 * (nginx's `valid_sec`, `updating_sec`, `error_sec`).
 */
export interface EntryValidity {
  /** Until when (seconds since the epoch) the entry is fresh. */
  readonly validSec: number;
  /** Seconds past `validSec` during which it is sent while it is updated (`stale-while-revalidate=`). */
  readonly updatingSec: number;
  /** Seconds past `validSec` during which it is sent when the upstream fails (`stale-if-error=`, else `stale-while-revalidate=`). */
  readonly errorSec: number;
}

/** What an entry's header says. */
export interface EntryHead extends EntryValidity {
  readonly key: string;
  /** When the response was stored (seconds since the epoch). */
  readonly dateSec: number;
  readonly status: number;
  readonly reason: string;
  readonly headers: readonly [string, string | string[]][];
  readonly upstreamHeaders: readonly string[];
  /** `Last-Modified` and `ETag` of a 200/206 entry, for `proxy_cache_revalidate`. */
  readonly lastModified: string | undefined;
  readonly etag: string | undefined;
  /**
   * The request's values of the headers the response's `Vary` names, when it
   * has one: a request whose values differ is not answered from the entry.
   */
  readonly variant: string | undefined;
}

/** An entry's header as read back: its first line's length, where its body starts in the file and the whole file's size. */
export interface ReadEntryHead extends EntryHead {
  readonly firstLineBytes: number;
  readonly bodyOffset: number;
  readonly fileBytes: number;
}

/** The first line of version 3: the magic, the JSON's length and the validity, fixed width. */
const FIRST_LINE_BYTES = 'JINXCACHE 3 '.length + 10 + 1 + 12 + 1 + 10 + 1 + 10 + 1;
/** The first line of version 2, without the updating and error seconds. */
const V2_FIRST_LINE_BYTES = 'JINXCACHE 2 '.length + 10 + 1 + 12 + 1;

/** The first line of an entry; of version 2 when `firstLineBytes` says the file has one (its validity alone is rewritten). */
function firstLine(jsonBytes: number, v: EntryValidity, firstLineBytes = FIRST_LINE_BYTES): Buffer {
  const pad = (n: number, width: number): string => String(Math.max(0, Math.floor(n))).padStart(width, '0');
  const line = firstLineBytes === V2_FIRST_LINE_BYTES
    ? `JINXCACHE 2 ${pad(jsonBytes, 10)} ${pad(v.validSec, 12)}\n`
    : `JINXCACHE 3 ${pad(jsonBytes, 10)} ${pad(v.validSec, 12)} ${pad(v.updatingSec, 10)} ${pad(v.errorSec, 10)}\n`;
  return Buffer.from(line, 'latin1');
}

/** Encodes an entry's header. */
export function encodeEntryHead(head: EntryHead): Buffer {
  const { validSec, updatingSec, errorSec, ...rest } = head;
  const json = Buffer.from(`${JSON.stringify(rest)}\n`, 'utf8');
  return Buffer.concat([firstLine(json.length, { validSec, updatingSec, errorSec }), json]);
}

/** Rewrites the validity of an entry in its file, open for writing (`ngx_http_file_cache_update_header`). */
export async function updateEntryValidity(fh: FileHandle, head: ReadEntryHead, validity: EntryValidity): Promise<void> {
  await fh.write(firstLine(head.bodyOffset - head.firstLineBytes, validity, head.firstLineBytes), 0, head.firstLineBytes, 0);
}

/** What an entry's first line says. */
interface FirstLine extends EntryValidity {
  readonly firstLineBytes: number;
  readonly jsonBytes: number;
}

/** The figures of an entry's first line (version 3 or 2); undefined when it is not one. */
function readFirstLine(first: Buffer): FirstLine | undefined {
  const text = first.toString('latin1', 0, Math.min(first.length, FIRST_LINE_BYTES));
  const m = /^JINXCACHE 3 (\d{10}) (\d{12}) (\d{10}) (\d{10})\n/.exec(text);
  if (m && Number(m[1]) > 0) {
    return { firstLineBytes: FIRST_LINE_BYTES, jsonBytes: Number(m[1]), validSec: Number(m[2]), updatingSec: Number(m[3]), errorSec: Number(m[4]) };
  }
  const v2 = /^JINXCACHE 2 (\d{10}) (\d{12})\n/.exec(text);
  if (!v2 || Number(v2[1]) <= 0) return undefined;
  return { firstLineBytes: V2_FIRST_LINE_BYTES, jsonBytes: Number(v2[1]), validSec: Number(v2[2]), updatingSec: 0, errorSec: 0 };
}

/** An entry's header from its first line and its JSON; undefined when the JSON is damaged. */
function decodeEntryHead(json: Buffer, line: FirstLine, fileBytes: number): ReadEntryHead | undefined {
  let rest: Omit<EntryHead, keyof EntryValidity>;
  try {
    rest = JSON.parse(json.toString('utf8')) as Omit<EntryHead, keyof EntryValidity>;
  } catch {
    return undefined;
  }
  if (typeof rest.key !== 'string') return undefined;
  const { firstLineBytes, jsonBytes, validSec, updatingSec, errorSec } = line;
  return { ...rest, validSec, updatingSec, errorSec, firstLineBytes, bodyOffset: firstLineBytes + jsonBytes, fileBytes };
}

/** Whether two validities are the same. */
function sameValidity(a: EntryValidity, b: EntryValidity): boolean {
  return a.validSec === b.validSec && a.updatingSec === b.updatingSec && a.errorSec === b.errorSec;
}

/**
 * Reads an entry file's header from its open handle; undefined when the
 * file is not an entry (another version, or damaged). For the loader and
 * revalidation; a request opens an entry with `EntryFile.open`.
 * @throws the file system's error
 */
export async function readEntryHead(fh: FileHandle): Promise<ReadEntryHead | undefined> {
  const { size } = await fh.stat();
  const first = Buffer.alloc(FIRST_LINE_BYTES);
  const { bytesRead } = await fh.read(first, 0, FIRST_LINE_BYTES, 0);
  const line = readFirstLine(first.subarray(0, bytesRead));
  if (!line || line.firstLineBytes + line.jsonBytes > size) return undefined;
  const json = Buffer.alloc(line.jsonBytes);
  await fh.read(json, 0, line.jsonBytes, line.firstLineBytes);
  return decodeEntryHead(json, line, size);
}

/**
 * An entry's header as read from one file (its inode, size and mtime): a
 * later open of the same file takes the header from here instead of
 * parsing its JSON again, and only the validity from the first line (the
 * one part a revalidation rewrites, which changes the mtime anyway).
 */
export interface KnownHead {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly head: ReadEntryHead;
}

/** Bytes of an entry file read at once when it is opened: its header and, for a small entry, the whole body. */
const FIRST_READ_BYTES = 32 * 1024;

/**
 * An entry file open for a request: its header, read with the file's first
 * block, and its body, read from that block as far as it went, then from
 * the file. Opening and the first block are read synchronously, as nginx
 * reads a cache file without `aio`: a HIT of a small entry costs one open,
 * one read and one close, and no thread-pool round trip for each; the rest
 * of a larger body is read as the client takes it, in the worker too
 * unless the location has `aio threads` (then in node's thread pool).
 */
export class EntryFile {
  private constructor(
    readonly head: ReadEntryHead,
    /** The header with the file it was read from, for the next open (`known`). */
    readonly known: KnownHead,
    private readonly fd: number,
    /** The file's first block (header and the body's start). */
    private readonly block: Buffer,
  ) {}

  /**
   * Opens the entry file at `path`; undefined when it is not an entry
   * (another version, damaged, cut short). `known`: what an earlier open
   * of the key's file read, reused if it is still the same file.
   * @throws the file system's error (ENOENT when there is none)
   */
  static open(path: string, known: KnownHead | undefined): EntryFile | undefined {
    const fd = openSync(path, 'r');
    try {
      const { ino, size, mtimeMs } = fstatSync(fd);
      const block = Buffer.allocUnsafe(Math.min(size, FIRST_READ_BYTES));
      const n = readSync(fd, block, 0, block.length, 0);
      const line = readFirstLine(block.subarray(0, n));
      if (!line || line.firstLineBytes + line.jsonBytes > size) {
        closeSync(fd);
        return undefined;
      }
      let head: ReadEntryHead | undefined;
      if (known && known.ino === ino && known.size === size && known.mtimeMs === mtimeMs) {
        const { validSec, updatingSec, errorSec } = line;
        head = sameValidity(known.head, line) ? known.head : { ...known.head, validSec, updatingSec, errorSec };
      } else {
        const headBytes = line.firstLineBytes + line.jsonBytes;
        let json: Buffer;
        if (headBytes <= n) json = block.subarray(line.firstLineBytes, headBytes);
        else {
          json = Buffer.allocUnsafe(line.jsonBytes);
          readSync(fd, json, 0, line.jsonBytes, line.firstLineBytes);
        }
        head = decodeEntryHead(json, line, size);
      }
      if (!head) {
        closeSync(fd);
        return undefined;
      }
      return new EntryFile(head, { ino, size, mtimeMs, head }, fd, block.subarray(0, n));
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  /**
   * Up to `length` bytes of the file from `position`: from the first block
   * when it holds them, else read from the file (empty at its end).
   * @throws the file system's error
   */
  async read(position: number, length: number): Promise<Buffer> {
    if (position < this.block.length) return this.block.subarray(position, Math.min(this.block.length, position + length));
    const buf = Buffer.allocUnsafe(length);
    const n = await new Promise<number>((res, rej) => read(this.fd, buf, 0, length, position, (err, bytes) => (err ? rej(err) : res(bytes))));
    return n === length ? buf : buf.subarray(0, n);
  }

  /**
   * The same read in the worker (`aio off`, as nginx reads a cache file
   * without aio), into the worker's read buffer (`workerReadBuffer`): write
   * the bytes before anything else runs, then call `wroteReadBuffer`.
   * @throws the file system's error
   */
  readInWorker(position: number, length: number): Buffer {
    if (position < this.block.length) return this.block.subarray(position, Math.min(this.block.length, position + length));
    const buf = workerReadBuffer(length);
    return buf.subarray(0, readSync(this.fd, buf, 0, length, position));
  }

  close(): void {
    closeSync(this.fd);
  }
}
