/**
 * DNS messages as nginx's resolver writes and reads them
 * (`src/core/ngx_resolver.c`): the A and AAAA queries of
 * `ngx_resolver_create_name_query`, the checks of
 * `ngx_resolver_process_response` and `ngx_resolver_process_a`, names read
 * as `ngx_resolver_copy` reads them, and addresses printed as
 * `ngx_inet6_ntop` prints them. Each check that fails gives the text nginx
 * logs for it (`short DNS response`, `invalid A record in DNS response` …).
 */

export const TYPE_A = 1;
export const TYPE_CNAME = 5;
export const TYPE_PTR = 12;
export const TYPE_AAAA = 28;
export const TYPE_SRV = 33;
export const TYPE_DNAME = 39;

export const RCODE_FORMERR = 1;
export const RCODE_NXDOMAIN = 3;
export const RCODE_REFUSED = 5;
/** `NGX_RESOLVE_TIMEDOUT` (`NGX_ETIMEDOUT`). */
export const RESOLVE_TIMEDOUT = 110;

/** The size of the header (`ngx_resolver_hdr_t`). */
export const HEADER_BYTES = 12;
/** The type and class after the question's name (`ngx_resolver_qs_t`). */
const QUESTION_TAIL_BYTES = 4;
/** Type, class, TTL and data length after an answer's name (`ngx_resolver_an_t`). */
const ANSWER_FIXED_BYTES = 10;

/** `ngx_resolver_strerror`: the text nginx prints after a resolver code. */
export function resolverStrerror(code: number): string {
  const texts = ['Format error', 'Server failure', 'Host not found', 'Unimplemented', 'Operation refused'];
  if (code > 0 && code < 6) return texts[code - 1]!;
  if (code === RESOLVE_TIMEDOUT) return 'Operation timed out';
  return 'Unknown error';
}

/**
 * `ngx_resolver_create_name_query`: a recursive query of one question,
 * `name` (lowercase, no trailing dot) with type `type` (A or AAAA), class
 * IN, id `ident`. Undefined where nginx declines the name (empty, an empty
 * label, a label over 255 bytes): the name is then not found. Names are
 * bytes (latin1), as nginx sends them.
 */
export function nameQuery(name: string, type: number, ident: number): Buffer | undefined {
  if (name === '') return undefined;
  const labels = name.split('.');
  if (labels.some((l) => l.length === 0 || l.length > 255)) return undefined;
  const out = Buffer.alloc(HEADER_BYTES + name.length + 2 + QUESTION_TAIL_BYTES);
  out.writeUInt16BE(ident, 0);
  // recursion desired, one question
  out[2] = 1;
  out.writeUInt16BE(1, 4);
  let p = HEADER_BYTES;
  for (const label of labels) {
    // nginx writes the length byte as it is, even past 63
    out[p++] = label.length & 0xff;
    p += out.write(label, p, 'latin1');
  }
  out[p++] = 0;
  out.writeUInt16BE(type, p);
  out.writeUInt16BE(1, p + 2);
  return out;
}

/** What was read, or the line to log when a check failed. */
export type Read<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });

/**
 * `ngx_resolver_copy`: the (possibly compressed) name at `offset`,
 * lowercase, without the trailing dot (empty for the root), or why it
 * cannot be read: at most 128 labels and pointers, none leading out of the
 * message.
 */
export function readName(buf: Buffer, offset: number): Read<string> {
  const last = buf.length;
  let p = offset;
  for (let i = 0; i < 128; i++) {
    const n = buf[p++]!;
    if (n === 0) return { ok: true, value: copyLabels(buf, offset) };
    if (n & 0xc0) {
      if ((n & 0xc0) !== 0xc0) return fail('invalid label type in DNS response');
      if (p >= last) return fail('name is out of DNS response');
      p = ((n & 0x3f) << 8) + buf[p]!;
    } else p += n;
    if (p >= last) return fail('name is out of DNS response');
  }
  return fail('compression pointers loop in DNS response');
}

