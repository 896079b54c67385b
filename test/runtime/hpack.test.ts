import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { HeaderBlockWriter, HpackDecoder, huffmanDecode } from '../../src/runtime/http2/hpack.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/** Decodes a header block into `name: value` lines, or the error's message. */
function decode(decoder: HpackDecoder, block: Buffer): string[] | string {
  const fields: string[] = [];
  const error = decoder.decode(block, 4096, (f) => {
    fields.push(`${f.name.toString('latin1')}: ${f.value.toString('latin1')}`);
    return undefined;
  });
  return error ? error.message : fields;
}

describe('HPACK header blocks a client sends (RFC 7541 Appendix C)', () => {
  it('reads the requests of C.3 (raw strings) and C.4 (Huffman strings), each on one connection\'s dynamic table', () => {
    for (const blocks of [
      ['828684410f7777772e6578616d706c652e636f6d', '828684be58086e6f2d6361636865', '828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565'],
      ['828684418cf1e3c2e5f23a6ba0ab90f4ff', '828684be5886a8eb10649cbf', '828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf'],
    ]) {
      const decoder = new HpackDecoder();
      assert.deepEqual(decode(decoder, hex(blocks[0]!)), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com']);
      assert.deepEqual(decode(decoder, hex(blocks[1]!)), [':method: GET', ':scheme: http', ':path: /', ':authority: www.example.com', 'cache-control: no-cache']);
      assert.deepEqual(decode(decoder, hex(blocks[2]!)), [':method: GET', ':scheme: https', ':path: /index.html', ':authority: www.example.com', 'custom-key: custom-value']);
    }
  });

  it('takes Huffman padding of any length of ones short of EOS, as nginx does, and refuses other padding and EOS', () => {
    assert.equal(huffmanDecode(hex('f1e3c2e5f23a6ba0ab90f4ff'))?.toString(), 'www.example.com');
    // "a" (00011) padded with a whole octet of ones more
    assert.equal(huffmanDecode(hex('1fff'))?.toString(), 'a');
    assert.equal(huffmanDecode(hex('18')), undefined);
    assert.equal(huffmanDecode(hex('ffffffff')), undefined);
  });

  it('refuses an index past the tables and a string longer than large_client_header_buffers allows', () => {
    assert.equal(decode(new HpackDecoder(), hex('be')), 'client sent out of bound hpack table index: 0');
    assert.equal(decode(new HpackDecoder(), hex('80')), 'client sent invalid hpack table index 0');
    const decoder = new HpackDecoder();
    const error = decoder.decode(hex('400a637573746f6d2d6b65790c637573746f6d2d76616c7565'), 8, () => undefined);
    assert.equal(error?.message, 'client sent too large header field');
  });
});

describe('HPACK strings jinx sends', () => {
  /** The encoding of `s` as one string literal. */
  const literal = (s: string, lower = false): Buffer => {
    const w = new HeaderBlockWriter();
    w.string(s, lower);
    return w.take();
  };

  it('Huffman-codes a string where that is shorter (C.4.1) and sends a short or incompressible one raw', () => {
    assert.equal(literal('www.example.com').toString('hex'), '8cf1e3c2e5f23a6ba0ab90f4ff');
    assert.equal(literal('no-cache').toString('hex'), '86a8eb10649cbf');
    assert.equal(literal('{}').toString('hex'), '027b7d');
    assert.equal(huffmanDecode(literal('X-Custom', true).subarray(1))?.toString(), 'x-custom');
  });

  it('codes every octet, the long codes too, as the decoder reads them back (C.4.3\'s date among them), raw where that is shorter', () => {
    assert.equal(literal('Mon, 21 Oct 2013 20:13:21 GMT').toString('hex'), '96d07abe941054d444a8200595040b8166e082a62d1bff');
    const all = Array.from({ length: 256 }, (_, c) => String.fromCharCode(c)).join('');
    // every octet among many short codes: Huffman-coded (the first block) with codes of up to 30 bits in it
    assert.equal(literal('e'.repeat(2000) + all)[0]! & 0x80, 0x80);
    for (const s of ['e'.repeat(2000) + all, all, all.split('').reverse().join(''), '\x00\xff\x01\xfe'.repeat(50), 'a\u00e9b'.repeat(300)]) {
      const block = literal(s);
      // the length (a 7-bit-prefix integer) after the Huffman bit, then the octets
      let at = 1;
      if ((block[0]! & 0x7f) === 0x7f) while (block[at++]! & 0x80);
      const octets = block.subarray(at);
      assert.equal((block[0]! & 0x80) === 0x80 ? huffmanDecode(octets)?.toString('latin1') : octets.toString('latin1'), s);
    }
  });

  it('keeps writing into a grown buffer for a block larger than its first one (and starts afresh after take)', () => {
    const w = new HeaderBlockWriter();
    const long = 'v'.repeat(5000);
    w.octet(0);
    w.string('x-long', true);
    w.raw(long);
    const block = w.take();
    // 0, the name's literal, 5000 as a 7-bit-prefix integer (3 octets), the value
    assert.equal(block.length, 1 + literal('x-long', true).length + 3 + 5000);
    assert.equal(block.subarray(block.length - 5000).toString('latin1'), long);
    w.octet(0x82);
    assert.equal(w.take().toString('hex'), '82');
  });
});
