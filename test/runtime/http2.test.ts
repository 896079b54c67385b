/**
 * HTTP/2 from clients over TLS, differential against nginx: ALPN `h2` and
 * `http/1.1` on one port, a proxied GET and a 1 MiB POST through DATA frames
 * (the upstream receives `Host` from `:authority` and the whole body), a
 * `return`, an upstream failure logged with `request: "… HTTP/2.0"`, and the
 * access log's `$request` / `$server_protocol`; h2c with prior knowledge and
 * HTTP/1.1 on one plain port; the limits nginx applies per connection from
 * the connection's server (`http2_max_concurrent_streams`,
 * `keepalive_requests`, `large_client_header_buffers`), its SETTINGS and
 * windows (`http2_body_preread_size`); a 100 MiB upload to a slow upstream.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { request } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, hasCommand, startJinx, startUpstream } from '../helpers/harness.js';
import { selfSigned } from '../helpers/pki.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';
import { FRAME, H2_ERROR, RawH2, getFields, type ClientStart, type Field } from '../helpers/h2-frames.js';
import { echoUpstream, type Echo } from '../helpers/upstreams.js';

/** What a client saw of one HTTP/2 exchange. */
interface H2Seen {
  readonly status: number;
  readonly body: string;
}

function h2(session: ClientHttp2Session, path: string, method = 'GET', body?: Buffer): Promise<H2Seen> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path, ':method': method, ':authority': 'h2.test' });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on('response', (h) => { status = Number(h[':status']); });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('latin1') }));
    stream.on('error', reject);
    stream.end(body);
  });
}

/** The upstream's view of a proxied request: method, URL, Host header, body length and digest. */
function echoed(seen: H2Seen): Pick<Echo, 'method' | 'url' | 'bodyLength' | 'bodySha1'> & { host: string | undefined } {
  const e = JSON.parse(seen.body) as Echo;
  return { method: e.method, url: e.url, host: e.headers.find(([n]) => n.toLowerCase() === 'host')?.[1], bodyLength: e.bodyLength, bodySha1: e.bodySha1 };
}

function http1(port: number, path: string): Promise<{ status: number; alpn: string | false }> {
  return new Promise((resolve, reject) => {
    const options = {
      host: '127.0.0.1', port, path, servername: 'h2.test', rejectUnauthorized: false, agent: false, ALPNProtocols: ['http/1.1'], headers: { Host: 'h2.test' },
    };
    const req = request(options, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, alpn: (res.socket as unknown as { alpnProtocol: string | false }).alpnProtocol }));
    });
    req.on('error', reject);
    req.end();
  });
}

const NO_OPENSSL = hasCommand('openssl') ? false : 'no openssl command';

