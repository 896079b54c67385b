import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { HpackDecoder, huffmanDecode, huffmanEncode, writeString } from '../../src/runtime/http2/hpack.js';

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
  it('Huffman-codes a string where that is shorter (C.4.1) and sends a short or incompressible one raw', () => {
    assert.equal(huffmanEncode(Buffer.from('www.example.com')).toString('hex'), 'f1e3c2e5f23a6ba0ab90f4ff');
    const out: number[] = [];
    writeString(out, Buffer.from('no-cache'), false);
    assert.equal(Buffer.from(out).toString('hex'), '86a8eb10649cbf');
    const raw: number[] = [];
    writeString(raw, Buffer.from('{}'), false);
    assert.equal(Buffer.from(raw).toString('hex'), '027b7d');
    const name: number[] = [];
    writeString(name, Buffer.from('X-Custom'), true);
    assert.equal(huffmanDecode(Buffer.from(name.slice(1)))?.toString(), 'x-custom');
  });
});
