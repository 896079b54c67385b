/**
 * HPACK (RFC 7541) as nginx speaks it: the Huffman code
 * (`ngx_http_huff_decode.c`, `ngx_http_v2_huff_encode.c`), the static and
 * dynamic tables of a connection's decoder (`ngx_http_v2_table.c`), and the
 * string and integer encodings of `ngx_http_v2_filter_module.c`. Strings
 * are byte strings (latin1): HPACK carries octets, not text.
 */

/**
 * Code lengths in bits of HPACK's Huffman code for each octet and for EOS
 * (RFC 7541 Appendix B). The code is canonical: codes of one length are
 * consecutive in symbol order, each length's first code following the
 * previous length's last, so the lengths alone define it.
 */
export const HUFFMAN_BITS = Uint8Array.from([
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
]);

const EOS = 256;

/**
 * The canonical codes of `HUFFMAN_BITS`, by symbol: the codes of one length
 * are consecutive in symbol order and follow those of the shorter lengths
 * (RFC 1951, 3.2.2). Counted in three short passes: this runs when the
 * module loads, where a loop over every length and symbol was hot enough
 * for V8 to optimize it (jinx loads its modules with TurboFan on,
 * src/cli/tiering.ts).
 */
const HUFFMAN_CODES: Uint32Array = (() => {
  const perLength = new Uint32Array(31);
  for (let sym = 0; sym <= EOS; sym++) perLength[HUFFMAN_BITS[sym]!]!++;
  const next = new Uint32Array(31);
  for (let len = 1, code = 0; len <= 30; len++) {
    code = (code + perLength[len - 1]!) << 1;
    next[len] = code;
  }
  const codes = new Uint32Array(257);
  for (let sym = 0; sym <= EOS; sym++) codes[sym] = next[HUFFMAN_BITS[sym]!]!++;
  return codes;
})();

/**
 * The decoding tree of the code, as arrays of child indices: node 0 is the
 * root, `child[2n + bit]` the next node (0: none), `symbol[n]` the octet a
 * leaf stands for (-1 inside the tree).
 */
const TREE = (() => {
  const child = new Int32Array(2 * 520);
  const symbol = new Int16Array(520).fill(-1);
  let nodes = 1;
  for (let sym = 0; sym <= EOS; sym++) {
    const len = HUFFMAN_BITS[sym]!;
    const code = HUFFMAN_CODES[sym]!;
    let n = 0;
    for (let i = len - 1; i >= 0; i--) {
      const bit = (code >>> i) & 1;
      let next = child[2 * n + bit]!;
      if (next === 0) {
        next = nodes++;
        child[2 * n + bit] = next;
      }
      n = next;
    }
    symbol[n] = sym;
  }
  return { child, symbol };
})();

/**
 * Decodes a Huffman-coded string as `ngx_http_huff_decode` does: the bits
 * after the last symbol must all be ones (a prefix of EOS, of any length
 * short of EOS itself); EOS inside the string is an error.
 * @returns the octets, or undefined for an invalid code
 */
export function huffmanDecode(src: Buffer): Buffer | undefined {
  const out = Buffer.allocUnsafe(Math.floor((src.length * 8) / 5) + 1);
  let o = 0;
  let n = 0;
  let ones = true;
  const { child, symbol } = TREE;
  for (let i = 0; i < src.length; i++) {
    const byte = src[i]!;
    for (let b = 7; b >= 0; b--) {
      const bit = (byte >> b) & 1;
      n = child[2 * n + bit]!;
      if (n === 0) return undefined;
      if (bit === 0) ones = false;
      const sym = symbol[n]!;
      if (sym >= 0) {
        if (sym === EOS) return undefined;
        out[o++] = sym;
        n = 0;
        ones = true;
      }
    }
  }
  if (n !== 0 && !ones) return undefined;
  return out.subarray(0, o);
}

/** The static table (RFC 7541 Appendix A), index 1 first. */
export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** `NGX_HTTP_V2_TABLE_SIZE`: the dynamic table size nginx allows (the SETTINGS default, which it never raises). */
const TABLE_SIZE = 4096;
/** RFC 7541 section 4.1: an entry's size is its name and value plus 32 octets. */
const ENTRY_OVERHEAD = 32;
/** `NGX_HTTP_V2_INT_OCTETS`: the most octets an integer nginx reads may take. */
const INT_OCTETS = 4;

