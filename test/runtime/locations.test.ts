/**
 * Location selection, differential against nginx: `=`, longest prefix, `^~`,
 * regexes in configuration order with captures, nested locations, named
 * locations (error_page, try_files), and the 301 for a proxied `/api/`
 * requested as `/api`.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const LOCATIONS = `
    location = / { return 200 "exact-root\\n"; }
    location / { return 200 "prefix-root $uri\\n"; }
    location = /exact { return 200 "exact $uri\\n"; }
    location /exact { return 200 "prefix-exact $uri\\n"; }
    location /docs/ { return 200 "docs $uri\\n"; }
    location /docs/api/ { return 200 "docs-api $uri\\n"; }
    location ^~ /static/ { return 200 "static-noregex $uri\\n"; }
    location ~ ^/order/ { return 200 "first-regex $uri\\n"; }
    location ~ ^/order/deep { return 200 "second-regex $uri\\n"; }
    location ~ \\.php$ { return 200 "php $uri\\n"; }
    location ~* \\.(JPG|png)$ { return 200 "image $uri 1=$1\\n"; }
    location ~ ^/users/(?<id>\\d+)/(\\w+)$ { return 200 "user id=$id 2=$2\\n"; }
    location /nested/ {
      location /nested/inner/ { return 200 "nested-inner $uri\\n"; }
      location = /nested/exact { return 200 "nested-exact\\n"; }
      location ^~ /nested/stop/ { return 200 "nested-noregex $uri\\n"; }
      location ~ \\.txt$ { return 200 "nested-regex $uri\\n"; }
      return 200 "nested-outer $uri\\n";
    }
    location ~ ^/rx/ {
      location ~ \\.json$ { return 200 "regex-nested-regex $uri\\n"; }
      return 200 "regex-outer $uri\\n";
    }
`;

const URIS = [
  '/', '/index.html', '/exact', '/exact/', '/exactly', '/docs', '/docs/', '/docs/x', '/docs/x.php', '/docs/api/x',
  '/docs/api/x.php', '/static/x.php', '/static/a.PNG', '/a.jpg', '/a.JPG', '/a.Jpg', '/a.PNG', '/A.PHP',
  '/order/deep', '/users/42/profile', '/users/x/profile', '/nested/', '/nested/a', '/nested/inner/a.txt',
  '/nested/inner/x', '/nested/exact', '/nested/stop/a.txt', '/nested/a.txt', '/nested/a.php', '/rx/a.json', '/rx/a',
];

/** URIs that are decoded and normalized before a location is searched. */
const NORMALIZED = ['/docs/%61pi/x', '/docs/../static/x.php', '//docs//api//x', '/docs/./api/x', '/docs/api/x?a=1', '/docs/x%2ephp', '/docs/%2F/x'];

