/**
 * Compression, differential against nginx: which responses the gzip filter
 * takes (Accept-Encoding variants, gzip_http_version, gzip_proxied with
 * Via, gzip_disable, gzip_types, gzip_min_length against Content-Length,
 * status, an upstream's Content-Encoding), what it does to the headers
 * (Content-Length, Accept-Ranges, a weak ETag, Vary), HEAD, HTTP/1.0
 * without chunks, `$gzip_ratio`; gzip_static (on, always) with gunzip.
 * Compressed bytes depend on the zlib build, so bodies are compared
 * decompressed. jinx alone: a large proxied response is compressed as it
 * streams, with bounded memory, for a client that reads slowly.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { createGunzip, gunzipSync, gzipSync } from 'node:zlib';
import { cleanup, freePort, startJinx, startUpstream, type Response } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, normalizeBody, parseRaw, rawExchange, snap, type Snap } from '../helpers/differential.js';
import { servingPid } from '../helpers/slow-clients.js';
import { repeatingUpstream } from '../helpers/upstreams.js';

const TEXT = 'The quick brown fox jumps over the lazy dog. '.repeat(40);

/**
 * A response normalized as the differential harness does (Server, Date and
 * the server's name in pages), its body decompressed when it is gzip.
 */
function seen(resp: Response, kind: 'nginx' | 'jinx', method = 'GET'): Snap {
  const base = snap(resp, kind, method);
  if (!/(^|[\n,] ?)gzip$/.test(base.headers['content-encoding'] ?? '') || resp.body.length === 0) return base;
  return { ...base, body: `gunzipped: ${normalizeBody(gunzipSync(Buffer.from(resp.body, 'latin1')).toString('latin1'))}` };
}

const FILES = {
  'html/t/a.txt': TEXT,
  'html/t/a.html': `<p>${TEXT}</p>`,
  'html/t/a.css': `p { } /* ${TEXT} */`,
  'html/t/tiny.txt': 'tiny\n',
  'html/t/empty.txt': '',
  'html/st/pre.txt': 'never sent: the .gz is\n',
  'html/st/plain.txt': `only plain ${TEXT}`,
};

