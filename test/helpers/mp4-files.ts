/**
 * Small MP4 files made byte by byte, for the MP4 module's tests: `ftyp`,
 * `moov` (`mvhd` and two tracks) and `mdat`, with sample bytes that read as
 * text (`V07ggggggg` is video sample 7, `a12.` audio sample 12).
 *
 * The video track (timescale 12800, 2.1 s) has 20 samples of sizes 8 to 20
 * bytes, three `stts` entries (samples of 0.1 s, one of 0.2 s), sync samples
 * 1, 6, 11 and 16 (`stss`), composition offsets (`ctts`) and chunks of 3, 4,
 * 4, 3, 3 and 3 samples (three `stsc` entries). The audio track (timescale
 * 8000, 2.1 s) has 42 samples of 4 bytes (`stsz` with one size for all), 6 a
 * chunk. The movie's timescale is 1000 (2100 = 2.1 s). Chunks are
 * interleaved in the `mdat`: video chunk 1, audio chunk 1, video chunk 2 …
 */

/** Variants of the file. */
export interface Mp4FileOptions {
  /** `moov` before the `mdat` (as `-movflags faststart` writes it) or after it (the default of most muxers). */
  readonly moov?: 'first' | 'last';
  /** 64-bit chunk offsets (`co64`) instead of `stco`. */
  readonly co64?: boolean;
  /** An edit list (`edts`/`elst`) in the video track. */
  readonly editList?: boolean;
  /** Version 1 (64-bit) `mvhd`, `tkhd` and `mdhd`. */
  readonly version1?: boolean;
  /** An `mdat` with a 64-bit size (size field 1). */
  readonly mdat64?: boolean;
  /** No `ftyp`. */
  readonly noFtyp?: boolean;
  /** No `mdat`. */
  readonly noMdat?: boolean;
  /** Atoms added at the end of the `moov` (a `free` atom to make it large, a second `mvhd` …), as they are. */
  readonly moovExtra?: readonly Buffer[];
  /** Bytes put between the `ftyp` and the next atom, as they are. */
  readonly afterFtyp?: Buffer;
}

const u8 = (n: number): Buffer => Buffer.from([n & 0xff]);
const u16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};
const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};
const u64 = (n: number): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
};
const zeros = (n: number): Buffer => Buffer.alloc(n);
const text = (s: string): Buffer => Buffer.from(s, 'latin1');

/** An atom: a 32-bit size, the 4-character type, the payload. */
export function atom(type: string, ...payload: readonly Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  return Buffer.concat([u32(8 + body.length), text(type), body]);
}

/** A full atom: an atom whose payload starts with a version byte and 24 bits of flags. */
function fullAtom(type: string, version: number, flags: number, ...payload: readonly Buffer[]): Buffer {
  return atom(type, u8(version), u8(flags >> 16), u16(flags & 0xffff), ...payload);
}

/** The identity matrix of `mvhd` and `tkhd` (16.16 and 2.30 fixed point). */
const MATRIX = Buffer.concat([u32(0x10000), u32(0), u32(0), u32(0), u32(0x10000), u32(0), u32(0), u32(0), u32(0x40000000)]);

/** A time in a header: 32 bits in version 0, 64 in version 1. */
const time = (v1: boolean, n: number): Buffer => (v1 ? u64(n) : u32(n));

/** One track's tables and samples. */
interface Track {
  readonly id: number;
  readonly kind: 'vide' | 'soun';
  readonly timescale: number;
  readonly stts: readonly (readonly [count: number, duration: number])[];
  readonly stss?: readonly number[];
  readonly ctts?: readonly (readonly [count: number, offset: number])[];
  /** Samples per chunk, chunk by chunk. */
  readonly chunkSamples: readonly number[];
  /** Each sample's bytes. */
  readonly samples: readonly Buffer[];
  /** One size for every sample (`stsz` without entries). */
  readonly uniformSize?: number;
}

