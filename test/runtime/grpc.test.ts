/**
 * `grpc_pass`, differential against nginx: a real gRPC server
 * (`@grpc/grpc-js`) behind both, called by a gRPC client over cleartext
 * HTTP/2 (unary calls, an error status, a bidirectional stream), by an
 * HTTP/1.1 client (the trailers in the last chunk) and an HTTP/2 one (the
 * trailers frame); `grpcs://` to a TLS gRPC server with a certificate made
 * here; and a scripted HTTP/2 upstream for what the upstream receives
 * (`:authority`, `grpc_set_header`, TE) and for failures (a reset stream,
 * no answer, a closed port, an intercepted error, connections kept by an
 * `upstream` block's `keepalive`).
 */
import { strict as assert } from 'node:assert';
import http2 from 'node:http2';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, onCleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange } from '../helpers/differential.js';
import { callChat, callUnary, cancelChat, startGrpcServer, startH2Server } from '../helpers/grpc-servers.js';
import { selfSigned } from '../helpers/pki.js';

/** A gRPC message frame: no compression, the length, the bytes. */
function grpcFrame(message: string): string {
  const b = Buffer.alloc(5 + message.length);
  b.writeUInt32BE(message.length, 1);
  b.write(message, 5, 'latin1');
  return b.toString('latin1');
}

/** An HTTP/1.1 exchange on its own connection, the server's name and the date left out. */
async function http1(port: number, request: string): Promise<string> {
  const text = await rawExchange(port, request);
  return text.replace(/^(Date|Server): .*\r\n/gim, '');
}

/** A POST of one gRPC message over HTTP/1.1, with `Connection: close`. */
function http1Call(path: string, message: string, extra = ''): string {
  const body = grpcFrame(message);
  return `POST ${path} HTTP/1.1\r\nHost: grpc.test\r\nContent-Type: application/grpc\r\nTE: trailers\r\n${extra}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
}

/** An HTTP/2 request: the response's headers (without date and server), body and trailers. */
function http2Call(port: number, path: string, message: string): Promise<{ headers: Record<string, unknown>; body: string; trailers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
    let headers: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      headers = Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'date' && k !== 'server'));
    });
    stream.on('trailers', (t) => {
      trailers = Object.fromEntries(Object.entries(t));
    });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      session.close();
      resolve({ headers, body: Buffer.concat(chunks).toString('latin1'), trailers });
    });
    stream.on('error', reject);
    stream.end(Buffer.from(grpcFrame(message), 'latin1'));
  });
}

/** An HPACK block of literal fields without indexing, new names (RFC 7541, 6.2.2), short strings not Huffman-coded. */
function literalBlock(fields: readonly (readonly [string, string])[]): Buffer {
  return Buffer.concat(fields.map(([name, value]) => Buffer.concat([
    Buffer.from([0, name.length]), Buffer.from(name, 'latin1'), Buffer.from([value.length]), Buffer.from(value, 'latin1'),
  ])));
}

/**
 * An HTTP/2 server written frame by frame that answers every request with
 * one HEADERS frame ending the stream, its block `fields` as literals with
 * no dynamic table size update before them: what grpc's C core sends a
 * request it refuses early, whatever header table size the client's
 * SETTINGS asked for. Stopped at cleanup.
 */
async function tableSizeIgnoringServer(fields: readonly (readonly [string, string])[]): Promise<{ port: number }> {
  const frame = (type: number, flags: number, id: number, payload: Buffer): Buffer => {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(id, 5);
    return Buffer.concat([head, payload]);
  };
  const sockets = new Set<Socket>();
  const server = createNetServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    sock.write(frame(4, 0, 0, Buffer.alloc(0)));
    let input = Buffer.alloc(0);
    let preface = 24;
    sock.on('data', (d: Buffer) => {
      input = Buffer.concat([input, d]);
      const skip = Math.min(preface, input.length);
      input = input.subarray(skip);
      preface -= skip;
      while (input.length >= 9 && input.length >= 9 + input.readUIntBE(0, 3)) {
        const [type, flags, id] = [input[3]!, input[4]!, input.readUInt32BE(5) & 0x7fffffff];
        input = input.subarray(9 + input.readUIntBE(0, 3));
        if (type === 4 && (flags & 1) === 0) sock.write(frame(4, 1, 0, Buffer.alloc(0)));
        if (type === 1) sock.write(frame(1, 0x5, id, literalBlock(fields)));
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => { for (const x of sockets) x.destroy(); server.close(() => res()); }));
  return { port: (server.address() as AddressInfo).port };
}

/** A server taking HTTP/1.1 and cleartext HTTP/2 whose one location passes every request to the gRPC server on `backendPort`. */
function grpcOnly(backendPort: number): Parameters<typeof differential>[0] {
  return {
    conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; http2 on; server_name grpc.test;
    location / { grpc_pass grpc://127.0.0.1:${backendPort}; }
  }`),
    literals: { GRPC: backendPort },
  };
}

