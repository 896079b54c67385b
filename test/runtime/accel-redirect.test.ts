/**
 * `X-Accel-Redirect` from a proxied or FastCGI server, differential against
 * nginx: the request is redirected internally (as GET, HEAD staying HEAD) to
 * the URI or named location it names, with the upstream's Content-Type,
 * Set-Cookie, Content-Disposition, Cache-Control, Expires and Accept-Ranges
 * and no other header of it; unsafe URIs are 404 with nginx's error line;
 * `proxy_ignore_headers X-Accel-Redirect` passes the response on; the
 * upstream connection of a response without a body is kept after it, as
 * after an intercepted error.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { echoUpstream } from '../helpers/upstreams.js';
import { STDOUT, endRequest, fcgiRecord, scriptedFastcgi } from '../helpers/fastcgi-server.js';

/** Headers the upstream answers with besides X-Accel-Redirect. */
const UPSTREAM_HEADERS: Record<string, string> = {
  'Content-Type': 'text/blah',
  'Set-Cookie': 'blah=blah; Path=/up/',
  'Content-Disposition': 'attachment',
  'Cache-Control': 'no-cache',
  Expires: 'fake',
  'Accept-Ranges': 'parrots',
  Something: 'other',
};

const TARGETS = `
    location /files/ { root html; }
    location = /text { return 200 "text $request_method $uri $args x=$upstream_http_x_accel_redirect\\n"; }
    location @named { return 200 "named $request_method $uri\\n"; }`;

const CASES = ['/files/a.txt', '/text?q=1', '/text%20sp', '@named', '..', '../x', '/x/..', '/x/.%2e', '/x/..?a', '/missing-file', '?a'];

describe('X-Accel-Redirect (differential)', () => {
  after(cleanup);

  it('follows X-Accel-Redirect from a proxied server with the headers nginx keeps', async () => {
    const up = await echoUpstream('xar', (req, res) => {
      const target = decodeURIComponent(new URL(req.url ?? '/', 'http://x').searchParams.get('to') ?? '');
      res.writeHead(200, { ...UPSTREAM_HEADERS, 'X-Accel-Redirect': target, 'Content-Length': '8' });
      res.end('upstream');
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name xar.test;
    location /proxy { proxy_pass http://127.0.0.1:${up.port}; proxy_cookie_path /up/ /down/; }
    location /ignored { proxy_pass http://127.0.0.1:${up.port}; proxy_ignore_headers X-Accel-Redirect; }${TARGETS}
  }`),
      files: { 'html/files/a.txt': 'file a\n' },
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const to of CASES) out[to] = await s.get(`/proxy?to=${encodeURIComponent(to)}`);
      out['POST'] = await s.get(`/proxy?to=${encodeURIComponent('/text')}`, { method: 'POST', body: 'b' });
      out['POST named'] = await s.get(`/proxy?to=${encodeURIComponent('@named')}`, { method: 'POST', body: 'b' });
      out['HEAD'] = await s.get(`/proxy?to=${encodeURIComponent('/files/a.txt')}`, { method: 'HEAD' });
      out['ignored'] = await s.get(`/ignored?to=${encodeURIComponent('/text')}`);
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n['/text?q=1']!.body, 'text GET /text q=1 x=/text?q=1\n');
    assert.equal(n['/text?q=1']!.headers['content-type'], 'text/blah');
    assert.equal(n['/text?q=1']!.headers['something'], undefined);
    assert.equal(n['/x/.%2e']!.status, 404);
    assertSameAsNginx(run);
  });

  it('follows X-Accel-Redirect from a FastCGI server', async () => {
    const fcgi = await scriptedFastcgi((req, sock) => {
      const query = req.params.find(([n]) => n === 'QUERY_STRING')?.[1] ?? '';
      const target = decodeURIComponent(new URLSearchParams(query).get('to') ?? '');
      const head = Object.entries(UPSTREAM_HEADERS).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      sock.write(Buffer.concat([fcgiRecord(STDOUT, `${head}X-Accel-Redirect: ${target}\r\n\r\nbody`), fcgiRecord(STDOUT, ''), endRequest()]));
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name xar.test;
    location /fcgi { fastcgi_pass 127.0.0.1:${fcgi.port}; fastcgi_param QUERY_STRING $query_string; }${TARGETS}
  }`),
      files: { 'html/files/a.txt': 'file a\n' },
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const to of ['/files/a.txt', '/text?q=1', '@named', '/x/..']) out[to] = await s.get(`/fcgi?to=${encodeURIComponent(to)}`);
      return out;
    });
    assert.equal(run.nginx.result['@named']!.body, 'named GET /fcgi\n');
    assertSameAsNginx(run);
  });

  it('keeps the upstream connection of a bodiless response that X-Accel-Redirect or an intercepted error gives up', async () => {
    // empty bodies, which the upstream's connection has read whole with the header
    const up = await echoUpstream('kept', (req, res) => {
      if (req.url === '/plain') res.writeHead(200, { 'Content-Length': '0' });
      else if (req.url === '/accel') res.writeHead(200, { 'X-Accel-Redirect': '/text', 'Content-Length': '0' });
      else res.writeHead(404, { 'Content-Length': '0' });
      res.end();
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream kept { server 127.0.0.1:${up.port}; keepalive 4; }
  server { listen 127.0.0.1:${port}; server_name accel.test;
    location / { proxy_pass http://kept; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_intercept_errors on; error_page 404 = /text; }
    location = /text { return 200 "text\\n"; }
  }`),
    }, async (s) => {
      const before = up.connections();
      const out: Record<string, Snap> = {};
      for (const path of ['/plain', '/plain', '/accel', '/plain', '/missing', '/plain']) out[`${path} ${up.connections() - before}`] = await s.get(path);
      return { responses: out, opened: up.connections() - before };
    });
    // ngx_http_proxy_process_header sets u->keepalive for a response without a body: one connection serves all six
    assert.equal(run.nginx.result.opened, 1);
    assertSameAsNginx(run);
  });
});
