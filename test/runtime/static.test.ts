/**
 * Static content, differential against nginx: root, alias, index, try_files,
 * types, the 404/403 pages and their log lines, the 301 for a directory
 * without slash (absolute_redirect, port_in_redirect, server_name_in_redirect),
 * HEAD, conditional GET, 405.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const FILES = {
  'html/index.html': '<p>index</p>\n',
  'html/a.txt': 'text a\n',
  'html/page.HTML': '<p>upper</p>\n',
  'html/data.json': '{"a":1}\n',
  'html/noext': 'no extension\n',
  'html/with space.txt': 'space\n',
  'html/empty.txt': '',
  'html/dir/index.htm': '<p>dir index.htm</p>\n',
  'html/dir/a.txt': 'dir a\n',
  'html/noindex/file.txt': 'x\n',
  'html/sub/deeper/f.txt': 'deep\n',
  'html/dir sp"<{|}>/a.txt': 'odd\n',
  'other/alias.txt': 'alias file\n',
  'other/img/logo.png': 'PNGDATA',
  'other/deep/d.txt': 'alias deep\n',
};

const TYPES = `  types { text/html html htm; text/plain txt; application/json json; image/png png; }
  default_type application/octet-stream;`;

async function getAll(s: { get(p: string, o?: { method?: string; headers?: Record<string, string>; body?: string }): Promise<Snap> },
  uris: readonly string[], opts: { method?: string; host?: string; body?: string } = {}): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  for (const u of uris) {
    out[`${opts.method ?? 'GET'} ${u}`] = await s.get(u, { method: opts.method, body: opts.body, headers: { Host: opts.host ?? 'static.test' } });
  }
  return out;
}

describe('static content (differential)', () => {
  after(cleanup);

  it('serves files under root with types by extension, and 404 with its log line', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}\n  server { listen 127.0.0.1:${port}; server_name static.test; root html; }`),
      files: FILES,
    }, async (s) => ({
      ...(await getAll(s, ['/a.txt', '/page.HTML', '/data.json', '/noext', '/with%20space.txt', '/empty.txt', '/sub/deeper/f.txt', '/none.txt', '/sub/none/x', '/a.txt/x', '/a.txt?x=1'])),
      ...(await getAll(s, ['/a.txt', '/none.txt', '/'], { method: 'HEAD' })),
    }));
    assert.equal(run.nginx.result['GET /none.txt']!.status, 404);
    assert.ok(run.nginx.errorLog.some((l) => /open\(\) ".*\/html\/none\.txt" failed \(2: No such file or directory\)/.test(l)));
    assertSameAsNginx(run);
  });

  it('answers a conditional GET with 304', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}\n  server { listen 127.0.0.1:${port}; server_name static.test; root html; }`),
      files: FILES,
    }, async (s) => {
      const first = await s.get('/a.txt', { headers: { Host: 'static.test' } });
      return {
        first,
        ims: await s.get('/a.txt', { headers: { Host: 'static.test', 'If-Modified-Since': first.headers['last-modified']! } }),
        imsOld: await s.get('/a.txt', { headers: { Host: 'static.test', 'If-Modified-Since': 'Thu, 01 Jan 1970 00:00:01 GMT' } }),
        inm: await s.get('/a.txt', { headers: { Host: 'static.test', 'If-None-Match': first.headers.etag! } }),
        inmList: await s.get('/a.txt', { headers: { Host: 'static.test', 'If-None-Match': `"x", ${first.headers.etag!}` } }),
        inmStar: await s.get('/a.txt', { headers: { Host: 'static.test', 'If-None-Match': '*' } }),
      };
    });
    assert.equal(run.nginx.result.ims.status, 304);
    assertSameAsNginx(run);
  });

  it('answers empty_gif with nginx\'s 43-byte GIF: GET, HEAD, 304 for If-Modified-Since, 405 for POST, with add_header', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location = /pixel.gif { empty_gif; }
    location /track/ { empty_gif; add_header Cache-Control no-store; }
  }`),
    }, async (s) => ({
      get: await s.get('/pixel.gif'),
      head: await s.get('/track/a', { method: 'HEAD' }),
      ims: await s.get('/pixel.gif', { headers: { 'If-Modified-Since': 'Mon, 28 Sep 1970 06:00:00 GMT' } }),
      post: await s.get('/track/b', { method: 'POST', body: 'x' }),
    }));
    assert.equal(run.nginx.result.get.headers['content-length'], '43');
    assertSameAsNginx(run);
  });

  // at notice: the proxied request's own connection (jinx to itself) ends on undici's `Connection: close`, where nginx's ends keep-alive (README)
  it('gives a location the content handler of the last of proxy_pass, fastcgi_pass, empty_gif and stub_status it names, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location = /inner { return 200 "proxied\\n"; }
    location /gif-then-proxy { empty_gif; proxy_pass http://127.0.0.1:${port}/inner; }
    location /proxy-then-gif { proxy_pass http://127.0.0.1:${port}/inner; empty_gif; }
    location /gif-twice { empty_gif; empty_gif; }
    location /fastcgi-then-gif { fastcgi_pass 127.0.0.1:1; empty_gif; }
    location /status-then-gif { stub_status; empty_gif; }
    location /outer { empty_gif; location /outer/inner { return 200 "inner\\n"; } location /outer/static { } }
  }`, { level: 'notice' }),
    }, async (s) => getAll(s, ['/gif-then-proxy', '/proxy-then-gif', '/gif-twice', '/fastcgi-then-gif', '/status-then-gif', '/outer/inner', '/outer/static']));
    assert.equal(run.nginx.result['GET /gif-then-proxy']!.body, 'proxied\n');
    assert.equal(run.nginx.result['GET /proxy-then-gif']!.headers['content-type'], 'image/gif');
    assertSameAsNginx(run);
  });

  it('maps URIs with alias, in prefix and regex locations', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /files/ { alias ${prefix}/other/; }
    location /one { alias ${prefix}/other/alias.txt; }
    location ~ ^/img/(.+\\.png)$ { alias ${prefix}/other/img/$1; }
    location /nodir/ { alias ${prefix}/none/; }
  }`),
      files: FILES,
    }, async (s) => getAll(s, ['/files/alias.txt', '/files/deep/d.txt', '/files/deep', '/files/', '/one', '/img/logo.png', '/img/none.png', '/nodir/x', '/files/none']));
    assert.equal(run.nginx.result['GET /files/alias.txt']!.body, 'alias file\n');
    assertSameAsNginx(run);
  });

  it('serves index files, and refuses a directory without one with 403', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    index none.html index.htm index.html;
    location /redirected/ { index /dir/a.txt; }
    location = /dir/index.htm { add_header X-Index-Location yes; }
  }`),
      files: FILES,
    }, async (s) => ({
      ...(await getAll(s, ['/', '/dir/', '/noindex/', '/missingdir/', '/redirected/', '/dir/?q=1'])),
      ...(await getAll(s, ['/dir/', '/noindex/'], { method: 'HEAD' })),
      ...(await getAll(s, ['/dir/', '/noindex/', '/a.txt'], { method: 'POST', body: 'x' })),
      ...(await getAll(s, ['/dir/', '/a.txt'], { method: 'DELETE' })),
    }));
    assert.equal(run.nginx.result['GET /noindex/']!.status, 403);
    assert.ok(run.nginx.errorLog.some((l) => /directory index of ".*\/html\/noindex\/" is forbidden/.test(l)));
    assert.equal(run.nginx.result['POST /dir/']!.status, 405);
    assertSameAsNginx(run);
  });

  it('redirects a directory requested without slash with 301 per absolute_redirect, port_in_redirect and server_name_in_redirect', async () => {
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test alias.test; root html; }
  server { listen 127.0.0.1:${ports[0]}; server_name relative.test; root html; absolute_redirect off; }
  server { listen 127.0.0.1:${ports[1]}; server_name noport.test; root html; port_in_redirect off; }
  server { listen 127.0.0.1:${ports[2]}; server_name primary.test other.test; root html; server_name_in_redirect on; }`),
      files: FILES,
      extraPorts: 3,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      out['default'] = await s.get('/dir?x=1', { headers: { Host: 'static.test' } });
      out['host alias'] = await s.get('/dir', { headers: { Host: 'Alias.Test:8080' } });
      out['deep'] = await s.get('/sub/deeper', { headers: { Host: 'static.test' } });
      out['HEAD'] = await s.get('/dir', { method: 'HEAD', headers: { Host: 'static.test' } });
      out['absolute_redirect off'] = await s.get('/dir?x=1', { headers: { Host: 'relative.test' }, port: s.ports[0] });
      out['port_in_redirect off'] = await s.get('/dir', { headers: { Host: 'noport.test' }, port: s.ports[1] });
      out['server_name_in_redirect on'] = await s.get('/dir', { headers: { Host: 'other.test' }, port: s.ports[2] });
      out['no Host (HTTP/1.0)'] = (await s.raw('GET /dir HTTP/1.0\r\n\r\n'))!;
      return out;
    });
    assert.equal(run.nginx.result['absolute_redirect off']!.headers.location, '/dir/?x=1');
    assertSameAsNginx(run);
  });

  it('escapes the URI in the Location of a directory or location redirect as nginx (NGX_ESCAPE_URI)', async () => {
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location / { }
    location "/auto sp/" { proxy_pass http://127.0.0.1:${port}; }
    location '/auto "#%<>?\\^\`{|}/' { proxy_pass http://127.0.0.1:${port}; }
    location /i/ { alias html/; }
  }
  server { listen 127.0.0.1:${ports[0]}; server_name relative.test; root html; absolute_redirect off; location "/auto sp/" { proxy_pass http://127.0.0.1:${port}; } }`),
      files: { ...FILES, 'html/dir sp/f.txt': 'f\n', 'html/q"<>^|/f.txt': 'q\n' },
      extraPorts: 1,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const u of ['/dir%20sp', '/dir%20sp?a=b%20c', '/i/dir%20sp', '/q%22%3C%3E%5E%7C', '/auto%20sp?a=b', '/auto%20%22%23%25%3C%3E%3F%5C%5E%60%7B%7C%7D']) {
        out[u] = (await s.raw(`GET ${u} HTTP/1.0\r\nHost: static.test\r\n\r\n`))!;
      }
      out['relative'] = (await s.raw('GET /auto%20sp HTTP/1.0\r\nHost: relative.test\r\n\r\n', s.ports[0]))!;
      return out;
    });
    assert.equal(run.nginx.result['relative']!.headers.location, '/auto%20sp/');
    assertSameAsNginx(run);
  });

  it('follows try_files: a file, a directory, a fallback URI with arguments, and =404', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /tf/ { try_files $uri $uri/ /fallback?from=$uri; }
    location /tf-code/ { try_files $uri =404; }
    location /tf-code418/ { try_files /none =418; }
    location /tf-dir/ { try_files $uri/ =403; }
    location /tf-root/ { try_files /a.txt /none; }
    location /fallback { return 200 "fallback uri=$uri args=$args\\n"; }
  }`),
      files: { ...FILES, 'html/tf/x.txt': 'tf x\n', 'html/tf/sub/index.html': '<p>tf sub</p>\n', 'html/tf-code/y.txt': 'y\n', 'html/tf-dir/d/index.html': 'd\n' },
    }, async (s) => getAll(s, [
      '/tf/x.txt', '/tf/sub', '/tf/sub/', '/tf/none?q=1', '/tf-code/y.txt', '/tf-code/none', '/tf-code418/x', '/tf-dir/d', '/tf-dir/none', '/tf-root/whatever',
    ]));
    assert.equal(run.nginx.result['GET /tf/none?q=1']!.body, 'fallback uri=/fallback args=from=/tf/none\n');
    assertSameAsNginx(run);
  });

  it('follows try_files under alias in prefix, regex and nested locations as nginx', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location ~ /alias-re.txt { alias ${prefix}/other/deep; try_files $uri =404; }
    location ~ ^/re-dir/(.*)$ { alias ${prefix}/other/$1; try_files $uri $uri/ =404; }
    location /prefix/ { alias ${prefix}/other/; try_files $uri /prefix/alias.txt =404; }
    location /static-item/ { alias ${prefix}/other/; try_files /alias.txt =404; }
    location /nested/ {
      alias ${prefix}/other/;
      location ~ txt$ { try_files $uri =404; }
    }
    location /file-name/ { alias ${prefix}/other/; try_files $uri =404; add_header X-File $request_filename; }
  }`),
      files: { ...FILES, 'other/deep/alias-re.txt': 'regex alias\n' },
    }, async (s) => getAll(s, [
      '/alias-re.txt', '/re-dir/img', '/re-dir/alias.txt', '/prefix/alias.txt', '/prefix/missing', '/static-item/x', '/nested/alias.txt',
      '/nested/deep/d.txt', '/nested/missing.txt', '/file-name/alias.txt',
    ]));
    assert.equal(run.nginx.result['GET /alias-re.txt']!.body, 'regex alias\n');
    assert.equal(run.nginx.result['GET /nested/alias.txt']!.body, 'alias file\n');
    assertSameAsNginx(run);
  });

  it('answers range requests as nginx\'s range filter: 206, multipart/byteranges, 416, If-Range, max_ranges', async () => {
    const body = Array.from({ length: 100 }, (_, i) => `X${String(i).padStart(3, '0')}XXXXXX`).join('');
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /one/ { max_ranges 1; }
    location /none/ { max_ranges 0; }
    location /lm/ { add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT"; }
    location /ep/ { error_page 404 /t.txt; }
    location /noetag/ { etag off; }
  }`),
      files: { 'html/t.txt': body, 'html/one/t.txt': body, 'html/none/t.txt': body, 'html/lm/t.txt': body, 'html/noetag/t.txt': body, 'html/empty.txt': '' },
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string>, method = 'GET'): Promise<void> => {
        out[label] = await s.get(path, { method, headers: { Host: 'static.test', ...headers } });
      };
      const full = await s.get('/t.txt', { headers: { Host: 'static.test' } });
      const etag = full.headers.etag!;
      const lm = full.headers['last-modified']!;
      for (const range of [
        'bytes=0-9', 'bytes=990-', 'bytes=-5', 'bytes=-2000', 'bytes=5-3', 'bytes=1000-', 'bytes=0-9,20-29', 'bytes=0-9, 5-14',
        'bytes=0-0,-1', 'bytes=abc', 'bytes=0-9,x', 'bytes= 1 - 2 ', 'BYTES=0-1', 'items=0-1', 'bytes=', 'bytes=0-', 'bytes=0-9,0-999',
      ]) await get(`range ${range}`, '/t.txt', { Range: range });
      await get('HEAD multipart', '/t.txt', { Range: 'bytes=0-1,3-4' }, 'HEAD');
      await get('if-range etag', '/t.txt', { Range: 'bytes=0-9', 'If-Range': etag });
      await get('if-range date', '/t.txt', { Range: 'bytes=0-9', 'If-Range': lm });
      await get('if-range wrong', '/t.txt', { Range: 'bytes=0-9', 'If-Range': '"nope"' });
      await get('if-range add_header', '/lm/t.txt', { Range: 'bytes=0-9', 'If-Range': 'Mon, 28 Sep 1970 06:00:00 GMT' });
      await get('max_ranges 1 two', '/one/t.txt', { Range: 'bytes=0-1,3-4' });
      await get('max_ranges 1 one', '/one/t.txt', { Range: 'bytes=0-1' });
      await get('max_ranges 0', '/none/t.txt', { Range: 'bytes=0-1' });
      await get('error_page', '/ep/missing', { Range: 'bytes=0-1' });
      await get('empty file', '/empty.txt', { Range: 'bytes=0-1' });
      await get('etag off', '/noetag/t.txt', { Range: 'bytes=0-1' });
      return out;
    });
    assert.equal(run.nginx.result['range bytes=0-9']!.status, 206);
    assert.match(run.nginx.result['range bytes=0-9,20-29']!.headers['content-type']!, /^multipart\/byteranges; boundary=0+1$/);
    assert.equal(run.nginx.result['range bytes=1000-']!.status, 416);
    assertSameAsNginx(run);
  });

  it('sends a large file, whole and in ranges, the same with aio off (read in the worker) and aio threads (in a thread pool)', async () => {
    // 3 MiB: many reads, and more than one turn's 2 MiB to the client
    const big = Array.from({ length: 3 * 1024 * 1024 / 16 }, (_, i) => `${String(i).padStart(15, '0')}\n`).join('');
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /pool/ { aio threads; alias html/; }
  }`),
      files: { 'html/big.txt': big },
    }, async (s) => {
      const out: Record<string, { status: number; length: number; sha256: string; contentRange: string | undefined }> = {};
      for (const prefix of ['/', '/pool/']) {
        for (const range of [undefined, 'bytes=100000-2500000', 'bytes=-700000', 'bytes=0-99,3000000-3000099']) {
          const snap = await s.get(`${prefix}big.txt`, { headers: { Host: 'static.test', ...(range ? { Range: range } : {}) } });
          out[`${prefix} ${range ?? 'whole'}`] = {
            status: snap.status, length: Buffer.byteLength(snap.body, 'latin1'),
            sha256: createHash('sha256').update(snap.body, 'latin1').digest('hex'), contentRange: snap.headers['content-range'],
          };
        }
      }
      return out;
    });
    const whole = run.nginx.result['/ whole']!;
    assert.deepEqual([whole.status, whole.length, whole.sha256], [200, big.length, createHash('sha256').update(big).digest('hex')]);
    assert.equal(run.nginx.result['/ bytes=100000-2500000']!.sha256, createHash('sha256').update(big.slice(100000, 2500001)).digest('hex'));
    // (a multipart body differs by its boundary, a count of such responses)
    for (const key of Object.keys(run.nginx.result).filter((k) => k.startsWith('/ ') && !k.includes(','))) {
      assert.deepEqual(run.nginx.result[`/pool${key}`], run.nginx.result[key], key);
    }
    assertSameAsNginx(run);
  });

  it('sends each client its own bytes when one client reads a large file slowly while another takes files at once', async () => {
    // the slow client's connection keeps read buffers the worker cannot fill again while it waits
    const lines = (tag: string, bytes: number): string => Array.from({ length: bytes / 16 }, (_, i) => `${tag}${String(i).padStart(14, '0')}\n`).join('');
    const slow = lines('s', 24 * 1024 * 1024);
    const fast = lines('f', 2 * 1024 * 1024);
    const sha256 = (text: string): string => createHash('sha256').update(text, 'latin1').digest('hex');
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html; }`),
      files: { 'html/slow.txt': slow, 'html/fast.txt': fast },
    }, async (s) => {
      const socket = connect({ host: '127.0.0.1', port: s.port });
      socket.pause();
      socket.write('GET /slow.txt HTTP/1.1\r\nHost: static.test\r\nConnection: close\r\n\r\n');
      await new Promise((res) => setTimeout(res, 300));
      const fasts: string[] = [];
      for (let i = 0; i < 3; i++) fasts.push(sha256((await s.get('/fast.txt', { headers: { Host: 'static.test' } })).body));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      await new Promise((res) => socket.on('close', res).resume());
      const text = Buffer.concat(chunks).toString('latin1');
      return { slow: sha256(text.slice(text.indexOf('\r\n\r\n') + 4)), fast: fasts };
    });
    assert.deepEqual(run.nginx.result, { slow: sha256(slow), fast: [sha256(fast), sha256(fast), sha256(fast)] });
    assertSameAsNginx(run);
  });

  it('sends a 416 with the headers the response had (add_header\'s, an always one twice), its error_page too, and no add_header without always on an error_page\'s error status, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    add_header X-A a always; add_header X-B b;
    location /ep/ { alias html/; error_page 404 416 /err; }
    location = /err { return 200 "custom\\n"; }
  }`),
      files: { 'html/t.txt': 'twelve bytes' },
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string> = {}): Promise<void> => {
        out[label] = await s.get(path, { headers: { Host: 'static.test', ...headers } });
      };
      await get('416', '/t.txt', { Range: 'bytes=100-' });
      await get('416 to an error_page', '/ep/t.txt', { Range: 'bytes=100-' });
      await get('404 to an error_page', '/ep/missing');
      return out;
    });
    assert.equal(run.nginx.result['416']!.headers['x-b'], 'b');
    assert.equal(run.nginx.result['404 to an error_page']!.headers['x-b'], undefined);
    assertSameAsNginx(run);
  });

  it('answers conditional requests as nginx\'s not-modified filter: If-Modified-Since per if_modified_since, If-None-Match, If-Match, If-Unmodified-Since, for files and return', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /before/ { if_modified_since before; }
    location /off/ { if_modified_since off; }
    location = /return { return 200 "returned\\n"; }
  }`),
      files: { 'html/t.txt': 'text\n', 'html/before/t.txt': 'text\n', 'html/off/t.txt': 'text\n' },
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const full = await s.get('/t.txt', { headers: { Host: 'static.test' } });
      const etag = full.headers.etag!;
      const lm = full.headers['last-modified']!;
      const later = 'Tue, 19 Jan 2038 03:14:07 GMT';
      const earlier = 'Thu, 01 Jan 1998 00:00:00 GMT';
      const cases: [string, Record<string, string>][] = [
        ['ims exact', { 'If-Modified-Since': lm }], ['ims later', { 'If-Modified-Since': later }], ['ims earlier', { 'If-Modified-Since': earlier }],
        ['ims rfc850', { 'If-Modified-Since': 'Tuesday, 19-Jan-38 03:14:07 GMT' }], ['ims asctime', { 'If-Modified-Since': 'Tue Jan 19 03:14:07 2038' }],
        ['ims garbage', { 'If-Modified-Since': 'yesterday' }], ['inm', { 'If-None-Match': etag }], ['inm weak', { 'If-None-Match': `W/${etag}` }],
        ['inm list', { 'If-None-Match': `"a", ${etag} , "b"` }], ['inm star', { 'If-None-Match': '*' }], ['inm other', { 'If-None-Match': '"x"' }],
        ['inm and ims', { 'If-None-Match': '"x"', 'If-Modified-Since': lm }], ['im', { 'If-Match': etag }], ['im other', { 'If-Match': '"x"' }],
        ['im weak', { 'If-Match': `W/${etag}` }], ['im star', { 'If-Match': '*' }], ['ius later', { 'If-Unmodified-Since': later }],
        ['ius earlier', { 'If-Unmodified-Since': earlier }], ['ius garbage', { 'If-Unmodified-Since': 'x' }],
      ];
      for (const prefix of ['', '/before', '/off']) {
        for (const [label, headers] of cases) out[`${prefix} ${label}`] = await s.get(`${prefix}/t.txt`, { headers: { Host: 'static.test', ...headers } });
      }
      // a response without validators
      for (const [label, headers] of cases) out[`return ${label}`] = await s.get('/return', { headers: { Host: 'static.test', ...headers } });
      out['404 with If-Match'] = await s.get('/nx', { headers: { Host: 'static.test', 'If-Match': '"x"' } });
      return out;
    });
    assert.equal(run.nginx.result['/before ims later']!.status, 304);
    assert.equal(run.nginx.result[' im other']!.status, 412);
    assertSameAsNginx(run);
  });

  it('does not log a missing file with log_not_found off', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location /quiet/ { log_not_found off; }
  }`),
      files: FILES,
    }, async (s) => getAll(s, ['/quiet/none.txt', '/loud.txt']));
    assert.equal(run.nginx.errorLog.length, 1);
    assertSameAsNginx(run);
  });
});
