/**
 * Hostile and malformed HTTP/1.x requests, differential against nginx: each
 * is sent as raw bytes to the same configuration (a `return` location and a
 * proxy to an upstream that records every request it parses), and jinx must
 * answer as nginx answers (status line, headers, page, connection closed or
 * kept), log the same error-log lines, and pass the upstream exactly the
 * requests nginx passes, in the same form.
 */
import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, onCleanup } from '../helpers/harness.js';
import { NO_ORACLE, assertSameAsNginx, differential, httpConf, normalizeBody, parseRaw, rawExchange, snap } from '../helpers/differential.js';

/**
 * An upstream that records the request head of every request it receives
 * (the bytes up to the empty line, with the body length) and answers 200.
 */
async function recordingUpstream(): Promise<{ port: number; seen: string[] }> {
  const seen: string[] = [];
  const server: Server = createServer((socket) => {
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = buf.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        // header names lowercased: undici writes its own `host` so (README, "Differences from nginx")
        const lines = head.split('\r\n').filter((l) => !/^(x-real-ip|connection):/i.test(l));
        seen.push(`${[lines[0], ...lines.slice(1).map((l) => l.replace(/^[^:]*/, (n) => n.toLowerCase()))].join(' | ')} [body ${length}]`);
        buf = buf.subarray(end + 4 + length);
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nup\n');
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  onCleanup(() => new Promise<void>((res) => server.close(() => res())));
  return { port: (server.address() as { port: number }).port, seen };
}

const conf = (port: number, upstream: number): string => httpConf(`
  log_format t '"$request" $status $request_length $http_host';
  server {
    listen 127.0.0.1:${port};
    access_log logs/access.log t;
    server_name proxy.test;
    location / { return 200 "host=$host uri=$uri args=$args request_uri=$request_uri\\n"; }
    location /up/ { proxy_pass http://127.0.0.1:${upstream}; proxy_set_header Host $host; }
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
};

describe('hostile HTTP/1.x requests (differential)', { skip: NO_ORACLE }, () => {
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
});