describe('HTTP/2 over TLS (differential)', { skip: NO_OPENSSL }, () => {
  after(cleanup);

  it('serves h2 and http/1.1 on one TLS port, proxies GET and a 1 MiB POST, and logs requests as HTTP/2.0', async () => {
    const tls = selfSigned('h2.test');
    const up = await echoUpstream('app');
    const refused = await freePort();
    const upload = Buffer.alloc(1024 * 1024, 0x5a);
    const run = await differential({
      files: { 'h2.pem': tls.cert, 'h2.key': tls.key },
      conf: ({ port }) => httpConf(`
  log_format proto '$request $server_protocol $status';
  server { listen 127.0.0.1:${port} ssl; http2 on; server_name h2.test;
    ssl_certificate h2.pem; ssl_certificate_key h2.key;
    access_log logs/h2.log proto;
    client_max_body_size 2m;
    location /app/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /down/ { proxy_pass http://127.0.0.1:${refused}; }
    location = /hello { return 200 "hello $server_protocol\\n"; }
  }`),
    }, async (s) => {
      const session = connect(`https://127.0.0.1:${s.port}`, { servername: 'h2.test', rejectUnauthorized: false });
      try {
        const hello = await h2(session, '/hello');
        const get = echoed(await h2(session, '/app/get?x=1'));
        const post = echoed(await h2(session, '/app/post', 'POST', upload));
        const down = (await h2(session, '/down/')).status;
        const alpn = (session.socket as unknown as { alpnProtocol: string }).alpnProtocol;
        return { hello, get, post, down, alpn, http1: await http1(s.port, '/hello') };
      } finally {
        session.close();
      }
    });
    const n = run.nginx.result;
    assert.deepEqual(n.hello, { status: 200, body: 'hello HTTP/2.0\n' });
    assert.equal(n.alpn, 'h2');
    assert.deepEqual(n.get, { method: 'GET', url: '/app/get?x=1', host: '127.0.0.1:' + up.port, bodyLength: 0, bodySha1: createHash('sha1').update('').digest('hex') });
    assert.deepEqual([n.post.bodyLength, n.post.bodySha1], [upload.length, createHash('sha1').update(upload).digest('hex')]);
    assert.equal(n.down, 502);
    assert.deepEqual(n.http1, { status: 200, alpn: 'http/1.1' });
    assert.ok(run.nginx.errorLog.some((l) => l.includes('connect() failed (111: Connection refused) while connecting to upstream') && l.includes('request: "GET /down/ HTTP/2.0"')));
    assert.deepEqual(run.jinx.file('logs/h2.log'), run.nginx.file('logs/h2.log'));
    assertSameAsNginx(run);
  });
  it('serves h2c with prior knowledge and HTTP/1.1 on one plain port with http2 on', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name h2c.test;
    location = /hello { return 200 "hello $server_protocol $scheme\\n"; }
  }`),
    }, async (s) => {
      const session = connect(`http://127.0.0.1:${s.port}`);
      try {
        return { h2c: await h2(session, '/hello'), http1: (await s.get('/hello', { headers: { Host: 'h2c.test' } })).body };
      } finally {
        session.close();
      }
    });
    assert.deepEqual(run.nginx.result, { h2c: { status: 200, body: 'hello HTTP/2.0 http\n' }, http1: 'hello HTTP/1.1 http\n' });
    assertSameAsNginx(run);
  });

  it('passes an upstream\'s 204 without its Content-Type over HTTP/2 and with it over HTTP/1.1, as nginx', async () => {
    const up = await startUpstream((_req, res) => {
      res.writeHead(204, { 'Content-Type': 'text/plain', 'X-Up': '1' });
      res.end();
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name h2c.test;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const session = connect(`http://127.0.0.1:${s.port}`);
      try {
        const h2Headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
          const stream = session.request({ ':path': '/nothing', ':authority': 'h2c.test' });
          stream.on('response', (h) => resolve(Object.fromEntries(Object.entries(h).filter(([n]) => n !== 'date' && n !== 'server'))));
          stream.on('error', reject);
          stream.resume();
          stream.end();
        });
        const http1 = await s.get('/nothing', { headers: { Host: 'h2c.test' } });
        return { h2: h2Headers, http1: { status: http1.status, type: http1.headers['content-type'], up: http1.headers['x-up'] } };
      } finally {
        session.close();
      }
    });
    assert.equal(run.nginx.result.h2['content-type'], undefined);
    assert.equal(run.nginx.result.http1.type, 'text/plain');
    assertSameAsNginx(run);
  });
});

/** What a client saw of one HTTP/2 request: the status, or the error that ended its stream. */
type H2Outcome = { readonly status: number } | { readonly error: string };

function h2Outcome(session: ClientHttp2Session, headers: OutgoingHttpHeaders): Promise<H2Outcome> {
  return new Promise((resolve) => {
    let stream;
    try {
      stream = session.request(headers);
    } catch (err) {
      resolve({ error: (err as NodeJS.ErrnoException).code ?? 'thrown' });
      return;
    }
    let status = 0;
    stream.on('response', (h) => { status = Number(h[':status']); });
    stream.resume();
    stream.on('end', () => resolve({ status }));
    stream.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    stream.end();
  });
}

