/**
 * The table that turns an upstream client failure into nginx's status,
 * message, phase and `proxy_next_upstream` condition
 * (src/runtime/upstream/errors.ts), case by case, with the errors undici and
 * Node raise.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { errors } from 'undici';
import { mapUpstreamError, upstreamTimeout, UpstreamCertificateError, X509_ERRORS } from '../../src/runtime/upstream/errors.js';

/** A Node system error as `net` raises it. */
const systemError = (code: string, syscall = 'read'): Error & { code: string } =>
  Object.assign(new Error(`${syscall} ${code}`), { code, syscall });

describe('upstream error table', () => {
  it('connect() failed (111: Connection refused) while connecting to upstream: 502', () => {
    assert.deepEqual(mapUpstreamError(systemError('ECONNREFUSED', 'connect'), 'connect'), {
      code: 'connect', status: 502, message: 'connect() failed (111: Connection refused)', action: 'connecting to upstream', condition: 'error',
    });
  });

  it('a connect timeout is 504 "upstream timed out (110: Operation timed out) while connecting to upstream"', () => {
    assert.deepEqual(mapUpstreamError(new errors.ConnectTimeoutError(), 'connect'), {
      code: 'timeout', status: 504, message: 'upstream timed out (110: Operation timed out)', action: 'connecting to upstream', condition: 'timeout',
    });
  });

  it('a header timeout is 504 "while reading response header from upstream", a body timeout "while reading upstream"', () => {
    assert.deepEqual(mapUpstreamError(new errors.HeadersTimeoutError(), 'header'), upstreamTimeout('header'));
    assert.equal(upstreamTimeout('header').action, 'reading response header from upstream');
    assert.deepEqual(mapUpstreamError(new errors.BodyTimeoutError(), 'body'), {
      code: 'timeout', status: 504, message: 'upstream timed out (110: Operation timed out)', action: 'reading upstream', condition: 'timeout',
    });
  });

  it('an oversized header is 502 "upstream sent too big header"', () => {
    assert.deepEqual(mapUpstreamError(new errors.HeadersOverflowError(), 'header'), {
      code: 'header-too-big', status: 502, message: 'upstream sent too big header', action: 'reading response header from upstream', condition: 'invalid_header',
    });
  });

  it('a reset is "recv() failed (104: …)" for the header and unbuffered bodies, "readv() failed" for buffered bodies', () => {
    const reset = systemError('ECONNRESET');
    assert.deepEqual(mapUpstreamError(reset, 'header'), {
      code: 'read', status: 502, message: 'recv() failed (104: Connection reset by peer)', action: 'reading response header from upstream', condition: 'error',
    });
    assert.equal(mapUpstreamError(reset, 'body', false).message, 'recv() failed (104: Connection reset by peer)');
    assert.deepEqual(mapUpstreamError(reset, 'body', true), {
      code: 'read', status: 502, message: 'readv() failed (104: Connection reset by peer)', action: 'reading upstream', condition: 'error',
    });
  });

  it('a closed connection is "upstream prematurely closed connection" in the phase it happened', () => {
    const closed = new errors.SocketError('other side closed');
    assert.deepEqual(mapUpstreamError(closed, 'header'), {
      code: 'premature-close', status: 502, message: 'upstream prematurely closed connection', action: 'reading response header from upstream', condition: 'error',
    });
    assert.equal(mapUpstreamError(closed, 'body').action, 'reading upstream');
  });

  it('a status line that is not HTTP is "upstream sent no valid HTTP/1.0 header", a bad header line "upstream sent invalid header"', () => {
    const statusLine = Object.assign(new errors.HTTPParserError('Expected HTTP/'), { code: 'HPE_INVALID_CONSTANT' });
    assert.equal(mapUpstreamError(statusLine, 'header').message, 'upstream sent no valid HTTP/1.0 header');
    const headerLine = Object.assign(new errors.HTTPParserError('Invalid header value char'), { code: 'HPE_INVALID_HEADER_TOKEN' });
    assert.deepEqual(mapUpstreamError(headerLine, 'header'), {
      code: 'invalid-header', status: 502, message: 'upstream sent invalid header', action: 'reading response header from upstream', condition: 'invalid_header',
    });
  });

  it('a TLS handshake failure is "SSL_do_handshake() failed (SSL: error:…)" while SSL handshaking to upstream', () => {
    const err = Object.assign(new Error('C0:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:354:\n'), {
      code: 'ERR_SSL_WRONG_VERSION_NUMBER',
    });
    assert.deepEqual(mapUpstreamError(err, 'connect'), {
      code: 'ssl', status: 502,
      message: 'SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines:ssl3_get_record:wrong version number)',
      action: 'SSL handshaking to upstream',
      condition: 'error',
    });
  });

  /** An OpenSSL error as Node.js raises it: `…:error:CODE:LIB:FUNC:REASON:FILE:LINE:DATA`. */
  const opensslError = (code: string, hex: string, func: string, reason: string, data = ''): Error & { code: string } =>
    Object.assign(new Error(`80AC21EA8E7F0000:error:${hex}:SSL routines:${func}:${reason}:../deps/openssl/openssl/ssl/record/rec_layer_s3.c:1601:${data}\n`), { code });

  it('a TLS alert in the handshake keeps OpenSSL\'s data: "…:tlsv1 alert protocol version:SSL alert number 70"', () => {
    const err = opensslError('ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', '0A00042E', 'ssl3_read_bytes', 'tlsv1 alert protocol version', 'SSL alert number 70');
    assert.deepEqual(mapUpstreamError(err, 'connect'), {
      code: 'ssl', status: 502,
      message: 'SSL_do_handshake() failed (SSL: error:0A00042E:SSL routines:ssl3_read_bytes:tlsv1 alert protocol version:SSL alert number 70)',
      action: 'SSL handshaking to upstream', condition: 'error',
    });
  });

  it('an "sslv3 alert" reason is printed with OpenSSL 3.2\'s name "ssl/tls alert", as nginx 1.30 prints it', () => {
    const err = opensslError('ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', '0A000410', 'ssl3_read_bytes', 'sslv3 alert handshake failure', 'SSL alert number 40');
    assert.equal(mapUpstreamError(err, 'connect').message,
      'SSL_do_handshake() failed (SSL: error:0A000410:SSL routines:ssl3_read_bytes:ssl/tls alert handshake failure:SSL alert number 40)');
  });

  it('a TLS alert after the handshake is "SSL_read() failed (SSL: …)" in the phase it came in (TLS 1.3 client certificate required)', () => {
    const err = opensslError('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', '0A00045C', 'ssl3_read_bytes', 'tlsv13 alert certificate required', 'SSL alert number 116');
    assert.deepEqual(mapUpstreamError(err, 'header'), {
      code: 'ssl', status: 502,
      message: 'SSL_read() failed (SSL: error:0A00045C:SSL routines:ssl3_read_bytes:tlsv13 alert certificate required:SSL alert number 116)',
      action: 'reading response header from upstream', condition: 'error',
    });
    assert.equal(mapUpstreamError(err, 'body').action, 'reading upstream');
  });

  it('a certificate that fails verification is "upstream SSL certificate verify error: (N:text)", OpenSSL\'s number and text', () => {
    const cases: [string, string][] = [
      ['DEPTH_ZERO_SELF_SIGNED_CERT', '(18:self-signed certificate)'],
      ['SELF_SIGNED_CERT_IN_CHAIN', '(19:self-signed certificate in certificate chain)'],
      ['UNABLE_TO_GET_ISSUER_CERT_LOCALLY', '(20:unable to get local issuer certificate)'],
      ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', '(21:unable to verify the first certificate)'],
      ['CERT_HAS_EXPIRED', '(10:certificate has expired)'],
      ['CERT_NOT_YET_VALID', '(9:certificate is not yet valid)'],
      ['CERT_CHAIN_TOO_LONG', '(22:certificate chain too long)'],
      ['INVALID_PURPOSE', '(26:unsupported certificate purpose)'],
    ];
    for (const [code, text] of cases) {
      assert.deepEqual(mapUpstreamError(new UpstreamCertificateError(code, 'backend.test'), 'connect'), {
        code: 'certificate', status: 502, message: `upstream SSL certificate verify error: ${text}`, action: 'SSL handshaking to upstream', condition: 'error',
      }, code);
    }
  });

  it('the verification table has one number per code and OpenSSL 3\'s hyphenated "self-signed"', () => {
    const numbers = Object.values(X509_ERRORS).map(([n]) => n);
    assert.equal(new Set(numbers).size, numbers.length);
    assert.ok(Object.values(X509_ERRORS).every(([, text]) => !text.includes('self signed')));
  });

  it('a certificate whose names do not match is "upstream SSL certificate does not match \"NAME\""', () => {
    assert.deepEqual(mapUpstreamError(new UpstreamCertificateError('ERR_TLS_CERT_ALTNAME_INVALID', 'backend.test'), 'connect'), {
      code: 'certificate', status: 502, message: 'upstream SSL certificate does not match "backend.test"', action: 'SSL handshaking to upstream', condition: 'error',
    });
  });
});
