/**
 * Cropping an MP4 file to a time span, as nginx's MP4 module does
 * (`ngx_http_mp4_process` and the atom readers and updaters of
 * `src/http/modules/ngx_http_mp4_module.c`): the file's atoms are read
 * through a buffer of `mp4_buffer_size` bytes (the `moov` atom whole, up to
 * `mp4_max_buffer_size`), the sample tables of each track (`stts`, `stss`,
 * `ctts`, `stsc`, `stsz`, `stco`/`co64`) are cut to the samples from the
 * start time to the end time, the durations (`mvhd`, `tkhd`, `mdhd`) and the
 * atom sizes updated and the chunk offsets moved to where the samples will
 * be. The answer is `ftyp`, the new `moov` and an `mdat` header, then a
 * range of the file. The checks are nginx 1.30's, which refuses more than
 * older releases did: a sync sample 0, chunks out of order or a chunk 0 in
 * `stsc`, a start at the last sample or chunk, no data between the start
 * and the end.
 *
 * The port keeps nginx's memory model where it shows in the answer: the
 * atoms are changed in place in the buffer they were read into, each piece
 * of the answer is a view (`Piece`, nginx's `ngx_buf_t`) on that buffer, and
 * counters have the width of nginx's (32-bit sample and chunk numbers,
 * 64-bit times), so that malformed files are cut, or refused, as nginx
 * cuts and refuses them.
 */
import type { FileHandle } from 'node:fs/promises';
import type { Mp4Conf } from '../../config/modules/mp4.js';
import { systemErrorText } from '../../os-errors.js';

/** A failure nginx logs (at `level`, with `message`) and answers with 500 (`NGX_ERROR`). */
export class Mp4Error extends Error {
  readonly code = 'mp4-error';
  constructor(readonly level: 'error' | 'crit', message: string) {
    super(message);
  }
}

/** What `cropMp4` made of a file. */
export type Mp4Crop =
  /** The file goes out as it is (`NGX_DECLINED`: its `moov` is before its `mdat` and the whole movie is asked for). */
  | { readonly kind: 'whole' }
  /**
   * `header` (`ftyp`, `moov`, the `mdat` header), then the file's bytes from
   * `fileStart` to `fileEnd`. `zeroSizeAt`: where in `header` nginx's answer
   * has an empty buffer (a track's table cut to nothing), which nginx's
   * output chain logs as `zero size buf in output` when it sends it.
   */
  | { readonly kind: 'cropped'; readonly header: Buffer; readonly zeroSizeAt: readonly number[]; readonly fileStart: number; readonly fileEnd: number };

/** The time span asked for, in milliseconds (`mp4->start`, `mp4->length`; a length of 0 is "to the end"). */
export interface Mp4Span {
  readonly startMs: bigint;
  readonly lengthMs: bigint;
}

/** nginx's `NGX_MAX_INT_T_VALUE` (and `NGX_MAX_OFF_T_VALUE`) on a 64-bit system. */
const MAX_INT = (1n << 63n) - 1n;

/**
 * `ngx_http_mp4_atofp`: a number of seconds with `point` digits of fraction
 * kept (more digits are ignored, as Flash players send them) as an integer
 * in units of 10^-point s; -1 for an empty value, a character other than
 * digits and one dot, or a value beyond nginx's `ngx_int_t`.
 */
export function mp4Atofp(text: string, point: number): bigint {
  if (text.length === 0) return -1n;
  const cutoff = MAX_INT / 10n;
  const cutlim = MAX_INT % 10n;
  let dot = false;
  let left = point;
  let value = 0n;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      if (dot) return -1n;
      dot = true;
      continue;
    }
    if (c < 0x30 || c > 0x39) return -1n;
    if (left === 0) continue;
    const digit = BigInt(c - 0x30);
    if (value >= cutoff && (value > cutoff || digit > cutlim)) return -1n;
    value = value * 10n + digit;
    if (dot) left--;
  }
  for (; left > 0; left--) {
    if (value > cutoff) return -1n;
    value *= 10n;
  }
  return value;
}

// The pieces of a track's answer, in the order they go out (nginx's NGX_HTTP_MP4_*_ATOM/DATA).
const TRAK = 0;
const TKHD = 1;
const EDTS = 2;
const ELST = 3;
const MDIA = 4;
const MDHD = 5;
const HDLR = 6;
const MINF = 7;
const VMHD = 8;
const SMHD = 9;
const DINF = 10;
const STBL = 11;
const STSD = 12;
const STTS_ATOM = 13;
const STTS_DATA = 14;
const STSS_ATOM = 15;
const STSS_DATA = 16;
const CTTS_ATOM = 17;
const CTTS_DATA = 18;
const STSC_ATOM = 19;
const STSC_START = 20;
const STSC_DATA = 21;
const STSC_END = 22;
const STSZ_ATOM = 23;
const STSZ_DATA = 24;
const STCO_ATOM = 25;
const STCO_DATA = 26;
const CO64_ATOM = 27;
const CO64_DATA = 28;
const PIECES = 29;

/** `NGX_HTTP_MP4_MOOV_BUFFER_EXCESS`: what the buffer keeps past a `moov` read before the `mdat`, for the atoms after it. */
const MOOV_BUFFER_EXCESS = 4 * 1024;

/** A part of the answer: bytes `pos` to `last` of `mem`, both moved as tables are cut (nginx's `ngx_buf_t` of memory). */
class Piece {
  constructor(readonly mem: Buffer, public pos: number, public last: number) {}
}

// Big-endian fields as nginx's ngx_mp4_get/set_*value read and write them; a
// field outside the memory (a table cut past its end, in a malformed file)
// reads as 0 and is not written.
const get32 = (b: Buffer, at: number): number => (at >= 0 && at + 4 <= b.length ? b.readUInt32BE(at) : 0);
const get64 = (b: Buffer, at: number): bigint => (at >= 0 && at + 8 <= b.length ? b.readBigUInt64BE(at) : 0n);
const set16 = (b: Buffer, at: number, n: number): void => {
  if (at >= 0 && at + 2 <= b.length) b.writeUInt16BE(n & 0xffff, at);
};
const set32 = (b: Buffer, at: number, n: number | bigint): void => {
  if (at >= 0 && at + 4 <= b.length) b.writeUInt32BE(typeof n === 'bigint' ? Number(BigInt.asUintN(32, n)) : n >>> 0, at);
};
const set64 = (b: Buffer, at: number, n: bigint): void => {
  if (at >= 0 && at + 8 <= b.length) b.writeBigUInt64BE(BigInt.asUintN(64, n), at);
};
const setName = (b: Buffer, at: number, name: string): void => {
  if (at >= 0 && at + 8 <= b.length) b.write(name, at + 4, 4, 'latin1');
};
/** `a * b` in 32 bits, as nginx multiplies two `uint32_t`. */
const mul32 = (a: number, b: number): number => Math.imul(a, b) >>> 0;
/** A product in 64 bits, as nginx multiplies into a `uint64_t`. */
const mul64 = (a: bigint, b: bigint): bigint => BigInt.asUintN(64, a * b);