describe('gzip (differential)', () => {
  after(cleanup);

  it('compresses by Accept-Encoding, type, length, status and client, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/plain txt; text/html html; text/css css; }
  gzip_types text/plain;
  log_format ratio '$uri $status $gzip_ratio';
  server { listen 127.0.0.1:${port}; server_name gz.test; root html;
    gzip on; gzip_min_length 10; gzip_vary on;
    access_log logs/ratio.log ratio;
    location /small/ { alias html/t/; gzip_min_length 2000; }
    location /l9/ { alias html/t/; gzip_comp_level 9; gzip_window 4k; gzip_hash 2k; }
    location /v10/ { alias html/t/; gzip_http_version 1.0; }
    location /novary/ { alias html/t/; gzip_vary off; }
    location /all/ { alias html/t/; gzip_types *; }
    location /ua/ { alias html/t/; gzip_disable "Bot/\\d" msie6; }
    location /off/ { alias html/t/; gzip off; }
    location = /ret { return 200 "${TEXT}"; }
    location = /r404 { return 404; }
    location = /r403 { return 403; }
    location = /r301 { return 301 /t/a.txt; }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<void> => {
        out[label] = seen(await s.request(path, { method, headers: { Host: 'gz.test', ...headers } }), s.kind, method);
      };
      const encodings = ['gzip', 'gzip, deflate', 'deflate, gzip', 'GZIP', 'x-gzip', 'deflate', 'br;q=1, gzip;q=0.5', 'gzip;q=0', 'gzip;q=0.000',
        'gzip; q=1.001', 'gzip;q=1', 'gzip;Q=0.1', 'gzip ;q=0.3', 'gzip,', 'gzipx', 'identity', '*', 'gzip;level=1', 'gzip;q=.5', 'x,gzip'];
      for (const ae of encodings) await get(`AE ${ae}`, '/t/a.txt', { 'Accept-Encoding': ae });
      await get('no AE', '/t/a.txt');
      await get('html', '/t/a.html', { 'Accept-Encoding': 'gzip' });
      await get('css (not a gzip_type)', '/t/a.css', { 'Accept-Encoding': 'gzip' });
      await get('css with gzip_types *', '/all/a.css', { 'Accept-Encoding': 'gzip' });
      await get('tiny (below gzip_min_length)', '/t/tiny.txt', { 'Accept-Encoding': 'gzip' });
      await get('empty with gzip_types *', '/all/empty.txt', { 'Accept-Encoding': 'gzip' });
      await get('below a larger gzip_min_length', '/small/a.txt', { 'Accept-Encoding': 'gzip' });
      await get('level 9, small window', '/l9/a.txt', { 'Accept-Encoding': 'gzip' });
      await get('no vary', '/novary/a.txt', { 'Accept-Encoding': 'gzip' });
      await get('gzip off', '/off/a.txt', { 'Accept-Encoding': 'gzip' });
      await get('Via, gzip_proxied off', '/t/a.txt', { 'Accept-Encoding': 'gzip', Via: '1.1 cache' });
      await get('gzip_disable regex', '/ua/a.txt', { 'Accept-Encoding': 'gzip', 'User-Agent': 'Bot/2.0' });
      await get('gzip_disable other agent', '/ua/a.txt', { 'Accept-Encoding': 'gzip', 'User-Agent': 'Browser/2.0' });
      await get('gzip_disable msie6', '/ua/a.txt', { 'Accept-Encoding': 'gzip', 'User-Agent': 'Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)' });
      await get('HEAD', '/t/a.txt', { 'Accept-Encoding': 'gzip' }, 'HEAD');
      await get('return', '/ret', { 'Accept-Encoding': 'gzip' });
      await get('404 page', '/r404', { 'Accept-Encoding': 'gzip' });
      await get('403 page', '/r403', { 'Accept-Encoding': 'gzip' });
      await get('missing file 404', '/t/none.txt', { 'Accept-Encoding': 'gzip' });
      await get('301 page', '/r301', { 'Accept-Encoding': 'gzip' });
      await get('405 page', '/t/a.txt', { 'Accept-Encoding': 'gzip' }, 'POST');
      for (const [label, path] of [['HTTP/1.0 (gzip_http_version 1.1)', '/t/a.txt'], ['HTTP/1.0 (gzip_http_version 1.0)', '/v10/a.txt']]) {
        const raw = parseRaw(await rawExchange(s.port, `GET ${path} HTTP/1.0\r\nHost: gz.test\r\nAccept-Encoding: gzip\r\n\r\n`))!;
        out[label] = seen(raw, s.kind);
      }
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n['AE gzip']!.headers['content-encoding'], 'gzip');
    assert.equal(n['HTTP/1.0 (gzip_http_version 1.0)']!.headers['content-encoding'], 'gzip');
    assertSameAsNginx(run);
    // $gzip_ratio: the ratio depends on the zlib build; compare where it is found, and its form
    const shape = (lines: string[]): string[] => lines.map((l) => l.replace(/ \d+\.\d\d$/, ' N.NN'));
    assert.deepEqual(shape(run.jinx.file('logs/ratio.log')), shape(run.nginx.file('logs/ratio.log')));
    assert.ok(run.nginx.file('logs/ratio.log').some((l) => / \d+\.\d\d$/.test(l)));
  });

  it('compresses proxied responses as nginx: an upstream\'s encoding, ETag, length and caching headers, gzip_proxied with Via', async () => {
    const up = await startUpstream((req, res) => {
      const path = req.url ?? '/';
      const headers: Record<string, string | string[]> = { 'Content-Type': 'text/plain' };
      if (path === '/encoded') headers['Content-Encoding'] = 'br';
      if (path === '/empty-encoding') headers['Content-Encoding'] = '';
      if (path === '/etag') Object.assign(headers, { ETag: '"abc"', 'Last-Modified': 'Mon, 01 Jan 2024 00:00:00 GMT' });
      if (path === '/weak') headers.ETag = 'W/"abc"';
      if (path === '/unquoted') headers.ETag = 'abc';
      if (path === '/charset') headers['Content-Type'] = 'text/plain; charset=koi8-r';
      if (path === '/json') headers['Content-Type'] = 'application/json';
      if (path === '/vary') headers.Vary = 'Cookie';
      if (path === '/expired') headers.Expires = 'Thu, 01 Jan 1970 00:00:01 GMT';
      if (path === '/fresh') headers.Expires = 'Thu, 31 Dec 2037 23:55:55 GMT';
      if (path === '/no-cache') headers['Cache-Control'] = 'private, no-cache';
      if (path === '/no-store') headers['Cache-Control'] = 'no-store';
      if (path === '/public') headers['Cache-Control'] = 'public, max-age=60';
      if (path === '/short') headers['Content-Length'] = '5';
      const status = path === '/500' ? 500 : path === '/404' ? 404 : 200;
      if (path === '/chunked') {
        res.writeHead(200, headers);
        res.write(TEXT.slice(0, 100));
        setTimeout(() => res.end(TEXT.slice(100)), 20);
        return;
      }
      const body = path === '/short' ? 'short' : TEXT;
      if (path !== '/short') headers['Content-Length'] = String(body.length);
      res.writeHead(status, headers);
      res.end(body);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  gzip_types text/plain;
  server { listen 127.0.0.1:${port}; server_name gz.test;
    gzip on; gzip_vary on;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /expired/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied expired; }
    location /no-cache/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied no-cache; }
    location /no-store/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied no-store private; }
    location /nolm/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied no_last_modified no_etag; }
    location /auth/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied auth; }
    location /any/ { proxy_pass http://127.0.0.1:${up.port}/; gzip_proxied any; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<void> => {
        out[label] = seen(await s.request(path, { method, headers: { Host: 'gz.test', 'Accept-Encoding': 'gzip', ...headers } }), s.kind, method);
      };
      for (const p of ['/plain', '/encoded', '/empty-encoding', '/etag', '/weak', '/unquoted', '/charset', '/json', '/vary', '/short', '/500', '/404', '/chunked']) {
        await get(p, p);
      }
      await get('HEAD /etag', '/etag', {}, 'HEAD');
      const via = { Via: '1.1 proxy' };
      for (const p of ['/plain', '/expired', '/fresh', '/no-cache', '/no-store', '/public', '/etag']) {
        for (const loc of ['', '/expired', '/no-cache', '/no-store', '/nolm', '/any']) await get(`Via ${loc}${p}`, `${loc}${p}`, via);
      }
      await get('Via, auth without Authorization', '/auth/plain', via);
      await get('Via, auth with Authorization', '/auth/plain', { ...via, Authorization: 'Basic eDp5' });
      return out;
    });
    assert.equal(run.nginx.result['/etag']!.headers.etag, 'W/"abc"');
    assertSameAsNginx(run);
  });

  it('gzip_static on and always, with gunzip for clients that do not take gzip', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => {
        // the .gz is binary: written here, before the harness writes the text files
        mkdirSync(join(prefix, 'html/st'), { recursive: true });
        writeFileSync(join(prefix, 'html/st/pre.txt.gz'), new Uint8Array(gzipSync(Buffer.from(`precompressed ${TEXT}`))));
        return httpConf(`  types { text/plain txt; }
  server { listen 127.0.0.1:${port}; server_name gz.test; root html;
    location /on/ { alias html/st/; gzip_static on; }
    location /vary/ { alias html/st/; gzip_static on; gzip_vary on; }
    location /always/ { alias html/st/; gzip_static always; }
    location /gunzip/ { alias html/st/; gzip_static always; gunzip on; gzip_vary on; }
  }`);
      },
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const loc of ['/on/', '/vary/', '/always/', '/gunzip/']) {
        for (const file of ['pre.txt', 'plain.txt']) {
          for (const ae of ['gzip', undefined]) {
            for (const method of ['GET', 'HEAD']) {
              const headers: Record<string, string> = { Host: 'gz.test' };
              if (ae) headers['Accept-Encoding'] = ae;
              out[`${method} ${loc}${file} ${ae ?? '-'}`] = seen(await s.request(`${loc}${file}`, { method, headers }), s.kind, method);
            }
          }
        }
      }
      const first = await s.request('/on/pre.txt', { headers: { Host: 'gz.test', 'Accept-Encoding': 'gzip' } });
      out['conditional .gz'] = seen(await s.request('/on/pre.txt', {
        headers: { Host: 'gz.test', 'Accept-Encoding': 'gzip', 'If-None-Match': String(first.headers.etag) },
      }), s.kind);
      return out;
    });
    assert.equal(run.nginx.result['GET /on/pre.txt gzip']!.body, `gunzipped: precompressed ${TEXT}`);
    assert.equal(run.nginx.result['GET /gunzip/pre.txt -']!.body, `precompressed ${TEXT}`);
    assertSameAsNginx(run);
  });
});

