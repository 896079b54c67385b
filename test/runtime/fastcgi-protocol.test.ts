/**
 * The FastCGI wire format record by record (src/runtime/upstream/fastcgi-protocol.ts):
 * the records, BEGIN_REQUEST and PARAMS jinx writes, byte for byte; and how
 * the response reader takes what a server sends, in one piece or split at
 * any byte: padding, the header lines, stderr cut into the pieces nginx logs
 * (per read before the header, per buffer after it, trailing newlines, dots
 * and spaces trimmed, newlines inside kept), nginx's refusals, the
 * response's Content-Length, and when a connection may be kept.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import {
  beginRequestBody, encodeParams, encodeRecords, FCGI, ResponseReader, stderrEnd, type ReaderSettings,
} from '../../src/runtime/upstream/fastcgi-protocol.js';
import { CgiResponseError, type BodyReading } from '../../src/runtime/upstream/cgi-response.js';
import { STDERR, STDOUT, endRequest, fcgiRecord } from '../helpers/fastcgi-server.js';

/** What a reader handed on, in order. */
type Event = ['stderr', string] | ['warn' | 'error', string] | ['header', [string, string][], number] | ['stdout', string] | ['end', boolean];

// with fastcgi_keep_conn the reader says where a response ends; without, the connection's end does
const DEFAULTS: ReaderSettings = { bufferSize: 4096, bodyBufferSize: 4096, keepConn: true };

/** A reader that appends what it hands on to `events`. */
function eventReader(events: (Event | ['error', string])[], opts: { settings?: Partial<ReaderSettings>; body?: BodyReading | 'stop' } = {}): ResponseReader {
  return new ResponseReader({ ...DEFAULTS, ...opts.settings }, {
    stderr: (text) => events.push(['stderr', text]),
    log: (level, message) => events.push([level === 'warn' ? 'warn' : 'error', message]),
    header: (lines, room) => {
      events.push(['header', lines.map(([n, v]) => [n, v]), room]);
      return opts.body ?? { contentLength: -1, buffered: true };
    },
    body: (data) => events.push(['stdout', data.toString('latin1')]),
    end: (reusable) => events.push(['end', reusable]),
  });
}

/** Feeds `chunks` to a reader and returns its events; a refusal ends them with `['error', message]`. */
function read(chunks: readonly Buffer[], opts: { settings?: Partial<ReaderSettings>; body?: BodyReading | 'stop'; eof?: boolean } = {}): (Event | ['error', string])[] {
  const events: (Event | ['error', string])[] = [];
  const reader = eventReader(events, opts);
  try {
    for (const c of chunks) reader.push(c);
    if (opts.eof) reader.eof();
  } catch (err) {
    assert.ok(err instanceof CgiResponseError, String(err));
    events.push(['error', err.message]);
  }
  return events;
}

/** Consecutive stdout events joined, to compare readings whose chunks differ. */
function joined(events: readonly (Event | ['error', string])[]): unknown[] {
  const out: unknown[] = [];
  for (const e of events) {
    const last = out[out.length - 1] as [string, string] | undefined;
    if (e[0] === 'stdout' && last?.[0] === 'stdout') last[1] += e[1];
    else out.push([...e]);
  }
  return out;
}

/** `buf` cut into pieces of `size` bytes. */
const pieces = (buf: Buffer, size: number): Buffer[] => {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
};

const HEAD = 'Content-Type: text/plain\r\n\r\n';
const response = (body = 'hello'): Buffer => Buffer.concat([fcgiRecord(STDOUT, HEAD + body), fcgiRecord(STDOUT, ''), endRequest()]);

