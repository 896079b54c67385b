/**
 * FastCGI record by record, differential against nginx, with a scripted
 * FastCGI server: what the server receives (BEGIN_REQUEST flags, the params
 * in order, the body as STDIN), and how responses php-fpm does not send are
 * taken: records and lines split across TCP segments, stderr filling the
 * header buffer, wrong versions, types and request ids, early ends, and
 * stderr of unbuffered responses.
 */
import { strict as assert } from 'node:assert';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, onCleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { STDERR, STDOUT, endRequest, fcgiRecord, scriptedFastcgi, type SeenRequest } from '../helpers/fastcgi-server.js';

/** Writes `parts` one after the other, `gapMs` apart (separate TCP segments), then closes unless `keep`. */
function writeApart(sock: Socket, parts: readonly Buffer[], gapMs: number, keep = false): void {
  const timers: NodeJS.Timeout[] = [];
  onCleanup(() => { for (const t of timers) clearTimeout(t); });
  parts.forEach((p, i) => timers.push(setTimeout(() => {
    if (sock.destroyed) return;
    sock.write(p);
    if (i === parts.length - 1 && !keep) sock.end();
  }, i * gapMs)));
}

const HEAD = 'Content-Type: text/plain\r\n\r\n';
const ok = (body = 'ok\n'): Buffer[] => [fcgiRecord(STDOUT, HEAD + body), fcgiRecord(STDOUT, ''), endRequest()];

/** The answers of the scripted server, by the script name the request asks for. */
const SCRIPTS: Record<string, (sock: Socket) => void> = {
  '/plain': (s) => writeApart(s, [Buffer.concat(ok())], 0),
  // a header line split over two STDOUT records, and the second record in a later segment
  '/split-line': (s) => writeApart(s, [fcgiRecord(STDOUT, 'Content-Ty'), Buffer.concat([fcgiRecord(STDOUT, 'pe: text/plain\r\nX-Split: yes\r\n\r\nbody\n'), fcgiRecord(STDOUT, ''), endRequest()])], 100),
  // a STDERR record's header alone in a segment, its content in the next: nginx logs what it has each time
  '/stderr-split': (s) => {
    const rec = fcgiRecord(STDERR, 'late message\n');
    writeApart(s, [rec.subarray(0, 8), Buffer.concat([rec.subarray(8), ...ok()])], 100);
  },
  // a STDERR record and its padding fill the 4096-byte header buffer exactly: nginx finds no room and gives up
  '/stderr-fills-buffer': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDERR, 'w'.repeat(4080), { padding: 8 }), ...ok()])], 0),
  // STDERR before the header, 10 KiB in one record: logged in 4 KiB pieces, the buffer emptied each time
  '/stderr-large': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDERR, 'x'.repeat(10_000)), ...ok()])], 0),
  '/too-big': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `X-Big: ${'b'.repeat(5000)}\r\n${HEAD}`), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/version': (s) => writeApart(s, [fcgiRecord(STDOUT, HEAD, { version: 2 })], 0),
  '/type': (s) => writeApart(s, [fcgiRecord(9, 'what')], 0),
  '/request-id': (s) => writeApart(s, [fcgiRecord(STDOUT, HEAD, { requestId: 2 })], 0),
  '/end-first': (s) => writeApart(s, [endRequest()], 0),
  '/empty-stdout': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/close-in-header': (s) => writeApart(s, [fcgiRecord(STDOUT, 'Content-Type: text/')], 0),
  '/close-in-body': (s) => writeApart(s, [fcgiRecord(STDOUT, `${HEAD}partial`)], 0),
  '/space-in-name': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `Bad Name: x\r\n${HEAD}`), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/cr-in-line': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `X-A: b\rc\r\n${HEAD}`), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/lf-only': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, 'Status: 404 Not Here\nX-Lf:  spaced value  \nNoColon\n\nbody\n'), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  // one Content-Length, once, of digits, as every upstream module takes it
  '/two-lengths': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `Content-Length: 2\r\nContent-Length: 3\r\n${HEAD}abc`), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/bad-length': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `Content-Length: -1\r\n${HEAD}abc`), fcgiRecord(STDOUT, ''), endRequest()])], 0),
  '/data-after-end': (s) => writeApart(s, [Buffer.concat([...ok(), fcgiRecord(STDOUT, 'extra')])], 0),
  // unbuffered: stderr in the segment that ends the header is read with it, a later one is not
  '/unbuffered-together': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `X-Accel-Buffering: no\r\n${HEAD}one\n`), fcgiRecord(STDERR, 'with the header'), ...ok('two\n')])], 0),
  '/unbuffered-later': (s) => writeApart(s, [fcgiRecord(STDOUT, `X-Accel-Buffering: no\r\n${HEAD}one\n`), Buffer.concat([fcgiRecord(STDERR, 'after the header'), ...ok('two\n')])], 300),
  // buffered: stderr in the middle of the body, split where the pipe's buffers end
  '/body-stderr': (s) => writeApart(s, [Buffer.concat([fcgiRecord(STDOUT, `${HEAD}${'a'.repeat(3000)}`), fcgiRecord(STDERR, 'y'.repeat(3000)), ...ok('end\n')])], 0),
};

function answer(req: SeenRequest, sock: Socket): void {
  const script = req.params.find(([n]) => n === 'SCRIPT_NAME')?.[1] ?? '';
  (SCRIPTS[script] ?? SCRIPTS['/plain']!)(sock);
}