describe('gzip framing (differential)', () => {
  after(cleanup);

  it('sends nginx\'s gzip header at levels 1, 5 and 9 (its XFL as zlib writes it) and data that decompresses to the file', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/plain txt; }
  gzip_types text/plain;
  server { listen 127.0.0.1:${port}; server_name gz.test; root html; gzip on; gzip_min_length 0; chunked_transfer_encoding off;
    location /l1/ { alias html/t/; gzip_comp_level 1; }
    location /l5/ { alias html/t/; gzip_comp_level 5; }
    location /l9/ { alias html/t/; gzip_comp_level 9; }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, string> = {};
      for (const path of ['/l1/a.txt', '/l5/a.txt', '/l9/a.txt']) {
        // without chunked_transfer_encoding the body is sent as it is, up to the close
        const raw = await rawExchange(s.port, `GET ${path} HTTP/1.1\r\nHost: gz.test\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n`);
        const body = Buffer.from(raw.slice(raw.indexOf('\r\n\r\n') + 4), 'latin1');
        // node's zlib deflates otherwise than the system's zlib nginx links: the data is compared decompressed
        out[`${path} header`] = body.subarray(0, 10).toString('hex');
        out[`${path} decompressed`] = gunzipSync(body).toString();
      }
      return out;
    });
    assert.equal(run.nginx.result['/l1/a.txt header'], '1f8b0800000000000403');
    assertSameAsNginx(run);
  });

  it('sends a small gzipped body as one chunk, header, data and trailer together, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/plain txt; }
  gzip_types text/plain;
  server { listen 127.0.0.1:${port}; server_name gz.test; root html; gzip on; gzip_min_length 0; }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, number[]> = {};
      for (const path of ['/t/tiny.txt', '/t/empty.txt']) {
        const raw = await rawExchange(s.port, `GET ${path} HTTP/1.1\r\nHost: gz.test\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n`);
        // the sizes of the chunks, in order
        const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
        const sizes: number[] = [];
        for (let at = 0; at < body.length;) {
          const eol = body.indexOf('\r\n', at);
          const size = parseInt(body.slice(at, eol), 16);
          sizes.push(size);
          if (!(size > 0)) break;
          at = eol + 2 + size + 2;
        }
        out[path] = sizes;
      }
      return out;
    });
    assert.deepEqual(run.nginx.result['/t/tiny.txt']!.length, 2);
    assertSameAsNginx(run);
  });
});