describe('grpc_pass (differential)', () => {
  after(cleanup);

  it('passes unary calls, an error status and a stream of a real gRPC server, trailers included, as nginx does', async () => {
    const backend = await startGrpcServer();
    const run = await differential(grpcOnly(backend.port), async (s) => ({
      say: await callUnary(s.port, 'say', 'hello', { 'x-custom': 'v1' }),
      fail: await callUnary(s.port, 'fail', 'x'),
      chat: await callChat(s.port, ['one', 'two', 'three']),
      http1: await http1(s.port, http1Call('/test.Echo/Say', 'abc')),
      http1Fail: await http1(s.port, http1Call('/test.Echo/Fail', 'abc')),
      http2: await http2Call(s.port, '/test.Echo/Say', 'abc'),
    }));
    const n = run.nginx.result;
    assert.deepEqual(n.say, { message: 'echo:hello', code: 0, details: '', metadata: { 'seen-x-custom': 'v1' } });
    assert.equal(n.fail.code, 5);
    assert.deepEqual(n.chat.answers, ['re:one', 're:two', 're:three']);
    assert.match(n.http1, /\r\n0\r\ngrpc-status: 0\r\ngrpc-message: OK\r\n\r\n$/);
    assert.match(n.http1Fail, /Content-Length: 0\r\n[^]*grpc-status: 5\r\n/);
    assert.deepEqual(n.http2.trailers, { 'grpc-status': '0', 'grpc-message': 'OK' });
    assertSameAsNginx(run);
  });

  it('answers a call the client cancels, and the calls after it, and logs the cancel as nginx does (but for its action)', async () => {
    const backend = await startGrpcServer();
    const run = await differential(grpcOnly(backend.port), async (s) => ({ cancelled: await cancelChat(s.port, 'first'), after: await callUnary(s.port, 'say', 'again') }));
    assert.deepEqual(run.nginx.result.cancelled, { answers: ['re:first'], code: 1 });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    // nginx logs the cancel with the action of its last work on the upstream connection, here a write to it
    // ("sending request to upstream"); jinx's HTTP/2 session to the upstream is node's, whose frames jinx does
    // not see (README, "Differences")
    const withoutAction = (lines: readonly string[]): string[] => lines.map((l) => l.replace(/ while [a-z ]+ upstream,/, ' while …,'));
    assert.deepEqual(withoutAction(run.jinx.errorLog), withoutAction(run.nginx.errorLog));
    assert.match(run.jinx.errorLog.join('\n'), /\[info\] \*CONN client canceled stream \d+ while/);
  });

  it('speaks TLS to a grpcs:// upstream, and checks its certificate with grpc_ssl_verify, as nginx does', async () => {
    const { cert, key } = selfSigned('backend.test');
    const backend = await startGrpcServer({ cert: Buffer.from(cert), key: Buffer.from(key) });
    const run = await differential({
      files: { 'backend.pem': cert },
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; http2 on;
    location / { grpc_pass grpcs://127.0.0.1:${backend.port}; }
    location /verified/ {
      grpc_ssl_verify on; grpc_ssl_trusted_certificate backend.pem; grpc_ssl_name backend.test; grpc_ssl_server_name on;
      grpc_pass grpcs://127.0.0.1:${backend.port};
    }
    location /mismatch/ {
      grpc_ssl_verify on; grpc_ssl_trusted_certificate backend.pem; grpc_ssl_name other.test;
      grpc_pass grpcs://127.0.0.1:${backend.port};
    }
  }`),
      literals: { GRPC: backend.port },
    }, async (s) => ({
      say: await callUnary(s.port, 'say', 'over tls'),
      http1: await http1(s.port, http1Call('/test.Echo/Say', 'abc')),
      verified: await http1(s.port, http1Call('/verified/x', 'abc')),
      mismatch: (await s.get('/mismatch/x')).status,
    }));
    assert.equal(run.nginx.result.say.message, 'echo:over tls');
    assert.equal(run.nginx.result.mismatch, 502);
    assertSameAsNginx(run);
  });

  it('sends the request to the upstream as nginx does (:authority, grpc_set_header, TE, the client\'s headers; END_STREAM on the HEADERS of a request without a body)', async () => {
    const endedWithHeaders: boolean[] = [];
    const upstream = await startH2Server((stream) => {
      endedWithHeaders.push(stream.endAfterHeaders);
      stream.respond({ ':status': 200, 'content-type': 'text/plain' });
      stream.end('ok');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name grpc.test;
    location / { grpc_pass 127.0.0.1:${upstream.port}; }
    location /set/ { grpc_set_header Host backend.test; grpc_set_header X-Extra "$request_method $args"; grpc_set_header TE ""; grpc_pass grpc://127.0.0.1:${upstream.port}; }
  }`),
      literals: { H2: upstream.port },
    }, async (s) => {
      const from = upstream.requests.length;
      const plain = await http1(s.port, 'GET /plain?a=b HTTP/1.1\r\nHost: grpc.test\r\nX-Client: c\r\nCookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n');
      const te = await http1(s.port, http1Call('/te', 'abc', 'X-Client: d\r\n'));
      const set = await http1(s.port, 'GET /set/x?q=1 HTTP/1.1\r\nHost: grpc.test\r\nTE: trailers\r\nConnection: close\r\n\r\n');
      const empty = await http1(s.port, 'POST /empty HTTP/1.1\r\nHost: grpc.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      const seen = upstream.requests.slice(from).map((h) => Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'user-agent')));
      return { plain, te, set, empty, seen, endedWithHeaders: endedWithHeaders.slice(from) };
    });
    assert.deepEqual(run.nginx.result.endedWithHeaders, [true, false, true, false]);
    const seen = run.nginx.result.seen;
    assert.equal(seen[0]![':authority'], `127.0.0.1:${upstream.port}`);
    assert.equal(seen[2]!.host, 'backend.test');
    assert.equal(seen[2]![':authority'], undefined);
    assertSameAsNginx(run);
  });

  it('passes a response whose header block skips the table size update the preface asked for (grpc\'s C core refusing a GET), as nginx does', async () => {
    const upstream = await tableSizeIgnoringServer([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', '2'], ['grpc-message', 'Bad method header']]);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; grpc_read_timeout 3s;
    location / { grpc_pass grpc://127.0.0.1:${upstream.port}; }
  }`),
      literals: { H2: upstream.port },
    }, async (s) => http1(s.port, 'GET /x HTTP/1.1\r\nHost: grpc.test\r\nConnection: close\r\n\r\n'));
    assert.match(run.nginx.result, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(run.nginx.result, /\r\nGrpc-Message: Bad method header\r\n/i);
    assertSameAsNginx(run);
  });

  it('answers an upstream that resets, does not answer, is down, sends a header past grpc_buffer_size or answers an error as nginx does (502, 504, error_page)', async () => {
    const upstream = await startH2Server((stream, headers) => {
      const path = headers[':path'];
      if (path === '/rst') stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      else if (path === '/refused') stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      else if (path === '/hang') return;
      else if (path?.startsWith('/big-header/')) {
        stream.respond({ ':status': 200, 'x-big': 'b'.repeat(Number(path.slice('/big-header/'.length))) });
        stream.end('big');
      }
      else if (path === '/midrst' || path === '/middrop') {
        // (node's close() ends the stream before its RST_STREAM: the response is whole)
        stream.respond({ ':status': 200 });
        stream.write('part');
        setTimeout(() => (path === '/midrst' ? stream.close(http2.constants.NGHTTP2_CANCEL) : stream.session?.destroy()), 100);
      } else if (path === '/drop') stream.session?.destroy();
      else if (path?.endsWith('/missing')) {
        stream.respond({ ':status': 404, 'content-type': 'text/plain' });
        stream.end('missing');
      } else {
        stream.respond({ ':status': 200 });
        stream.end('fine');
      }
    });
    const down = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; grpc_read_timeout 1s;
    location / { grpc_pass grpc://127.0.0.1:${upstream.port}; }
    location /down { grpc_pass grpc://127.0.0.1:${down}; }
    location /intercepted/ { grpc_intercept_errors on; error_page 404 = /fallback; grpc_pass grpc://127.0.0.1:${upstream.port}; }
    location = /fallback { return 200 "fallback\\n"; }
  }`),
      literals: { H2: upstream.port, DOWN: down },
    }, async (s) => ({
      rst: (await s.get('/rst')).status,
      refused: (await s.get('/refused')).status,
      hang: (await s.get('/hang')).status,
      midrst: await http1(s.port, 'GET /midrst HTTP/1.1\r\nHost: grpc.test\r\nConnection: close\r\n\r\n'),
      middrop: await http1(s.port, 'GET /middrop HTTP/1.1\r\nHost: grpc.test\r\nConnection: close\r\n\r\n'),
      drop: (await s.get('/drop')).status,
      down: (await s.get('/down')).status,
      headerFits: (await s.get('/big-header/3000')).status,
      headerTooBig: (await s.get('/big-header/6000')).status,
      missing: await s.get('/missing'),
      intercepted: await s.get('/intercepted/missing'),
    }));
    const n = run.nginx.result;
    assert.deepEqual([n.rst, n.refused, n.hang, n.down, n.headerFits, n.headerTooBig], [502, 502, 504, 502, 200, 502]);
    assert.equal(n.intercepted.body, 'fallback\n');
    assert.ok(run.nginx.errorLog.some((l) => l.includes('upstream rejected request with error 2 while reading response header from upstream')));
    assertSameAsNginx(run);
  });

  it('takes its address from variables, tries the next server, and answers with a gRPC error page, as nginx does', async () => {
    const backend = await startGrpcServer();
    const down = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream pool { server 127.0.0.1:${down}; server 127.0.0.1:${backend.port}; }
  upstream dead { server 127.0.0.1:${down}; }
  server { listen 127.0.0.1:${port}; http2 on; server_name grpc.test;
    location / { set $target "grpc://127.0.0.1:${backend.port}"; grpc_pass $target; }
    location /by-name/ { set $target pool; grpc_pass $target; }
    location /bad/ { set $target "grpc://127.0.0.1:${backend.port}/x"; grpc_pass $target; }
    location /no-port/ { set $target 127.0.0.1; grpc_pass $target; }
    location /pool/ { grpc_pass grpc://pool; }
    location /dead/ { error_page 502 = /error502grpc; grpc_pass grpc://dead; }
    location = /error502grpc { internal; default_type application/grpc; add_header grpc-status 14; add_header grpc-message unavailable; return 204; }
  }`),
      literals: { GRPC: backend.port, DOWN: down },
    }, async (s) => ({
      variables: await http1(s.port, http1Call('/test.Echo/Say', 'v')),
      byName: (await s.get('/by-name/x')).status,
      bad: (await s.get('/bad/x')).status,
      noPort: (await s.get('/no-port/x')).status,
      pool: await http1(s.port, http1Call('/pool/x', 'p')),
      dead: await http1(s.port, http1Call('/dead/x', 'd')),
      deadHttp2: await http2Call(s.port, '/dead/x', 'd'),
    }));
    const n = run.nginx.result;
    assert.match(n.dead, /^HTTP\/1\.1 204 No Content\r\n[^]*grpc-status: 14\r\n/);
    assert.equal(n.deadHttp2.headers['grpc-status'], '14');
    assertSameAsNginx(run);
  });

  it('passes large bodies both ways, trailers after them, as nginx does', async () => {
    const upstream = await startH2Server((stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const got = Buffer.concat(chunks);
        const size = Number(new URLSearchParams(String(headers[':path']).split('?')[1]).get('size') ?? '0');
        stream.respond({ ':status': 200, 'content-type': 'application/octet-stream' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'x-received': String(got.length) }));
        stream.end(Buffer.alloc(size, 'y'));
      });
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; client_max_body_size 8m;
    location / { grpc_pass grpc://127.0.0.1:${upstream.port}; }
  }`),
      literals: { H2: upstream.port },
    }, async (s) => {
      const big = Buffer.alloc(3 << 20, 'z').toString('latin1');
      const upload = await http1(s.port, `POST /up?size=10 HTTP/1.1\r\nHost: grpc.test\r\nContent-Length: ${big.length}\r\nConnection: close\r\n\r\n${big}`);
      const download = await http1(s.port, 'GET /down?size=4194304 HTTP/1.1\r\nHost: grpc.test\r\nConnection: close\r\n\r\n');
      // (the chunks' sizes are each server's own: nginx's follow its 4k buffer)
      const head = download.slice(0, download.indexOf('\r\n\r\n'));
      const trailer = download.slice(download.lastIndexOf('\r\n0\r\n'));
      return { upload, head, bodyBytes: download.split('y').length - 1, trailer };
    });
    assert.match(run.nginx.result.upload, /x-received: 3145728\r\n\r\n$/);
    assertSameAsNginx(run);
  });

  it('keeps upstream connections of an upstream block with keepalive, and opens one per request without, as nginx does', async () => {
    const upstream = await startH2Server((stream) => {
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream kept { server 127.0.0.1:${upstream.port}; keepalive 2; }
  server { listen 127.0.0.1:${port};
    location /kept/ { grpc_pass grpc://kept; }
    location / { grpc_pass grpc://127.0.0.1:${upstream.port}; }
  }`),
      literals: { H2: upstream.port },
    }, async (s) => {
      const count = async (path: string): Promise<number> => {
        const before = upstream.connections;
        for (let i = 0; i < 3; i++) await s.get(path);
        return upstream.connections - before;
      };
      return { kept: await count('/kept/x'), unkept: await count('/x') };
    });
    assert.deepEqual(run.nginx.result, { kept: 1, unkept: 3 });
    assertSameAsNginx(run);
  });
});