/** What the server received, comparable between the two runs: the client port left out. */
const received = (req: SeenRequest): object => ({
  role: req.role, flags: req.flags, params: req.params.filter(([n]) => n !== 'REMOTE_PORT'), stdinLength: req.stdin.length, stdin: req.stdin.toString('latin1', 0, 64),
});

describe('FastCGI records (differential, scripted FastCGI server)', () => {
  after(cleanup);

  it('sends BEGIN_REQUEST, the params in nginx\'s order with the request headers as HTTP_*, and the body as STDIN', async () => {
    const fcgi = await scriptedFastcgi(answer);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name records.test;
    client_max_body_size 1m;
    location / {
      fastcgi_param SCRIPT_NAME /plain;
      fastcgi_param REQUEST_METHOD $request_method;
      fastcgi_param CONTENT_LENGTH $content_length;
      fastcgi_param EMPTY "";
      fastcgi_param SKIPPED $http_x_none if_not_empty;
      fastcgi_param HTTP_X_OVERRIDDEN from-param;
      fastcgi_param LONG_VALUE ${'v'.repeat(300)};
      fastcgi_pass 127.0.0.1:${fcgi.port};
    }
    location /keep/ { fastcgi_keep_conn on; fastcgi_param SCRIPT_NAME /plain; fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => {
      const before = fcgi.requests.length;
      const headers = { 'X-One': '1', 'X-Dup': 'a', Cookie: 'a=1', 'X-Overridden': 'from-header', 'User-Agent': 'ua' };
      await s.get('/get?q=1', { headers });
      await s.raw('GET /dup HTTP/1.1\r\nHost: records.test\r\nX-Dup: a\r\nX-Dup: b\r\nCookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n');
      await s.get('/post', { method: 'POST', body: Buffer.alloc(200_000, 'p') });
      await s.get('/chunked', { method: 'POST', chunks: ['abc', 'def'] });
      await s.get('/keep/x');
      // the Host header as nginx 1.30 passes it: the request line's host, lowercased, without a trailing dot, with the port as a number
      await s.raw('GET http://Example.COM.:08080/abs HTTP/1.1\r\nX-First: 1\r\nHost: other\r\nConnection: close\r\n\r\n');
      await s.raw('GET /ipv6 HTTP/1.1\r\nHost: [::1]:443\r\nConnection: close\r\n\r\n');
      await s.raw('GET /old HTTP/1.0\r\n\r\n');
      return fcgi.requests.slice(before).map(received);
    });
    const n = run.nginx.result as { flags: number; params: [string, string][]; stdinLength: number }[];
    assert.deepEqual(n.map((r) => r.flags), [0, 0, 0, 0, 1, 0, 0, 0]);
    assert.deepEqual(n[5]!.params.filter(([k]) => k.startsWith('HTTP_')), [['HTTP_X_OVERRIDDEN', 'from-param'], ['HTTP_HOST', 'example.com:8080'], ['HTTP_X_FIRST', '1'], ['HTTP_CONNECTION', 'close']]);
    assert.equal(n[6]!.params.find(([k]) => k === 'HTTP_HOST')![1], '[::1]:443');
    assert.equal(n[7]!.params.find(([k]) => k === 'HTTP_HOST')![1], 'records.test');
    assert.deepEqual(n[2]!.stdinLength, 200_000);
    assertSameAsNginx(run);
  });

  it('reads headers, stderr and records split across segments and buffers as nginx does, and refuses what nginx refuses', async () => {
    const fcgi = await scriptedFastcgi(answer);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name records.test;
    location / { fastcgi_param SCRIPT_NAME $uri; fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const script of Object.keys(SCRIPTS)) {
        out[script] = await s.raw(`GET ${script} HTTP/1.1\r\nHost: records.test\r\nConnection: close\r\n\r\n`);
      }
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n['/split-line']!.headers['x-split'], 'yes');
    assert.equal(n['/stderr-fills-buffer']!.status, 502);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "" while reading response header from upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream sent invalid FastCGI record type: 9 while reading response header from upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "with the header" while reading response header from upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN FastCGI sent in stderr: "after the header" while reading upstream')));
    // 3000 bytes of stderr after 3000 of body: the header buffer (4096) ends inside it
    assert.ok(run.nginx.errorLog.some((l) => /^\[error\] \*CONN FastCGI sent in stderr: "y{1000,}" while reading upstream/.test(l)));
    assertSameAsNginx(run);
  });

  it('answers 504 when the FastCGI server stops reading the request body for fastcgi_send_timeout', async () => {
    // a server that accepts and never reads: the body fills the socket buffers
    const sockets = new Set<Socket>();
    const server = createServer((sock) => {
      sockets.add(sock);
      sock.pause();
      sock.on('error', () => undefined);
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => {
      for (const sock of sockets) sock.destroy();
      server.close(() => res());
    }));
    const port = (server.address() as AddressInfo).port;
    const run = await differential({
      conf: ({ port: listen }) => httpConf(`  server { listen 127.0.0.1:${listen}; server_name records.test;
    client_max_body_size 64m;
    location / { fastcgi_send_timeout 1s; fastcgi_pass 127.0.0.1:${port}; }
  }`),
    }, async (s) => (await s.get('/upload', { method: 'POST', body: Buffer.alloc(32 * 1024 * 1024, 'u') })).status);
    assert.equal(run.nginx.result, 504);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while sending request to upstream')));
    assertSameAsNginx(run);
  });
});