describe('gzip of a large proxied response (jinx)', () => {
  after(cleanup);

  it('compresses as the body streams, for a slow client, with bounded memory', async () => {
    const chunk = Buffer.from(`${'0123456789abcdef'.repeat(63)}0123456789abcde\n`);
    const totalBytes = 128 * 1024 * 1024;
    const expected = createHash('sha256');
    for (let sent = 0; sent < totalBytes; sent += chunk.length) expected.update(chunk);
    const up = await repeatingUpstream(chunk, totalBytes, { 'Content-Type': 'text/plain' });
    const port = await freePort();
    const jinx = await startJinx(`daemon off;\npid logs/nginx.pid;\nerror_log logs/error.log info;\nevents {}\nhttp {
  access_log off;
  server { listen 127.0.0.1:${port}; gzip on; gzip_types text/plain;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
  }
}\n`, [port]);
    // the worker's memory (the master serves nothing)
    const worker = servingPid(jinx.child.pid!);
    const rssKb = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${worker}/status`, 'utf8'))![1]);
    // measured from the first bytes of the response: what the worker loads and sets up for its first
    // proxied, gzipped response (undici, zlib, the young generation) is not what this test bounds
    let baseKb = 0;
    let peakKb = 0;
    const got = createHash('sha256');
    let plainBytes = 0;
    let wireBytes = 0;
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port }, () => {
        socket.write('GET /big HTTP/1.1\r\nHost: big.test\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n');
      });
      const gunzip = createGunzip();
      gunzip.on('data', (d: Buffer) => {
        got.update(d);
        plainBytes += d.length;
      });
      gunzip.on('end', resolve);
      gunzip.on('error', reject);
      let pending: Buffer<ArrayBufferLike> = Buffer.alloc(0);
      let headRead = false;
      socket.on('data', (d: Buffer) => {
        if (wireBytes === 0) baseKb = peakKb = rssKb();
        wireBytes += d.length;
        pending = Buffer.concat([pending, d]);
        if (!headRead) {
          const end = pending.indexOf('\r\n\r\n');
          if (end === -1) return;
          assert.match(pending.subarray(0, end + 2).toString('latin1'), /\r\nContent-Encoding: gzip\r\n/);
          pending = pending.subarray(end + 4);
          headRead = true;
        }
        // de-chunk what is complete
        for (;;) {
          const nl = pending.indexOf('\r\n');
          if (nl === -1) break;
          const size = parseInt(pending.subarray(0, nl).toString('latin1'), 16);
          if (pending.length < nl + 2 + size + 2) break;
          if (size === 0) {
            gunzip.end();
            break;
          }
          gunzip.write(pending.subarray(nl + 2, nl + 2 + size));
          pending = pending.subarray(nl + 2 + size + 2);
        }
        // a slow client: it reads a little, then pauses
        socket.pause();
        peakKb = Math.max(peakKb, rssKb());
        setTimeout(() => socket.resume(), 1);
      });
      socket.on('error', reject);
    });
    assert.equal(plainBytes, totalBytes);
    assert.equal(got.digest('hex'), expected.digest('hex'));
    assert.ok(wireBytes < totalBytes / 20, `compressed on the wire: ${wireBytes} bytes`);
    assert.ok(peakKb - baseKb < 64 * 1024, `RSS grew by ${peakKb - baseKb} KiB`);
  });
});