/** The GOAWAY frames a node:http2 client session received (error code, last stream), and whether it closed. */
function goaways(session: ClientHttp2Session): { code: number; last: number }[] {
  const seen: { code: number; last: number }[] = [];
  session.on('goaway', (code, last) => seen.push({ code, last }));
  session.on('error', () => undefined);
  return seen;
}

describe('HTTP/2 limits per connection (differential)', { skip: NO_OPENSSL }, () => {
  after(cleanup);

  it('advertises the SNI server\'s http2_max_concurrent_streams, refuses a stream beyond it with RST_STREAM REFUSED_STREAM, and a client that respects it gets every response', async () => {
    const files: Record<string, string> = {};
    for (const name of ['a.test', 'b.test']) {
      const { cert, key } = selfSigned(name);
      files[`${name}.pem`] = cert;
      files[`${name}.key`] = key;
    }
    let inFlight = 0;
    let maxInFlight = 0;
    const slow = await startUpstream((_req, res) => {
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      setTimeout(() => {
        inFlight--;
        res.end('slow\n');
      }, 300);
    });
    const run = await differential({
      files,
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port} ssl default_server; http2 on; server_name a.test; ssl_certificate a.test.pem; ssl_certificate_key a.test.key;
    location / { proxy_pass http://127.0.0.1:${slow.port}; }
  }
  server { listen 127.0.0.1:${port} ssl; http2 on; server_name b.test; ssl_certificate b.test.pem; ssl_certificate_key b.test.key;
    http2_max_concurrent_streams 2;
    location / { proxy_pass http://127.0.0.1:${slow.port}; }
  }`),
    }, async (s) => {
      const get = (stream: number): [number, Field[]] => [stream, getFields('/slow', 'b.test', 'https')];
      // the default server's connections: nginx's default 128
      const a = await RawH2.open(s.port, { servername: 'a.test' });
      await a.until((f) => f.length > 0);
      const defaultLimit = a.settings().get(3);
      a.close();
      // three streams at once where two are allowed: the third is refused, the others answered
      const raw = await RawH2.open(s.port, { servername: 'b.test' });
      raw.requests([get(1), get(3), get(5)]);
      await raw.until(() => raw.ended().length >= 2);
      const refused = { limit: raw.settings().get(3), outcomes: raw.outcomes(), ended: raw.ended().sort() };
      raw.close();
      // node's client, once it has the server's SETTINGS, waits for a stream to end before opening a third
      maxInFlight = 0;
      const session = connect(`https://127.0.0.1:${s.port}`, { servername: 'b.test', rejectUnauthorized: false });
      try {
        await once(session, 'remoteSettings');
        const three = await Promise.all([1, 2, 3].map(() => h2Outcome(session, { ':path': '/slow', ':authority': 'b.test' })));
        return { defaultLimit, refused, respected: { three, remoteLimit: session.remoteSettings.maxConcurrentStreams, maxInFlight } };
      } finally {
        session.close();
      }
    });
    assert.deepEqual(run.nginx.result, {
      defaultLimit: 128,
      refused: { limit: 2, outcomes: { 1: 'response', 3: 'response', 5: `rst:${H2_ERROR.REFUSED_STREAM}` }, ended: [1, 3] },
      respected: { three: [{ status: 200 }, { status: 200 }, { status: 200 }], remoteLimit: 2, maxInFlight: 2 },
    });
    // the refusal is logged at info
    const refusal = /^\[info\] \*CONN concurrent streams exceeded 2 while processing HTTP\/2 connection, client: 127\.0\.0\.1, server: 127\.0\.0\.1:\d+$/;
    assert.equal(run.nginx.errorLog.filter((l) => refusal.test(l)).length, 1);
    assertSameAsNginx(run);
  });

  it('advertises the server\'s http2_body_preread_size as the initial stream window and opens the connection window to 2^31-1, and uploads go through either window', async () => {
    const up = await echoUpstream('app');
    const run = await differential({
      extraPorts: 1,
      conf: ({ port, ports }) => httpConf(`
  client_max_body_size 4m;
  server { listen 127.0.0.1:${port}; http2 on; location / { proxy_pass http://127.0.0.1:${up.port}; } }
  server { listen 127.0.0.1:${ports[0]}; http2 on; http2_body_preread_size 1m; location / { proxy_pass http://127.0.0.1:${up.port}; } }`),
    }, async (s) => {
      const body = Buffer.alloc(3 * 1024 * 1024, 'x');
      const windows = async (port: number): Promise<Record<string, number | undefined>> => {
        const raw = await RawH2.open(port);
        await raw.until((f) => f.some((x) => x.type === FRAME.WINDOW_UPDATE && x.stream === 0));
        const increment = raw.frames.find((x) => x.type === FRAME.WINDOW_UPDATE && x.stream === 0)?.payload.readUInt32BE(0);
        const settings = raw.settings();
        raw.close();
        const session = connect(`http://127.0.0.1:${port}`);
        try {
          const upload = await h2(session, '/upload', 'POST', body);
          return { initialWindow: settings.get(4), maxFrameSize: settings.get(5), connectionIncrement: increment, uploaded: echoed(upload).bodyLength };
        } finally {
          session.close();
        }
      };
      return { defaults: await windows(s.port), preread1m: await windows(s.ports[0]!) };
    });
    const uploaded = 3 * 1024 * 1024;
    assert.deepEqual(run.nginx.result, {
      defaults: { initialWindow: 65_536, maxFrameSize: 16_777_215, connectionIncrement: 2 ** 31 - 1 - 65_535, uploaded },
      preread1m: { initialWindow: 1_048_576, maxFrameSize: 16_777_215, connectionIncrement: 2 ** 31 - 1 - 65_535, uploaded },
    });
    assertSameAsNginx(run);
  });

  it('sends GOAWAY once the connection carried keepalive_requests streams (the server\'s, not the location\'s), answers that stream and those before it, and closes the connection', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name h2c.test; keepalive_requests 3;
    location / { keepalive_requests 1; return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      // one request after another: the fourth finds the connection going away
      const session = connect(`http://127.0.0.1:${s.port}`);
      const seen = goaways(session);
      const sequential: H2Outcome[] = [];
      for (let i = 0; i < 4; i++) sequential.push(await h2Outcome(session, { ':path': '/', ':authority': 'h2c.test' }));
      session.destroy();
      // four at once: the fourth is after the GOAWAY's last stream, and not answered
      const raw = await RawH2.open(s.port);
      raw.requests([1, 3, 5, 7].map((id) => [id, getFields('/', 'h2c.test')]));
      await raw.until(() => raw.closed, 3000);
      const all = raw.goaways();
      raw.close();
      return {
        sequential: sequential.map((o) => ('error' in o ? 'refused' : o.status)), goaway: seen[0],
        together: { outcomes: raw.outcomes(), ended: raw.ended().sort(), goaway: all[0], sameGoaways: all.every((g) => g.lastStream === 5 && g.code === 0), closed: raw.closed },
      };
    });
    assert.deepEqual(run.nginx.result, {
      sequential: [200, 200, 200, 'refused'], goaway: { code: H2_ERROR.NO_ERROR, last: 5 },
      together: { outcomes: { 1: 'response', 3: 'response', 5: 'response' }, ended: [1, 3, 5], goaway: { lastStream: 5, code: 0 }, sameGoaways: true, closed: true },
    });
    assertSameAsNginx(run);
  });

  it('ends the connection with GOAWAY ENHANCE_YOUR_CALM for a header field or header block over the connection server\'s large_client_header_buffers', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  log_format h2 '$request $status';
  server { listen 127.0.0.1:${port} default_server; http2 on; server_name small.test; large_client_header_buffers 2 1k;
    access_log logs/h2.log h2;
    location / { return 200 "small\\n"; }
  }
  server { listen 127.0.0.1:${port}; http2 on; server_name big.test; large_client_header_buffers 4 8k;
    access_log logs/h2.log h2;
    location / { return 200 "big\\n"; }
  }`),
    }, async (s) => {
      const viaNode = async (value: string): Promise<{ outcome: H2Outcome; goaway: { code: number; last: number } | null }> => {
        const session = connect(`http://127.0.0.1:${s.port}`);
        const seen = goaways(session);
        try {
          // :authority picks big.test for the request, not the connection's limits
          const outcome = await h2Outcome(session, { ':path': '/', ':authority': 'big.test', 'x-long': value });
          // null, not undefined: a recording (JSON) keeps it
          return { outcome: 'error' in outcome ? { error: 'failed' } : outcome, goaway: seen[0] ?? null };
        } finally {
          session.destroy();
        }
      };
      const viaRaw = async (fields: Field[]): Promise<{ outcomes: Record<number, string>; goaways: { lastStream: number; code: number }[] }> => {
        const raw = await RawH2.open(s.port);
        raw.request(1, [...getFields('/', 'small.test'), ...fields]);
        await raw.until(() => raw.closed || raw.ended().length > 0, 3000);
        raw.close();
        return { outcomes: raw.outcomes(), goaways: raw.goaways() };
      };
      // the pseudo-headers (:method GET, :path /, :scheme http, :authority small.test) count 7+3+5+1+7+4+10+10 = 47 of 2048
      const fill = (n: number): Field[] => [['x-a', 'a'.repeat(1000), true], ['x-b', 'b'.repeat(n - 47 - 1003 - 3), true]];
      return {
        // 'a' is 5 bits in HPACK's Huffman code: 1600 of them are 1000 octets on the wire, 1700 are 1063
        fieldFits: await viaNode('a'.repeat(1600)),
        fieldTooLarge: await viaNode('a'.repeat(1700)),
        blockFits: await viaRaw(fill(2048)),
        blockTooLarge: await viaRaw(fill(2049)),
        // nginx counts octets, not fields
        manyFields: await viaRaw(Array.from({ length: 200 }, (_, i): Field => [`x-${i}`, ''])),
      };
    });
    const calm = [{ lastStream: 1, code: H2_ERROR.ENHANCE_YOUR_CALM }];
    assert.deepEqual(run.nginx.result, {
      fieldFits: { outcome: { status: 200 }, goaway: null },
      fieldTooLarge: { outcome: { error: 'failed' }, goaway: { code: H2_ERROR.ENHANCE_YOUR_CALM, last: 1 } },
      blockFits: { outcomes: { 1: 'response' }, goaways: [] },
      blockTooLarge: { outcomes: {}, goaways: calm },
      manyFields: { outcomes: { 1: 'response' }, goaways: [] },
    });
    const context = /, client: 127\.0\.0\.1, server: 127\.0\.0\.1:\d+$/;
    assert.deepEqual(run.nginx.errorLog.map((l) => l.replace(context, '')), [
      '[info] *CONN client sent too large header field while processing HTTP/2 connection',
      '[info] *CONN client sent too large header while processing HTTP/2 connection',
    ]);
    assert.deepEqual(run.jinx.file('logs/h2.log'), run.nginx.file('logs/h2.log'));
    assertSameAsNginx(run);
  });

  it('ends the connection with GOAWAY ENHANCE_YOUR_CALM for a header value sent raw, longer than the buffer, however short its Huffman code would be', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name small.test; large_client_header_buffers 2 1k;
    location / { return 200 "small\n"; }
  }`),
    }, async (s) => {
      const raw = await RawH2.open(s.port);
      // 1025 octets raw (Huffman would code them in 641): the length on the wire is what counts
      raw.request(1, [...getFields('/', 'small.test'), ['x-raw', 'a'.repeat(1025)]]);
      await raw.until(() => raw.closed || raw.ended().length > 0, 3000);
      raw.close();
      return { outcomes: raw.outcomes(), goaways: raw.goaways() };
    });
    assert.deepEqual(run.nginx.result, { outcomes: {}, goaways: [{ lastStream: 1, code: H2_ERROR.ENHANCE_YOUR_CALM }] });
    assert.deepEqual(run.jinx.result, run.nginx.result);
  });
});

/** Waits `ms` milliseconds. */
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A TLS handshake with ALPN `protocols` and SNI `servername`: the protocol chosen, or `refused` when the handshake failed. */
function alpn(port: number, servername: string, protocols: string[]): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, servername, ALPNProtocols: protocols, rejectUnauthorized: false });
    socket.once('secureConnect', () => {
      resolve(socket.alpnProtocol || 'none');
      socket.destroy();
    });
    socket.once('error', () => resolve('refused'));
  });
}

describe('HTTP/2 frames and refusals as nginx sends them (differential)', () => {
  after(cleanup);

  it('sends a body in DATA frames of http2_chunk_size, answers 400 to an invalid header name and an :authority that Host contradicts, and ends the connection with GOAWAY for a bad HPACK index', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name frames.test;
    location / { return 200 "body"; }
    location /chunks { http2_chunk_size 1; return 200 "body"; }
  }`),
    }, async (s) => {
      const streams = async (fields: Field[][]): Promise<string[]> => {
        const raw = await RawH2.open(s.port, undefined, 'settings');
        await raw.until((f) => f.some((x) => x.type === FRAME.SETTINGS));
        raw.ackSettings();
        fields.forEach((f, i) => raw.request(2 * i + 1, f));
        await raw.until(() => raw.ended().length === fields.length, 3000);
        raw.close();
        return raw.summary();
      };
      const chunks = await streams([getFields('/chunks', 'frames.test')]);
      const refused = await streams([
        [...getFields('/', 'frames.test'), ['x-Upper', 'v']],
        [...getFields('/', 'frames.test'), ['host', 'other.test']],
      ]);
      const raw = await RawH2.open(s.port);
      raw.send(FRAME.HEADERS, 0x5, 1, Buffer.from([0xff, 0x7f]));
      await raw.until(() => raw.goaways().length > 0 || raw.closed, 3000);
      raw.close();
      return { chunks, refused, goaways: raw.goaways() };
    });
    assert.deepEqual(run.nginx.result.goaways, [{ lastStream: 1, code: 9 }]);
    assertSameAsNginx(run);
  });
});