const VIDEO_SIZES = Array.from({ length: 20 }, (_, i) => 8 + ((i * 7) % 13));

const VIDEO: Track = {
  id: 1,
  kind: 'vide',
  timescale: 12800,
  stts: [[12, 1280], [1, 2560], [7, 1280]],
  stss: [1, 6, 11, 16],
  ctts: [[1, 1280], [1, 3200], [2, 0], [3, 1280], [13, 640]],
  chunkSamples: [3, 4, 4, 3, 3, 3],
  samples: VIDEO_SIZES.map((size, i) => text(`V${String(i).padStart(2, '0')}`.padEnd(size, String.fromCharCode(0x61 + (i % 26))))),
};

const AUDIO: Track = {
  id: 2,
  kind: 'soun',
  timescale: 8000,
  stts: [[42, 400]],
  chunkSamples: [6, 6, 6, 6, 6, 6, 6],
  samples: Array.from({ length: 42 }, (_, i) => text(`a${String(i).padStart(2, '0')}.`)),
  uniformSize: 4,
};

/** The movie's timescale and duration (2.1 s). */
const MOVIE_TIMESCALE = 1000;
const MOVIE_DURATION = 2100;

const mediaDuration = (t: Track): number => t.stts.reduce((n, [count, duration]) => n + count * duration, 0);

/** The `stsc` entries of a track: a new entry where the number of samples per chunk changes. */
function stscEntries(t: Track): Buffer[] {
  const out: Buffer[] = [];
  let last = -1;
  t.chunkSamples.forEach((samples, i) => {
    if (samples === last) return;
    out.push(u32(i + 1), u32(samples), u32(1));
    last = samples;
  });
  return out;
}

/** A track atom whose chunks are at `offsets` in the file. */
function trak(t: Track, offsets: readonly number[], opts: Mp4FileOptions): Buffer {
  const v1 = opts.version1 === true;
  const version = v1 ? 1 : 0;
  const video = t.kind === 'vide';
  const tkhd = fullAtom('tkhd', version, 3, time(v1, 0), time(v1, 0), u32(t.id), u32(0), time(v1, MOVIE_DURATION), zeros(8),
    u16(0), u16(0), u16(video ? 0 : 0x100), u16(0), MATRIX, u32(video ? 320 << 16 : 0), u32(video ? 240 << 16 : 0));
  const edts = video && opts.editList ? [atom('edts', fullAtom('elst', 0, 0, u32(1), u32(MOVIE_DURATION), u32(1280), u16(1), u16(0)))] : [];
  const mdhd = fullAtom('mdhd', version, 0, time(v1, 0), time(v1, 0), u32(t.timescale), time(v1, mediaDuration(t)), u16(0x55c4), u16(0));
  const hdlr = fullAtom('hdlr', 0, 0, u32(0), text(t.kind), zeros(12), text(video ? 'VideoHandler\0' : 'SoundHandler\0'));
  const mediaHeader = video ? fullAtom('vmhd', 0, 1, u16(0), zeros(6)) : fullAtom('smhd', 0, 0, u16(0), u16(0));
  const dinf = atom('dinf', fullAtom('dref', 0, 0, u32(1), fullAtom('url ', 0, 1)));
  const entry = video ? atom('avc1', zeros(6), u16(1), zeros(16), u16(320), u16(240), zeros(50)) : atom('mp4a', zeros(6), u16(1), zeros(8), u16(2), u16(16), zeros(4), u32(8000 << 16));
  const stbl = atom('stbl',
    fullAtom('stsd', 0, 0, u32(1), entry),
    fullAtom('stts', 0, 0, u32(t.stts.length), ...t.stts.flatMap(([count, duration]) => [u32(count), u32(duration)])),
    ...(t.stss ? [fullAtom('stss', 0, 0, u32(t.stss.length), ...t.stss.map(u32))] : []),
    ...(t.ctts ? [fullAtom('ctts', 0, 0, u32(t.ctts.length), ...t.ctts.flatMap(([count, offset]) => [u32(count), u32(offset)]))] : []),
    fullAtom('stsc', 0, 0, u32(stscEntries(t).length / 3), ...stscEntries(t)),
    t.uniformSize === undefined
      ? fullAtom('stsz', 0, 0, u32(0), u32(t.samples.length), ...t.samples.map((s) => u32(s.length)))
      : fullAtom('stsz', 0, 0, u32(t.uniformSize), u32(t.samples.length)),
    opts.co64 ? fullAtom('co64', 0, 0, u32(offsets.length), ...offsets.map(u64)) : fullAtom('stco', 0, 0, u32(offsets.length), ...offsets.map(u32)));
  return atom('trak', tkhd, ...edts, atom('mdia', mdhd, hdlr, atom('minf', mediaHeader, dinf, stbl)));
}