describe('location selection (differential)', () => {
  after(cleanup);

  it('chooses =, the longest prefix, ^~, regexes in order and nested locations as nginx does', async () => {
    const run = await differential({
      // types {}: every answer is default_type (the type of `return` by extension is tested in rewrite.test.ts)
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test; types {}\n${LOCATIONS}  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const u of URIS) out[u] = await s.get(u, { headers: { Host: 'loc.test' } });
      return out;
    });
    assert.equal(run.nginx.result['/docs/x.php']!.body, 'php /docs/x.php\n');
    assert.equal(run.nginx.result['/nested/inner/a.txt']!.body, 'nested-regex /nested/inner/a.txt\n');
    assert.equal(run.nginx.result['/order/deep']!.body, 'first-regex /order/deep\n');
    assertSameAsNginx(run);
  });

  it('matches the decoded, normalized URI', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test; types {}\n${LOCATIONS}  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const u of NORMALIZED) out[u] = await s.get(u, { headers: { Host: 'loc.test' } });
      return out;
    });
    assert.equal(run.nginx.result['/docs/%61pi/x']!.body, 'docs-api /docs/api/x\n');
    assertSameAsNginx(run);
  });

  it('answers 400 to a URI that climbs above the root and logs it at info', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test; types {}\n${LOCATIONS}  }`),
    }, async (s) => ({
      encoded: await s.get('/%2e%2e/docs/x', { headers: { Host: 'loc.test' } }),
      plain: await s.raw('GET /docs/../../x HTTP/1.0\r\nHost: loc.test\r\n\r\n'),
    }));
    assert.equal(run.nginx.result.encoded.status, 400);
    assertSameAsNginx(run);
  });

  it('redirects /api to /api/ with 301 when /api/ is proxied, keeping the query', async () => {
    const up = await startUpstream((req, res) => res.end(`upstream ${req.url}\n`));
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test;
    location /api/ { proxy_pass http://127.0.0.1:${up.port}/; }
    location /app/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /static/ { root html; }
    location / { return 200 "root $uri\\n"; }
  }`),
    }, async (s) => ({
      api: await s.get('/api', { headers: { Host: 'loc.test' } }),
      apiArgs: await s.get('/api?x=1&y=2', { headers: { Host: 'loc.test' } }),
      apiHead: await s.get('/api', { method: 'HEAD', headers: { Host: 'loc.test' } }),
      apiSlash: await s.get('/api/v?x=1', { headers: { Host: 'loc.test' } }),
      app: await s.get('/app', { headers: { Host: 'loc.test' } }),
      staticNoProxy: await s.get('/static', { headers: { Host: 'loc.test' } }),
    }));
    assert.equal(run.nginx.result.api.status, 301);
    assert.equal(run.nginx.result.apiArgs.headers.location, `http://loc.test:${run.nginx.result.api.headers.location!.split(':')[2]!.split('/')[0]}/api/?x=1&y=2`);
    assertSameAsNginx(run);
  });

  it('redirects /exact to /exact/ with 301 when "location = /exact/" is proxied', async () => {
    const up = await startUpstream((req, res) => res.end(`upstream ${req.url}\n`));
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test;
    location = /exact/ { proxy_pass http://127.0.0.1:${up.port}; }
    location / { return 200 "root $uri\\n"; }
  }`),
    }, async (s) => ({
      exact: await s.get('/exact?a=1', { headers: { Host: 'loc.test' } }),
      slash: await s.get('/exact/', { headers: { Host: 'loc.test' } }),
    }));
    assert.equal(run.nginx.result.exact.status, 301);
    assertSameAsNginx(run);
  });

  const named = (port: number, body: string): string => httpConf(`  server { listen 127.0.0.1:${port}; server_name loc.test; root html;
${body}
    location @fallback { return 200 "named uri=$uri args=$args method=$request_method\n"; }
  }`);

  it('reaches a named location from error_page, as GET, with =CODE', async () => {
    const run = await differential({
      conf: ({ port }) => named(port, `
    location /ep/ { error_page 404 = @fallback; }
    location /ep-code/ { error_page 404 =202 @fallback; }
    location /ep-plain/ { error_page 404 @fallback; }`),
    }, async (s) => ({
      ep: await s.get('/ep/none?q=2', { headers: { Host: 'loc.test' } }),
      epPost: await s.get('/ep/none', { method: 'POST', body: 'x', headers: { Host: 'loc.test' } }),
      epCode: await s.get('/ep-code/none', { headers: { Host: 'loc.test' } }),
      epPlain: await s.get('/ep-plain/none', { headers: { Host: 'loc.test' } }),
      direct: await s.get('/@fallback', { headers: { Host: 'loc.test' } }),
    }));
    // a named location keeps the method (only a URI target turns it into GET)
    assert.equal(run.nginx.result.epPost.body, 'named uri=/ep/none args= method=POST\n');
    assertSameAsNginx(run);
  });

  it('falls back to a named location at the end of try_files', async () => {
    const run = await differential({
      conf: ({ port }) => named(port, '    location /tf/ { try_files $uri $uri/ @fallback; }'),
      files: { 'html/tf/real.txt': 'real file\n' },
    }, async (s) => ({
      hit: await s.get('/tf/real.txt', { headers: { Host: 'loc.test' } }),
      miss: await s.get('/tf/none?q=1', { headers: { Host: 'loc.test' } }),
    }));
    assert.equal(run.nginx.result.miss.body, 'named uri=/tf/none args=q=1 method=GET\n');
    assertSameAsNginx(run);
  });

  it('shows the error status as $status in the named location of an error_page', async () => {
    const run = await differential({
      conf: ({ port }) => named(port, `
    location /ret/ { error_page 418 @teapot; return 418; }
    location @teapot { return 200 "teapot $status\\n"; }`),
    }, async (s) => ({ ret: await s.get('/ret/x', { headers: { Host: 'loc.test' } }) }));
    assert.equal(run.nginx.result.ret.body, 'teapot 418\n');
    assertSameAsNginx(run);
  });

  it('answers 500 when an error_page names a location that does not exist', async () => {
    const run = await differential({
      conf: ({ port }) => named(port, '    location /missing/ { error_page 404 @nowhere; }'),
    }, async (s) => ({ missing: await s.get('/missing/x', { headers: { Host: 'loc.test' } }) }));
    assert.equal(run.nginx.result.missing.status, 500);
    assertSameAsNginx(run);
  });
});
