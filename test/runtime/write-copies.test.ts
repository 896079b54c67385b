/**
 * Writes to a client's TLS socket (src/runtime/write-copies.ts), over a
 * real TLS connection on 127.0.0.1: what the client reads is what was
 * written, in order, when large writes are handed to OpenSSL in pieces
 * (`boundTlsWrites`), and when the buffer a write came in is filled with
 * other bytes as soon as `writeReleasing` says it is free.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { boundTlsWrites, writeReleasing } from '../../src/runtime/write-copies.js';
import { cleanup, hasCommand, onCleanup } from '../helpers/harness.js';
import { selfSigned } from '../helpers/pki.js';

const NO_OPENSSL = hasCommand('openssl') ? false : 'no openssl command';

/** `bytes` bytes counting up from `seed` (mod 251): any piece out of place or missing shows. */
function pattern(bytes: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(bytes);
  for (let i = 0; i < bytes; i++) b[i] = (seed + i) % 251;
  return b;
}

/**
 * A TLS server on 127.0.0.1 whose first connection `serve` writes to (its
 * writes bounded by `boundTlsWrites`) and ends; resolves to all a client
 * read from it.
 */
async function readAllFrom(serve: (socket: TLSSocket) => void): Promise<Buffer> {
  const { cert, key } = selfSigned('copies.test');
  const server = createTlsServer({ cert, key }, (socket) => {
    boundTlsWrites(socket);
    serve(socket);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => server.close(() => res())));
  const client = tlsConnect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, rejectUnauthorized: false });
  const chunks: Buffer[] = [];
  client.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((res, rej) => client.on('end', res).on('error', rej));
  client.destroy();
  return Buffer.concat(chunks);
}

describe('writes to a client TLS socket', { skip: NO_OPENSSL }, () => {
  after(cleanup);

  it('delivers large writes, queued ones and strings among them whole and in order, each write called back in order', async () => {
    const a = pattern(200 * 1024, 1);
    const b = pattern(100 * 1024, 2);
    const c = pattern(300 * 1024, 3);
    const text = 'between the buffers';
    const done: string[] = [];
    const got = await readAllFrom((socket) => {
      // queued behind one another: node hands them over as one `_writev`, cut here into pieces of 64 KiB
      socket.cork();
      socket.write(a, () => done.push('a'));
      socket.write(text, 'latin1', () => done.push('text'));
      socket.write(b, () => done.push('b'));
      socket.uncork();
      // alone: one `_write`, cut as well
      socket.write(c, () => done.push('c'));
      socket.end();
    });
    assert.equal(got.length, a.length + text.length + b.length + c.length);
    assert.ok(got.equals(Buffer.concat([a, Buffer.from(text, 'latin1'), b, c])), 'the bytes read are the bytes written, in order');
    assert.deepEqual(done, ['a', 'text', 'b', 'c']);
  });

  it('sends what was written even when the buffer is filled with other bytes as soon as writeReleasing says it is free', async () => {
    const expected: Buffer[] = [];
    const got = await readAllFrom((socket) => {
      const reused = Buffer.allocUnsafe(100 * 1024);
      for (let i = 0; i < 64; i++) {
        // the first write, longer than OpenSSL is handed at once, goes in part later, as the writes of the same turn
        // after it (they wait behind it): those parts as copies
        const piece = reused.subarray(0, i === 0 ? reused.length : 32 * 1024);
        pattern(piece.length, i).copy(piece);
        expected.push(Buffer.from(piece));
        assert.equal(writeReleasing(socket, [piece]), true, `write ${i} left its buffer free`);
      }
      reused.fill(0);
      socket.end();
    });
    assert.ok(got.equals(Buffer.concat(expected)), 'each write arrived as it was when written');
  });
});