/** One track (`ngx_http_mp4_trak_t`): its counts, where its cut falls, and its pieces. */
class Trak {
  timescale = 0;
  timeToSampleEntries = 0;
  sampleToChunkEntries = 0;
  syncSamplesEntries = 0;
  compositionOffsetEntries = 0;
  sampleSizesEntries = 0;
  chunks = 0;
  startSample = 0;
  endSample = 0;
  startChunk = 0;
  endChunk = 0;
  startChunkSamples = 0;
  endChunkSamples = 0;
  startChunkSamplesSize = 0;
  endChunkSamplesSize = 0;
  /** The media duration (`mdhd`'s timescale), cut. */
  duration = 0n;
  /** The media time before the start time that a key frame start adds (`mp4_start_key_frame`). */
  prefix = 0n;
  /** The track's duration in the movie's timescale (`tkhd`), cut. */
  movieDuration = 0n;
  startOffset = 0;
  endOffset = 0;
  tkhdSize = 0;
  mdhdSize = 0;
  hdlrSize = 0;
  vmhdSize = 0;
  smhdSize = 0;
  dinfSize = 0;
  /** The track atom's size in the answer, summed as its atoms are updated. */
  size = 0;
  readonly out: (Piece | undefined)[] = new Array<Piece | undefined>(PIECES).fill(undefined);
}

/** An atom reader (`ngx_http_mp4_atom_handler_t`): given the size of the atom's data; `false` for `NGX_DECLINED`. */
type AtomReader = (mp4: Mp4File, atomDataSize: number) => Promise<boolean> | boolean;

/**
 * A file being cropped (`ngx_http_mp4_file_t`): the read position in the
 * file (`offset`), nginx's buffer (`buffer`, with the part read at
 * `bufferStart` and the unread part from `pos` to `end`), and what the
 * answer is made of. Offsets and sizes are in bytes, times in units of the
 * movie's or the track's timescale.
 */
class Mp4File {
  offset = 0;
  buffer: Buffer | undefined;
  bufferStart = 0;
  pos = 0;
  end = 0;
  bufferSize: number;
  timescale = 0;
  traks: Trak[] = [];
  ftyp: Piece | undefined;
  ftypSize = 0;
  moovSize = 0;
  moovRead = false;
  readonly moovHeader = Buffer.alloc(8);
  mvhd: Piece | undefined;
  /** The `mdat` atom's data: where it ends in the file, and the range that goes out. */
  mdat: { filePos: number; fileLast: number } | undefined;
  readonly mdatHeader = Buffer.alloc(16);
  mdatHeaderSize = 0;

  constructor(
    readonly fd: FileHandle,
    /** The file's path as nginx names it in its messages. */
    readonly name: string,
    /** The file's size in bytes (`mp4->end`). */
    readonly fileEnd: number,
    readonly span: Mp4Span,
    readonly conf: Mp4Conf,
  ) {
    this.bufferSize = conf.bufferSizeBytes;
  }

  /** The buffer the atoms are read into; only called where nginx has read the atom there. */
  get mem(): Buffer {
    return this.buffer ?? EMPTY;
  }

  /** The last track read (`ngx_mp4_last_trak`). */
  get trak(): Trak {
    return this.traks[this.traks.length - 1]!;
  }

  /** An error nginx logs at `error`. */
  fail(message: string): Mp4Error {
    return new Mp4Error('error', message);
  }

  /**
   * `ngx_http_mp4_read`: makes `size` bytes from `offset` readable at
   * `pos`, reading the buffer's size (cut at the end of the file) from the
   * file when they are not in it. Throws `"…" mp4 file truncated` when the
   * file ends before, and nginx's `pread()` errors.
   */
  async read(size: number): Promise<void> {
    if (this.buffer ? this.pos + size <= this.end : size === 0) return;
    if (this.offset + this.bufferSize > this.fileEnd) this.bufferSize = this.fileEnd - this.offset;
    if (this.bufferSize < size) throw this.fail(`"${this.name}" mp4 file truncated`);
    if (!this.buffer) {
      this.buffer = Buffer.alloc(this.bufferSize);
      this.bufferStart = 0;
    }
    let n: number;
    try {
      ({ bytesRead: n } = await this.fd.read(this.buffer, this.bufferStart, this.bufferSize, this.offset));
    } catch (err) {
      throw new Mp4Error('crit', `pread() "${this.name}" failed (${systemErrorText(err as NodeJS.ErrnoException)})`);
    }
    if (n !== this.bufferSize) throw new Mp4Error('crit', `pread() read only ${n} of ${this.bufferSize} from "${this.name}"`);
    this.pos = this.bufferStart;
    this.end = this.bufferStart + this.bufferSize;
  }

  /** `ngx_mp4_atom_next`: moves on `n` bytes in the file and in the buffer (to its end at most). */
  next(n: number): void {
    this.pos = n > this.end - this.pos ? this.end : this.pos + n;
    this.offset += n;
  }

  /** Forgets the buffer (nginx sets `buffer`, `buffer_pos` and `buffer_end` to NULL). */
  dropBuffer(): void {
    this.buffer = undefined;
    this.pos = 0;
    this.end = 0;
  }
}

const EMPTY = Buffer.alloc(0);

/**
 * `ngx_http_mp4_read_atom`: reads the atoms of `atomDataSize` bytes from
 * the file's offset, giving each one `readers` knows to its reader and
 * skipping the others; `false` when a reader declines. Throws for an atom
 * smaller than its header or larger than what holds it.
 */
async function readAtoms(mp4: Mp4File, readers: ReadonlyMap<string, AtomReader>, atomDataSize: number): Promise<boolean> {
  const end = mp4.offset + atomDataSize;
  while (mp4.offset < end) {
    await mp4.read(4);
    let atomSize = BigInt(get32(mp4.mem, mp4.pos));
    let headerSize = 8;
    if (atomSize === 0n) return true;
    if (atomSize < 8n) {
      if (atomSize !== 1n) throw mp4.fail(`"${mp4.name}" mp4 atom is too small:${atomSize}`);
      await mp4.read(16);
      atomSize = get64(mp4.mem, mp4.pos + 8);
      headerSize = 16;
      if (atomSize < 16n) throw mp4.fail(`"${mp4.name}" mp4 atom is too small:${atomSize}`);
    }
    await mp4.read(8);
    const name = mp4.mem.toString('latin1', mp4.pos + 4, mp4.pos + 8);
    if (atomSize > MAX_INT - BigInt(mp4.offset) || BigInt(mp4.offset) + atomSize > BigInt(end)) {
      throw mp4.fail(`"${mp4.name}" mp4 atom too large:${atomSize}`);
    }
    const reader = readers.get(name);
    if (reader) {
      mp4.next(headerSize);
      if (!(await reader(mp4, Number(atomSize) - headerSize))) return false;
    } else mp4.next(Number(atomSize));
  }
  return true;
}