describe('HTTP/2 connections as nginx starts and ends them (differential)', { skip: NO_OPENSSL }, () => {
  after(cleanup);

  it('serves a client whose first frame after the preface is a SETTINGS acknowledgement or a request, and sends each client the frames nginx sends', async () => {
    const tls = selfSigned('h2.test');
    const run = await differential({
      extraPorts: 1,
      files: { 'h2.pem': tls.cert, 'h2.key': tls.key },
      conf: ({ port, ports }) => httpConf(`
  server { listen 127.0.0.1:${port}; listen 127.0.0.1:${ports[0]} ssl; http2 on; server_name h2.test;
    ssl_certificate h2.pem; ssl_certificate_key h2.key;
    location / { return 200; }
  }`),
    }, async (s) => {
      const frames = async (start: ClientStart, tlsPort?: number): Promise<string[]> => {
        const raw = await RawH2.open(tlsPort ?? s.port, tlsPort ? { servername: 'h2.test' } : undefined, start);
        if (start === 'settings') {
          await raw.until((f) => f.some((x) => x.type === FRAME.SETTINGS));
          raw.ackSettings();
        }
        raw.request(1, getFields('/', 'h2.test', tlsPort ? 'https' : 'http'));
        await raw.until(() => raw.ended().length > 0);
        // a frame sent after the response (a stray SETTINGS acknowledgement) would show here
        await pause(200);
        raw.close();
        return raw.summary();
      };
      return {
        settings: await frames('settings'), ackFirst: await frames('ack-first'), headersFirst: await frames('headers-first'),
        ackFirstTls: await frames('ack-first', s.ports[0]),
      };
    });
    const served = ['SETTINGS:0:0', 'WINDOW_UPDATE:0:0', 'HEADERS:5:1'];
    const conforming = ['SETTINGS:0:0', 'WINDOW_UPDATE:0:0', 'SETTINGS:1:0', 'HEADERS:5:1'];
    assert.deepEqual(run.nginx.result, { settings: conforming, ackFirst: served, headersFirst: served, ackFirstTls: served });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.jinx.errorLog, run.nginx.errorLog);
  });

  it('offers h2 by ALPN to the server the SNI name selects and answers a request naming a server with http2 off with 421', async () => {
    const files: Record<string, string> = {};
    for (const name of ['on.test', 'off.test']) {
      const { cert, key } = selfSigned(name);
      files[`${name}.pem`] = cert;
      files[`${name}.key`] = key;
    }
    const run = await differential({
      files,
      conf: ({ port }) => httpConf(`
  log_format h2 '"$request" $status';
  server { listen 127.0.0.1:${port} ssl; http2 on; server_name on.test; ssl_certificate on.test.pem; ssl_certificate_key on.test.key;
    access_log logs/h2.log h2;
    location / { return 200 "on\\n"; }
  }
  server { listen 127.0.0.1:${port} ssl; server_name off.test; ssl_certificate off.test.pem; ssl_certificate_key off.test.key;
    access_log logs/h2.log h2;
    location / { return 200 "off\\n"; }
  }`),
    }, async (s) => {
      const session = connect(`https://127.0.0.1:${s.port}`, { servername: 'on.test', rejectUnauthorized: false });
      try {
        return {
          h2Only: { on: await alpn(s.port, 'on.test', ['h2']), off: await alpn(s.port, 'off.test', ['h2']) },
          either: { on: await alpn(s.port, 'on.test', ['h2', 'http/1.1']), off: await alpn(s.port, 'off.test', ['h2', 'http/1.1']) },
          hostOff: await h2Outcome(session, { ':path': '/', ':authority': 'off.test' }),
          hostOn: await h2Outcome(session, { ':path': '/', ':authority': 'on.test' }),
        };
      } finally {
        session.close();
      }
    });
    assert.deepEqual(run.nginx.result, {
      h2Only: { on: 'h2', off: 'refused' }, either: { on: 'h2', off: 'http/1.1' }, hostOff: { status: 421 }, hostOn: { status: 200 },
    });
    assert.deepEqual(run.nginx.file('logs/h2.log'), ['"-" 421', '"GET / HTTP/2.0" 200']);
    assert.deepEqual(run.jinx.file('logs/h2.log'), run.nginx.file('logs/h2.log'));
    assert.ok(run.nginx.errorLog.some((l) => /client attempted to request the server name for which the negotiated protocol is disabled while reading client request headers, client: 127\.0\.0\.1, server: off\.test$/.test(l)));
    // the handshakes' lines come in the order the handshakes end
    assert.deepEqual([...run.jinx.errorLog].sort(), [...run.nginx.errorLog].sort());
    assertSameAsNginx(run, { log: false });
  });

  it('closes an idle connection with GOAWAY after keepalive_timeout and on a reload, refuses TRACE with 405, and ends a HEAD stream with its HEADERS frame', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name h2c.test; keepalive_timeout 1s;
    location / { return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const session = connect(`http://127.0.0.1:${s.port}`);
      const idleGoaways = goaways(session);
      const trace = await h2Outcome(session, { ':method': 'TRACE', ':path': '/', ':authority': 'h2c.test' });
      const get = await h2Outcome(session, { ':path': '/', ':authority': 'h2c.test' });
      await pause(1500);
      const closedWhenIdle = session.closed || session.destroyed;
      session.destroy();
      // a GOAWAY repeated as the connection closes would have to say the same: code and last stream
      const same = (list: readonly { code: number }[]): boolean => list.every((g) => JSON.stringify(g) === JSON.stringify(list[0]));
      const idle = idleGoaways[0];
      const raw = await RawH2.open(s.port);
      raw.request(1, [[':method', 'HEAD'], [':path', '/'], [':scheme', 'http'], [':authority', 'h2c.test']]);
      await raw.until(() => raw.ended().length > 0);
      raw.ackSettings();
      s.server.child.kill('SIGHUP');
      await raw.until(() => raw.goaways().length > 0);
      raw.close();
      const reload = raw.goaways()[0];
      const repeated = same(idleGoaways) && same(raw.goaways());
      return { trace, get, idle, closedWhenIdle, head: raw.summary().filter((f) => f.endsWith(':1')), reload, repeated };
    });
    assert.deepEqual(run.nginx.result, {
      trace: { status: 405 }, get: { status: 200 }, idle: { code: H2_ERROR.NO_ERROR, last: 3 }, closedWhenIdle: true,
      head: ['HEADERS:5:1'], reload: { lastStream: 1, code: H2_ERROR.NO_ERROR }, repeated: true,
    });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[info] *CONN client sent TRACE method while reading client request headers')));
    assertSameAsNginx(run);
  });

  it('stops a response whose stream the client reset: no send_timeout follows', async () => {
    const run = await differential({
      files: { 'html/big.txt': 'x'.repeat(1024 * 1024) },
      conf: ({ port, prefix }) => httpConf(`
  server { listen 127.0.0.1:${port}; http2 on; server_name h2c.test; send_timeout 1s; root ${prefix}/html; }`),
    }, async (s) => {
      const raw = await RawH2.open(s.port);
      raw.request(1, getFields('/big.txt', 'h2c.test'));
      await raw.until((f) => f.some((x) => x.type === FRAME.DATA));
      raw.reset(1, H2_ERROR.CANCEL);
      await pause(1500);
      raw.close();
      return { reset: true };
    });
    // nginx also logs the stream's request once more when the connection closes (`client prematurely closed connection`)
    const again = /client prematurely closed connection while sending response to client/;
    assert.ok(run.nginx.errorLog.some((l) => /client canceled stream 1 while sending response to client/.test(l)));
    assert.deepEqual(run.jinx.errorLog, run.nginx.errorLog.filter((l) => !again.test(l)));
    assertSameAsNginx(run, { log: false });
  });
});