describe('FastCGI records jinx writes', () => {
  it('writes an 8-byte header (version 1, type, request id, length, padding) and pads the content to a multiple of 8 with zeros', () => {
    const out: Buffer[] = [];
    encodeRecords(FCGI.STDIN, 1, Buffer.from('abc'), out);
    assert.deepEqual(Buffer.concat(out), Buffer.from([1, 5, 0, 1, 0, 3, 5, 0, 0x61, 0x62, 0x63, 0, 0, 0, 0, 0]));
    const aligned: Buffer[] = [];
    encodeRecords(FCGI.PARAMS, 1, Buffer.alloc(16, 7), aligned);
    assert.deepEqual(Buffer.concat(aligned).subarray(0, 8), Buffer.from([1, 4, 0, 1, 0, 16, 0, 0]));
    assert.equal(Buffer.concat(aligned).length, 24);
  });

  it('writes empty content as one empty record (the end of PARAMS or STDIN)', () => {
    const out: Buffer[] = [];
    encodeRecords(FCGI.PARAMS, 1, Buffer.alloc(0), out);
    assert.deepEqual(Buffer.concat(out), Buffer.from([1, 4, 0, 1, 0, 0, 0, 0]));
  });

  it('splits content over 65535 bytes into records of 65535 and the rest, each padded', () => {
    const out: Buffer[] = [];
    encodeRecords(FCGI.STDIN, 1, Buffer.alloc(70_000, 1), out);
    const all = Buffer.concat(out);
    assert.deepEqual(all.subarray(0, 8), Buffer.from([1, 5, 0, 1, 0xff, 0xff, 1, 0]));
    const second = 8 + 65535 + 1;
    assert.deepEqual(all.subarray(second, second + 8), Buffer.from([1, 5, 0, 1, (70_000 - 65535) >> 8, (70_000 - 65535) & 0xff, 7, 0]));
    assert.equal(all.length, second + 8 + 4465 + 7);
  });

  it('writes BEGIN_REQUEST with the responder role and FCGI_KEEP_CONN only with fastcgi_keep_conn', () => {
    assert.deepEqual(beginRequestBody(false), Buffer.from([0, 1, 0, 0, 0, 0, 0, 0]));
    assert.deepEqual(beginRequestBody(true), Buffer.from([0, 1, 1, 0, 0, 0, 0, 0]));
  });

  it('writes params with 1-byte lengths below 128 and 4-byte lengths (high bit set) from 128, names and values as bytes', () => {
    const long = 'v'.repeat(300);
    const b = encodeParams([['A', 'b'], ['NAME', long], ['BYTES', 'caf\u00e9']]);
    assert.deepEqual(b.subarray(0, 4), Buffer.from([1, 1, 0x41, 0x62]));
    assert.deepEqual(b.subarray(4, 9), Buffer.from([4, 0x80, 0, 1, 44]));
    assert.equal(b.toString('latin1', 9, 13), 'NAME');
    assert.equal(b.toString('latin1', 13, 313), long);
    assert.deepEqual(b.subarray(313), Buffer.from([5, 4, ...Buffer.from('BYTES'), 0x63, 0x61, 0x66, 0xe9]));
  });
});

