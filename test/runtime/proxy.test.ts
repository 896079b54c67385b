/**
 * The proxy module, differential against nginx: the URI sent upstream, the
 * request headers (proxy_set_header inheritance and defaults), the response
 * headers (hide/pass, add_header, proxy_redirect), upstream groups (round
 * robin, weight, keepalive) and request bodies.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, parseRaw, rawExchange, snap, type RequestOpts, type Side, type Snap } from '../helpers/differential.js';
import { echoOf, echoUpstream, type Echo } from '../helpers/upstreams.js';

/**
 * What the upstream received, with header names lowercased and sorted, and
 * without `Connection` (case, order and Connection are compared in their own
 * tests).
 */
interface UpstreamView {
  readonly method: string;
  readonly url: string;
  readonly httpVersion: string;
  readonly headers: readonly [string, string][];
  readonly bodyLength: number;
}

/** A proxied exchange: the client's view (without the body) and what the upstream received. */
interface Proxied {
  readonly status: number;
  readonly reason: string;
  readonly headers: Record<string, string>;
  readonly upstream: UpstreamView | string;
}

/** An echo with lowercase header names, sorted by name (stable for repeated names). */
export function view(e: Echo): UpstreamView {
  const headers = e.headers.map(([k, v]) => [k.toLowerCase(), v] as [string, string]).filter(([k]) => k !== 'connection');
  headers.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { method: e.method, url: e.url, httpVersion: e.httpVersion, headers, bodyLength: e.bodyLength };
}

/** The value of a header the upstream received (name case-insensitive). */
const header = (v: UpstreamView | Echo | string, name: string): string | undefined =>
  typeof v === 'string' ? undefined : v.headers.find(([k]) => k.toLowerCase() === name)?.[1];

async function proxied(s: Side, path: string, opts: RequestOpts = {}): Promise<Proxied> {
  const r: Snap = await s.get(path, { ...opts, headers: { Host: 'proxy.test', ...opts.headers } });
  const headers = { ...r.headers };
  delete headers['content-length'];
  let upstream: UpstreamView | string = r.body;
  try {
    upstream = view(echoOf(r.body));
  } catch {
    // not an echo: a page of the proxy itself
  }
  return { status: r.status, reason: r.reason, headers, upstream };
}