/** `ngx_http_mp4_read_ftyp_atom`: a copy of the `ftyp` atom (1024 bytes of data at most, in the buffer). */
function readFtyp(mp4: Mp4File, atomDataSize: number): boolean {
  if (atomDataSize > 1024 || mp4.pos + atomDataSize > mp4.end) {
    throw mp4.fail(`"${mp4.name}" mp4 ftyp atom is too large:${atomDataSize}`);
  }
  if (mp4.ftyp) throw mp4.fail(`duplicate mp4 ftyp atom in "${mp4.name}"`);
  const atomSize = 8 + atomDataSize;
  const ftyp = Buffer.alloc(atomSize);
  set32(ftyp, 0, atomSize);
  setName(ftyp, 0, 'ftyp');
  mp4.mem.copy(ftyp, 8, mp4.pos, mp4.pos + atomDataSize);
  mp4.ftyp = new Piece(ftyp, 0, atomSize);
  mp4.ftypSize = atomSize;
  mp4.next(atomDataSize);
  return true;
}

/**
 * `ngx_http_mp4_read_moov_atom`: declines (the file goes out whole) for a
 * `moov` before the `mdat` when the whole movie is asked for; else reads it
 * whole into the buffer (a larger one when it does not fit, up to
 * `mp4_max_buffer_size`) and its atoms.
 */
async function readMoov(mp4: Mp4File, atomDataSize: number): Promise<boolean> {
  const noMdat = mp4.mdat === undefined;
  if (noMdat && mp4.span.startMs === 0n && mp4.span.lengthMs === 0n) return false;
  if (mp4.moovRead) throw mp4.fail(`duplicate mp4 moov atom in "${mp4.name}"`);
  if (atomDataSize > mp4.bufferSize) {
    if (atomDataSize > mp4.conf.maxBufferSizeBytes) {
      throw mp4.fail(`"${mp4.name}" mp4 moov atom is too large:${atomDataSize}, you may want to increase mp4_max_buffer_size`);
    }
    mp4.dropBuffer();
    mp4.bufferSize = atomDataSize + (noMdat ? MOOV_BUFFER_EXCESS : 0);
  }
  await mp4.read(atomDataSize);
  mp4.traks = [];
  mp4.moovRead = true;
  const ok = await readAtoms(mp4, MOOV_ATOMS, atomDataSize);
  if (noMdat) {
    // the atoms after the moov are read into the buffer's rest, or a new one
    mp4.bufferStart = mp4.pos;
    mp4.bufferSize = MOOV_BUFFER_EXCESS;
    if (mp4.bufferStart + mp4.bufferSize > mp4.end) mp4.dropBuffer();
  } else {
    mp4.offset = mp4.fileEnd;
  }
  return ok;
}

/** `ngx_http_mp4_read_mdat_atom`: where the `mdat` data ends; the atoms after it are skipped once the tracks are read. */
function readMdat(mp4: Mp4File, atomDataSize: number): boolean {
  if (mp4.mdat) throw mp4.fail(`duplicate mp4 mdat atom in "${mp4.name}"`);
  mp4.mdat = { filePos: 0, fileLast: mp4.offset + atomDataSize };
  if (mp4.traks.length > 0) mp4.offset = mp4.fileEnd;
  else mp4.next(atomDataSize);
  return true;
}

/**
 * `ngx_http_mp4_update_mdat_atom`: the new `mdat` header for the file's
 * bytes from `startOffset` to `endOffset` (a 64-bit size beyond 4 GiB);
 * returns the header's size.
 */
function updateMdat(mp4: Mp4File, startOffset: number, endOffset: number): number {
  const atomDataSize = endOffset - startOffset;
  mp4.mdat!.filePos = startOffset;
  mp4.mdat!.fileLast = endOffset;
  const header = mp4.mdatHeader;
  let atomSize: number;
  let headerSize: number;
  if (atomDataSize > 0xffffffff - 8) {
    atomSize = 1;
    headerSize = 16;
    set64(header, 8, BigInt(16 + atomDataSize));
  } else {
    atomSize = 8 + atomDataSize;
    headerSize = 8;
  }
  set32(header, 0, atomSize);
  setName(header, 0, 'mdat');
  mp4.mdatHeaderSize = headerSize;
  return headerSize;
}

/** A start or length in milliseconds as a time of `timescale` (nginx's `(uint64_t) ms * timescale / 1000`). */
const msToTime = (ms: bigint, timescale: number): bigint => mul64(ms, BigInt(timescale)) / 1000n;

/** `ngx_http_mp4_read_mvhd_atom`: the movie's timescale; its duration cut. Throws when the start is past the movie's end. */
function readMvhd(mp4: Mp4File, atomDataSize: number): boolean {
  if (mp4.mvhd) throw mp4.fail(`duplicate mp4 mvhd atom in "${mp4.name}"`);
  const mem = mp4.mem;
  const h = mp4.pos - 8;
  setName(mem, h, 'mvhd');
  if (100 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 mvhd atom too small`);
  const v0 = mem[h + 8] === 0;
  if (!v0 && 112 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 mvhd atom too small`);
  const timescale = get32(mem, v0 ? h + 20 : h + 28);
  let duration = v0 ? BigInt(get32(mem, h + 24)) : get64(mem, h + 32);
  mp4.timescale = timescale;
  const startTime = msToTime(mp4.span.startMs, timescale);
  if (duration < startTime) throw mp4.fail(`"${mp4.name}" mp4 start time exceeds file duration`);
  duration -= startTime;
  if (mp4.span.lengthMs !== 0n) {
    const lengthTime = msToTime(mp4.span.lengthMs, timescale);
    if (duration > lengthTime) duration = lengthTime;
  }
  const atomSize = 8 + atomDataSize;
  set32(mem, h, atomSize);
  if (v0) set32(mem, h + 24, duration);
  else set64(mem, h + 32, duration);
  mp4.mvhd = new Piece(mem, h, h + atomSize);
  mp4.next(atomDataSize);
  return true;
}

/** `ngx_http_mp4_read_trak_atom`: a track and its atoms; a track that declines (it ends before the start) is left out. */
async function readTrak(mp4: Mp4File, atomDataSize: number): Promise<boolean> {
  const trak = new Trak();
  mp4.traks.push(trak);
  const h = mp4.pos - 8;
  setName(mp4.mem, h, 'trak');
  trak.out[TRAK] = new Piece(mp4.mem, h, h + 8);
  const atomEnd = mp4.pos + atomDataSize;
  const atomFileEnd = mp4.offset + atomDataSize;
  const ok = await readAtoms(mp4, TRAK_ATOMS, atomDataSize);
  if (!ok) {
    mp4.traks.pop();
    mp4.pos = atomEnd;
    mp4.offset = atomFileEnd;
  }
  return true;
}