describe('FastCGI responses as jinx reads them', () => {
  it('reads the header and body the same whether the records come whole or one byte at a time', () => {
    const whole = read([response()]);
    assert.deepEqual(whole, [['header', [['Content-Type', 'text/plain']], 4096 - 8 - HEAD.length], ['stdout', 'hello'], ['end', true]]);
    for (const size of [1, 3, 7, 8, 9, 13]) assert.deepEqual(joined(read(pieces(response(), size))), joined(whole), `pieces of ${size}`);
  });

  it('keeps what came of a header cut by a read\'s end while other responses\' headers are read in between', () => {
    // a header is read into the worker's shared header buffer, which other readers' reads overwrite: each read is parsed to its end
    const cut: (Event | ['error', string])[] = [];
    const reader = eventReader(cut);
    const whole = response('cut body');
    reader.push(whole.subarray(0, 20));
    for (const body of ['other', 'and another']) assert.deepEqual(joined(read([response(body)])), [['header', [['Content-Type', 'text/plain']], 4096 - 8 - HEAD.length], ['stdout', body], ['end', true]]);
    reader.push(whole.subarray(20));
    assert.deepEqual(joined(cut), joined(read([whole])));
  });

  it('skips padding, whatever its bytes', () => {
    const padded = Buffer.concat([fcgiRecord(STDOUT, `${HEAD}ab`, { padding: 6 }), fcgiRecord(STDOUT, 'cd', { padding: 255 }), endRequest()]);
    padded.fill(0xee, 8 + HEAD.length + 2, 8 + HEAD.length + 8);
    assert.deepEqual(joined(read([padded])).slice(1), [['stdout', 'abcd'], ['end', true]]);
  });

  it('joins a header line split over records and reads LF-only lines, values trimmed of spaces only, a line without colon as a name', () => {
    const events = read([Buffer.concat([
      fcgiRecord(STDOUT, 'X-Spl'), fcgiRecord(STDOUT, 'it:  a b  \nHTTP/1.1 200 OK\nX-Tab:\tt\nNoColon\n\nbody'), endRequest(),
    ])]);
    // the header ends after the first record (16 bytes), the second's header and 45 bytes of lines
    assert.deepEqual(events[0], ['header', [['X-Split', 'a b'], ['X-Tab', '\tt'], ['NoColon', '']], 4096 - 16 - 8 - 45]);
  });

  it('refuses header lines as nginx does, naming the line up to the refused byte', () => {
    const refused = (text: string): unknown => read([fcgiRecord(STDOUT, text)]).at(-1);
    assert.deepEqual(refused('Bad Name: x\r\n\r\n'), ['error', 'upstream sent invalid header: "Bad\\x20..."']);
    assert.deepEqual(refused(':x\r\n\r\n'), ['error', 'upstream sent invalid header: "\\x3a..."']);
    assert.deepEqual(refused('X-A: b\rc\r\n\r\n'), ['error', 'upstream sent invalid header: "X-A: b\\x0d..."']);
    assert.deepEqual(refused('X-A: b \rc\r\n\r\n'), ['error', 'upstream sent invalid header: "X-A: b\\x20..."']);
    assert.deepEqual(refused('X-A: b\0\r\n\r\n'), ['error', 'upstream sent invalid header: "X-A: b\\x00..."']);
  });

  it('keeps a stderr message whole with its newlines, trimming trailing CR, LF, dots and spaces but always its first byte', () => {
    const events = read([Buffer.concat([fcgiRecord(STDERR, 'PHP message: one\nPHP message: two. \r\n'), fcgiRecord(STDERR, '\n'), fcgiRecord(STDERR, ''), response()])]);
    assert.deepEqual(events.slice(0, 2), [['stderr', 'PHP message: one\nPHP message: two'], ['stderr', '\n']]);
    const b = Buffer.from('x...');
    assert.equal(stderrEnd(b, 0, b.length), 1);
    assert.equal(stderrEnd(b, 0, 0), 0);
  });

  it('logs what it has of a stderr record at each read before the header: an empty message when only its record header came', () => {
    const rec = fcgiRecord(STDERR, 'late message');
    const events = read([rec.subarray(0, 8), rec.subarray(8, 12), Buffer.concat([rec.subarray(12), response()])]);
    assert.deepEqual(events.slice(0, 3), [['stderr', ''], ['stderr', 'late'], ['stderr', ' message']]);
  });

  it('empties the header buffer for more stderr before the header, in pieces of fastcgi_buffer_size', () => {
    const events = read([Buffer.concat([fcgiRecord(STDERR, 'x'.repeat(10_000)), response()])]);
    assert.deepEqual(events.slice(0, 3).map((e) => [e[0], (e[1] as string).length]), [['stderr', 4088], ['stderr', 4096], ['stderr', 10_000 - 4088 - 4096]]);
    assert.equal(events[3]![0], 'header');
  });

  it('refuses a header that does not fit fastcgi_buffer_size, even when stderr and its padding end exactly at the end of the buffer', () => {
    assert.deepEqual(read([fcgiRecord(STDOUT, `X-Big: ${'b'.repeat(5000)}\r\n\r\n`)]).at(-1), ['error', 'upstream sent too big header']);
    const exact = Buffer.concat([fcgiRecord(STDERR, 'w'.repeat(4080), { padding: 8 }), response()]);
    assert.deepEqual(read([exact]), [['stderr', 'w'.repeat(4080)], ['error', 'upstream sent too big header']]);
    // the same bytes in two reads leave room: the buffer is emptied after the stderr
    assert.equal(read([exact.subarray(0, 4088), exact.subarray(4088)])[1]![0], 'header');
  });

  it('refuses other protocol versions, record types, request ids, and an end before the header', () => {
    assert.deepEqual(read([fcgiRecord(STDOUT, HEAD, { version: 2 })]), [['error', 'upstream sent unsupported FastCGI protocol version: 2']]);
    assert.deepEqual(read([fcgiRecord(9, 'x')]), [['error', 'upstream sent invalid FastCGI record type: 9']]);
    assert.deepEqual(read([fcgiRecord(STDOUT, HEAD, { requestId: 0x0101 })]), [['error', 'upstream sent unexpected FastCGI request id high byte: 1']]);
    assert.deepEqual(read([fcgiRecord(STDOUT, HEAD, { requestId: 2 })]), [['error', 'upstream sent unexpected FastCGI request id low byte: 2']]);
    assert.deepEqual(read([endRequest()]), [['error', 'upstream sent unexpected FastCGI record: 3']]);
    assert.deepEqual(read([fcgiRecord(STDOUT, '')]), [['error', 'upstream prematurely closed FastCGI stdout']]);
  });

  it('cuts stderr after the header where the event pipe\'s buffers end: the rest of the header buffer, then fastcgi_buffers-sized ones', () => {
    const body = Buffer.concat([fcgiRecord(STDOUT, `${HEAD}${'a'.repeat(3000)}`), fcgiRecord(STDERR, 'y'.repeat(3000)), response('end')]);
    const events = read([body], { settings: { bodyBufferSize: 1024 } });
    // the body record (8 + 28 + 3000 bytes and 4 of padding), then the stderr record's header: its content starts at byte 3048
    const start = 8 + HEAD.length + 3000 + 4 + 8;
    const stderr = events.filter((e) => e[0] === 'stderr').map((e) => (e[1] as string).length);
    assert.deepEqual(stderr, [4096 - start, 1024, 3000 - (4096 - start) - 1024]);
    // unbuffered, each read is filtered as it comes: reads of 1000 bytes cut at 4000, 5000 and 6000
    const unbuffered = read(pieces(body, 1000), { body: { contentLength: -1, buffered: false } });
    assert.deepEqual(unbuffered.filter((e) => e[0] === 'stderr').map((e) => (e[1] as string).length), [4000 - start, 1000, 1000, start + 3000 - 6000]);
  });

  it('with fastcgi_keep_conn ends once the END_REQUEST record is read whole, reusable when nothing follows; without, never: the connection\'s end ends the response', () => {
    const loose = { settings: { keepConn: false } };
    assert.equal(read([response()], loose).some((e) => e[0] === 'end'), false);
    assert.equal(read([Buffer.concat([response(), fcgiRecord(STDOUT, 'ignored')])], loose).some((e) => e[0] === 'stdout' && e[1] === 'ignored'), false);
    // nginx 1.30 reads on after the empty STDOUT record
    const stdoutClosed = Buffer.concat([fcgiRecord(STDOUT, 'Content-Type: text/plain\r\n\r\nx'), fcgiRecord(STDOUT, '')]);
    assert.equal(read([stdoutClosed]).some((e) => e[0] === 'end'), false);
    assert.deepEqual(read([response()]).at(-1), ['end', true]);
    assert.deepEqual(read([Buffer.concat([response(), fcgiRecord(STDOUT, 'more')])]).at(-1), ['end', false]);
    // the END_REQUEST body and padding may come in later reads
    assert.deepEqual(read(pieces(response(), 5)).at(-1), ['end', true]);
  });

  it('holds the body to the Content-Length of the header: more is cut with a warning, less is refused at the end', () => {
    const body = (declared: number, sent: string): Buffer => Buffer.concat([fcgiRecord(STDOUT, `Content-Length: ${declared}\r\n\r\n${sent}`), fcgiRecord(STDOUT, ''), endRequest()]);
    assert.deepEqual(read([body(3, 'abcdef')], { body: { contentLength: 3, buffered: true } }).slice(1),
      [['stdout', 'abc'], ['warn', 'upstream sent more data than specified in "Content-Length" header'], ['end', false]]);
    assert.deepEqual(read([body(0, 'x')], { body: { contentLength: 0, buffered: true } }).slice(1),
      [['warn', 'upstream sent more data than specified in "Content-Length" header'], ['end', false]]);
    assert.deepEqual(read([body(10, 'abc')], { body: { contentLength: 10, buffered: true } }).slice(1),
      [['stdout', 'abc'], ['error', 'upstream prematurely closed FastCGI stdout']]);
  });

  it('stops reading when the header is all that is wanted', () => {
    assert.deepEqual(read([response()], { body: 'stop' }).map((e) => e[0]), ['header']);
  });
});