/** The labels of a name already checked by `readName`, joined by dots. */
function copyLabels(buf: Buffer, offset: number): string {
  const labels: string[] = [];
  let p = offset;
  for (let n = buf[p++]!; n !== 0; n = buf[p++]!) {
    if (n & 0xc0) {
      p = ((n & 0x3f) << 8) + buf[p]!;
      continue;
    }
    labels.push(buf.toString('latin1', p, p + n).toLowerCase());
    p += n;
  }
  return labels.join('.');
}

/** The header of a response (`ngx_resolver_hdr_t`). */
export interface ResponseHeader {
  readonly ident: number;
  readonly flags: number;
  /** The response code (`flags & 0xf`). */
  readonly code: number;
  /** Answers announced. */
  readonly nan: number;
  /** The TC bit: the answer was truncated. */
  readonly trunc: boolean;
  /** Questions announced. */
  readonly nqs: number;
}

/**
 * The header checks of `ngx_resolver_process_response`: long enough, a
 * response to a standard query, not truncated over TCP.
 */
export function readHeader(buf: Buffer, tcp: boolean): Read<ResponseHeader> {
  if (buf.length < HEADER_BYTES) return fail('short DNS response');
  const ident = buf.readUInt16BE(0);
  const flags = buf.readUInt16BE(2);
  const trunc = (flags & 0x0200) !== 0;
  if ((flags & 0xf870) !== 0x8000 || (trunc && tcp)) {
    return fail(`invalid ${tcp ? 'TCP' : 'UDP'} DNS response ${ident} fl:${flags.toString(16).toUpperCase().padStart(4, '0')}`);
  }
  return { ok: true, value: { ident, flags, code: flags & 0xf, nan: buf.readUInt16BE(6), trunc, nqs: buf.readUInt16BE(4) } };
}

/** The question of a response. */
export interface ResponseQuestion {
  readonly qtype: number;
  readonly qclass: number;
  /** Where the answers start. */
  readonly answersAt: number;
}

/**
 * The question checks of `ngx_resolver_process_response`: one question,
 * its name uncompressed and not empty, and room for `nan` minimal answers.
 */
export function readQuestion(buf: Buffer, header: ResponseHeader): Read<ResponseQuestion> {
  if (header.nqs !== 1) return fail('invalid number of questions in DNS response');
  let i = HEADER_BYTES;
  for (;;) {
    if (i >= buf.length) return fail('short DNS response');
    if (buf[i]! & 0xc0) return fail('unexpected compression pointer in DNS response');
    if (buf[i] === 0) break;
    i += 1 + buf[i]!;
  }
  if (i++ === HEADER_BYTES) return fail('zero-length domain name in DNS response');
  if (i + QUESTION_TAIL_BYTES + header.nan * (2 + ANSWER_FIXED_BYTES) > buf.length) return fail('short DNS response');
  return { ok: true, value: { qtype: buf.readUInt16BE(i), qclass: buf.readUInt16BE(i + 2), answersAt: i + QUESTION_TAIL_BYTES } };
}

/** The answers to an A or AAAA question. */
export interface AddressAnswers {
  /** Addresses of the question's type, in the order of the message. */
  readonly addrs: readonly string[];
  /** Where the data of the last CNAME record starts (its target name), if there is one. */
  readonly cnameAt: number | undefined;
}

/** What reading the answers gave: the answers or the line to log, and the lowest TTL seen on the way (seconds). */
export interface AnswersRead {
  readonly result: Read<AddressAnswers>;
  /** The lowest TTL of the records read (nginx lowers the node's TTL as it reads, even when a later record fails). */
  readonly minTtlSec: number;
}

/**
 * The answer loop of `ngx_resolver_process_a`: each record's name is
 * skipped, its class must be IN, its TTL (negative taken as 0) lowers
 * `ttlSec`; A records (for an A question) and AAAA records (for an AAAA
 * question) must be 4 and 16 bytes, a CNAME records where its target is,
 * a DNAME is skipped, and any other type is reported through `unexpected`
 * (`unexpected RR type N in DNS response`) and skipped.
 */