/** `ngx_http_mp4_update_trak_atom`: the track atom's size. */
function updateTrak(trak: Trak): void {
  trak.size += 8;
  const atom = trak.out[TRAK]!;
  set32(atom.mem, atom.pos, trak.size);
}

/** `ngx_http_mp4_read_cmov_atom`: a compressed `moov` is refused. */
function readCmov(mp4: Mp4File): boolean {
  throw mp4.fail(`"${mp4.name}" mp4 compressed moov atom (cmov) is not supported`);
}

/** `ngx_http_mp4_read_tkhd_atom`: the track's duration cut; declines a track that ends at the start time or before. */
function readTkhd(mp4: Mp4File, atomDataSize: number): boolean {
  const mem = mp4.mem;
  const h = mp4.pos - 8;
  setName(mem, h, 'tkhd');
  if (84 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 tkhd atom too small`);
  const v0 = mem[h + 8] === 0;
  if (!v0 && 96 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 tkhd atom too small`);
  let duration = v0 ? BigInt(get32(mem, h + 28)) : get64(mem, h + 36);
  const startTime = msToTime(mp4.span.startMs, mp4.timescale);
  if (duration <= startTime) return false;
  duration -= startTime;
  if (mp4.span.lengthMs !== 0n) {
    const lengthTime = msToTime(mp4.span.lengthMs, mp4.timescale);
    if (duration > lengthTime) duration = lengthTime;
  }
  const atomSize = 8 + atomDataSize;
  const trak = mp4.trak;
  if (trak.out[TKHD]) throw mp4.fail(`duplicate mp4 tkhd atom in "${mp4.name}"`);
  trak.tkhdSize = atomSize;
  trak.movieDuration = duration;
  set32(mem, h, atomSize);
  if (v0) set32(mem, h + 28, duration);
  else set64(mem, h + 36, duration);
  trak.out[TKHD] = new Piece(mem, h, h + atomSize);
  mp4.next(atomDataSize);
  return true;
}

/** The readers of `mdia`, `minf` and `stbl`: a container atom whose header is kept, and its atoms read. */
function container(name: string, index: number, readers: () => ReadonlyMap<string, AtomReader>): AtomReader {
  return (mp4, atomDataSize) => {
    const h = mp4.pos - 8;
    setName(mp4.mem, h, name);
    const trak = mp4.trak;
    if (trak.out[index]) throw mp4.fail(`duplicate mp4 ${name} atom in "${mp4.name}"`);
    trak.out[index] = new Piece(mp4.mem, h, h + 8);
    return readAtoms(mp4, readers(), atomDataSize);
  };
}

/** `ngx_http_mp4_update_mdia_atom`, `…_minf_atom` (with the media header and `dinf` sizes), `…_stbl_atom`: a container's size. */
function updateContainer(trak: Trak, index: number, extra = 0): void {
  trak.size += 8 + extra;
  const atom = trak.out[index]!;
  set32(atom.mem, atom.pos, trak.size);
}

/** `ngx_http_mp4_read_mdhd_atom`: the media timescale and duration cut; declines a track whose media ends at the start time or before. */
function readMdhd(mp4: Mp4File, atomDataSize: number): boolean {
  const mem = mp4.mem;
  const h = mp4.pos - 8;
  setName(mem, h, 'mdhd');
  if (24 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 mdhd atom too small`);
  const v0 = mem[h + 8] === 0;
  if (!v0 && 36 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 mdhd atom too small`);
  const timescale = get32(mem, v0 ? h + 20 : h + 28);
  let duration = v0 ? BigInt(get32(mem, h + 24)) : get64(mem, h + 32);
  const startTime = msToTime(mp4.span.startMs, timescale);
  if (duration <= startTime) return false;
  duration -= startTime;
  if (mp4.span.lengthMs !== 0n) {
    const lengthTime = msToTime(mp4.span.lengthMs, timescale);
    if (duration > lengthTime) duration = lengthTime;
  }
  const atomSize = 8 + atomDataSize;
  const trak = mp4.trak;
  if (trak.out[MDHD]) throw mp4.fail(`duplicate mp4 mdhd atom in "${mp4.name}"`);
  trak.mdhdSize = atomSize;
  trak.timescale = timescale;
  trak.duration = duration;
  set32(mem, h, atomSize);
  trak.out[MDHD] = new Piece(mem, h, h + atomSize);
  mp4.next(atomDataSize);
  return true;
}

/** `ngx_http_mp4_update_mdhd_atom`: the media duration, with what a key frame start added. */
function updateMdhd(trak: Trak): void {
  const atom = trak.out[MDHD];
  if (!atom) return;
  if (atom.mem[atom.pos + 8] === 0) set32(atom.mem, atom.pos + 24, trak.duration);
  else set64(atom.mem, atom.pos + 32, trak.duration);
  trak.size += trak.mdhdSize;
}

/**
 * The readers of `hdlr`, `vmhd`, `smhd` and `dinf`: the atom kept whole
 * (`ngx_http_mp4_read_hdlr_atom` …), its size added to the track's.
 */
function keptWhole(name: string, index: number, duplicate: string, add: (trak: Trak, atomSize: number) => void, others: readonly number[] = []): AtomReader {
  return (mp4, atomDataSize) => {
    const mem = mp4.mem;
    const h = mp4.pos - 8;
    const atomSize = 8 + atomDataSize;
    set32(mem, h, atomSize);
    setName(mem, h, name);
    const trak = mp4.trak;
    if (trak.out[index] || others.some((i) => trak.out[i])) throw mp4.fail(`duplicate mp4 ${duplicate} atom in "${mp4.name}"`);
    trak.out[index] = new Piece(mem, h, h + atomSize);
    add(trak, atomSize);
    mp4.next(atomDataSize);
    return true;
  };
}

/**
 * `ngx_http_mp4_update_edts_atom`: a track that starts at a key frame
 * before the start time gets an edit list (version 1, one entry) whose
 * media time skips that prefix.
 */
function updateEdts(trak: Trak): void {
  if (trak.prefix === 0n) return;
  const edts = Buffer.alloc(8);
  set32(edts, 0, 8 + 36);
  setName(edts, 0, 'edts');
  trak.out[EDTS] = new Piece(edts, 0, 8);
  const elst = Buffer.alloc(36);
  set32(elst, 0, 36);
  setName(elst, 0, 'elst');
  elst[8] = 1;
  set32(elst, 12, 1);
  set64(elst, 16, trak.movieDuration);
  set64(elst, 24, trak.prefix);
  set16(elst, 32, 1);
  set16(elst, 34, 0);
  trak.out[ELST] = new Piece(elst, 0, 36);
  trak.size += 8 + 36;
}

