/**
 * The charset filter, differential against nginx: `; charset=` for
 * `charset_types` (and not for 301/302), `charset_types *`, a charset from a
 * variable, an upstream's own charset with and without `override_charset`,
 * recoding with nginx's own maps (koi-utf, koi-win, win-utf) byte for byte,
 * to UTF-8 and from UTF-8 (`&#N;` for characters the map lacks, `?` for
 * invalid UTF-8, a sequence split between upstream chunks), the error-log
 * line for a pair without a map, and a response already encoded; an
 * upstream's `X-Accel-Charset`. Over HTTP/2 too, with gzip.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect as http2Connect } from 'node:http2';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { ROOT, cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, snap, type Snap } from '../helpers/differential.js';

/** nginx's own charset maps, as Debian ships them in /etc/nginx. */
const MAPS = Object.fromEntries(['koi-utf', 'koi-win', 'win-utf'].map((f) => [f, readFileSync(join(ROOT, 'test/differential/fixtures/valid/charset-maps', f), 'latin1')]));

/** Text in KOI8-R: "Привет, мир" and every byte from 0x80 up. */
const KOI8 = Buffer.concat([Buffer.from([0xf0, 0xd2, 0xc9, 0xd7, 0xc5, 0xd4, 0x2c, 0x20, 0xcd, 0xc9, 0xd2, 0x0a]), Buffer.from(Array.from({ length: 128 }, (_, i) => 0x80 + i))]);
/** UTF-8 with characters windows-1251 has, has not, beyond U+FFFF, and invalid or cut sequences. */
const UTF8 = Buffer.concat([
  Buffer.from('Привет € 中 😀 é\n', 'utf8'), Buffer.from([0xff, 0x41, 0xc3, 0x28, 0x42, 0xe2, 0x82, 0x0a, 0xc0, 0xaf, 0x0a]),
  Buffer.from('tail ё', 'utf8'), Buffer.from([0xe2, 0x82]),
]);

/** Writes binary files into the prefix (the harness writes text). */
function writeBinary(prefix: string, files: Readonly<Record<string, Buffer>>): void {
  for (const [rel, data] of Object.entries(files)) {
    mkdirSync(join(prefix, rel, '..'), { recursive: true });
    writeFileSync(join(prefix, rel), new Uint8Array(data));
  }
}

/** A response normalized by the harness, with the body's bytes as hex for what is not ASCII. */
function seen(resp: { status: number; headers: Record<string, string | string[] | undefined>; body: string }, kind: 'nginx' | 'jinx', method = 'GET'): Snap {
  const s = snap(resp, kind, method);
  return { ...s, body: s.body.replace(/[^\x20-\x7e\n]/g, (c) => `<${c.charCodeAt(0).toString(16)}>`) };
}