/** A decoding failure: nginx's info message and the connection error code it ends with. */
export interface HpackError {
  readonly message: string;
  /** An HTTP/2 error code (RFC 9113 section 7). */
  readonly code: number;
}

/** One decoded header field, with the octets its literal strings took (for `large_client_header_buffers`). */
export interface HeaderField {
  readonly name: Buffer;
  readonly value: Buffer;
}

/** The static table's entries as byte strings, made once: a field read from it is not copied (fields are only read). */
const STATIC_ENTRIES: readonly (readonly [Buffer, Buffer])[] = STATIC_TABLE.map(([n, v]) => [Buffer.from(n, 'latin1'), Buffer.from(v, 'latin1')] as const);

/** HTTP/2 error codes (RFC 9113 section 7), as `ngx_http_v2.c` names them. */
export const H2_ERROR = {
  NO_ERROR: 0x0, PROTOCOL_ERROR: 0x1, INTERNAL_ERROR: 0x2, FLOW_CTRL_ERROR: 0x3, SETTINGS_TIMEOUT: 0x4, STREAM_CLOSED: 0x5,
  SIZE_ERROR: 0x6, REFUSED_STREAM: 0x7, CANCEL: 0x8, COMP_ERROR: 0x9, CONNECT_ERROR: 0xa, ENHANCE_YOUR_CALM: 0xb,
} as const;

/**
 * The header decoder of one connection: its dynamic table, which every
 * header block the client sends updates, in order (`ngx_http_v2_table.c`).
 */
export class HpackDecoder {
  /** Entries, newest first. */
  private readonly entries: [Buffer, Buffer][] = [];
  private size = 0;
  private maxSize = TABLE_SIZE;

  /**
   * Decodes one header block (`ngx_http_v2_state_header_block` and the
   * states after it). `onField` sees each field in order and may stop the
   * block with an error; a string longer than `maxFieldBytes` on the wire is
   * nginx's `client sent too large header field` (ENHANCE_YOUR_CALM).
   * @returns undefined, or the error that ends the connection
   */
  decode(block: Buffer, maxFieldBytes: number, onField: (field: HeaderField) => HpackError | undefined): HpackError | undefined {
    return this.run(block, maxFieldBytes, onField, false);
  }

  /**
   * Decodes the start of a header block whose rest has not arrived, on a
   * copy of the table: the errors nginx finds before the rest comes (an
   * integer longer than 4 octets, a field length over the limit, a bad
   * index); running out of octets is not one.
   */
  probe(start: Buffer, maxFieldBytes: number): HpackError | undefined {
    const copy = new HpackDecoder();
    copy.entries.push(...this.entries);
    copy.size = this.size;
    copy.maxSize = this.maxSize;
    return copy.run(start, maxFieldBytes, () => undefined, true);
  }

  private run(block: Buffer, maxFieldBytes: number, onField: (field: HeaderField) => HpackError | undefined, partial: boolean): HpackError | undefined {
    const result = this.runFields(block, maxFieldBytes, onField);
    if (partial && result && (result.code === H2_ERROR.SIZE_ERROR)) return undefined;
    return result;
  }