/** `ngx_http_mp4_read_stsd_atom`: the sample descriptions, kept whole. */
function readStsd(mp4: Mp4File, atomDataSize: number): boolean {
  const mem = mp4.mem;
  const h = mp4.pos - 8;
  const atomSize = 8 + atomDataSize;
  set32(mem, h, atomSize);
  setName(mem, h, 'stsd');
  if (16 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 stsd atom too small`);
  const trak = mp4.trak;
  if (trak.out[STSD]) throw mp4.fail(`duplicate mp4 stsd atom in "${mp4.name}"`);
  trak.out[STSD] = new Piece(mem, h, h + atomSize);
  trak.size += atomSize;
  mp4.next(atomDataSize);
  return true;
}

/**
 * A sample table (`stts`, `stss`, `ctts`, `stsc`, `stco`, `co64`): its
 * 16-byte header and its entries of `entrySize` bytes, as the pieces
 * `atomIndex` and `dataIndex`. nginx checks for a duplicate before or after
 * the entries' size, by table.
 */
function table(name: string, atomIndex: number, dataIndex: number, entrySize: number, duplicateFirst: boolean, keep: (trak: Trak, entries: number) => void, duplicateOf: readonly number[] = [atomIndex], duplicateName = name): AtomReader {
  return (mp4, atomDataSize) => {
    const mem = mp4.mem;
    const h = mp4.pos - 8;
    setName(mem, h, name);
    if (8 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 ${name} atom too small`);
    const entries = get32(mem, h + 12);
    const trak = mp4.trak;
    const duplicate = (): void => {
      if (duplicateOf.some((i) => trak.out[i])) throw mp4.fail(`duplicate mp4 ${duplicateName} atom in "${mp4.name}"`);
    };
    if (duplicateFirst) duplicate();
    if (8 + entries * entrySize > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 ${name} atom too small`);
    if (!duplicateFirst) duplicate();
    keep(trak, entries);
    trak.out[atomIndex] = new Piece(mem, h, h + 16);
    trak.out[dataIndex] = new Piece(mem, h + 16, h + 16 + entries * entrySize);
    mp4.next(atomDataSize);
    return true;
  };
}

/** `ngx_http_mp4_update_stts_atom`: the time-to-sample table cut at the start and end times. */
function updateStts(mp4: Mp4File, trak: Trak): void {
  const data = trak.out[STTS_DATA];
  if (!data) throw mp4.fail(`no mp4 stts atoms were found in "${mp4.name}"`);
  cropStts(mp4, trak, true);
  cropStts(mp4, trak, false);
  const atomSize = 16 + (data.last - data.pos);
  trak.size += atomSize;
  const atom = trak.out[STTS_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 12, trak.timeToSampleEntries);
}

/**
 * `ngx_http_mp4_crop_stts_data`: finds the sample at the start time (going
 * back to the key frame before it with `mp4_start_key_frame`) or at the end
 * time, and cuts the entries there. Throws when the start is past the
 * samples.
 */
function cropStts(mp4: Mp4File, trak: Trak, start: boolean): void {
  let timeMs: bigint;
  if (start) timeMs = mp4.span.startMs;
  else if (mp4.span.lengthMs !== 0n) timeMs = mp4.span.lengthMs;
  else return;
  const data = trak.out[STTS_DATA]!;
  const mem = data.mem;
  let startTime = BigInt.asUintN(64, msToTime(timeMs, trak.timescale) + trak.prefix);
  let entries = trak.timeToSampleEntries;
  let startSample = 0;
  let entry = data.pos;
  let count = 0;
  let duration = 0;
  let rest = 0;
  let found = false;
  while (entry < data.last) {
    count = get32(mem, entry);
    duration = get32(mem, entry + 4);
    if (startTime < BigInt(count) * BigInt(duration)) {
      const samples = startTime / BigInt(duration);
      startSample += Number(samples);
      rest = Number(BigInt.asUintN(32, samples));
      found = true;
      break;
    }
    startSample += count;
    startTime -= BigInt(count) * BigInt(duration);
    entries--;
    entry += 8;
  }
  if (!found) {
    if (start) throw mp4.fail(`start time is out mp4 stts samples in "${mp4.name}"`);
    trak.endSample = trak.startSample + startSample;
    return;
  }
  if (start) {
    let keyPrefix = seekKeyFrame(mp4, trak, startSample >>> 0);
    startSample -= keyPrefix;
    while (rest < keyPrefix) {
      trak.prefix = BigInt.asUintN(64, trak.prefix + BigInt(mul32(rest, duration)));
      keyPrefix = (keyPrefix - rest) >>> 0;
      entry -= 8;
      entries++;
      count = get32(mem, entry);
      duration = get32(mem, entry + 4);
      rest = count;
    }
    trak.prefix = BigInt.asUintN(64, trak.prefix + BigInt(mul32(keyPrefix, duration)));
    trak.duration = BigInt.asUintN(64, trak.duration + trak.prefix);
    rest = (rest - keyPrefix) >>> 0;
    set32(mem, entry, count - rest);
    data.pos = entry;
    trak.timeToSampleEntries = entries >>> 0;
    trak.startSample = startSample;
  } else {
    set32(mem, entry, rest);
    data.last = entry + 8;
    trak.timeToSampleEntries = (trak.timeToSampleEntries - (entries - 1)) >>> 0;
    trak.endSample = trak.startSample + startSample;
  }
}

/**
 * `ngx_http_mp4_seek_key_frame`: with `mp4_start_key_frame on`, how many
 * samples before `startSample` (counted from 0) the last sync sample at or
 * before it is; 0 otherwise, or for a track without `stss`. Throws for a
 * sync sample 0 (they count from 1).
 */
function seekKeyFrame(mp4: Mp4File, trak: Trak, startSample: number): number {
  if (!mp4.conf.startKeyFrame) return 0;
  const data = trak.out[STSS_DATA];
  if (!data) return 0;
  const sampleNumber = (startSample + 1) >>> 0;
  let keyPrefix = 0;
  for (let entry = data.pos; entry < data.last; entry += 4) {
    const sample = get32(data.mem, entry);
    if (sample === 0) throw mp4.fail(`zero sync sample in "${mp4.name}"`);
    if (sample > sampleNumber) break;
    keyPrefix = (sampleNumber - sample) >>> 0;
  }
  return keyPrefix;
}


/** `ngx_http_mp4_update_stss_atom`: the sync samples cut and renumbered from the first sample sent. */
function updateStss(mp4: Mp4File, trak: Trak): void {
  const data = trak.out[STSS_DATA];
  if (!data) return;
  cropStss(mp4, trak, true);
  cropStss(mp4, trak, false);
  if (trak.syncSamplesEntries) {
    const first = trak.startSample >>> 0;
    for (let entry = data.pos; entry < data.last; entry += 4) set32(data.mem, entry, get32(data.mem, entry) - first);
  } else {
    trak.out[STSS_DATA] = undefined;
  }
  const atomSize = 16 + (data.last - data.pos);
  trak.size += atomSize;
  const atom = trak.out[STSS_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 12, trak.syncSamplesEntries);
}

/** `ngx_http_mp4_crop_stss_data`: drops the sync samples before the first sample sent, or from the first not sent. */
function cropStss(mp4: Mp4File, trak: Trak, start: boolean): void {
  let sampleNumber: number;
  if (start) sampleNumber = (trak.startSample + 1) >>> 0;
  else if (mp4.span.lengthMs !== 0n) sampleNumber = (trak.endSample + 1) >>> 0;
  else return;
  const data = trak.out[STSS_DATA]!;
  let entries = trak.syncSamplesEntries;
  let entry = data.pos;
  while (entry < data.last) {
    if (get32(data.mem, entry) >= sampleNumber) break;
    entries--;
    entry += 4;
  }
  if (start) {
    data.pos = entry;
    trak.syncSamplesEntries = entries >>> 0;
  } else {
    data.last = entry;
    trak.syncSamplesEntries = (trak.syncSamplesEntries - entries) >>> 0;
  }
}

/** `ngx_http_mp4_update_ctts_atom`: the composition offsets cut; the atom is left out when none is left. */
function updateCtts(mp4: Mp4File, trak: Trak): void {
  const data = trak.out[CTTS_DATA];
  if (!data) return;
  cropCtts(mp4, trak, true);
  cropCtts(mp4, trak, false);
  if (trak.compositionOffsetEntries === 0) {
    trak.out[CTTS_ATOM] = undefined;
    trak.out[CTTS_DATA] = undefined;
    return;
  }
  const atomSize = 16 + (data.last - data.pos);
  trak.size += atomSize;
  const atom = trak.out[CTTS_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 12, trak.compositionOffsetEntries);
}

/** `ngx_http_mp4_crop_ctts_data`: cuts the composition offsets at the first sample sent, or after the last. */
function cropCtts(mp4: Mp4File, trak: Trak, start: boolean): void {
  let sampleNumber: number;
  if (start) sampleNumber = (trak.startSample + 1) >>> 0;
  else if (mp4.span.lengthMs !== 0n) sampleNumber = (trak.endSample - trak.startSample + 1) >>> 0;
  else return;
  const data = trak.out[CTTS_DATA]!;
  const mem = data.mem;
  let entries = trak.compositionOffsetEntries;
  for (let entry = data.pos; entry < data.last; entry += 8) {
    const count = get32(mem, entry);
    if (sampleNumber <= count) {
      const rest = sampleNumber - 1;
      if (start) {
        set32(mem, entry, count - rest);
        data.pos = entry;
        trak.compositionOffsetEntries = entries >>> 0;
      } else {
        set32(mem, entry, rest);
        data.last = entry + 8;
        trak.compositionOffsetEntries = (trak.compositionOffsetEntries - (entries - 1)) >>> 0;
      }
      return;
    }
    sampleNumber = (sampleNumber - count) >>> 0;
    entries--;
  }
  if (start) {
    data.pos = data.last;
    trak.compositionOffsetEntries = 0;
  }
}

/** `ngx_http_mp4_update_stsc_atom`: the sample-to-chunk table cut and its chunks renumbered from the first chunk sent. */
function updateStsc(mp4: Mp4File, trak: Trak): void {
  const data = trak.out[STSC_DATA];
  if (!data) throw mp4.fail(`no mp4 stsc atoms were found in "${mp4.name}"`);
  if (trak.sampleToChunkEntries === 0) throw mp4.fail(`zero number of entries in stsc atom in "${mp4.name}"`);
  cropStsc(mp4, trak, true);
  cropStsc(mp4, trak, false);
  for (let entry = data.pos; entry < data.last; entry += 12) set32(data.mem, entry, get32(data.mem, entry) - trak.startChunk);
  const atomSize = 16 + trak.sampleToChunkEntries * 12;
  trak.size += atomSize;
  const atom = trak.out[STSC_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 12, trak.sampleToChunkEntries);
}

/** A sample-to-chunk entry of its own (`stsc_start_chunk_entry`, `stsc_end_chunk_entry`): first chunk, samples, description. */
function stscEntry(chunk: number, samples: number, id: number): Piece {
  const entry = Buffer.alloc(12);
  set32(entry, 0, chunk);
  set32(entry, 4, samples);
  set32(entry, 8, id);
  return new Piece(entry, 0, 12);
}

/**
 * `ngx_http_mp4_crop_stsc_data`: finds the chunk of the first sample sent
 * (or of the last), cuts the entries there and, for a chunk sent in part,
 * gives it an entry of its own. Throws when the sample is past the chunks,
 * for chunks out of order, a run of no samples or a chunk 0.
 */
function cropStsc(mp4: Mp4File, trak: Trak, start: boolean): void {
  let entries = trak.sampleToChunkEntries - 1;
  let startSample: number;
  if (start) {
    startSample = trak.startSample >>> 0;
  } else if (mp4.span.lengthMs !== 0n) {
    startSample = (trak.endSample - trak.startSample) >>> 0;
    const first = trak.out[STSC_START];
    if (first) {
      let firstSamples = get32(first.mem, first.pos + 4);
      entries--;
      if (firstSamples > startSample) {
        firstSamples = startSample;
        set32(first.mem, first.pos + 4, firstSamples);
      }
      startSample = (startSample - firstSamples) >>> 0;
    }
  } else {
    return;
  }
  const data = trak.out[STSC_DATA]!;
  const mem = data.mem;
  let entry = data.pos;
  let chunk = get32(mem, entry);
  let samples = get32(mem, entry + 4);
  let id = get32(mem, entry + 8);
  let prevSamples = 0;
  let nextChunk = 0;
  let found = false;
  const unordered = (): Mp4Error => mp4.fail(`unordered mp4 stsc chunks in "${mp4.name}"`);
  entry += 12;
  while (entry < data.last) {
    nextChunk = get32(mem, entry);
    if (nextChunk < chunk) throw unordered();
    // the samples of the run, counted in 64 bits
    const n = (nextChunk - chunk) * samples;
    if (startSample < n) {
      found = true;
      break;
    }
    startSample = (startSample - n) >>> 0;
    if (nextChunk > chunk) prevSamples = samples;
    chunk = nextChunk;
    samples = get32(mem, entry + 4);
    id = get32(mem, entry + 8);
    entries--;
    entry += 12;
  }
  if (!found) {
    nextChunk = (trak.chunks + 1) >>> 0;
    if (nextChunk < chunk) throw unordered();
    if (startSample > (nextChunk - chunk) * samples) {
      throw mp4.fail(`${start ? 'start' : 'end'} time is out mp4 stsc chunks in "${mp4.name}"`);
    }
  }
  entries++;
  entry -= 12;
  if (samples === 0) throw mp4.fail(`zero number of samples in "${mp4.name}"`);
  if (chunk === 0) throw mp4.fail(`zero chunk in "${mp4.name}"`);
  const targetChunk = chunk - 1 + Math.floor(startSample / samples);
  const chunkSamples = startSample % samples;
  if (start) {
    data.pos = entry;
    trak.sampleToChunkEntries = entries >>> 0;
    trak.startChunk = targetChunk;
    trak.startChunkSamples = chunkSamples;
    set32(mem, entry, trak.startChunk + 1);
    samples = (samples - chunkSamples) >>> 0;
  } else {
    if (startSample) {
      data.last = entry + 12;
      trak.sampleToChunkEntries = (trak.sampleToChunkEntries - (entries - 1)) >>> 0;
      trak.endChunkSamples = samples;
    } else {
      data.last = entry;
      trak.sampleToChunkEntries = (trak.sampleToChunkEntries - entries) >>> 0;
      trak.endChunkSamples = prevSamples;
    }
    if (chunkSamples) {
      trak.endChunk = targetChunk + 1;
      trak.endChunkSamples = chunkSamples;
    } else {
      trak.endChunk = targetChunk;
    }
    samples = chunkSamples;
    nextChunk = (chunk + 1) >>> 0;
  }
  if (chunkSamples && nextChunk - targetChunk === 2) {
    set32(mem, entry + 4, samples);
  } else if (chunkSamples && start) {
    trak.out[STSC_START] = stscEntry(1, samples, id);
    set32(mem, entry, trak.startChunk + 2);
    trak.sampleToChunkEntries = (trak.sampleToChunkEntries + 1) >>> 0;
  } else if (chunkSamples) {
    trak.out[STSC_END] = stscEntry(trak.endChunk - trak.startChunk, samples, id);
    trak.sampleToChunkEntries = (trak.sampleToChunkEntries + 1) >>> 0;
  }
}

/** `ngx_http_mp4_read_stsz_atom`: the sample sizes; a table of one size for all (no entries) is kept whole. */
function readStsz(mp4: Mp4File, atomDataSize: number): boolean {
  const mem = mp4.mem;
  const h = mp4.pos - 8;
  setName(mem, h, 'stsz');
  if (12 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 stsz atom too small`);
  const uniformSize = get32(mem, h + 12);
  const entries = get32(mem, h + 16);
  const trak = mp4.trak;
  if (trak.out[STSZ_ATOM]) throw mp4.fail(`duplicate mp4 stsz atom in "${mp4.name}"`);
  trak.sampleSizesEntries = entries;
  trak.out[STSZ_ATOM] = new Piece(mem, h, h + 20);
  if (uniformSize === 0) {
    if (12 + entries * 4 > atomDataSize) throw mp4.fail(`"${mp4.name}" mp4 stsz atom too small`);
    trak.out[STSZ_DATA] = new Piece(mem, h + 20, h + 20 + entries * 4);
  } else {
    const atomSize = 8 + atomDataSize;
    set32(mem, h, atomSize);
    trak.size += atomSize;
  }
  mp4.next(atomDataSize);
  return true;
}

