/**
 * auth_request, differential against nginx, with Authelia's snippets
 * (`/authelia` as an `internal` location proxied to a verifier through a
 * variable, `auth_request_set` from `$upstream_http_*`, `error_page 401 =302`
 * to the login portal): a verifier on 127.0.0.1 answers each request with
 * the verdict the client's cookie names (200 with `Remote-User`, 401, 403,
 * 302, 500) or refuses connections. Each case compares the client's
 * response, what the verifier received (method, headers, no body), what the
 * protected app received, and the error-log lines; then `satisfy any|all`
 * with `allow`/`deny` and `auth_basic`.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SHARED, cleanup, freePort } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side, type Snap } from '../helpers/differential.js';
import { dnsServer, echoOf, echoUpstream, type Echo, type EchoUpstream } from '../helpers/upstreams.js';

/** NPM's user file: alice / alice-secret, bob / bob-secret. */
const USERS = join(SHARED, 'corpus/nginx-proxy-manager/rootfs/data/access/1');
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/**
 * An Authelia-style verifier: the `verdict` cookie of the original request
 * (the subrequest carries the client's headers) decides the answer.
 */
function verifier(): Promise<EchoUpstream> {
  return echoUpstream('verifier', (req, res) => {
    const verdict = /verdict=(\d+)/.exec(req.headers.cookie ?? '')?.[1] ?? '401';
    // verdict 0: no answer at all
    if (verdict === '0') return true;
    const headers: Record<string, string> = { 'Content-Type': 'text/plain' };
    // Authelia 4.38's /api/authz/auth-request names the portal in Location on its 401
    if (verdict === '401' && req.url?.startsWith('/api/authz/')) headers.Location = `https://auth.example.com/?rd=${encodeURIComponent(String(req.headers['x-original-url']))}`;
    if (verdict === '200') Object.assign(headers, { 'Remote-User': 'alice', 'Remote-Groups': 'admins,dev', 'Remote-Name': 'Alice', 'Remote-Email': 'alice@example.com' });
    if (verdict === '401') headers['WWW-Authenticate'] = 'Basic realm="Authelia"';
    if (verdict === '302') headers.Location = 'https://auth.example.com/';
    const text = `verdict ${verdict}\n`;
    headers['Content-Length'] = String(text.length);
    res.writeHead(Number(verdict), headers);
    res.end(text);
    return true;
  });
}

/** What an upstream received, comparable between the two servers: header names lowercased and sorted, `Connection` left out (jinx's client owns it). */
interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: readonly [string, string][];
  readonly bodyLength: number;
}

function received(e: Echo): Received {
  const headers = e.headers.map(([k, v]) => [k.toLowerCase(), v] as [string, string]).filter(([k]) => k !== 'connection');
  headers.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { method: e.method, url: e.url, headers, bodyLength: e.bodyLength };
}

/** A client's view of one request: the response (the app's echo parsed), and what the verifier got for it. */
interface Exchange {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly app: Received | string;
  readonly verifier: readonly Received[];
}

async function through(s: Side, v: EchoUpstream, path: string, opts: Parameters<Side['get']>[1] = {}): Promise<Exchange> {
  const before = v.seen.length;
  const r: Snap = await s.get(path, opts);
  const headers = { ...r.headers };
  delete headers['content-length'];
  return {
    status: r.status,
    headers,
    app: headers['content-type'] === 'application/json' && r.body !== '' ? received(echoOf(r.body)) : r.body,
    verifier: v.seen.slice(before).map(received),
  };
}

/** Authelia's `authelia-location.conf` (legacy /api/verify), as Nginx Proxy Manager users include it. */
const AUTHELIA_LOCATION = `location /authelia {
      internal;
      proxy_pass_request_body off;
      proxy_pass $upstream_authelia;
      proxy_set_header Content-Length "";
      proxy_next_upstream error timeout invalid_header http_500 http_502 http_503;
      client_body_buffer_size 128k;
      proxy_set_header Host $host;
      proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Uri $request_uri;
      proxy_set_header X-Forwarded-Ssl on;
      proxy_redirect http:// $scheme://;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffers 4 32k;
      send_timeout 5m;
      proxy_read_timeout 240;
      proxy_send_timeout 240;
      proxy_connect_timeout 240;
    }`;

