/**
 * The file of one cache entry. nginx writes a binary header
 * (`ngx_http_file_cache_header_t`), `KEY: …`, then the upstream's response
 * header and body; jinx writes its own header, with the same facts, then the
 * body as the upstream sent it:
 *
 *     JINXCACHE 1 <length of the JSON>\n
 *     {"key":…,"validSec":…,"dateSec":…,"status":…,"reason":…,"headers":[…],"upstreamHeaders":[…],
 *      "lastModified":…,"etag":…}\n
 *     <body>
 *
 * `headers` are those the client gets before the headers module
 * (`add_header`) runs; `upstreamHeaders` as received, for `$upstream_http_*`.
 */
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
}

/** An entry's header as read back: where its body starts in the file and the whole file's size. */
export interface ReadEntryHead extends EntryHead {
  readonly bodyOffset: number;
  readonly fileBytes: number;
}

const MAGIC = 'JINXCACHE 1 ';
/** The longest first line: the magic and a length. */
const FIRST_LINE_MAX = 64;

/** Encodes an entry's header. */
export function encodeEntryHead(head: EntryHead): Buffer {
  const json = Buffer.from(`${JSON.stringify(head)}\n`, 'utf8');
  return Buffer.concat([Buffer.from(`${MAGIC}${json.length}\n`, 'latin1'), json]);
}

/**
 * Reads an entry file's header from its open handle; undefined when the
 * file is not an entry (another version, or damaged).
 * @throws the file system's error
 */
export async function readEntryHead(fh: FileHandle): Promise<ReadEntryHead | undefined> {
  const { size } = await fh.stat();
  const first = Buffer.alloc(FIRST_LINE_MAX);
  const { bytesRead } = await fh.read(first, 0, FIRST_LINE_MAX, 0);
  const text = first.subarray(0, bytesRead).toString('latin1');
  const nl = text.indexOf('\n');
  if (!text.startsWith(MAGIC) || nl === -1) return undefined;
  const jsonBytes = Number(text.slice(MAGIC.length, nl));
  if (!Number.isSafeInteger(jsonBytes) || jsonBytes <= 0 || nl + 1 + jsonBytes > size) return undefined;
  const json = Buffer.alloc(jsonBytes);
  await fh.read(json, 0, jsonBytes, nl + 1);
  let head: EntryHead;
  try {
    head = JSON.parse(json.toString('utf8')) as EntryHead;
  } catch {
    return undefined;
  }
  if (typeof head.key !== 'string' || typeof head.validSec !== 'number') return undefined;
  return { ...head, bodyOffset: nl + 1 + jsonBytes, fileBytes: size };
}