describe('proxy (differential)', () => {
  after(cleanup);

  it('sends the URI nginx sends: prefix replaced, unchanged, after rewrite, with variables', async () => {
    const up = await echoUpstream('up');
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /p/ { proxy_pass http://${u}/prefix/; }
    location /root/ { proxy_pass http://${u}/; }
    location /n/ { proxy_pass http://${u}; }
    location /rw/ { rewrite ^/rw/(.*)$ /new/$1 break; proxy_pass http://${u}; }
    location /rwuri/ { rewrite ^/rwuri/(.*)$ /changed/$1 break; proxy_pass http://${u}/base/; }
    location /rwlast/ { rewrite ^/rwlast/(.*)$ /p/$1 last; }
    location ~ ^/re/(.*)$ { proxy_pass http://${u}; }
    location /var/ { set $target ${u}; proxy_pass http://$target; }
    location /varuri/ { set $target ${u}; proxy_pass http://$target/fixed$is_args$args; }
    location /npm/ {
      set $forward_scheme http; set $server "127.0.0.1"; set $port ${up.port};
      proxy_pass $forward_scheme://$server:$port$request_uri;
    }
  }`),
    }, async (s) => {
      const out: Record<string, Proxied> = {};
      for (const p of [
        '/p/x?q=1', '/p/a%20b/c%2Fd?x=%20', '/p/', '/root/y?z', '/n/a%20b?q=1', '/n/../n/x', '/rw/a?k=v', '/rwuri/a?k=v', '/rwlast/b?k=v',
        '/re/c?k=v', '/var/d?k=v', '/varuri/e?k=v', '/npm/f%2Fg?k=v', '/p/q%22%3C%3E%5C%5E%60%7B%7C%7D%23%3F',
      ]) out[p] = await proxied(s, p);
      return out;
    });
    const echo = (p: string): UpstreamView => run.nginx.result[p]!.upstream as UpstreamView;
    assert.equal(echo('/p/x?q=1').url, '/prefix/x?q=1');
    assert.equal(echo('/rwuri/a?k=v').url, '/changed/a?k=v');
    assert.equal(echo('/npm/f%2Fg?k=v').url, '/npm/f%2Fg?k=v');
    // nginx 1.30's NGX_ESCAPE_URI: what RFC 3986 does not allow in a path, and '#', '%', '?'
    assert.equal(echo('/p/q%22%3C%3E%5C%5E%60%7B%7C%7D%23%3F').url, '/prefix/q%22%3C%3E%5C%5E%60%7B%7C%7D%23%3F');
    assertSameAsNginx(run);
  });

  it('sends nginx\'s default headers and passes the client\'s, dropping empty proxy_set_header values', async () => {
    const up = await echoUpstream('up');
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /default/ { proxy_pass http://${u}; }
    location /set/ {
      proxy_set_header X-Empty "";
      proxy_set_header User-Agent "";
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Host $host;
      proxy_set_header Host $host:$server_port;
      proxy_pass http://${u};
    }
    location /nohdrs/ { proxy_pass_request_headers off; proxy_pass http://${u}; }
  }`),
    }, async (s) => {
      const headers = { 'User-Agent': 'test-agent/1', 'X-Custom': 'a', 'X-Multi': 'one', Accept: '*/*', Cookie: 'c=1', 'X-Empty': 'client' };
      return {
        default: await proxied(s, '/default/x', { headers }),
        set: await proxied(s, '/set/x', { headers }),
        nohdrs: await proxied(s, '/nohdrs/x', { headers }),
        post: await proxied(s, '/default/post', { method: 'POST', body: 'abc', headers }),
      };
    });
    // nginx 1.30: HTTP/1.1 upstream, Host $proxy_host, no Connection header (keepalive by default)
    const d = run.nginx.result.default.upstream as UpstreamView;
    assert.equal(d.httpVersion, '1.1');
    assert.equal(header(d, 'host'), `127.0.0.1:${up.port}`);
    assert.equal(header(d, 'connection'), undefined);
    assertSameAsNginx(run);
  });

  it('inherits proxy_set_header only into levels that set none', async () => {
    const up = await echoUpstream('up');
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_set_header X-From-Http http;
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /inherit-http/ { proxy_pass http://${u}; }
  }
  server { listen 127.0.0.1:${port}; server_name srv.test;
    proxy_set_header X-From-Server server;
    location /inherit-server/ { proxy_pass http://${u}; }
    location /own/ { proxy_set_header X-From-Location location; proxy_pass http://${u}; }
    location /if/ { if ($arg_x) { proxy_pass http://${u}; } proxy_pass http://${u}; }
  }`),
    }, async (s) => ({
      http: await proxied(s, '/inherit-http/a'),
      server: await proxied(s, '/inherit-server/a', { headers: { Host: 'srv.test' } }),
      own: await proxied(s, '/own/a', { headers: { Host: 'srv.test' } }),
      ifBlock: await proxied(s, '/if/a?x=1', { headers: { Host: 'srv.test' } }),
    }));
    assert.equal(header(run.nginx.result.own.upstream, 'x-from-location'), 'location');
    assert.equal(header(run.nginx.result.own.upstream, 'x-from-server'), undefined);
    assertSameAsNginx(run);
  });

  it('builds X-Forwarded-For with $proxy_add_x_forwarded_for', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      none: await proxied(s, '/'),
      one: await proxied(s, '/', { headers: { 'X-Forwarded-For': '203.0.113.7' } }),
      list: await proxied(s, '/', { headers: { 'X-Forwarded-For': '203.0.113.7, 198.51.100.2' } }),
    }));
    assert.equal(header(run.nginx.result.one.upstream, 'x-forwarded-for'), '203.0.113.7, 127.0.0.1');
    assertSameAsNginx(run);
  });

  it('hides and passes upstream response headers like nginx', async () => {
    const up = await echoUpstream('up', (req, res) => {
      const raw: string[] = [
        'Content-Type', 'text/plain', 'Server', 'upstream-server/1', 'Date', 'Mon, 01 Jan 2001 00:00:00 GMT',
        'X-Powered-By', 'php', 'X-Secret', 's', 'X-Accel-Expires', '10', 'X-Accel-Redirect-Not', 'k',
        'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'X-Pad', 'pad', 'Keep-Alive', 'timeout=5', 'Content-Length', '3',
      ];
      res.writeHead(200, raw);
      res.end(req.url === '/head' ? undefined : 'abc');
      return true;
    });
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_hide_header X-Secret; proxy_pass http://${u}; }
    location /pass/ { proxy_pass_header Server; proxy_pass_header X-Accel-Expires; proxy_pass http://${u}; }
  }`),
    }, async (s) => ({
      plain: await s.get('/x', { headers: { Host: 'proxy.test' } }),
      pass: await s.request('/pass/x', { headers: { Host: 'proxy.test' } }).then((r) => ({ server: r.headers.server, accel: r.headers['x-accel-expires'] })),
    }));
    assert.equal(run.nginx.result.plain.headers['x-secret'], undefined);
    assert.equal(run.nginx.result.pass.server, 'upstream-server/1');
    assertSameAsNginx(run);
  });

  it('passes a chunked response\'s trailers with proxy_pass_trailers on, buffered or not, hidden ones left out, and none by default', async () => {
    const up = await echoUpstream('up', (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain', Trailer: 'X-Checksum' });
      res.write('hello ');
      res.addTrailers({ 'X-Checksum': 'abc', 'X-Hidden': 'h' });
      res.end('world');
      return true;
    });
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_pass_trailers on; proxy_hide_header X-Hidden; proxy_pass http://${u}; }
    location /unbuffered/ { proxy_pass_trailers on; proxy_buffering off; proxy_pass http://${u}; }
    location /default/ { proxy_pass http://${u}; }
  }`),
      literals: { UP: up.port },
    }, async (s) => {
      // the body's chunks are each server's own: only the last chunk and the trailers are compared
      const tail = async (path: string): Promise<string> => {
        const text = await rawExchange(s.port, `GET ${path} HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n`);
        return text.slice(text.indexOf('\r\n0\r\n'));
      };
      return { buffered: await tail('/x'), unbuffered: await tail('/unbuffered/x'), byDefault: await tail('/default/x') };
    });
    assert.deepEqual(run.nginx.result, {
      buffered: '\r\n0\r\nX-Checksum: abc\r\n\r\n',
      unbuffered: '\r\n0\r\nX-Checksum: abc\r\nX-Hidden: h\r\n\r\n',
      byDefault: '\r\n0\r\n\r\n',
    });
    assertSameAsNginx(run);
  });

  it('adds add_header to 2xx/3xx only, and to every status with always', async () => {
    const up = await echoUpstream('up', (req, res) => {
      const status = Number(/status=(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
      res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': '2' });
      res.end('ok');
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  add_header X-Http http;
  server { listen 127.0.0.1:${port}; server_name proxy.test; root html;
    add_header X-Server server;
    add_header X-Always always-$status always;
    location /proxy/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /static/ { }
    location /own/ { add_header X-Own own; return 200 "own\\n"; }
    location /empty/ { add_header X-Empty $arg_none; add_header X-Set set; return 200 "e\\n"; }
    location /ret404/ { return 404; }
    location /ret302/ { return 302 /elsewhere; }
  }`),
      files: { 'html/static/a.txt': 'a\n' },
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of ['/proxy/x?status=200', '/proxy/x?status=201', '/proxy/x?status=404', '/proxy/x?status=500', '/proxy/x?status=302',
        '/static/a.txt', '/static/none', '/own/', '/empty/', '/ret404/', '/ret302/']) out[p] = await s.get(p, { headers: { Host: 'proxy.test' } });
      return out;
    });
    assert.equal(run.nginx.result['/proxy/x?status=404']!.headers['x-server'], undefined);
    assert.equal(run.nginx.result['/proxy/x?status=404']!.headers['x-always'], 'always-404');
    assertSameAsNginx(run);
  });

  it('rewrites Location and Refresh with proxy_redirect default, off and explicit', async () => {
    let upPort = 0;
    const up = await echoUpstream('up', (req, res) => {
      const target = /to=([^&]*)/.exec(req.url ?? '')?.[1] ?? '';
      res.writeHead(302, { Location: decodeURIComponent(target).replace('UP', String(upPort)), Refresh: `5; url=${decodeURIComponent(target).replace('UP', String(upPort))}`, 'Content-Length': '0' });
      res.end();
      return true;
    });
    upPort = up.port;
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /app/ { proxy_pass http://${u}/backend/; }
    location /same/ { proxy_pass http://${u}; }
    location /off/ { proxy_redirect off; proxy_pass http://${u}/backend/; }
    location /explicit/ { proxy_redirect http://elsewhere.test/ /mapped/; proxy_pass http://${u}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const cases: [string, string][] = [
        ['/app/a', `http://127.0.0.1:UP/backend/moved`], ['/app/b', '/backend/relative'], ['/app/c', 'http://other.test/backend/x'],
        ['/same/d', `http://127.0.0.1:UP/same/moved`], ['/off/e', `http://127.0.0.1:UP/backend/moved`], ['/explicit/f', 'http://elsewhere.test/page'],
      ];
      for (const [p, to] of cases) out[`${p} -> ${to}`] = await s.get(`${p}?to=${encodeURIComponent(to)}`, { headers: { Host: 'proxy.test' } });
      return out;
    });
    assert.match(Object.values(run.nginx.result)[0]!.headers.location!, /^http:\/\/proxy\.test:\d+\/app\/moved$/);
    assertSameAsNginx(run);
  });

  it('balances an upstream group round robin with weights', async () => {
    const a = await echoUpstream('a');
    const b = await echoUpstream('b');
    const c = await echoUpstream('c');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream rr { server 127.0.0.1:${a.port}; server 127.0.0.1:${b.port}; }
  upstream weighted { server 127.0.0.1:${a.port} weight=3; server 127.0.0.1:${b.port}; server 127.0.0.1:${c.port} weight=2; }
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /rr/ { proxy_pass http://rr; }
    location /w/ { proxy_pass http://weighted; }
  }`, { oneWorker: true }),
    }, async (s) => {
      const rr: string[] = [];
      const w: string[] = [];
      for (let i = 0; i < 6; i++) rr.push((echoOf((await s.get('/rr/', { headers: { Host: 'proxy.test' } })).body)).name);
      for (let i = 0; i < 12; i++) w.push((echoOf((await s.get('/w/', { headers: { Host: 'proxy.test' } })).body)).name);
      const host = header(echoOf((await s.get('/rr/', { headers: { Host: 'proxy.test' } })).body), 'host');
      return { rr, w, host };
    });
    assert.deepEqual(run.nginx.result.rr, ['a', 'b', 'a', 'b', 'a', 'b']);
    assert.equal(run.nginx.result.host, 'rr');
    assertSameAsNginx(run);
  });

  it('keeps upstream connections alive by default (nginx 1.30), and opens one per request with proxy_http_version 1.0 or without an upstream block', async () => {
    const grp = await echoUpstream('group');
    const direct = await echoUpstream('direct');
    const old = await echoUpstream('http10');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream grp { server 127.0.0.1:${grp.port}; }
  upstream old { server 127.0.0.1:${old.port}; }
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /group/ { proxy_pass http://grp; }
    location /direct/ { proxy_pass http://127.0.0.1:${direct.port}; }
    location /http10/ { proxy_http_version 1.0; proxy_pass http://old; }
  }`, { oneWorker: true }),
    }, async (s) => {
      const count = async (path: string, up: { connections(): number }): Promise<{ connections: number; connection: (string | undefined)[]; version: string[] }> => {
        const before = up.connections();
        const connection: (string | undefined)[] = [];
        const version: string[] = [];
        for (let i = 0; i < 4; i++) {
          const e = echoOf((await s.get(path, { headers: { Host: 'proxy.test' } })).body);
          connection.push(header(e, 'connection'));
          version.push(e.httpVersion);
        }
        return { connections: up.connections() - before, connection, version };
      };
      return { group: await count('/group/', grp), direct: await count('/direct/', direct), http10: await count('/http10/', old) };
    });
    assert.equal(run.nginx.result.group.connections, 1);
    assert.equal(run.nginx.result.direct.connections, 4);
    assert.equal(run.nginx.result.http10.connections, 4);
    assert.deepEqual(run.nginx.result.http10.version, ['1.0', '1.0', '1.0', '1.0']);
    // Deliberate difference (README, "Differences from nginx"): undici speaks
    // HTTP/1.1 only and always writes its own Connection header; jinx keeps
    // nginx's connection counts.
    assert.deepEqual(run.jinx.result.group.connection, ['keep-alive', 'keep-alive', 'keep-alive', 'keep-alive']);
    assert.deepEqual(run.jinx.result.http10.connection, ['close', 'close', 'close', 'close']);
    assert.deepEqual(run.jinx.result.http10.version, ['1.1', '1.1', '1.1', '1.1']);
    const counts = (side: typeof run.nginx): number[] => [side.result.group.connections, side.result.direct.connections, side.result.http10.connections];
    assert.deepEqual(counts(run.jinx), counts(run.nginx));
  });

  it('reuses upstream connections with an explicit keepalive, for requests one after another and for pipelined ones', async () => {
    const ka = await echoUpstream('ka');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream ka { server 127.0.0.1:${ka.port}; keepalive 4; }
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /ka/ { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://ka; }
  }`, { oneWorker: true }),
    }, async (s) => {
      const b = ka.connections();
      for (let i = 0; i < 4; i++) await s.get('/ka/', { headers: { Host: 'proxy.test' } });
      const sequential = ka.connections() - b;
      // ngx_http_upstream_free_keepalive_peer caches the connection as the response ends: the
      // next request, read from the same client buffer at once, takes it
      const request = (close: boolean): string => `GET /ka/ HTTP/1.1\r\nHost: proxy.test\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;
      const text = await rawExchange(s.port, request(false).repeat(3) + request(true));
      return { sequential, pipelined: text.split('HTTP/1.1 200').length - 1, ka: ka.connections() - b };
    });
    assert.deepEqual(run.nginx.result, { sequential: 1, pipelined: 4, ka: 1 });
    assertSameAsNginx(run);
  });

  it('closes a kept upstream connection after keepalive_requests requests', async () => {
    const ka = await echoUpstream('ka');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream ka { server 127.0.0.1:${ka.port}; keepalive 1; keepalive_requests 3; }
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /ka/ { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://ka; }
  }`),
    }, async (s) => {
      const b = ka.connections();
      for (let i = 0; i < 7; i++) await s.get('/ka/', { headers: { Host: 'proxy.test' } });
      return { ka: ka.connections() - b };
    });
    assert.equal(run.nginx.result.ka, 3);
    assertSameAsNginx(run);
  });

  it('closes a kept upstream connection after the request that ends past its keepalive_time, and opens a new one for the next', async () => {
    const ka = await echoUpstream('ka');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream ka { server 127.0.0.1:${ka.port}; keepalive 1; keepalive_time 1s; }
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location /ka/ { proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://ka; }
  }`, { oneWorker: true }),
    }, async (s) => {
      const b = ka.connections();
      const opened: number[] = [];
      for (const waitMs of [0, 0, 1500, 0]) {
        await new Promise((res) => setTimeout(res, waitMs));
        await s.get('/ka/', { headers: { Host: 'proxy.test' } });
        opened.push(ka.connections() - b);
      }
      return { opened };
    });
    // the request after the pause still uses the old connection, which is then closed
    assert.deepEqual(run.nginx.result.opened, [1, 1, 1, 2]);
    assertSameAsNginx(run);
  });

  it('writes the upstream request head with nginx\'s order and name case for every header undici does not own', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_set_header X-Set set;
  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => echoOf((await s.get('/x', { method: 'POST', body: 'b', headers: { Host: 'proxy.test', 'X-Client': 'c', 'user-agent': 'ua' } })).body).headers);
    assert.deepEqual(run.nginx.result.map(([k]) => k), ['X-Set', 'Host', 'Content-Length', 'X-Client', 'user-agent']);
    // Deliberate difference (README): undici writes host first, then its own
    // connection, and content-length last, all in lower case.
    assert.deepEqual(run.jinx.result.map(([k]) => k), ['host', 'connection', 'X-Set', 'X-Client', 'user-agent', 'content-length']);
    const ownedByUndici = new Set(['host', 'connection', 'content-length']);
    const rest = (h: readonly [string, string][]): [string, string][] => h.filter(([k]) => !ownedByUndici.has(k.toLowerCase()));
    const values = (h: readonly [string, string][]): Record<string, string> => Object.fromEntries(h.filter(([k]) => k.toLowerCase() !== 'connection').map(([k, v]) => [k.toLowerCase(), v]));
    assert.deepEqual(rest(run.jinx.result), rest(run.nginx.result));
    assert.deepEqual(values(run.jinx.result), values(run.nginx.result));
  });

  it('passes request bodies intact, with Content-Length and chunked', async () => {
    const up = await echoUpstream('up');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test; client_max_body_size 10m;
    location /buffered/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /unbuffered/ { proxy_request_buffering off; proxy_http_version 1.1; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const big = Buffer.alloc(300_000, 'x').toString() + 'END';
      const pick = (e: Echo): Record<string, unknown> => ({
        method: e.method, url: e.url, bodyLength: e.bodyLength, bodySha1: e.bodySha1,
        framing: view(e).headers.filter(([k]) => /^(content-length|transfer-encoding)$/.test(k)),
      });
      const out: Record<string, Record<string, unknown>> = {};
      for (const loc of ['buffered', 'unbuffered']) {
        out[`${loc} length`] = pick(echoOf((await s.get(`/${loc}/a`, { method: 'POST', body: 'hello body', headers: { Host: 'proxy.test' } })).body));
        out[`${loc} big`] = pick(echoOf((await s.get(`/${loc}/b`, { method: 'PUT', body: big, headers: { Host: 'proxy.test' } })).body));
        out[`${loc} chunked`] = pick(echoOf((await s.get(`/${loc}/c`, { method: 'POST', chunks: ['chunk-one;', 'chunk-two;', big], headers: { Host: 'proxy.test' } })).body));
        out[`${loc} empty`] = pick(echoOf((await s.get(`/${loc}/d`, { method: 'POST', body: '', headers: { Host: 'proxy.test' } })).body));
      }
      return out;
    });
    assert.equal(run.nginx.result['buffered chunked']!.bodyLength, 20 + 300_003);
    assertSameAsNginx(run);
  });

  it('answers 502/504 and logs upstream failures as nginx does', async () => {
    const { createServer } = await import('node:net');
    const { onCleanup, freePort } = await import('../helpers/harness.js');
    // a raw upstream: /close closes without answering, /garbage sends no HTTP, /slow never answers
    const sockets = new Set<import('node:net').Socket>();
    const raw = createServer((sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
      sock.on('error', () => undefined);
      sock.once('data', (d: Buffer) => {
        const line = d.toString('latin1').split('\r\n')[0]!;
        if (line.includes('/close')) sock.destroy();
        else if (line.includes('/garbage')) sock.end('garbage\r\n\r\n');
        else if (line.includes('/half')) sock.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
      });
    });
    await new Promise<void>((res) => raw.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => { for (const x of sockets) x.destroy(); raw.close(() => res()); }));
    const rawPort = (raw.address() as { port: number }).port;
    const dead = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    proxy_read_timeout 1s;
    location /refused/ { proxy_pass http://127.0.0.1:${dead}; }
    location / { proxy_pass http://127.0.0.1:${rawPort}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap | string> = {};
      for (const p of ['/refused/x?a=1', '/close', '/slow', '/half']) {
        // raw: a response that is not HTTP/1.x is compared as the bytes received
        const text = await rawExchange(s.port, `GET ${p} HTTP/1.1\r\nHost: proxy.test\r\nConnection: close\r\n\r\n`);
        const parsed = parseRaw(text);
        out[p] = parsed && !text.startsWith('HTTP/1.1 200') ? snap(parsed, s.kind) : text.replace(/^(Date|Server): .*\r\n/gm, '');
      }
      return out;
    });
    assert.equal((run.nginx.result['/slow'] as Snap).status, 504);
    assertSameAsNginx(run);
  });

  it('answers 502 to an upstream that sends no HTTP/1.x status line, where nginx would relay it as HTTP/0.9', async () => {
    const { createServer } = await import('node:net');
    const { onCleanup, freePort, startJinx, request, logLines } = await import('../helpers/harness.js');
    const raw = createServer((sock) => {
      sock.on('error', () => undefined);
      sock.once('data', () => sock.end('garbage\r\n\r\n'));
    });
    await new Promise<void>((res) => raw.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => raw.close(() => res())));
    const rawPort = (raw.address() as { port: number }).port;
    const port = await freePort();
    const jinx = await startJinx(httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_pass http://127.0.0.1:${rawPort}; }
  }`), [port], { 'tmp/.keep': '' });
    const resp = await request(port, '/garbage', { headers: { Host: 'proxy.test' } });
    assert.equal(resp.status, 502);
    assert.deepEqual(logLines(jinx.errorLog()).filter((l) => l.startsWith('[error]')), [
      `[error] *CONN upstream sent no valid HTTP/1.0 header while reading response header from upstream, client: 127.0.0.1, server: proxy.test, request: "GET /garbage HTTP/1.1", upstream: "http://127.0.0.1:${rawPort}/garbage", host: "proxy.test"`,
    ]);
  });

  it('takes an upstream response whose lines end with a bare LF, as nginx does', async () => {
    const { createServer } = await import('node:net');
    const { onCleanup } = await import('../helpers/harness.js');
    const lf = createServer((sock) => {
      sock.on('error', () => undefined);
      sock.once('data', () => sock.end('HTTP/1.1 200 OK\nConnection: close\nX-Lf: yes\nContent-Length: 3\n\nlf\n'));
    });
    await new Promise<void>((res) => lf.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => lf.close(() => res())));
    const upstream = (lf.address() as { port: number }).port;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name proxy.test;
    location / { proxy_pass http://127.0.0.1:${upstream}; }
  }`),
    }, async (s) => ({ lf: await s.get('/lf', { headers: { Host: 'proxy.test' } }) }));
    assert.equal(run.nginx.result.lf.status, 200);
    assert.equal(run.nginx.result.lf.headers['x-lf'], 'yes');
    assertSameAsNginx(run);
  });
});
