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

/**
 * Reads an entry file's header from its open handle; undefined when the
 * file is not an entry (another version, or damaged).
 * @throws the file system's error
 */
export async function readEntryHead(fh: FileHandle): Promise<ReadEntryHead | undefined> {
  const { size } = await fh.stat();
  const first = Buffer.alloc(FIRST_LINE_BYTES);
  const { bytesRead } = await fh.read(first, 0, FIRST_LINE_BYTES, 0);
  const m = /^JINXCACHE 2 (\d{10}) (\d{12})\n$/.exec(first.subarray(0, bytesRead).toString('latin1'));
  if (!m) return undefined;
  const jsonBytes = Number(m[1]);
  const validSec = Number(m[2]);
  if (jsonBytes <= 0 || FIRST_LINE_BYTES + jsonBytes > size) return undefined;
  const json = Buffer.alloc(jsonBytes);
  await fh.read(json, 0, jsonBytes, FIRST_LINE_BYTES);
  let rest: Omit<EntryHead, 'validSec'>;
  try {
    rest = JSON.parse(json.toString('utf8')) as Omit<EntryHead, 'validSec'>;
  } catch {
    return undefined;
  }
  if (typeof rest.key !== 'string') return undefined;
  const head: EntryHead = { ...rest, validSec };
  return { ...head, bodyOffset: FIRST_LINE_BYTES + jsonBytes, fileBytes: size };
}
