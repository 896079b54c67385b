/**
 * Static content, differential against nginx: root, alias, index, try_files,
 * types, the 404/403 pages and their log lines, the 301 for a directory
 * without slash (absolute_redirect, port_in_redirect, server_name_in_redirect),
 * HEAD, conditional GET, 405.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { NO_ORACLE, assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

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

describe('static content (differential)', { skip: NO_ORACLE }, () => {
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

  it('escapes the Location of a redirect to a directory or a location as NGX_ESCAPE_URI does', async () => {
    const run = await differential({
      // the redirect is answered before any upstream is tried (nothing listens on port 9)
      conf: ({ port }) => httpConf(`${TYPES}
  server { listen 127.0.0.1:${port}; server_name static.test; root html;
    location "/auto sp#?%^/" { proxy_pass http://127.0.0.1:9; } }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const uri of ['/dir%20sp%22%3C%7B%7C%7D%3E', '/dir%20sp%22%3C%7B%7C%7D%3E?a=b', '/auto%20sp%23%3F%25%5E', '/auto%20sp%23%3F%25%5E?a=%20']) {
        out[uri] = await s.get(uri, { headers: { Host: 'static.test' } });
      }
      return out;
    });
    assert.match(run.nginx.result['/dir%20sp%22%3C%7B%7C%7D%3E']!.headers.location!, /\/dir%20sp%22%3C%7B%7C%7D%3E\/$/);
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