/**
 * `ngx_http_mp4_update_stsz_atom`: the sizes of the samples sent, and the
 * sizes of the samples of the first chunk before the first sample sent (and
 * of the last chunk up to the last one), which move the chunk offsets.
 */
function updateStsz(mp4: Mp4File, trak: Trak): void {
  const data = trak.out[STSZ_DATA];
  if (!data) return;
  const mem = data.mem;
  let entries = trak.sampleSizesEntries;
  if (trak.startSample >= entries) throw mp4.fail(`start time is out mp4 stsz samples in "${mp4.name}"`);
  entries -= trak.startSample;
  data.pos += trak.startSample * 4;
  for (let at = data.pos - trak.startChunkSamples * 4; at < data.pos; at += 4) trak.startChunkSamplesSize += get32(mem, at);
  if (trak.startChunkSamplesSize > mp4.fileEnd) throw mp4.fail(`too large mp4 start samples size in "${mp4.name}"`);
  if (mp4.span.lengthMs !== 0n) {
    if (trak.endSample - trak.startSample > entries) throw mp4.fail(`end time is out mp4 stsz samples in "${mp4.name}"`);
    entries = trak.endSample - trak.startSample;
    data.last = data.pos + entries * 4;
    for (let at = data.last - trak.endChunkSamples * 4; at < data.last; at += 4) trak.endChunkSamplesSize += get32(mem, at);
    if (trak.endChunkSamplesSize > mp4.fileEnd) throw mp4.fail(`too large mp4 end samples size in "${mp4.name}"`);
  }
  const atomSize = 20 + (data.last - data.pos);
  trak.size += atomSize;
  const atom = trak.out[STSZ_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 16, entries);
}

