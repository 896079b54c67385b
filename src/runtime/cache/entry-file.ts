/**
 * The file of one cache entry. nginx writes a binary header
 * (`ngx_http_file_cache_header_t`), `KEY: …`, then the upstream's response
 * header and body; jinx writes its own header, with the same facts, then the
 * body as the upstream sent it:
 *
 *     JINXCACHE 2 <length of the JSON, 10 digits> <validity, 12 digits>\n
 *     {"key":…,"dateSec":…,"status":…,"reason":…,"headers":[…],"upstreamHeaders":[…],
 *      "lastModified":…,"etag":…}\n
 *     <body>
 *
 * The validity (seconds since the epoch) has a fixed width in the first
 * line, so that a revalidation rewrites only that line
 * (`ngx_http_file_cache_update_header`).
 *
 * `headers` are those the client gets before the headers module
 * (`add_header`) runs; `upstreamHeaders` as received, for `$upstream_http_*`.
 */
import { closeSync, fstatSync, openSync, read, readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

/** What an entry's header says. */
export interface EntryHead {
  readonly key: string;
  /** Until when (seconds since the epoch) the entry is fresh. */
  readonly validSec: number;
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

/** An entry's header as read back: where its body starts in the file and the whole file's size. */
export interface ReadEntryHead extends EntryHead {
  readonly bodyOffset: number;
  readonly fileBytes: number;
}

const MAGIC = 'JINXCACHE 2 ';
/** The first line: the magic, the JSON's length and the validity, fixed width. */
const FIRST_LINE_BYTES = MAGIC.length + 10 + 1 + 12 + 1;

function firstLine(jsonBytes: number, validSec: number): Buffer {
  return Buffer.from(`${MAGIC}${String(jsonBytes).padStart(10, '0')} ${String(validSec).padStart(12, '0')}\n`, 'latin1');
}

/** Encodes an entry's header. */
export function encodeEntryHead(head: EntryHead): Buffer {
  const { validSec, ...rest } = head;
  const json = Buffer.from(`${JSON.stringify(rest)}\n`, 'utf8');
  return Buffer.concat([firstLine(json.length, validSec), json]);
}

/** Rewrites the validity of an entry in its file, open for writing (`ngx_http_file_cache_update_header`). */
export async function updateEntryValidity(fh: FileHandle, head: ReadEntryHead, validSec: number): Promise<void> {
  await fh.write(firstLine(head.bodyOffset - FIRST_LINE_BYTES, validSec), 0, FIRST_LINE_BYTES, 0);
}

/** The JSON's length and the validity in an entry's first line; undefined when it is not one. */
function readFirstLine(first: Buffer): { jsonBytes: number; validSec: number } | undefined {
  const m = /^JINXCACHE 2 (\d{10}) (\d{12})\n$/.exec(first.toString('latin1', 0, Math.min(first.length, FIRST_LINE_BYTES)));
  if (!m || Number(m[1]) <= 0) return undefined;
  return { jsonBytes: Number(m[1]), validSec: Number(m[2]) };
}

/** An entry's header from its first line's figures and its JSON; undefined when the JSON is damaged. */
function decodeEntryHead(json: Buffer, jsonBytes: number, validSec: number, fileBytes: number): ReadEntryHead | undefined {
  let rest: Omit<EntryHead, 'validSec'>;
  try {
    rest = JSON.parse(json.toString('utf8')) as Omit<EntryHead, 'validSec'>;
  } catch {
    return undefined;
  }
  if (typeof rest.key !== 'string') return undefined;
  return { ...rest, validSec, bodyOffset: FIRST_LINE_BYTES + jsonBytes, fileBytes };
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
  if (!line || FIRST_LINE_BYTES + line.jsonBytes > size) return undefined;
  const json = Buffer.alloc(line.jsonBytes);
  await fh.read(json, 0, line.jsonBytes, FIRST_LINE_BYTES);
  return decodeEntryHead(json, line.jsonBytes, line.validSec, size);
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
 * of a larger body is read asynchronously, as the client takes it.
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
      if (!line || FIRST_LINE_BYTES + line.jsonBytes > size) {
        closeSync(fd);
        return undefined;
      }
      let head: ReadEntryHead | undefined;
      if (known && known.ino === ino && known.size === size && known.mtimeMs === mtimeMs) {
        head = known.head.validSec === line.validSec ? known.head : { ...known.head, validSec: line.validSec };
      } else {
        const headBytes = FIRST_LINE_BYTES + line.jsonBytes;
        let json: Buffer;
        if (headBytes <= n) json = block.subarray(FIRST_LINE_BYTES, headBytes);
        else {
          json = Buffer.allocUnsafe(line.jsonBytes);
          readSync(fd, json, 0, line.jsonBytes, FIRST_LINE_BYTES);
        }
        head = decodeEntryHead(json, line.jsonBytes, line.validSec, size);
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

  close(): void {
    closeSync(this.fd);
  }
}
