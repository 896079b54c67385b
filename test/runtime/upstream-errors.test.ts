/**
 * The table that turns an upstream client failure into nginx's status,
 * message, phase and `proxy_next_upstream` condition
 * (src/runtime/upstream/errors.ts), case by case, with the errors undici and
 * Node raise.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { errors } from 'undici';
import { mapUpstreamError, upstreamTimeout } from '../../src/runtime/upstream/errors.js';

/** A Node system error as `net` raises it. */
const systemError = (code: string, syscall = 'read'): Error & { code: string } =>
  Object.assign(new Error(`${syscall} ${code}`), { code, syscall });

describe('upstream error table', () => {
  it('connect() failed (111: Connection refused) while connecting to upstream: 502', () => {
    assert.deepEqual(mapUpstreamError(systemError('ECONNREFUSED', 'connect'), 'connect'), {
      status: 502, message: 'connect() failed (111: Connection refused)', action: 'connecting to upstream', condition: 'error',
    });
  });

  it('a connect timeout is 504 "upstream timed out (110: Operation timed out) while connecting to upstream"', () => {
    assert.deepEqual(mapUpstreamError(new errors.ConnectTimeoutError(), 'connect'), {
      status: 504, message: 'upstream timed out (110: Operation timed out)', action: 'connecting to upstream', condition: 'timeout',
    });
  });

  it('a header timeout is 504 "while reading response header from upstream", a body timeout "while reading upstream"', () => {
    assert.deepEqual(mapUpstreamError(new errors.HeadersTimeoutError(), 'header'), upstreamTimeout('header'));
    assert.equal(upstreamTimeout('header').action, 'reading response header from upstream');
    assert.deepEqual(mapUpstreamError(new errors.BodyTimeoutError(), 'body'), {
      status: 504, message: 'upstream timed out (110: Operation timed out)', action: 'reading upstream', condition: 'timeout',
    });
  });

  it('an oversized header is 502 "upstream sent too big header"', () => {
    assert.deepEqual(mapUpstreamError(new errors.HeadersOverflowError(), 'header'), {
      status: 502, message: 'upstream sent too big header', action: 'reading response header from upstream', condition: 'invalid_header',
    });
  });

  it('a reset is "recv() failed (104: …)" for the header and unbuffered bodies, "readv() failed" for buffered bodies', () => {
    const reset = systemError('ECONNRESET');
    assert.deepEqual(mapUpstreamError(reset, 'header'), {
      status: 502, message: 'recv() failed (104: Connection reset by peer)', action: 'reading response header from upstream', condition: 'error',
    });
    assert.equal(mapUpstreamError(reset, 'body', false).message, 'recv() failed (104: Connection reset by peer)');
    assert.deepEqual(mapUpstreamError(reset, 'body', true), {
      status: 502, message: 'readv() failed (104: Connection reset by peer)', action: 'reading upstream', condition: 'error',
    });
  });

  it('a closed connection is "upstream prematurely closed connection" in the phase it happened', () => {
    const closed = new errors.SocketError('other side closed');
    assert.deepEqual(mapUpstreamError(closed, 'header'), {
      status: 502, message: 'upstream prematurely closed connection', action: 'reading response header from upstream', condition: 'error',
    });
    assert.equal(mapUpstreamError(closed, 'body').action, 'reading upstream');
  });

  it('a status line that is not HTTP is "upstream sent no valid HTTP/1.0 header", a bad header line "upstream sent invalid header"', () => {
    const statusLine = Object.assign(new errors.HTTPParserError('Expected HTTP/'), { code: 'HPE_INVALID_CONSTANT' });
    assert.equal(mapUpstreamError(statusLine, 'header').message, 'upstream sent no valid HTTP/1.0 header');
    const headerLine = Object.assign(new errors.HTTPParserError('Invalid header value char'), { code: 'HPE_INVALID_HEADER_TOKEN' });
    assert.deepEqual(mapUpstreamError(headerLine, 'header'), {
      status: 502, message: 'upstream sent invalid header', action: 'reading response header from upstream', condition: 'invalid_header',
    });
  });

  it('a TLS handshake failure is "SSL_do_handshake() failed (SSL: error:…)" while SSL handshaking to upstream', () => {
    const err = Object.assign(new Error('C0:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:354:\n'), {
      code: 'ERR_SSL_WRONG_VERSION_NUMBER',
    });
    assert.deepEqual(mapUpstreamError(err, 'connect'), {
      status: 502,
      message: 'SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines:ssl3_get_record:wrong version number)',
      action: 'SSL handshaking to upstream',
      condition: 'error',
    });
  });
});
