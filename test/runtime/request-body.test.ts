/**
 * Client request bodies on their way to an upstream, differential against
 * nginx: `client_max_body_size` (Content-Length and chunked, 0 disables),
 * `client_body_buffer_size` (memory or a temporary file, nginx's warning),
 * `client_body_temp_path` with levels and ten-digit names,
 * `client_body_in_file_only`, `client_body_timeout` with a client that
 * stops sending, `proxy_request_buffering off`, and clients that hang up in
 * the middle of an upload: every case checks the status, the error-log
 * lines, the temp files seen during and after the request, and that no
 * temp file or socket is left open.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { createHash } from 'node:crypto';
import { connect as connectHttp2 } from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, onCleanup, waitFor } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Side } from '../helpers/differential.js';
import { makePki } from '../helpers/pki.js';
import { echoOf, echoUpstream } from '../helpers/upstreams.js';
import { listTree, openFiles, rawClient, servingPid, settledTree, sleep, statusOf } from '../helpers/slow-clients.js';

const HOST = 'body.test';

/** A request head for `path` with a body of `length` bytes (Content-Length) or chunked (`length` undefined). */
const head = (method: string, path: string, length: number | undefined): string =>
  `${method} ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n${length === undefined ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`}\r\n\r\n`;

/** Sends a whole request on its own connection and returns the status (undefined: closed without a response). */
async function post(s: Side, path: string, body: Buffer, opts: { chunked?: readonly number[] } = {}): Promise<number | undefined> {
  const c = await rawClient(s.port);
  if (opts.chunked) {
    let at = 0;
    let data = head('POST', path, undefined);
    for (const size of opts.chunked) {
      data += `${size.toString(16)}\r\n${body.subarray(at, at + size).toString('latin1')}\r\n`;
      at += size;
    }
    await c.send(`${data}0\r\n\r\n`);
  } else await c.send(Buffer.concat([Buffer.from(head('POST', path, body.length), 'latin1'), body]));
  return statusOf((await c.ended()).text);
}

/** What the serving process holds open after the requests: temp files and sockets beyond the baseline. */
function leftOpen(s: Side, baselineSockets: number): { tempFiles: string[]; extraSockets: number } {
  const open = openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp'));
  return { tempFiles: open.tempFiles, extraSockets: Math.max(0, open.sockets - baselineSockets) };
}

/** Sockets the serving process holds when idle (listening sockets and the like). */
const baseline = (s: Side): number => openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp')).sockets;

describe('request bodies (differential)', () => {
  after(cleanup);

  it('answers 413 with "client intended to send too large body" above client_max_body_size, for lengths and chunks, and takes any size with 0', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /small/ { client_max_body_size 1k; proxy_pass http://127.0.0.1:${up.port}; }
    location /off/ { client_max_body_size 0; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      underDefault: await post(s, '/a', Buffer.alloc(1024 * 1024, 0x61)),
      overDefault: await post(s, '/b', Buffer.alloc(1024 * 1024 + 1, 0x61)),
      small: await post(s, '/small/', Buffer.alloc(1025, 0x61)),
      smallChunked: await post(s, '/small/c', Buffer.alloc(1500, 0x61), { chunked: [1000, 500] }),
      smallChunkedFits: await post(s, '/small/d', Buffer.alloc(1000, 0x61), { chunked: [600, 400] }),
      off: await post(s, '/off/', Buffer.alloc(3 * 1024 * 1024, 0x61)),
      offChunked: await post(s, '/off/c', Buffer.alloc(2 * 1024 * 1024, 0x61), { chunked: [1024 * 1024, 1024 * 1024] }),
    }));
    assert.deepEqual(run.nginx.result, {
      underDefault: 200, overDefault: 413, small: 413, smallChunked: 413, smallChunkedFits: 200, off: 200, offChunked: 200,
    });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN client intended to send too large body: 1048577 bytes')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN client intended to send too large chunked body: 1000+500 bytes')));
    assertSameAsNginx(run);
  });

  it('sends 100 Continue before a body it reads or discards (a file, a return, an error_page =200), not before an error (404, a POST to a file, 413 with or without error_page)', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST}; root html;
    location = /ret { return 200 "ret\\n"; }
    location /small/ { alias html/; client_max_body_size 2; }
    location /small-ep/ { alias html/; client_max_body_size 2; error_page 413 = /ret; }
    location /ep200/ { alias html/; error_page 404 =200 /ret; }
    location /ep404/ { alias html/; error_page 404 /ret; }
  }`),
      files: { 'html/f.txt': 'file\n' },
    }, async (s) => {
      const out: Record<string, string[]> = {};
      for (const [method, path] of [['GET', '/f.txt'], ['POST', '/ret'], ['GET', '/missing'], ['POST', '/f.txt'], ['POST', '/small/f.txt'],
        ['POST', '/small-ep/f.txt'], ['GET', '/ep200/missing'], ['GET', '/ep404/missing']] as const) {
        const raw = await rawExchange(s.port, `${method} ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody`);
        out[`${method} ${path}`] = raw.split('\r\n').filter((l) => l.startsWith('HTTP/1.1 '));
      }
      return out;
    });
    assert.deepEqual(run.nginx.result['GET /f.txt'], ['HTTP/1.1 100 Continue', 'HTTP/1.1 200 OK']);
    assert.deepEqual(run.nginx.result['POST /small-ep/f.txt'], ['HTTP/1.1 200 OK']);
    assertSameAsNginx(run);
  });

  it('keeps a body in memory up to client_body_buffer_size (8k by default, a quarter more for a known length) and writes a larger one to a temp file with nginx\'s warning', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /2k/ { client_body_buffer_size 2k; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const [name, path, size, chunked] of [
        ['9000', '/m', 9000, undefined], ['12000', '/f', 12000, undefined], ['64k', '/g', 65536, undefined],
        ['chunked 6000', '/cm', 6000, [6000]], ['chunked 12000', '/cf', 12000, [4000, 4000, 4000]],
        ['2k: 1500', '/2k/m', 1500, undefined], ['2k: 4000', '/2k/f', 4000, undefined],
      ] as const) {
        const body = Buffer.alloc(size, 0x62);
        out[name] = await post(s, path, body, chunked ? { chunked } : {});
      }
      out.echoed = up.seen.slice(-7).map((e) => e.bodyLength);
      up.seen.length = 0;
      out.tree = listTree(join(s.prefix, 'tmp/body'));
      return out;
    });
    assert.deepEqual(run.nginx.result.echoed, [9000, 12000, 65536, 6000, 12000, 1500, 4000]);
    const spooled = (lines: readonly string[]): string[] => lines.flatMap((l) => {
      const m = /^\[warn\] \*CONN a client request body is buffered to a temporary file \/.*\/tmp\/body\/(\d{10}), .*request: "POST (\S+) HTTP\/1\.1"/.exec(l);
      return m ? [`${m[2]} ${m[1]}`] : [];
    });
    assert.deepEqual(spooled(run.nginx.errorLog), ['/f 0000000001', '/g 0000000002', '/cf 0000000003', '/2k/f 0000000004']);
    assert.deepEqual(run.nginx.result.tree, []);
    assertSameAsNginx(run);
  });

  it('names temp files with ten digits under client_body_temp_path\'s level directories, removes them when the request ends, and keeps them with client_body_in_file_only', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { client_body_temp_path tmp/levels 1 2; proxy_pass http://127.0.0.1:${up.port}; }
    location /keep/ { client_body_temp_path tmp/kept 2; client_body_in_file_only on; proxy_pass http://127.0.0.1:${up.port}; }
    location /clean/ { client_body_temp_path tmp/cleaned; client_body_in_file_only clean; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      levels: await post(s, '/a', Buffer.alloc(20_000, 0x63)),
      keep: await post(s, '/keep/', Buffer.alloc(10, 0x63)),
      keepEmpty: await post(s, '/keep/empty', Buffer.alloc(0)),
      clean: await post(s, '/clean/', Buffer.alloc(30_000, 0x63)),
      levelsTree: await settledTree(join(s.prefix, 'tmp/levels')),
      keptTree: listTree(join(s.prefix, 'tmp/kept')),
      cleanedTree: await settledTree(join(s.prefix, 'tmp/cleaned')),
      echoed: up.seen.splice(0).map((e) => e.bodyLength),
    }));
    assert.deepEqual(run.nginx.result, {
      levels: 200, keep: 200, keepEmpty: 200, clean: 200,
      levelsTree: ['1/', '1/00/'],
      keptTree: ['02/', '02/0000000002', '03/', '03/0000000003'],
      cleanedTree: [],
      echoed: [20_000, 10, 0, 30_000],
    });
    const files = (lines: readonly string[]): string[] => lines.flatMap((l) => {
      const m = /^\[(\w+)\] \*CONN a client request body is buffered to a temporary file \/.*\/tmp\/(\S+),/.exec(l);
      return m ? [`${m[1]} ${m[2]}`] : [];
    });
    assert.deepEqual(files(run.nginx.errorLog), [
      'warn levels/1/00/0000000001', 'notice kept/02/0000000002', 'notice kept/03/0000000003', 'notice cleaned/0000000004',
    ]);
    assertSameAsNginx(run);
  });

  it('closes the connection without a response (408) when the client stops sending its body for client_body_timeout, buffered or streamed upstream', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    client_body_timeout 1s;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /unbuffered/ { proxy_request_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const sockets = baseline(s);
      const out: Record<string, unknown> = {};
      for (const [name, sent] of [['small', 100], ['spooled', 50_000], ['unbuffered/', 1000]] as const) {
        const c = await rawClient(s.port);
        await c.send(head('POST', `/${name}`, 100_000) + 'd'.repeat(sent));
        const end = await c.ended();
        // no status: null, not undefined (a recording, JSON, keeps it)
        out[name] = { status: statusOf(end.text) ?? null, received: end.text.length, reset: end.reset, inTime: end.afterMs >= 900 && end.afterMs < 3000 };
      }
      await sleep(200);
      out.left = leftOpen(s, sockets);
      out.upstreamSaw = up.seen.length;
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      small: { status: null, received: 0, reset: false, inTime: true },
      spooled: { status: null, received: 0, reset: false, inTime: true },
      'unbuffered/': { status: null, received: 0, reset: false, inTime: true },
      left: { tempFiles: [], extraSockets: 0 },
      upstreamSaw: 0,
    });
    // nginx 1.30 logs nothing for this time-out; the access log says 408
    assert.deepEqual(run.nginx.errorLog.filter((l) => !l.includes('buffered to a temporary file')), []);
    assert.deepEqual(run.nginx.file('logs/access.log'), ['408', '408', '408']);
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('leaves no temp file or socket behind when the client hangs up in the middle of an upload', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    client_max_body_size 10m;
    location / { client_body_temp_path tmp/upload 1; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const sockets = baseline(s);
      const c = await rawClient(s.port);
      await c.send(head('POST', '/upload', 5_000_000) + 'e'.repeat(200_000));
      // the body is being written to a temp file: the server has said so (after opening it and removing its name)
      await waitFor(() => readFileSync(join(s.prefix, 'logs/error.log'), 'utf8').includes('buffered to a temporary file'), 5000, 'the temp file warning');
      const during = openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp')).tempFiles;
      c.socket.destroy();
      await sleep(300);
      return { during, tree: listTree(join(s.prefix, 'tmp/upload')), left: leftOpen(s, sockets), upstreamSaw: up.seen.length };
    });
    assert.deepEqual(run.nginx.result, {
      during: ['/upload/1/0000000001 (deleted)'],
      tree: ['1/'],
      left: { tempFiles: [], extraSockets: 0 },
      upstreamSaw: 0,
    });
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('streams the body to the upstream as it arrives with proxy_request_buffering off, without a temp file', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location /on/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /off/ { proxy_request_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const loc of ['on', 'off']) {
        const [seen, connections] = [up.seen.length, up.connections()];
        const c = await rawClient(s.port);
        await c.send(head('POST', `/${loc}/`, 100_000) + 'f'.repeat(50_000));
        await sleep(500);
        // the echo upstream answers at the end of the body: its connections tell whether the request started
        const connectedBeforeEnd = up.connections() > connections;
        await c.send('f'.repeat(50_000));
        const end = await c.ended();
        out[loc] = { status: statusOf(end.text), connectedBeforeEnd, echoed: up.seen.slice(seen).map((e) => e.bodyLength) };
      }
      out.tree = listTree(join(s.prefix, 'tmp/body'));
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      on: { status: 200, connectedBeforeEnd: false, echoed: [100_000] },
      off: { status: 200, connectedBeforeEnd: true, echoed: [100_000] },
      tree: [],
    });
    assertSameAsNginx(run);
  });

  it('passes the body a client sent when the upstream answers', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const r = await s.request('/x', { method: 'PUT', body: Buffer.alloc(100_000, 0x67), headers: { Host: HOST } });
      return { status: r.status, length: echoOf(r.body).bodyLength };
    });
    assert.deepEqual(run.nginx.result, { status: 200, length: 100_000 });
    assertSameAsNginx(run);
  });

  it('reads HTTP/2 request bodies the same way: in memory up to client_body_buffer_size, a temp file beyond, 413 for an undeclared length over client_max_body_size', async (t) => {
    const pki = makePki();
    if (!pki) return t.skip('no openssl');
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port} ssl; http2 on; server_name ${HOST};
    ssl_certificate cert.pem; ssl_certificate_key cert.key;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /small/ { client_max_body_size 1k; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
      files: { 'cert.pem': pki.text('self.pem'), 'cert.key': pki.text('self.key') },
    }, async (s) => {
      const session = connectHttp2(`https://127.0.0.1:${s.port}`, { rejectUnauthorized: false });
      session.on('error', () => undefined);
      const post = (path: string, size: number, declared: boolean): Promise<number> => new Promise((res, rej) => {
        const headers: Record<string, string> = { ':method': 'POST', ':path': path, ':authority': HOST };
        if (declared) headers['content-length'] = String(size);
        const req = session.request(headers);
        req.on('response', (h) => {
          req.resume();
          req.on('end', () => res(Number(h[':status'])));
        });
        req.on('error', rej);
        req.end(Buffer.alloc(size, 0x68));
      });
      const out = {
        declared8000: await post('/a', 8000, true),
        declared9000: await post('/b', 9000, true),
        undeclared6000: await post('/c', 6000, false),
        undeclared20000: await post('/d', 20_000, false),
        small: await post('/small/', 2000, false),
        echoed: up.seen.splice(0).map((e) => e.bodyLength),
      };
      session.close();
      return out;
    });
    assert.deepEqual(run.nginx.result, { declared8000: 200, declared9000: 200, undeclared6000: 200, undeclared20000: 200, small: 413, echoed: [8000, 9000, 6000, 20_000] });
    const lines = (all: readonly string[]): string[] => all.filter((l) => !l.includes('client closed connection')).map((l) => l.replace(/ \/\S+\/tmp\/body\//, ' tmp/body/'));
    assert.deepEqual(lines(run.nginx.errorLog), [
      `[warn] *CONN a client request body is buffered to a temporary file tmp/body/0000000001, client: 127.0.0.1, server: ${HOST}, request: "POST /b HTTP/2.0", host: "${HOST}"`,
      `[warn] *CONN a client request body is buffered to a temporary file tmp/body/0000000002, client: 127.0.0.1, server: ${HOST}, request: "POST /d HTTP/2.0", host: "${HOST}"`,
      `[error] *CONN client intended to send too large chunked body: 2000 bytes, client: 127.0.0.1, server: ${HOST}, request: "POST /small/ HTTP/2.0", host: "${HOST}"`,
    ]);
    assert.deepEqual(lines(run.jinx.errorLog), lines(run.nginx.errorLog));
    assertSameAsNginx(run, { log: false });
  });

  it('passes a 16 MiB HTTP/2 body on to an upstream that stops reading for a while (proxy_request_buffering off): the client\'s window opens again once the upstream takes what waited', async (t) => {
    const pki = makePki();
    if (!pki) return t.skip('no openssl');
    const up = await lateReader(700);
    const body = Buffer.alloc(16 * 1024 * 1024, 0x6c);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port} ssl; http2 on; server_name ${HOST};
    ssl_certificate cert.pem; ssl_certificate_key cert.key;
    location / { client_max_body_size 0; proxy_request_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
      files: { 'cert.pem': pki.text('self.pem'), 'cert.key': pki.text('self.key') },
    }, async (s) => {
      const session = connectHttp2(`https://127.0.0.1:${s.port}`, { rejectUnauthorized: false });
      session.on('error', () => undefined);
      try {
        return await new Promise<{ status: number; answer: string }>((res, rej) => {
          const req = session.request({ ':method': 'POST', ':path': '/late', ':authority': HOST, 'content-length': String(body.length) });
          let status = 0;
          let answer = '';
          req.setTimeout(15_000, () => req.close());
          req.on('response', (h) => { status = Number(h[':status']); });
          req.on('data', (c: Buffer) => { answer += c.toString('latin1'); });
          req.on('close', () => res({ status, answer }));
          req.on('error', rej);
          req.end(body);
        });
      } finally {
        session.close();
      }
    });
    assert.deepEqual(run.nginx.result, { status: 200, answer: `${body.length} ${createHash('sha1').update(body).digest('hex')}` });
    assertSameAsNginx(run);
  });
});

/**
 * An upstream that leaves each connection unread for `pauseMs` (what the
 * proxy sends fills the socket buffers and waits), then reads the request
 * and its `Content-Length` body and answers 200 with the body's length and
 * SHA-1. Stopped at cleanup.
 */
async function lateReader(pauseMs: number): Promise<{ port: number }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    sock.pause();
    const timer = setTimeout(() => sock.resume(), pauseMs);
    sock.on('close', () => clearTimeout(timer));
    let head = '';
    let rest = -1;
    const hash = createHash('sha1');
    let length = 0;
    sock.on('data', (d: Buffer) => {
      let data = d;
      if (rest < 0) {
        head += d.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        rest = Number(/\r\ncontent-length: *(\d+)/i.exec(head.slice(0, end))?.[1] ?? 0);
        data = Buffer.from(head.slice(end + 4), 'latin1');
      }
      hash.update(data);
      length += data.length;
      rest -= data.length;
      if (rest > 0) return;
      const text = `${length} ${hash.digest('hex')}`;
      sock.end(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n${text}`);
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => { for (const s of sockets) s.destroy(); server.close(() => res()); }));
  return { port: (server.address() as AddressInfo).port };
}