  private runFields(block: Buffer, maxFieldBytes: number, onField: (field: HeaderField) => HpackError | undefined): HpackError | undefined {
    let pos = 0;
    const int = (prefixBits: number): number | HpackError => {
      const prefix = (1 << prefixBits) - 1;
      let value = block[pos++]! & prefix;
      if (value !== prefix) return value;
      const start = pos - 1;
      for (let shift = 0; ; shift += 7) {
        if (pos - start >= INT_OCTETS) return { message: '', code: H2_ERROR.COMP_ERROR };
        if (pos >= block.length) return { message: 'client sent header block with incorrect length', code: H2_ERROR.SIZE_ERROR };
        const octet = block[pos++]!;
        value += (octet & 0x7f) * 2 ** shift;
        if (octet < 128) return value;
      }
    };
    const string = (): Buffer | HpackError => {
      if (pos >= block.length) return { message: 'client sent header block with incorrect length', code: H2_ERROR.SIZE_ERROR };
      const huff = block[pos]! >> 7;
      const len = int(7);
      if (typeof len !== 'number') {
        return len.message === '' ? { message: 'client sent header field with too long length value', code: H2_ERROR.COMP_ERROR } : len;
      }
      if (len > maxFieldBytes) return { message: 'client sent too large header field', code: H2_ERROR.ENHANCE_YOUR_CALM };
      if (pos + len > block.length) return { message: 'client sent header field with incorrect length', code: H2_ERROR.SIZE_ERROR };
      // a view of the block, which is the decoder's own (a copy of the frames' payload)
      const raw = block.subarray(pos, pos + len);
      pos += len;
      if (!huff) return raw;
      const decoded = huffmanDecode(raw);
      return decoded ?? { message: 'client sent invalid encoded header field', code: H2_ERROR.COMP_ERROR };
    };
    while (pos < block.length) {
      const ch = block[pos]!;
      let kind: 'indexed' | 'incremental' | 'size' | 'literal' = 'literal';
      let prefixBits = 4;
      if (ch >= 0x80) {
        kind = 'indexed';
        prefixBits = 7;
      } else if (ch >= 0x40) {
        kind = 'incremental';
        prefixBits = 6;
      } else if (ch >= 0x20) {
        kind = 'size';
        prefixBits = 5;
      }
      const value = int(prefixBits);
      if (typeof value !== 'number') {
        if (value.message !== '') return value;
        return { message: `client sent header block with too long ${kind === 'size' ? 'size update' : 'header index'} value`, code: H2_ERROR.COMP_ERROR };
      }
      if (kind === 'size') {
        if (value > TABLE_SIZE) return { message: `client sent invalid table size update: ${value}`, code: H2_ERROR.COMP_ERROR };
        this.maxSize = value;
        this.evict(0);
        continue;
      }
      let name: Buffer;
      let fieldValue: Buffer;
      if (kind === 'indexed') {
        const entry = this.get(value);
        if ('message' in entry) return entry;
        [name, fieldValue] = entry;
      } else {
        if (value === 0) {
          const n = string();
          if ('message' in n) return n;
          if (n.length === 0) return { message: 'client sent zero header name length', code: H2_ERROR.PROTOCOL_ERROR };
          name = n;
        } else {
          const entry = this.get(value);
          if ('message' in entry) return entry;
          name = entry[0];
        }
        const v = string();
        if ('message' in v) return v;
        fieldValue = v;
        if (kind === 'incremental') this.add(name, fieldValue);
      }
      const stop = onField({ name, value: fieldValue });
      if (stop) return stop;
    }
    return undefined;
  }

  /** `ngx_http_v2_get_indexed_header`: the entry (a literal with an indexed name takes its name only). */
  private get(index: number): readonly [Buffer, Buffer] | HpackError {
    if (index === 0) return { message: 'client sent invalid hpack table index 0', code: H2_ERROR.COMP_ERROR };
    if (index <= STATIC_ENTRIES.length) return STATIC_ENTRIES[index - 1]!;
    const entry = this.entries[index - STATIC_TABLE.length - 1];
    // (nginx names the index within the dynamic table, counted from 0)
    if (!entry) return { message: `client sent out of bound hpack table index: ${index - STATIC_TABLE.length - 1}`, code: H2_ERROR.COMP_ERROR };
    return entry;
  }

  /** `ngx_http_v2_add_header`: an entry larger than the table empties it. */
  private add(name: Buffer, value: Buffer): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    if (size > this.maxSize) {
      this.entries.length = 0;
      this.size = 0;
      return;
    }
    this.evict(size);
    this.entries.unshift([name, value]);
    this.size += size;
  }

  private evict(room: number): void {
    while (this.size + room > this.maxSize && this.entries.length > 0) {
      const [n, v] = this.entries.pop()!;
      this.size -= n.length + v.length + ENTRY_OVERHEAD;
    }
  }
}