/** Authelia's `authelia-authrequest.conf`, plus the subrequest's status for the test to see. */
const AUTHELIA_AUTHREQUEST = `auth_request /authelia;
      auth_request_set $target_url $scheme://$http_host$request_uri;
      auth_request_set $user $upstream_http_remote_user;
      auth_request_set $groups $upstream_http_remote_groups;
      auth_request_set $name $upstream_http_remote_name;
      auth_request_set $email $upstream_http_remote_email;
      auth_request_set $auth_status $upstream_status;
      proxy_set_header Remote-User $user;
      proxy_set_header Remote-Groups $groups;
      proxy_set_header Remote-Name $name;
      proxy_set_header Remote-Email $email;
      add_header X-Auth-Status $auth_status always;
      error_page 401 =302 https://auth.example.com/?rd=$target_url;`;

const cookie = (verdict: number): Record<string, string> => ({ Host: 'wiki.example.com', Cookie: `authelia_session=s; verdict=${verdict}` });

describe('auth_request with an Authelia-style verifier (differential)', () => {
  after(cleanup);

  it('lets 2xx through with the verifier\'s Remote-* headers passed to the app, redirects 401 to the portal, returns 403, and answers 500 to other statuses', async () => {
    const v = await verifier();
    const app = await echoUpstream('app');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name wiki.example.com;
    set $upstream_authelia http://127.0.0.1:${v.port}/api/verify;
    ${AUTHELIA_LOCATION}
    location / {
      ${AUTHELIA_AUTHREQUEST}
      proxy_pass http://127.0.0.1:${app.port};
    }
    location /plain/ {
      auth_request /authelia;
      proxy_pass http://127.0.0.1:${app.port};
    }
  }`),
    }, async (s) => ({
      allowed: await through(s, v, '/d/home?tab=1', { headers: { ...cookie(200), Referer: 'https://wiki.example.com/' } }),
      post: await through(s, v, '/api/save', { method: 'POST', body: 'name=value', headers: { ...cookie(200), 'Content-Type': 'application/x-www-form-urlencoded' } }),
      login: await through(s, v, '/d/home?tab=1', { headers: cookie(401) }),
      challenge: await through(s, v, '/plain/x', { headers: cookie(401) }),
      forbidden: await through(s, v, '/d/home', { headers: cookie(403) }),
      redirect: await through(s, v, '/d/home', { headers: cookie(302) }),
      broken: await through(s, v, '/d/home', { headers: cookie(500) }),
      outside: await through(s, v, '/authelia', { headers: cookie(200) }),
    }));
    const n = run.nginx.result;
    assert.equal(n.allowed.status, 200);
    assert.equal(n.allowed.headers['x-auth-status'], '200');
    const appHeaders = new Map((n.allowed.app as Received).headers);
    assert.equal(appHeaders.get('remote-user'), 'alice');
    assert.equal(appHeaders.get('remote-groups'), 'admins,dev');
    const verify = n.allowed.verifier[0]!;
    assert.deepEqual([verify.method, verify.url, verify.bodyLength], ['GET', '/api/verify', 0]);
    assert.equal(new Map(verify.headers).get('x-original-url'), `http://wiki.example.com/d/home?tab=1`);
    assert.equal(new Map(n.post.verifier[0]!.headers).get('x-original-method'), 'POST');
    assert.equal(new Map(n.post.verifier[0]!.headers).get('content-length'), undefined);
    assert.equal((n.post.app as Received).bodyLength, 10);
    assert.equal(n.login.status, 302);
    assert.equal(n.login.headers.location, 'https://auth.example.com/?rd=http://wiki.example.com/d/home?tab=1');
    assert.equal(n.challenge.status, 401);
    assert.equal(n.challenge.headers['www-authenticate'], 'Basic realm="Authelia"');
    assert.equal(n.forbidden.status, 403);
    assert.deepEqual([n.redirect.status, n.broken.status], [500, 500]);
    assert.deepEqual([n.outside.status, n.outside.verifier.length], [404, 0]);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN auth request unexpected status: 302 while sending to client, client: 127.0.0.1, server: wiki.example.com, request: "GET /d/home HTTP/1.1"')));
    assertSameAsNginx(run);
  });

  it('answers 500 when the verifier refuses connections, logging the subrequest\'s connect() failure with its subrequest: field, then the unexpected 502', async () => {
    const refused = await freePort();
    const app = await echoUpstream('app');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name grafana.example.com;
    set $upstream_authelia http://127.0.0.1:${refused}/api/verify;
    ${AUTHELIA_LOCATION}
    location / {
      ${AUTHELIA_AUTHREQUEST}
      proxy_pass http://127.0.0.1:${app.port};
    }
  }`),
    }, async (s) => ({
      refused: (await s.get('/d/home', { headers: { Host: 'grafana.example.com', Referer: 'https://grafana.example.com/login' } })).status,
      again: (await s.get('/api/dashboards/home', { headers: { Host: 'grafana.example.com' } })).status,
    }));
    assert.deepEqual(run.nginx.result, { refused: 500, again: 500 });
    assert.deepEqual(run.nginx.errorLog.slice(0, 2), [
      `[error] *CONN connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: grafana.example.com, request: "GET /d/home HTTP/1.1", subrequest: "/authelia", upstream: "http://127.0.0.1:${refused}/api/verify", host: "grafana.example.com", referrer: "https://grafana.example.com/login"`,
      '[error] *CONN auth request unexpected status: 502 while sending to client, client: 127.0.0.1, server: grafana.example.com, request: "GET /d/home HTTP/1.1", host: "grafana.example.com", referrer: "https://grafana.example.com/login"',
    ]);
    assertSameAsNginx(run);
  });

  it('combines auth_request with allow/deny and auth_basic under satisfy any and satisfy all', async () => {
    const v = await verifier();
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name wiki.example.com; root html;
    set $upstream_authelia http://127.0.0.1:${v.port}/api/verify;
    ${AUTHELIA_LOCATION}
    location /any-allowed/ { satisfy any; allow 127.0.0.1; deny all; auth_request /authelia; try_files /ok.txt =404; }
    location /any-denied/ { satisfy any; deny all; auth_request /authelia; try_files /ok.txt =404; }
    location /any-basic/ { satisfy any; auth_basic "Members"; auth_basic_user_file ${USERS}; auth_request /authelia; try_files /ok.txt =404; }
    location /all/ { satisfy all; allow 127.0.0.1; deny all; auth_basic "Members"; auth_basic_user_file ${USERS}; auth_request /authelia; try_files /ok.txt =404; }
    location /all-denied/ { deny all; auth_request /authelia; try_files /ok.txt =404; }
  }`),
      files: { 'html/ok.txt': 'ok\n' },
    }, async (s) => {
      const out: Record<string, Exchange> = {};
      for (const verdict of [200, 401, 403, 500]) {
        for (const path of ['/any-allowed/', '/any-denied/', '/any-basic/', '/all/', '/all-denied/']) {
          out[`${path} ${verdict}`] = await through(s, v, path, { headers: cookie(verdict) });
          out[`${path} ${verdict} alice`] = await through(s, v, path, { headers: { ...cookie(verdict), Authorization: basic('alice', 'alice-secret') } });
        }
      }
      return out;
    });
    const n = run.nginx.result;
    assert.deepEqual([n['/any-allowed/ 401']!.status, n['/any-allowed/ 401']!.verifier.length], [200, 0]);
    assert.equal(n['/any-denied/ 200']!.status, 200);
    assert.equal(n['/any-denied/ 401']!.status, 401);
    assert.equal(n['/any-basic/ 401 alice']!.status, 200);
    assert.equal(n['/all/ 200']!.status, 401);
    assert.equal(n['/all/ 200 alice']!.status, 200);
    assert.equal(n['/all/ 403 alice']!.status, 403);
    assert.deepEqual([n['/all-denied/ 200']!.status, n['/all-denied/ 200']!.verifier.length], [403, 0]);
    assertSameAsNginx(run);
  });

  it('follows Authelia 4.38\'s flow, resolves the verifier\'s name through resolver, times out a silent verifier, and keeps the request line of a POST through error_page', async () => {
    const v = await verifier();
    const dns = await dnsServer({ a: '127.0.0.1' });
    const app = await echoUpstream('app');
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format auth '$status $request_method "$request" $upstream_addr $upstream_status';
  server { listen 127.0.0.1:${port}; server_name wiki.example.com; root html;
    access_log logs/auth.log auth;
    resolver 127.0.0.1:${dns} valid=60s ipv6=off;
    set $upstream_authelia http://authelia.internal:${v.port}/api/authz/auth-request;
    ${AUTHELIA_LOCATION}
    location = /slow-verify { internal; proxy_pass http://127.0.0.1:${v.port}/api/verify; proxy_read_timeout 1s; }
    location = /static-verify { internal; try_files /verdicts/allow.txt =404; }
    location = /missing-verify { internal; try_files /verdicts/none.txt =404; }
    location = /hidden-verify { internal; proxy_hide_header WWW-Authenticate; proxy_pass http://127.0.0.1:${v.port}/api/verify; }
    location = /return-verify { internal; add_header WWW-Authenticate 'Basic realm="own"' always; return 401; }
    location / {
      auth_request /authelia;
      auth_request_set $user $upstream_http_remote_user;
      auth_request_set $redirection_url $upstream_http_location;
      proxy_set_header Remote-User $user;
      error_page 401 =302 $redirection_url;
      proxy_pass http://127.0.0.1:${app.port};
    }
    location /slow/ { auth_request /slow-verify; proxy_pass http://127.0.0.1:${app.port}; }
    location /static/ { auth_request /static-verify; proxy_pass http://127.0.0.1:${app.port}; }
    location /missing/ { auth_request /missing-verify; proxy_pass http://127.0.0.1:${app.port}; }
    location /hidden/ { auth_request /hidden-verify; proxy_pass http://127.0.0.1:${app.port}; }
    location /return/ { auth_request /return-verify; proxy_pass http://127.0.0.1:${app.port}; }
    location /open/ { auth_request off; proxy_pass http://127.0.0.1:${app.port}; }
    location /denied/ { auth_request /authelia; error_page 403 /errors/403.html; proxy_pass http://127.0.0.1:${app.port}; }
    location /errors/ { }
  }`),
      files: { 'html/verdicts/allow.txt': 'allow\n' },
    }, async (s) => ({
      allowed: await through(s, v, '/d/home', { headers: cookie(200) }),
      head: await through(s, v, '/d/home', { method: 'HEAD', headers: cookie(200) }),
      login: await through(s, v, '/d/home?x=1', { headers: cookie(401) }),
      slow: await through(s, v, '/slow/x', { headers: cookie(0) }),
      fromFile: await through(s, v, '/static/x', { headers: cookie(200) }),
      missingFile: await through(s, v, '/missing/x', { headers: cookie(200) }),
      returned: await through(s, v, '/return/x', { headers: cookie(200) }),
      hiddenChallenge: await through(s, v, '/hidden/x', { headers: cookie(401) }),
      open: await through(s, v, '/open/x', { headers: cookie(401) }),
      deniedPost: await through(s, v, '/denied/x', { method: 'POST', body: 'a=b', headers: cookie(403) }),
    }));
    const n = run.nginx.result;
    assert.equal(n.allowed.status, 200);
    assert.equal(n.login.status, 302);
    assert.equal(n.login.headers.location, 'https://auth.example.com/?rd=http%3A%2F%2Fwiki.example.com%2Fd%2Fhome%3Fx%3D1');
    assert.equal(n.slow.status, 500);
    assert.equal(n.fromFile.status, 200);
    assert.equal(n.missingFile.status, 500);
    assert.deepEqual([n.returned.status, n.returned.headers['www-authenticate']], [401, undefined]);
    assert.deepEqual([n.hiddenChallenge.status, n.hiddenChallenge.headers['www-authenticate']], [401, 'Basic realm="Authelia"']);
    assert.deepEqual([n.open.status, n.open.verifier.length], [200, 0]);
    assert.equal(n.deniedPost.status, 404);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('request: "POST /denied/x HTTP/1.1"') && l.includes('/errors/403.html')));
    assert.deepEqual(run.jinx.file('logs/auth.log'), run.nginx.file('logs/auth.log'));
    assertSameAsNginx(run);
  });

  it('differs from nginx on purpose when the subrequest of a POST keeps the client\'s Content-Length: nginx sends it without the body and waits for the verifier, jinx sends neither', async () => {
    const v = await verifier();
    const app = await echoUpstream('app');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name wiki.example.com;
    location = /verify { internal; proxy_pass_request_body off; proxy_pass http://127.0.0.1:${v.port}/api/verify; proxy_read_timeout 1s; }
    location / { auth_request /verify; proxy_pass http://127.0.0.1:${app.port}; }
  }`),
    }, async (s) => ({
      get: await through(s, v, '/x', { headers: cookie(200) }),
      post: (await through(s, v, '/x', { method: 'POST', body: 'a=b', headers: cookie(200) })).status,
    }));
    // nginx: Content-Length: 3 and no body, the verifier waits for it until proxy_read_timeout (504, then 500)
    assert.equal(run.nginx.result.post, 500);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading response header from upstream') && l.includes('subrequest: "/verify"')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN auth request unexpected status: 504 while sending to client')));
    // jinx: the subrequest has no body, so it says none
    assert.equal(run.jinx.result.post, 200);
    assert.deepEqual(run.jinx.errorLog, []);
    assert.deepEqual(run.jinx.result.get, run.nginx.result.get);
  });
});