describe('HTTP/2 uploads', { skip: NO_OPENSSL }, () => {
  after(cleanup);

  it('passes a 100 MiB HTTP/2 upload whole to a slow upstream and leaves no temp file behind', async () => {
    const tls = selfSigned('h2.test');
    // reads the body 256 KiB at a time, 5 ms apart: about 2 s for 100 MiB
    const slow = await startUpstream((req, res) => {
      const hash = createHash('sha1');
      let length = 0;
      req.on('data', (c: Buffer) => {
        hash.update(c);
        length += c.length;
        if (length % (256 * 1024) < c.length) {
          req.pause();
          setTimeout(() => req.resume(), 5);
        }
      });
      req.on('end', () => res.end(JSON.stringify({ length, sha1: hash.digest('hex') })));
    });
    const port = await freePort();
    const jinx = await startJinx(httpConf(`
  server { listen 127.0.0.1:${port} ssl; http2 on; server_name h2.test;
    ssl_certificate h2.pem; ssl_certificate_key h2.key;
    client_max_body_size 200m;
    location / { proxy_pass http://127.0.0.1:${slow.port}; }
  }`), [port], { 'h2.pem': tls.cert, 'h2.key': tls.key, 'tmp/.keep': '' });
    const body = Buffer.alloc(100 * 1024 * 1024, 0x61);
    const session = connect(`https://127.0.0.1:${port}`, { servername: 'h2.test', rejectUnauthorized: false });
    try {
      const seen = await h2(session, '/upload', 'POST', body);
      assert.equal(seen.status, 200);
      assert.deepEqual(JSON.parse(seen.body), { length: body.length, sha1: createHash('sha1').update(body).digest('hex') });
    } finally {
      session.close();
    }
    assert.match(jinx.errorLog(), /a client request body is buffered to a temporary file .*\/tmp\/body\/\d{10}/);
    assert.deepEqual(readdirSync(join(jinx.prefix, 'tmp/body')), []);
  });
});