describe('charset (differential)', () => {
  after(cleanup);

  it('adds the charset and recodes bodies with charset_map tables, as nginx', async () => {
    const up = await startUpstream((req, res) => {
      const path = req.url ?? '/';
      const type = path.startsWith('/win') ? 'text/html; charset=windows-1251' : path.startsWith('/utf') ? 'text/html; charset=utf-8'
        : path.startsWith('/unknown') ? 'text/html; charset="x-unknown"' : path.startsWith('/koi') ? 'text/html;charset=KOI8-R' : 'text/html';
      const headers: Record<string, string> = { 'Content-Type': type };
      if (path.startsWith('/encoded')) headers['Content-Encoding'] = 'gzip';
      if (path.startsWith('/split')) {
        // UTF-8 sequences cut between chunks of 7 bytes, sent apart (README: with shorter chunks, or a cut
        // sequence at the very end, nginx never ends the response)
        const body = UTF8.subarray(0, UTF8.length - 2);
        res.writeHead(200, headers);
        let at = 0;
        const next = (): void => {
          if (at >= body.length) {
            res.end();
            return;
          }
          res.write(body.subarray(at, at + 7));
          at += 7;
          setTimeout(next, 5);
        };
        next();
        return;
      }
      const body = path.startsWith('/koi') ? KOI8 : path.startsWith('/win') ? Buffer.from([0xcf, 0xf0, 0xe8, 0x88, 0x0a]) : UTF8;
      headers['Content-Length'] = String(body.length);
      res.writeHead(200, headers);
      res.end(body);
    });
    const run = await differential({
      conf: ({ port, prefix }) => {
        writeBinary(prefix, { 'html/k/a.html': KOI8, 'html/k/a.txt': KOI8, 'html/k/a.css': KOI8, 'html/u/a.html': UTF8, 'html/w/a.html': Buffer.from([0xcf, 0xf0, 0xe8, 0x88]) });
        return httpConf(`  types { text/html html; text/plain txt; text/css css; }
  include koi-utf;
  include koi-win;
  include win-utf;
  server { listen 127.0.0.1:${port}; server_name cs.test; root html;
    location /utf/ { alias html/k/; charset utf-8; }
    location /k2u/ { alias html/k/; charset utf-8; source_charset koi8-r; }
    location /k2w/ { alias html/k/; charset windows-1251; source_charset koi8-r; }
    location /w2k/ { alias html/w/; charset koi8-r; source_charset windows-1251; }
    location /w2u/ { alias html/w/; charset utf-8; source_charset windows-1251; }
    location /u2w/ { alias html/u/; charset windows-1251; source_charset utf-8; }
    location /u2k/ { alias html/u/; charset KOI8-R; source_charset UTF-8; }
    location /same/ { alias html/u/; charset utf-8; source_charset UTF-8; }
    location /css/ { alias html/k/; charset utf-8; charset_types text/css; }
    location /any/ { alias html/k/; charset utf-8; charset_types *; }
    location /var/ { alias html/k/; charset $arg_cs; source_charset koi8-r; }
    location /nomap/ { alias html/k/; charset $arg_cs; source_charset $arg_src; }
    location = /r301 { charset utf-8; return 301 /x; }
    location = /r302 { charset utf-8; return 302 /x; }
    location = /r404 { charset utf-8; return 404; }
    location = /r200 { charset utf-8; return 200 "text\\n"; }
    location /up/ { charset utf-8; proxy_pass http://127.0.0.1:${up.port}/; }
    location /override/ { charset utf-8; override_charset on; proxy_pass http://127.0.0.1:${up.port}/; }
    location /to-win/ { charset windows-1251; override_charset on; proxy_pass http://127.0.0.1:${up.port}/; }
    location /buffered/ { charset windows-1251; source_charset utf-8; proxy_pass http://127.0.0.1:${up.port}/; }
    location /unbuffered/ { charset windows-1251; source_charset utf-8; proxy_buffering off; proxy_pass http://127.0.0.1:${up.port}/; }
  }`);
      },
      files: MAPS,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (path: string, method = 'GET'): Promise<void> => {
        out[`${method} ${path}`] = seen(await s.request(path, { method, headers: { Host: 'cs.test' } }), s.kind, method);
      };
      for (const p of ['/utf/a.html', '/utf/a.txt', '/utf/a.css', '/k2u/a.html', '/k2w/a.html', '/w2k/a.html', '/w2u/a.html', '/u2w/a.html',
        '/u2k/a.html', '/same/a.html', '/css/a.css', '/css/a.html', '/any/a.css', '/var/a.html?cs=utf-8', '/var/a.html?cs=windows-1251',
        '/var/a.html?cs=x-unknown', '/nomap/a.html?cs=utf-8&src=x-unknown', '/nomap/a.html?cs=x-y&src=x-y', '/nomap/a.html?cs=x&src=x-y',
        '/r301', '/r302', '/r404', '/r200', '/up/plain', '/up/win', '/override/win', '/override/utf', '/override/koi', '/override/unknown',
        '/override/plain', '/override/encoded', '/to-win/utf', '/to-win/koi', '/buffered/split', '/unbuffered/split']) {
        await get(p);
      }
      await get('/k2u/a.html', 'HEAD');
      return out;
    });
    assert.equal(run.nginx.result['GET /utf/a.html']!.headers['content-type'], 'text/html; charset=utf-8');
    assert.ok(run.nginx.errorLog.some((l) => l.includes('no "charset_map" between the charsets')));
    assertSameAsNginx(run);
  });

  it("takes an upstream's X-Accel-Charset as the charset (the last one; an unknown name is an error line), unless ignored, as nginx", async () => {
    const up = await startUpstream((req, res) => {
      const names = new URL(req.url ?? '/', 'http://up').searchParams.getAll('xa');
      res.writeHead(200, [['Content-Type', 'text/html'], ...names.map((n) => ['X-Accel-Charset', n])].flat());
      res.end(KOI8);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  include koi-utf;
  server { listen 127.0.0.1:${port}; server_name cs.test;
    location /none/ { proxy_pass http://127.0.0.1:${up.port}/; }
    location /recode/ { charset koi8-r; source_charset koi8-r; proxy_pass http://127.0.0.1:${up.port}/; }
    location /ignored/ { charset koi8-r; proxy_ignore_headers X-Accel-Charset; proxy_pass http://127.0.0.1:${up.port}/; }
  }`),
      files: MAPS,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of ['/none/a?xa=koi8-r', '/none/a?xa=KOI8-R', '/none/a?xa=utf-8&xa=koi8-r', '/none/a?xa=windows-1251', '/none/a?xa=off',
        '/recode/a?xa=utf-8', '/recode/a?xa=koi8-r', '/recode/a?xa=bogus', '/ignored/a?xa=utf-8']) {
        out[p] = seen(await s.request(p, { headers: { Host: 'cs.test' } }), s.kind);
      }
      return out;
    });
    assert.equal(run.jinx.result['/none/a?xa=KOI8-R']!.headers['content-type'], 'text/html; charset=KOI8-R');
    assert.equal(run.jinx.result['/recode/a?xa=utf-8']!.headers['content-type'], 'text/html; charset=utf-8');
    assert.ok(run.jinx.errorLog.some((l) => l.includes('unknown charset "windows-1251" to override while reading response header from upstream')));
    assertSameAsNginx(run);
  });

  it('closes the connection when the charset variable is not found, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$uri $status $body_bytes_sent';
  server { listen 127.0.0.1:${port}; server_name cs.test; root html; access_log logs/st.log st;
    location / { charset $arg_cs; }
  }`),
      files: { 'html/a.html': 'hello\n' },
    }, async (s) => ({
      missing: await s.raw('GET /a.html HTTP/1.0\r\nHost: cs.test\r\n\r\n'),
      given: await s.raw('GET /a.html?cs=koi8-r HTTP/1.0\r\nHost: cs.test\r\n\r\n'),
    }));
    assert.equal(run.nginx.result.missing, undefined);
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/st.log'), run.nginx.file('logs/st.log'));
  });

  it('over HTTP/2: the charset, recoding and gzip after it, as nginx', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => {
        writeBinary(prefix, { 'html/a.html': KOI8 });
        return httpConf(`  include koi-utf;
  server { listen 127.0.0.1:${port}; http2 on; server_name cs.test; root html;
    location / { charset utf-8; source_charset koi8-r; gzip on; gzip_min_length 0; gzip_vary on; }
  }`);
      },
      files: MAPS,
    }, async (s) => {
      const session = http2Connect(`http://127.0.0.1:${s.port}`);
      try {
        const one = (headers: Record<string, string>): Promise<{ headers: Record<string, unknown>; body: string }> => new Promise((resolve, reject) => {
          const req = session.request({ ':path': '/a.html', ':authority': 'cs.test', ...headers });
          const chunks: Buffer[] = [];
          let head: Record<string, unknown> = {};
          req.on('response', (h) => {
            head = Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'server' && k !== 'date'));
          });
          req.on('data', (c: Buffer) => chunks.push(c));
          req.on('end', () => {
            const data = Buffer.concat(chunks);
            resolve({ headers: head, body: (head['content-encoding'] === 'gzip' ? gunzipSync(data) : data).toString('hex') });
          });
          req.on('error', reject);
          req.end();
        });
        return { plain: await one({}), gzip: await one({ 'accept-encoding': 'gzip' }) };
      } finally {
        session.close();
      }
    });
    assert.equal(run.nginx.result.gzip.headers['content-encoding'], 'gzip');
    assertSameAsNginx(run);
  });
});