/** The octet HPACK sends for character `c` of a byte string (a latin1 code unit), lowercased with `lower`. */
function octetOf(s: string, i: number, lower: boolean): number {
  const c = s.charCodeAt(i) & 0xff;
  return lower && c >= 0x41 && c <= 0x5a ? c | 0x20 : c;
}

/**
 * A header block being written, as `ngx_http_v2_header_filter` fills its
 * buffer: the octets go into one buffer kept from block to block (grown by
 * doubling when a block needs more), strings are read from JavaScript
 * strings as byte strings (latin1) with no buffer made per field, and
 * `take` copies the block out. Not reentrant: a block is written and taken
 * before the next one starts.
 */
export class HeaderBlockWriter {
  private buf = Buffer.allocUnsafe(1024);
  private length = 0;

  private room(bytes: number): void {
    if (this.length + bytes <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + bytes));
    this.buf.copy(bigger, 0, 0, this.length);
    this.buf = bigger;
  }

  /** One octet. */
  octet(b: number): void {
    this.room(1);
    this.buf[this.length++] = b;
  }

  /** Octets as they are (an encoding kept from an earlier block). */
  octets(src: Buffer): void {
    this.room(src.length);
    src.copy(this.buf, this.length);
    this.length += src.length;
  }

  /** An integer with a `prefixBits`-bit prefix, the first octet's high bits `first` (`ngx_http_v2_write_int`). */
  int(first: number, prefixBits: number, value: number): void {
    const prefix = (1 << prefixBits) - 1;
    if (value < prefix) {
      this.octet(first | value);
      return;
    }
    this.octet(first | prefix);
    value -= prefix;
    while (value >= 128) {
      this.octet((value % 128) + 128);
      value = Math.floor(value / 128);
    }
    this.octet(value);
  }

  /** A byte string's octets raw, after its length as a 7-bit-prefix integer (what nginx does for `Content-Length`). */
  raw(s: string): void {
    this.int(0, 7, s.length);
    this.room(s.length);
    for (let i = 0; i < s.length; i++) this.buf[this.length++] = octetOf(s, i, false);
  }

  /**
   * A string literal as `ngx_http_v2_string_encode` writes it: Huffman-coded
   * when that is shorter (padded with ones to a whole octet), raw otherwise;
   * a name (`lower`) lowercased.
   */
  string(s: string, lower: boolean): void {
    let bits = 0;
    for (let i = 0; i < s.length; i++) bits += HUFFMAN_BITS[octetOf(s, i, lower)]!;
    const huffmanBytes = Math.ceil(bits / 8);
    if (huffmanBytes >= s.length) {
      this.int(0, 7, s.length);
      this.room(s.length);
      for (let i = 0; i < s.length; i++) this.buf[this.length++] = octetOf(s, i, lower);
      return;
    }
    this.int(0x80, 7, huffmanBytes);
    this.room(huffmanBytes);
    const buf = this.buf;
    let o = this.length;
    // at most 7 bits wait in `acc` between symbols; a code (up to 30 bits) goes in two parts of at most 16
    let acc = 0;
    let accBits = 0;
    for (let i = 0; i < s.length; i++) {
      const c = octetOf(s, i, lower);
      let len = HUFFMAN_BITS[c]!;
      let code = HUFFMAN_CODES[c]!;
      if (len > 16) {
        acc = (acc << (len - 16)) | (code >>> 16);
        accBits += len - 16;
        while (accBits >= 8) {
          accBits -= 8;
          buf[o++] = (acc >>> accBits) & 0xff;
        }
        acc &= (1 << accBits) - 1;
        code &= 0xffff;
        len = 16;
      }
      acc = (acc << len) | code;
      accBits += len;
      while (accBits >= 8) {
        accBits -= 8;
        buf[o++] = (acc >>> accBits) & 0xff;
      }
      acc &= (1 << accBits) - 1;
    }
    if (accBits > 0) buf[o++] = (acc << (8 - accBits)) | ((1 << (8 - accBits)) - 1);
    this.length = o;
  }

  /** The block written since the last `take`, copied out; the writer starts a new one. */
  take(): Buffer {
    const block = Buffer.allocUnsafe(this.length);
    this.buf.copy(block, 0, 0, this.length);
    this.length = 0;
    return block;
  }
}