/**
 * `ngx_http_mp4_update_stco_atom` and `…_co64_atom`: the chunk offsets of
 * the chunks sent, the first moved past the samples of its chunk not sent;
 * where the track's samples start and end in the file. Throws for a chunk
 * past the table or an offset past the file (or, in `stco`, past 4 GiB).
 */
function updateChunkOffsets(mp4: Mp4File, trak: Trak, co64: boolean): void {
  const name = co64 ? 'co64' : 'stco';
  const width = co64 ? 8 : 4;
  const data = trak.out[co64 ? CO64_DATA : STCO_DATA];
  if (!data) throw mp4.fail(`no mp4 ${name} atoms were found in "${mp4.name}"`);
  const mem = data.mem;
  const offsetAt = (at: number): number => Number(co64 ? get64(mem, at) : BigInt(get32(mem, at)));
  const check = (chunkOffset: number, samplesSize: number): void => {
    if (chunkOffset > mp4.fileEnd - samplesSize || (!co64 && chunkOffset + samplesSize > 0xffffffff)) {
      throw mp4.fail(`too large chunk offset in "${mp4.name}"`);
    }
  };
  if (trak.startChunk >= trak.chunks) throw mp4.fail(`start time is out mp4 ${name} chunks in "${mp4.name}"`);
  data.pos += trak.startChunk * width;
  const firstOffset = offsetAt(data.pos);
  check(firstOffset, trak.startChunkSamplesSize);
  trak.startOffset = firstOffset + trak.startChunkSamplesSize;
  if (co64) set64(mem, data.pos, BigInt(trak.startOffset));
  else set32(mem, data.pos, trak.startOffset);
  let entries: number;
  if (mp4.span.lengthMs !== 0n) {
    if (trak.endChunk > trak.chunks) throw mp4.fail(`end time is out mp4 ${name} chunks in "${mp4.name}"`);
    entries = co64 ? trak.endChunk - trak.startChunk : (trak.endChunk - trak.startChunk) >>> 0;
    data.last = data.pos + entries * width;
    if (entries) {
      const lastOffset = offsetAt(data.last - width);
      check(lastOffset, trak.endChunkSamplesSize);
      trak.endOffset = lastOffset + trak.endChunkSamplesSize;
    }
  } else {
    entries = trak.chunks - trak.startChunk;
    trak.endOffset = mp4.mdat!.fileLast;
  }
  if (entries === 0) {
    trak.startOffset = mp4.fileEnd;
    trak.endOffset = 0;
  }
  const atomSize = 16 + (data.last - data.pos);
  trak.size += atomSize;
  const atom = trak.out[co64 ? CO64_ATOM : STCO_ATOM]!;
  set32(atom.mem, atom.pos, atomSize);
  set32(atom.mem, atom.pos + 12, entries);
}

