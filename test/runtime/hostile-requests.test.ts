/**
 * Hostile and malformed HTTP/1.x requests, differential against nginx: each
 * is sent as raw bytes to the same configuration (a `return` location and a
 * proxy to an upstream that records every request it parses), and jinx must
 * answer as nginx answers (status line, headers, page, connection closed or
 * kept), log the same error-log lines, and pass the upstream exactly the
 * requests nginx passes, in the same form (but for what undici cannot
 * send, tested apart).
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, normalizeBody, parseRaw, rawExchange, snap } from '../helpers/differential.js';
import { recordingUpstream } from '../helpers/upstreams.js';

const conf = (port: number, upstream: number): string => httpConf(`
  log_format t '"$request" $status $request_length $http_host';
  server {
    listen 127.0.0.1:${port};
    access_log logs/access.log t;
    server_name proxy.test;
    location / { return 200 "host=$host uri=$uri args=$args request_uri=$request_uri\\n"; }
    location /up/ { proxy_pass http://127.0.0.1:${upstream}; proxy_set_header Host $host; }
    location /uri/ { proxy_pass http://127.0.0.1:${upstream}; proxy_set_header Host $host; proxy_set_header X-Uri $uri; }
  }
`);

/** Request lines and headers nginx refuses, rewrites or serves in its own way. */
const REQUESTS: Readonly<Record<string, string>> = {
  'bare LF line ends': 'GET /up/a?b=1 HTTP/1.0\nHost: proxy.test\n\n',
  'CRLF and LF mixed': 'GET /up/a HTTP/1.1\r\nHost: proxy.test\n\r\n',
  'a bare CR ends the request line': 'GET /up/ HTTP/1.1\rHost: proxy.test\r\n\r\n',
  'a bare CR inside a header': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\rX: y\r\n\r\n',
  'obs-fold': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX: y\r\n z\r\n\r\n',
  'NUL in a value': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX: y\x00z\r\n\r\n',
  'NUL in a name': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX\x00: y\r\n\r\n',
  'space before the colon': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length : 3\r\n\r\nabc',
  'a header line starting with a space': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\n X: y\r\n\r\n',
  'a header without a colon': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nNoColon\r\n\r\n',
  'an invalid header name is ignored': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX.y: z\r\nX_u: v\r\n\r\n',
  'a tab before a value is part of it': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-T:\tv\r\n\r\n',
  'absolute form': 'GET http://evil.test/up/abs?q=1 HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'Host with userinfo': 'GET /up/ HTTP/1.1\r\nHost: user@evil.test\r\n\r\n',
  'Host with a query': 'GET /up/ HTTP/1.1\r\nHost: evil.test?x\r\n\r\n',
  'Host with a fragment': 'GET /up/ HTTP/1.1\r\nHost: evil.test#x\r\n\r\n',
  'Host with a port too large': 'GET /up/ HTTP/1.1\r\nHost: proxy.test:99999\r\n\r\n',
  'Host with a port then userinfo': 'GET /up/ HTTP/1.1\r\nHost: a.test:80@evil.test\r\n\r\n',
  'two Hosts': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nHost: evil.test\r\n\r\n',
  'HTTP/1.1 without Host': 'GET /up/ HTTP/1.1\r\n\r\n',
  'HTTP/1.0 with Transfer-Encoding': 'POST /up/ HTTP/1.0\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'Transfer-Encoding: identity, chunked': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n',
  'Transfer-Encoding with a tab': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n',
  'two Transfer-Encodings': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'Content-Length and Transfer-Encoding': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'two If-Match headers': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nIf-Match: "a"\r\nIf-Match: "b"\r\n\r\n',
  'two If-None-Match headers': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nIf-None-Match: "a"\r\nIf-None-Match: "b"\r\n\r\n',
  'two If-Unmodified-Since headers': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nIf-Unmodified-Since: a\r\nIf-Unmodified-Since: b\r\n\r\n',
  'two Content-Ranges': 'PUT /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Range: bytes 0-0/1\r\nContent-Range: bytes 0-0/1\r\nContent-Length: 1\r\n\r\nx',
  'two Content-Lengths': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc',
  'Content-Length: 3, 3': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 3, 3\r\n\r\nabc',
  'Content-Length: +3': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: +3\r\n\r\nabc',
  'Content-Length too large': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 99999999999999999999\r\n\r\nabc',
  'an invalid chunk size': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
  'a chunk size ended by a bare LF': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n',
  'chunk data longer than its size': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n',
  'an invalid chunked body to a return': 'POST / HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n',
  'HTTP/2.0 on an HTTP/1.x connection': 'GET /up/v2 HTTP/2.0\r\nHost: proxy.test\r\n\r\n',
  'HTTP/1.10': 'GET /up/ HTTP/1.10\r\nHost: proxy.test\r\n\r\n',
  'HTTP/0.9': 'GET /\r\n',
  'HTTP/0.9 with POST': 'POST /\r\n',
  'TRACE': 'TRACE /up/ HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'CONNECT': 'CONNECT proxy.test:443 HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'a lowercase method': 'get /up/ HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'a control character in the URI': 'GET /up/\x01 HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'an escaped NUL': 'GET /up/a%00b HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'a bad escape': 'GET /up/a%zz HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'dot segments above the root': 'GET /up/../../b HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'escaped dot segments': 'GET /a/%2e%2e/up/b HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'a fragment': 'GET /up/a?b#frag HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'an escaped question mark': 'GET /up/a%3fb?c HTTP/1.1\r\nHost: proxy.test\r\n\r\n',
  'a request line of 9000 bytes': `GET /up/${'a'.repeat(9000)} HTTP/1.1\r\nHost: proxy.test\r\n\r\n`,
  'a header of 9000 bytes': `GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-Long: ${'b'.repeat(9000)}\r\n\r\n`,
  '1500 headers': `GET /up/ HTTP/1.1\r\nHost: proxy.test\r\n${'X-H: v\r\n'.repeat(1500)}\r\n`,
  'empty lines before the request line': '\r\n\r\nGET /up/ HTTP/1.0\r\nHost: proxy.test\r\n\r\n',
  'pipelined requests': 'GET /up/1 HTTP/1.1\r\nHost: proxy.test\r\n\r\nGET /up/2 HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'an unknown method': 'FOO /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a method with a digit': 'G3T /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a method with an underscore': 'GET_X /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a method of 40 letters': 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'two spaces after the method': 'GET  /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a tab after the method': 'GET\t/up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'spaces after the version': 'GET /up/ HTTP/1.1  \r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a lowercase protocol name': 'GET /up/ http/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'HTTP/1.9': 'GET /up/ HTTP/1.9\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'HTTP/2.1': 'GET /up/ HTTP/2.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'HTTP/1 without a minor version': 'GET /up/ HTTP/1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'HTTP/01.1': 'GET /up/ HTTP/01.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a version of 1000.1': 'GET /up/ HTTP/1000.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a URI without a leading slash': 'GET up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'OPTIONS *': 'OPTIONS * HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a space inside the URI': 'GET /up/a b HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'raw 8-bit bytes in the path': 'GET /up/caf\xe9\xff HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'DEL in the path': 'GET /up/a\x7fb HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a backslash in the path': 'GET /up/a\\b HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'an escaped slash': 'GET /up/a%2Fb HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'double slashes': 'GET //up//a///b HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'a percent sign at the end': 'GET /up/a% HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'dot segments in the middle': 'GET /x/./y/../up/z HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'an absolute form with a port': 'GET http://proxy.test:8080/up/p HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n',
  'an absolute form with userinfo': 'GET http://user@proxy.test/up/u HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'an absolute form of https': 'GET https://proxy.test/up/s HTTP/1.1\r\nConnection: close\r\n\r\n',
  'an absolute form without a path': 'GET http://proxy.test HTTP/1.1\r\nConnection: close\r\n\r\n',
  'a request line of 20000 bytes': `GET /up/${'a'.repeat(20000)} HTTP/1.1\r\nHost: proxy.test\r\n\r\n`,
  'Host with a trailing dot': 'GET /up/ HTTP/1.1\r\nHost: proxy.test.\r\nConnection: close\r\n\r\n',
  'Host in upper case': 'GET /up/ HTTP/1.1\r\nHost: PROXY.Test\r\nConnection: close\r\n\r\n',
  'an empty Host': 'GET /up/ HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n',
  'Host with a space inside': 'GET /up/ HTTP/1.1\r\nHost: proxy test\r\nConnection: close\r\n\r\n',
  'Host with a backslash': 'GET /up/ HTTP/1.1\r\nHost: evil.test\\proxy.test\r\nConnection: close\r\n\r\n',
  'Host with a slash': 'GET /up/ HTTP/1.1\r\nHost: evil.test/x\r\nConnection: close\r\n\r\n',
  'Host as an IPv6 literal': 'GET /up/ HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n',
  'Host as an unclosed IPv6 literal': 'GET /up/ HTTP/1.1\r\nHost: [::1\r\nConnection: close\r\n\r\n',
  'Host with two dots in a row': 'GET /up/ HTTP/1.1\r\nHost: a..test\r\nConnection: close\r\n\r\n',
  'Host of a port only': 'GET /up/ HTTP/1.1\r\nHost: :80\r\nConnection: close\r\n\r\n',
  'Host with a NUL': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\x00evil\r\nConnection: close\r\n\r\n',
  'no space after the colon': 'GET /up/ HTTP/1.1\r\nHost:proxy.test\r\nX-A:b\r\nConnection: close\r\n\r\n',
  'an empty header value': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-Empty:\r\nConnection: close\r\n\r\n',
  'trailing spaces in a value': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-T: v   \r\nConnection: close\r\n\r\n',
  'a space inside a header name': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX A: b\r\nConnection: close\r\n\r\n',
  'an underscore in a header name': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX_Forwarded_For: 6.6.6.6\r\nConnection: close\r\n\r\n',
  '8-bit bytes in a value': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-8: caf\xe9\r\nConnection: close\r\n\r\n',
  'obs-fold with a tab': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX: y\r\n\tz\r\nConnection: close\r\n\r\n',
  'a header of 40 KiB over several lines': `GET /up/ HTTP/1.1\r\nHost: proxy.test\r\n${[0, 1, 2, 3, 4, 5].map((i) => `X-Big${i}: ${'c'.repeat(7000)}\r\n`).join('')}\r\n`,
  '2000 headers': `GET /up/ HTTP/1.1\r\nHost: proxy.test\r\n${'X-H: v\r\n'.repeat(2000)}\r\n`,
  'Content-Length with leading zeros': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 003\r\nConnection: close\r\n\r\nabc',
  'a negative Content-Length': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: -1\r\n\r\n',
  'an empty Content-Length': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length:\r\n\r\n',
  'Content-Length with a space inside': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 1 2\r\n\r\nabcdefghijkl',
  'Transfer-Encoding: Chunked in capitals': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: CHUNKED\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
  'Transfer-Encoding: chunked, identity': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n',
  'Transfer-Encoding: gzip': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n',
  'Transfer-Encoding: gzip, chunked': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n',
  'an empty Transfer-Encoding': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding:\r\nConnection: close\r\n\r\n',
  'a chunk extension': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n',
  'spaces after a chunk size': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3  \r\nabc\r\n0\r\n\r\n',
  'a chunk size with a 0x prefix': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n',
  'a chunk size of 17 hex digits': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000003\r\nabc\r\n0\r\n\r\n',
  'trailers after the last chunk': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n',
  'a GET with a body': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello',
  'Expect: 100-continue': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc',
  'an unknown Expect': 'POST /up/ HTTP/1.1\r\nHost: proxy.test\r\nExpect: 200-ok\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc',
  'pipelined GET, POST, GET': 'GET /up/p1 HTTP/1.1\r\nHost: proxy.test\r\n\r\nPOST /up/p2 HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 2\r\n\r\nhiGET /up/p3 HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
  'Connection: close, keep-alive': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: keep-alive, close\r\n\r\n',
  'an HTTP/1.0 keep-alive request': 'GET /up/ HTTP/1.0\r\nHost: proxy.test\r\nConnection: keep-alive\r\n\r\nGET /up/second HTTP/1.0\r\nHost: proxy.test\r\n\r\n',
  'an h2c upgrade request': 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n',
};