/** The chunks of a track, each its samples' bytes. */
function chunksOf(t: Track): Buffer[] {
  const out: Buffer[] = [];
  let next = 0;
  for (const n of t.chunkSamples) {
    out.push(Buffer.concat(t.samples.slice(next, next + n)));
    next += n;
  }
  return out;
}

/** An MP4 file of the two tracks (see the file's comment), in the variant `opts` asks for. */
export function mp4File(opts: Mp4FileOptions = {}): Buffer {
  const v1 = opts.version1 === true;
  const ftyp = opts.noFtyp ? zeros(0) : atom('ftyp', text('isom'), u32(512), text('isomiso2avc1mp41'));
  const before = Buffer.concat([ftyp, opts.afterFtyp ?? zeros(0)]);
  const mvhd = fullAtom('mvhd', v1 ? 1 : 0, 0, time(v1, 0), time(v1, 0), u32(MOVIE_TIMESCALE), time(v1, MOVIE_DURATION),
    u32(0x10000), u16(0x100), zeros(10), MATRIX, zeros(24), u32(3));
  const video = chunksOf(VIDEO);
  const audio = chunksOf(AUDIO);
  const order: { readonly track: 0 | 1; readonly bytes: Buffer }[] = [];
  for (let i = 0; i < Math.max(video.length, audio.length); i++) {
    if (video[i]) order.push({ track: 0, bytes: video[i]! });
    if (audio[i]) order.push({ track: 1, bytes: audio[i]! });
  }
  const data = Buffer.concat(order.map((c) => c.bytes));
  const mdatHeader = opts.mdat64 ? Buffer.concat([u32(1), text('mdat'), u64(16 + data.length)]) : Buffer.concat([u32(8 + data.length), text('mdat')]);
  const moovAt = (dataStart: number): Buffer => {
    const offsets: [number[], number[]] = [[], []];
    let at = dataStart;
    for (const c of order) {
      offsets[c.track].push(at);
      at += c.bytes.length;
    }
    return atom('moov', mvhd, trak(VIDEO, offsets[0], opts), trak(AUDIO, offsets[1], opts), ...(opts.moovExtra ?? []));
  };
  if (opts.noMdat) return Buffer.concat([before, moovAt(0)]);
  if (opts.moov === 'first') {
    const size = moovAt(0).length;
    return Buffer.concat([before, moovAt(before.length + size + mdatHeader.length), mdatHeader, data]);
  }
  return Buffer.concat([before, mdatHeader, data, moovAt(before.length + mdatHeader.length)]);
}

/** A copy of `file` with the 32-bit field `at` bytes into its first atom of type `type` (from the atom's size field) set to `value`. */
export function patched(file: Buffer, type: string, at: number, value: number): Buffer {
  const copy = Buffer.from(file);
  const start = copy.indexOf(type, 0, 'latin1') - 4;
  if (start < 0) throw new Error(`no ${type} atom`);
  copy.writeUInt32BE(value >>> 0, start + at);
  return copy;
}