/**
 * `ngx_http_mp4_adjust_stco_atom` and `…_co64_atom`: every chunk offset
 * sent moved by `adjustment` bytes (in 32 bits for `stco`, as nginx adds an
 * `int32_t`).
 */
function adjustChunkOffsets(trak: Trak, adjustment: number): void {
  const co64 = trak.out[CO64_DATA] !== undefined;
  const data = co64 ? trak.out[CO64_DATA]! : trak.out[STCO_DATA]!;
  if (co64) {
    for (let at = data.pos; at < data.last; at += 8) set64(data.mem, at, get64(data.mem, at) + BigInt(adjustment));
  } else {
    const by = adjustment | 0;
    for (let at = data.pos; at < data.last; at += 4) set32(data.mem, at, get32(data.mem, at) + by);
  }
}

const TOP_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['ftyp', readFtyp],
  ['moov', readMoov],
  ['mdat', readMdat],
]);

const MOOV_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['mvhd', readMvhd],
  ['trak', readTrak],
  ['cmov', readCmov],
]);

const STBL_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['stsd', readStsd],
  ['stts', table('stts', STTS_ATOM, STTS_DATA, 8, false, (trak, n) => void (trak.timeToSampleEntries = n))],
  ['stss', table('stss', STSS_ATOM, STSS_DATA, 4, true, (trak, n) => void (trak.syncSamplesEntries = n))],
  ['ctts', table('ctts', CTTS_ATOM, CTTS_DATA, 8, true, (trak, n) => void (trak.compositionOffsetEntries = n))],
  ['stsc', table('stsc', STSC_ATOM, STSC_DATA, 12, false, (trak, n) => void (trak.sampleToChunkEntries = n))],
  ['stsz', readStsz],
  ['stco', table('stco', STCO_ATOM, STCO_DATA, 4, false, (trak, n) => void (trak.chunks = n), [STCO_ATOM, CO64_ATOM], 'stco/co64')],
  ['co64', table('co64', CO64_ATOM, CO64_DATA, 8, false, (trak, n) => void (trak.chunks = n), [STCO_ATOM, CO64_ATOM], 'stco/co64')],
]);

const MINF_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['vmhd', keptWhole('vmhd', VMHD, 'vmhd/smhd', (trak, n) => void (trak.vmhdSize += n), [SMHD])],
  ['smhd', keptWhole('smhd', SMHD, 'vmhd/smhd', (trak, n) => void (trak.smhdSize += n), [VMHD])],
  ['dinf', keptWhole('dinf', DINF, 'dinf', (trak, n) => void (trak.dinfSize += n))],
  ['stbl', container('stbl', STBL, () => STBL_ATOMS)],
]);

const MDIA_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['mdhd', readMdhd],
  ['hdlr', keptWhole('hdlr', HDLR, 'hdlr', (trak, n) => void (trak.hdlrSize = n))],
  ['minf', container('minf', MINF, () => MINF_ATOMS)],
]);

const TRAK_ATOMS: ReadonlyMap<string, AtomReader> = new Map<string, AtomReader>([
  ['tkhd', readTkhd],
  ['mdia', container('mdia', MDIA, () => MDIA_ATOMS)],
]);

/**
 * `ngx_http_mp4_process`: reads the file's atoms and crops the movie to
 * `span`. Resolves to `whole` when nginx declines (a `moov` before the
 * `mdat` and the whole movie asked for), else to the answer's header and
 * file range; throws `Mp4Error` for what nginx refuses with 500 (no track,
 * no `mdat`, a start past the samples, no sample between the start and the
 * end, a malformed or truncated file …).
 *
 * `fd` is the open file of `sizeBytes` bytes; `name` is its path as nginx's
 * messages name it.
 */
export async function cropMp4(fd: FileHandle, name: string, sizeBytes: number, span: Mp4Span, conf: Mp4Conf): Promise<Mp4Crop> {
  const mp4 = new Mp4File(fd, name, sizeBytes, span, conf);
  if (!(await readAtoms(mp4, TOP_ATOMS, mp4.fileEnd))) return { kind: 'whole' };
  if (mp4.traks.length === 0) throw mp4.fail(`no mp4 trak atoms were found in "${name}"`);
  if (!mp4.mdat) throw mp4.fail(`no mp4 mdat atom was found in "${name}"`);
  const pieces: Piece[] = [];
  if (mp4.ftyp) pieces.push(mp4.ftyp);
  pieces.push(new Piece(mp4.moovHeader, 0, 8));
  if (mp4.mvhd) {
    mp4.moovSize += mp4.mvhd.last - mp4.mvhd.pos;
    pieces.push(mp4.mvhd);
  }
  let startOffset = mp4.fileEnd;
  let endOffset = 0;
  for (const trak of mp4.traks) {
    updateStts(mp4, trak);
    updateStss(mp4, trak);
    updateCtts(mp4, trak);
    updateStsc(mp4, trak);
    updateStsz(mp4, trak);
    updateChunkOffsets(mp4, trak, trak.out[CO64_DATA] !== undefined);
    updateContainer(trak, STBL);
    updateContainer(trak, MINF, trak.vmhdSize + trak.smhdSize + trak.dinfSize);
    updateMdhd(trak);
    trak.size += trak.hdlrSize;
    updateContainer(trak, MDIA);
    trak.size += trak.tkhdSize;
    updateEdts(trak);
    updateTrak(trak);
    mp4.moovSize += trak.size;
    if (startOffset > trak.startOffset) startOffset = trak.startOffset;
    if (endOffset < trak.endOffset) endOffset = trak.endOffset;
    for (const piece of trak.out) if (piece) pieces.push(piece);
  }
  if (endOffset <= startOffset) throw mp4.fail(`no data between start time and end time in "${name}"`);
  mp4.moovSize += 8;
  set32(mp4.moovHeader, 0, mp4.moovSize);
  setName(mp4.moovHeader, 0, 'moov');
  if (startOffset >= mp4.mdat.fileLast) throw mp4.fail(`start time is out mp4 mdat atom in "${name}"`);
  const adjustment = mp4.ftypSize + mp4.moovSize + updateMdat(mp4, startOffset, endOffset) - startOffset;
  for (const trak of mp4.traks) adjustChunkOffsets(trak, adjustment);
  pieces.push(new Piece(mp4.mdatHeader, 0, mp4.mdatHeaderSize));
  const bytes = pieces.map((p) => p.mem.subarray(p.pos, Math.max(p.pos, p.last)));
  const zeroSizeAt: number[] = [];
  let at = 0;
  for (const b of bytes) {
    if (b.length === 0) zeroSizeAt.push(at);
    at += b.length;
  }
  return { kind: 'cropped', header: Buffer.concat(bytes), zeroSizeAt, fileStart: mp4.mdat.filePos, fileEnd: mp4.mdat.fileLast };
}
