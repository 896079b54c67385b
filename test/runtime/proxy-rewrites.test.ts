/**
 * What the proxy module changes on the way, differential against nginx: the
 * upstream request's method and body (`proxy_method`, `proxy_set_body`,
 * `set $args`), the response's cookies (`proxy_cookie_domain`,
 * `proxy_cookie_path`, `proxy_cookie_flags`) and redirects
 * (`proxy_redirect` regexes and `default`), upstream headers nginx takes with bare LFs,
 * ignores when repeated or refuses, the `$upstream_*` variables, and the
 * connections an upstream sees after a response is given up.
 */
import { strict as assert } from 'node:assert';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, onCleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Snap } from '../helpers/differential.js';
import { echoOf, echoUpstream, scriptedUpstream } from '../helpers/upstreams.js';

/** A response with its headers sorted by name (where node:http puts `Connection: close` is not compared here). */
function sorted(r: Snap): Snap {
  return { ...r, headers: Object.fromEntries(Object.entries(r.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
}

describe('proxy request and response rewriting (differential)', () => {
  after(cleanup);

  it('proxy_method and proxy_set_body change the upstream request; set $args changes the URI of a proxy_pass without one', async () => {
    const up = await echoUpstream('up');
    const u = `127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location /const { proxy_method POST; proxy_pass http://${u}; }
    location /var { proxy_method $arg_m; proxy_pass http://${u}; }
    location /parent { proxy_method PUT; location /parent/child { proxy_pass http://${u}; } }
    location /body { proxy_set_body "a=$arg_a"; proxy_pass http://${u}; }
    location /args { set $args "x=1"; proxy_pass http://${u}; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const [p, body] of [['/const', undefined], ['/var?m=PATCH', undefined], ['/parent/child', undefined], ['/body?a=b', 'client body'],
        ['/args?y=2', undefined]] as const) {
        const r = await s.get(p, body === undefined ? {} : { method: 'POST', body });
        const e = echoOf(r.body);
        // undici sends "content-length: 0" for a bodiless POST, PUT or PATCH (README, differences): compared only with a body
        // null, not undefined: a recording (JSON) keeps it
        const length = body === undefined ? null : e.headers.find(([k]) => k.toLowerCase() === 'content-length')?.[1] ?? null;
        out[p] = { method: e.method, url: e.url, body: e.body, length };
      }
      return out;
    });
    assert.deepEqual(run.jinx.result['/body?a=b'], { method: 'POST', url: '/body?a=b', body: 'a=b', length: '3' });
    assert.deepEqual(run.jinx.result['/args?y=2'], { method: 'GET', url: '/args?x=1', body: '', length: null });
    assertSameAsNginx(run);
  });

  it('rewrites Set-Cookie with proxy_cookie_domain, proxy_cookie_path and proxy_cookie_flags, and Location with proxy_redirect regexes', async () => {
    const cookies = [
      'v=1; Domain=www.Example.org', 'v=1; Domain=.LocalHost.com', 'v=1; Domain=www.example.NET', 'v=1; Path=/path/x.html',
      'v=1; Path=/CASEless/x.html', 'v=1; domain=www.example.org; path=/path/a', 'a=1; Domain=example.org', 'a=1;Secure;HttpOnly;SameSite=Lax',
      'd=1; secure; httponly; samesite=lax', 'foobarbaz=1', 'nx=1;samesite=none', 'noequals',
    ];
    const backendCookies = cookies.map((c, i) => `    location ~ /c${i}$ { add_header Set-Cookie "${c}"; return 200 ok; }`).join('\n');
    const run = await differential({
      extraPorts: 1,
      conf: ({ port, ports }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location / {
      proxy_pass http://127.0.0.1:${ports[0]};
      proxy_cookie_domain www.example.org .example.com;
      proxy_cookie_domain .$server_name.com en.$server_name.org;
      proxy_cookie_domain ~^(.+)\\.net$ $1.org;
      proxy_cookie_path /path/ /new/;
      proxy_cookie_path ~*^/caseless/(.+)$ /$1;
      proxy_cookie_flags a secure httponly samesite=none;
      proxy_cookie_flags d nosecure nohttponly nosamesite;
      proxy_cookie_flags ~BAR httponly;
      proxy_redirect ~^http://[^/]+/regex_w_([^/]+) /$1/test.html;
      proxy_redirect ~*re+gexp? /replaced/test.html;
      location /off/ { proxy_pass http://127.0.0.1:${ports[0]}; proxy_cookie_domain off; proxy_cookie_path off; proxy_cookie_flags off; }
    }
  }
  server { listen 127.0.0.1:${ports[0]}; server_name backend;
${backendCookies}
    location /loc { return 302 $arg_l; }
  }`),
    }, async (s) => {
      const out: Record<string, string | undefined> = {};
      for (let i = 0; i < cookies.length; i++) {
        out[cookies[i]!] = (await s.get(`/c${i}`)).headers['set-cookie'];
        out[`off ${cookies[i]!}`] = (await s.get(`/off/c${i}`)).headers['set-cookie'];
      }
      for (const l of [`http://127.0.0.1:${s.ports[0]}/regex_w_x/y`, 'http://other/ReeeGEX', 'http://other/plain']) {
        out[`location ${l.replace(String(s.ports[0]), 'PORT')}`] = (await s.get(`/loc?l=${l}`)).headers['location'];
      }
      return out;
    });
    assert.equal(run.jinx.result['v=1; Domain=www.Example.org'], 'v=1; Domain=example.com');
    assert.equal(run.jinx.result['a=1;Secure;HttpOnly;SameSite=Lax'], 'a=1; Secure; HttpOnly; SameSite=None');
    // not the logs: nginx keeps its connections to the backend, which then logs "closed keepalive connection"
    assertSameAsNginx(run, { log: false });
  });

  it('proxy_redirect default is the rule of the proxy_pass URL as written, in its place among the others and inherited as its parent wrote it', async () => {
    const run = await differential({
      extraPorts: 1,
      conf: ({ port, ports }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location /d/ { proxy_pass http://127.0.0.1:${ports[0]}/; proxy_redirect default; proxy_redirect ~^http://other(/.*)$ https://y$1; }
    location /first/ { proxy_pass http://127.0.0.1:${ports[0]}/; proxy_redirect ~^http://other(/.*)$ https://y$1; proxy_redirect default; }
    location /n/ {
      proxy_pass http://127.0.0.1:${ports[0]}/a/; proxy_redirect default;
      location /n/in/ { proxy_pass http://127.0.0.1:${ports[0]}/b/; }
    }
    location /nouri/ { proxy_pass http://127.0.0.1:${ports[0]}; }
  }
  server { listen 127.0.0.1:${ports[0]}; server_name backend;
    location / { return 302 $arg_l; }
  }`),
    }, async (s) => {
      const back = `http://127.0.0.1:${s.ports[0]}`;
      const out: Record<string, string | undefined> = {};
      for (const [path, l] of [['/d/x', `${back}/q`], ['/d/x', 'http://other/q'], ['/first/x', `${back}/q`], ['/first/x', 'http://other/q'],
        ['/n/x', `${back}/a/q`], ['/n/in/x', `${back}/a/q`], ['/n/in/x', `${back}/b/q`], ['/nouri/x', `${back}/q`]]) {
        out[`${path} ${l!.replace(String(s.ports[0]), 'PORT')}`] = (await s.get(`${path}?l=${l}`)).headers['location'];
      }
      return out;
    });
    assert.equal(run.jinx.result['/d/x http://other/q'], 'https://y/q');
    assert.match(run.jinx.result['/n/in/x http://127.0.0.1:PORT/a/q'] ?? '', /^http:\/\/127\.0\.0\.1:\d+\/n\/q$/);
    // not the logs: nginx keeps its connections to the backend, which then logs "closed keepalive connection"
    assertSameAsNginx(run, { log: false });
  });

  it('reads upstream headers ending in bare LF, ignores a repeated Expires with a warning, refuses an unknown or repeated Transfer-Encoding, keeps a status line without reason', async () => {
    const responses: Record<string, string> = {
      '/lf': 'HTTP/1.1 200 OK\nConnection: close\nX-Foo: bar\n\nbody',
      '/expires': 'HTTP/1.1 200 OK\r\nConnection: close\r\nExpires: foo\r\nExpires: bar\r\nContent-Length: 2\r\n\r\nok',
      '/te-unknown': 'HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: foo\r\n\r\n',
      '/te-twice': 'HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      '/no-reason': 'HTTP/1.1 200\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok',
    };
    const up = await scriptedUpstream((line: string, sock: Socket) => {
      sock.end(responses[line.split(' ')[1]!] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of Object.keys(responses)) out[p] = sorted(await s.get(p));
      // a status line without a reason phrase goes on as it came
      const raw = await rawExchange(s.port, 'GET /no-reason HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      return { snaps: out, statusLine: raw.slice(0, raw.indexOf('\r\n')) };
    });
    assert.equal(run.jinx.result.statusLine, 'HTTP/1.1 200');
    assert.equal(run.jinx.result.snaps['/lf']!.body, 'body');
    assert.equal(run.jinx.result.snaps['/te-unknown']!.status, 502);
    assertSameAsNginx(run);
  });

  it('$upstream_* in the access log: every server tried, lengths and bytes received, cookies and headers of the upstream', async () => {
    const body = 'TEST-OK-IF-YOU-SEE-THIS';
    const up = await scriptedUpstream((_line: string, sock: Socket) => {
      sock.end(`HTTP/1.1 200 OK\nConnection: close\nSet-Cookie: a=b; path=/\nX-Len: 5\n\n${body}`);
    });
    const refused = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format u "$uri|$upstream_addr|$upstream_status|$upstream_response_length|$upstream_bytes_received|$upstream_cookie_a|$upstream_http_x_len|$upstream_connect_time";
  upstream g { server 127.0.0.1:${refused}; server 127.0.0.1:${up.port}; }
  server { listen 127.0.0.1:${port}; server_name localhost; access_log logs/u.log u;
    location / { proxy_pass http://127.0.0.1:${up.port}; add_header X-Up "$upstream_addr|$upstream_response_time|$upstream_bytes_sent|$upstream_cookie_a"; }
    location /g { proxy_pass http://g; }
  }`),
    }, async (s) => ({ one: sorted(await s.get('/one')), tried: sorted(await s.get('/g')) }));
    const log = (lines: readonly string[]): string[] => lines.map((l) => l.replace(/\|[-0-9., ]+$/, '|TIMES').replace(/:\d+/g, ':PORT'));
    assert.deepEqual(log(run.jinx.file('logs/u.log')), log(run.nginx.file('logs/u.log')));
    assert.match(run.jinx.file('logs/u.log')[0]!, new RegExp(`^/one\\|127.0.0.1:\\d+\\|200\\|${body.length}\\|\\d+\\|b\\|5\\|`));
    assert.match(run.jinx.result.one.headers['x-up']!, /^127\.0\.0\.1:\d+\|-\|0\|b$/);
    assert.equal(run.jinx.result.one.headers['x-up']!.replace(/:\d+/, ':PORT'), run.nginx.result.one.headers['x-up']!.replace(/:\d+/, ':PORT'));
    assertSameAsNginx({ nginx: { ...run.nginx, result: run.nginx.result.tried }, jinx: { ...run.jinx, result: run.jinx.result.tried } });
  });

  it('leaves the upstream no idle connection after a response passed on to the next server', async () => {
    // an upstream that tells which of its connections are open and never carried a request
    const open = new Set<Socket>();
    const carried = new WeakSet<Socket>();
    const server = createServer((sock) => {
      open.add(sock);
      sock.on('close', () => open.delete(sock)).on('error', () => undefined);
      let head = '';
      sock.on('data', (d: Buffer) => {
        carried.add(sock);
        head += d.toString('latin1');
        if (head.includes('\r\n\r\n')) sock.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => {
      for (const sock of open) sock.destroy();
      server.close(() => res());
    }));
    const upPort = (server.address() as AddressInfo).port;
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream u { server 127.0.0.1:${upPort}; server 127.0.0.1:${upPort}; }
  server { listen 127.0.0.1:${port}; server_name localhost;
    proxy_next_upstream http_404; proxy_intercept_errors on; error_page 404 /404;
    location / { proxy_pass http://u; }
    location = /404 { return 200 "x$upstream_status x"; }
  }`),
    }, async (s) => {
      const r = await s.get('/tries');
      await new Promise((res) => setTimeout(res, 300));
      return { body: r.body, idle: [...open].filter((sock) => !carried.has(sock)).length };
    });
    assert.deepEqual(run.jinx.result, { body: 'x404, 404 x', idle: 0 });
    assertSameAsNginx(run);
  });
});