describe('hostile HTTP/1.x requests (differential)', () => {
  after(cleanup);

  it('answers, logs and proxies each as nginx does, and passes on no request nginx refuses', async () => {
    const upstream = await recordingUpstream();
    const run = await differential({ conf: ({ port }) => conf(port, upstream.port) }, async (side) => {
      const out: Record<string, unknown> = {};
      for (const [name, bytes] of Object.entries(REQUESTS)) {
        upstream.seen.length = 0;
        const text = await rawExchange(side.port, bytes, 3000);
        // pipelined answers are compared one by one; bytes that are not a response (HTTP/0.9) as they are
        const answers: unknown[] = [];
        let rest = text;
        // an interim 100 (Expect: 100-continue) before the response
        const interim = 'HTTP/1.1 100 Continue\r\n\r\n';
        if (rest.startsWith(interim)) {
          answers.push('100 Continue');
          rest = rest.slice(interim.length);
        }
        for (let i = 0; i < 4 && rest.length > 0; i++) {
          const parsed = parseRaw(rest);
          const length = Number(parsed?.headers['content-length'] ?? NaN);
          if (!parsed || Number.isNaN(length)) {
            answers.push(normalizeBody(rest).replace(/\r/g, '\\r'));
            break;
          }
          const headEnd = rest.indexOf('\r\n\r\n') + 4;
          answers.push(snap({ ...parsed, body: rest.slice(headEnd, headEnd + length) } as typeof parsed, side.kind));
          rest = rest.slice(headEnd + length);
        }
        out[name] = { answers, upstream: [...upstream.seen] };
      }
      return out;
    });
    const nginx = run.nginx.result as Record<string, { upstream: string[] }>;
    assert.deepEqual(nginx['two Hosts']!.upstream, [], 'nginx passes no request with two Host headers');
    assert.equal(nginx['bare LF line ends']!.upstream.length, 1, 'nginx passes a request with bare LF line ends');
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'), 'the access log');
  });

  it('serves what undici cannot send as nginx would, leaving out the field undici refuses with an info line (README, "Upstream requests go through undici"): a control byte in a value, Content-Length: 0 on a GET', async () => {
    const upstream = await recordingUpstream();
    const run = await differential({ conf: ({ port }) => conf(port, upstream.port) }, async (side) => {
      const out: Record<string, { status: number | undefined; upstream: string[] }> = {};
      for (const [name, bytes] of Object.entries({
        control: 'GET /up/ HTTP/1.1\r\nHost: proxy.test\r\nX-C: a\x01b\r\nConnection: close\r\n\r\n',
        'control from $uri': 'GET /uri/%7F HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n',
        empty: 'GET /up/a HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n',
      })) {
        upstream.seen.length = 0;
        out[name] = { status: parseRaw(await rawExchange(side.port, bytes, 3000))?.status, upstream: [...upstream.seen] };
      }
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      control: { status: 200, upstream: ['GET /up/ HTTP/1.1 | host: proxy.test | x-c: a\x01b [body 0]'] },
      'control from $uri': { status: 200, upstream: ['GET /uri/%7F HTTP/1.1 | host: proxy.test | x-uri: /uri/\x7f [body 0]'] },
      empty: { status: 200, upstream: ['GET /up/a HTTP/1.1 | host: proxy.test | content-length: 0 [body 0]'] },
    });
    assert.deepEqual(run.jinx.result, {
      control: { status: 200, upstream: ['GET /up/ HTTP/1.1 | host: proxy.test [body 0]'] },
      'control from $uri': { status: 200, upstream: ['GET /uri/%7F HTTP/1.1 | host: proxy.test [body 0]'] },
      empty: { status: 200, upstream: ['GET /up/a HTTP/1.1 | host: proxy.test [body 0]'] },
    });
    for (const name of ['X-C', 'X-Uri']) {
      const line = `[info] *CONN header "${name}" left out of the upstream request: its value has a control character, client: 127.0.0.1, server: proxy.test, request: "GET /`;
      assert.ok(run.jinx.errorLog.some((l) => l.startsWith(line)), `${line}\n${run.jinx.errorLog.join('\n')}`);
    }
  });
});