export function readAddressAnswers(
  buf: Buffer, q: ResponseQuestion, nan: number, ttlSec: number, unexpected: (line: string) => void,
): AnswersRead {
  const n = buf.length;
  let minTtlSec = ttlSec;
  const done = (result: Read<AddressAnswers>): AnswersRead => ({ result, minTtlSec });
  const addrs: string[] = [];
  let cnameAt: number | undefined;
  let i = q.answersAt;
  for (let a = 0; a < nan; a++) {
    const start = i;
    let compressed = false;
    for (;;) {
      if (i >= n) return done(fail('short DNS response'));
      if (buf[i]! & 0xc0) {
        i += 2;
        compressed = true;
        break;
      }
      if (buf[i] === 0) {
        i++;
        break;
      }
      i += 1 + buf[i]!;
    }
    if (!compressed && i - start < 2) return done(fail('invalid name in DNS response'));
    if (i + ANSWER_FIXED_BYTES >= n) return done(fail('short DNS response'));
    const type = buf.readUInt16BE(i);
    const klass = buf.readUInt16BE(i + 2);
    const ttl = buf.readInt32BE(i + 4);
    const len = buf.readUInt16BE(i + 8);
    if (klass !== 1) return done(fail(`unexpected RR class ${klass} in DNS response`));
    minTtlSec = Math.min(minTtlSec, Math.max(ttl, 0));
    i += ANSWER_FIXED_BYTES;
    if (type === TYPE_A) {
      if (q.qtype !== TYPE_A) return done(fail('unexpected A record in DNS response'));
      if (len !== 4) return done(fail('invalid A record in DNS response'));
      if (i + 4 > n) return done(fail('short DNS response'));
      addrs.push(`${buf[i]}.${buf[i + 1]}.${buf[i + 2]}.${buf[i + 3]}`);
    } else if (type === TYPE_AAAA) {
      if (q.qtype !== TYPE_AAAA) return done(fail('unexpected AAAA record in DNS response'));
      if (len !== 16) return done(fail('invalid AAAA record in DNS response'));
      if (i + 16 > n) return done(fail('short DNS response'));
      addrs.push(inet6Ntop(buf.subarray(i, i + 16)));
    } else if (type === TYPE_CNAME) cnameAt = i;
    else if (type !== TYPE_DNAME) unexpected(`unexpected RR type ${type} in DNS response`);
    i += len;
  }
  return done({ ok: true, value: { addrs, cnameAt } });
}

/**
 * `ngx_inet6_ntop`: lowercase hex words, the longest run of two or more
 * zero words written `::`, an IPv4-mapped or -compatible address ending in
 * dotted quads.
 */
export function inet6Ntop(p: Uint8Array): string {
  let zero = -1;
  let last = -1;
  let max = 1;
  let run = 0;
  for (let i = 0; i < 16; i += 2) {
    if (p[i] || p[i + 1]) {
      if (max < run) {
        zero = last;
        max = run;
      }
      run = 0;
      continue;
    }
    if (run++ === 0) last = i;
  }
  if (max < run) {
    zero = last;
    max = run;
  }
  let out = '';
  let end = 16;
  if (zero === 0) {
    if ((max === 5 && p[10] === 0xff && p[11] === 0xff) || max === 6 || (max === 7 && p[14] !== 0 && p[15] !== 1)) end = 12;
    out += ':';
  }
  for (let i = 0; i < end; i += 2) {
    if (i === zero) {
      out += ':';
      i += (max - 1) * 2;
      continue;
    }
    out += (p[i]! * 256 + p[i + 1]!).toString(16);
    if (i < 14) out += ':';
  }
  if (end === 12) out += `${p[12]}.${p[13]}.${p[14]}.${p[15]}`;
  return out;
}
