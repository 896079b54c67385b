/**
 * Client address and access control, differential against nginx: realip
 * (X-Real-IP, X-Forwarded-For, real_ip_recursive, as Nginx Proxy Manager's
 * http block sets them), allow/deny, auth_basic with NPM's user file,
 * satisfy any|all, and the error-log lines of each.
 */
import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SHARED, cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** NPM's user file: alice / alice-secret, bob / bob-secret. */
const USERS = join(SHARED, 'corpus/nginx-proxy-manager/rootfs/data/access/1');
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** NPM's real-IP settings, with the loopback address trusted as the test client is on it. */
const NPM_REALIP = `  set_real_ip_from 10.0.0.0/8;
  set_real_ip_from 172.16.0.0/12;
  set_real_ip_from 192.168.0.0/16;
  set_real_ip_from 127.0.0.1;
  real_ip_header X-Real-IP;
  real_ip_recursive on;`;

/**
 * Content served after the access phase (`return` would answer in the rewrite
 * phase, before access checks and before location-level realip): the file
 * ok.txt, with the address and user in response headers.
 */
const SERVE = 'try_files /ok.txt =404; add_header X-Remote-Addr $remote_addr always; add_header X-Remote-User $remote_user always;';
const FILES = { 'html/ok.txt': 'ok\n' };

describe('real client address (differential)', () => {
  after(cleanup);

  it('takes $remote_addr from X-Real-IP of a trusted peer, for variables, allow/deny and the error log', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${NPM_REALIP}
  server { listen 127.0.0.1:${port}; server_name ip.test; root html;
    location /addr { return 200 "remote=$remote_addr realip=$realip_remote_addr xff=$proxy_add_x_forwarded_for\\n"; }
    location /acl/ { allow 203.0.113.0/24; deny all; ${SERVE} }
    location /missing/ { }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const [name, hdrs] of Object.entries({
        none: {}, realIp: { 'X-Real-IP': '203.0.113.9' }, v6: { 'X-Real-IP': '2001:db8::5' }, garbage: { 'X-Real-IP': 'not-an-ip' },
        withPort: { 'X-Real-IP': '203.0.113.9:1234' }, xffOnly: { 'X-Forwarded-For': '203.0.113.9' },
      } as Record<string, Record<string, string>>)) {
        out[`/addr ${name}`] = await s.get('/addr', { headers: { Host: 'ip.test', ...hdrs } });
        out[`/acl/ ${name}`] = await s.get('/acl/', { headers: { Host: 'ip.test', ...hdrs } });
      }
      out['/missing/x realIp'] = await s.get('/missing/x', { headers: { Host: 'ip.test', 'X-Real-IP': '198.51.100.4' } });
      return out;
    });
    assert.equal(run.nginx.result['/acl/ realIp']!.headers['x-remote-addr'], '203.0.113.9');
    assert.equal(run.nginx.result['/acl/ none']!.status, 403);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('client: 198.51.100.4,')));
    assert.ok(run.nginx.errorLog.some((l) => l.includes('access forbidden by rule, client: 127.0.0.1,')));
    assertSameAsNginx(run);
  });

  it('takes the address from X-Forwarded-For, skipping trusted addresses with real_ip_recursive on', async () => {
    const xff = (recursive: 'on' | 'off'): string => `set_real_ip_from 127.0.0.1; set_real_ip_from 10.0.0.0/8; real_ip_header X-Forwarded-For; real_ip_recursive ${recursive};`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ip.test;
    root html;
    location /on { ${xff('on')} ${SERVE} }
    location /off { ${xff('off')} ${SERVE} }
    location /early { ${xff('on')} return 200 "remote=$remote_addr\\n"; }
  }
  server { listen 127.0.0.1:${port}; server_name srv.test; ${xff('on')}
    location / { return 200 "remote=$remote_addr\\n"; }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const lists = ['203.0.113.9', '203.0.113.9, 10.0.0.5', '198.51.100.1, 203.0.113.9, 10.0.0.5, 10.1.1.1', '10.0.0.7, 10.0.0.5', 'junk, 10.0.0.5', '203.0.113.9,10.0.0.5'];
      for (const path of ['/on', '/off']) for (const l of lists) out[`${path} XFF: ${l}`] = await s.get(path, { headers: { Host: 'ip.test', 'X-Forwarded-For': l } });
      out['location-level realip is not applied yet in the rewrite phase'] = await s.get('/early', { headers: { Host: 'ip.test', 'X-Forwarded-For': '203.0.113.9' } });
      for (const l of lists) out[`server-level XFF: ${l}`] = await s.get('/', { headers: { Host: 'srv.test', 'X-Forwarded-For': l } });
      return out;
    });
    assert.equal(run.nginx.result['/on XFF: 203.0.113.9, 10.0.0.5']!.headers['x-remote-addr'], '203.0.113.9');
    assert.equal(run.nginx.result['/off XFF: 203.0.113.9, 10.0.0.5']!.headers['x-remote-addr'], '10.0.0.5');
    assert.equal(run.nginx.result['server-level XFF: 203.0.113.9, 10.0.0.5']!.body, 'remote=203.0.113.9\n');
    assertSameAsNginx(run);
  });
});

describe('access control (differential)', () => {
  after(cleanup);

  it('applies allow/deny in order and answers 403 with "access forbidden by rule"', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name acl.test; root html;
    location /deny-all/ { deny all; ${SERVE} }
    location /allow-local/ { allow 127.0.0.1; deny all; ${SERVE} }
    location /deny-first/ { deny 127.0.0.0/8; allow all; ${SERVE} }
    location /net/ { allow 10.0.0.0/8; allow ::1; deny all; ${SERVE} }
    location /inherit/ { deny all; location /inherit/inner/ { ${SERVE} } }
    location /return/ { deny all; return 200 "return answers before the access phase\\n"; }
    location /ep/ { deny all; error_page 403 /forbidden.txt; }
    location = /forbidden.txt { return 200 "custom forbidden page\\n"; }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of ['/deny-all/', '/allow-local/', '/deny-first/', '/net/', '/inherit/inner/', '/return/', '/ep/x']) out[p] = await s.get(p, { headers: { Host: 'acl.test' } });
      return out;
    });
    assert.equal(run.nginx.result['/deny-all/']!.status, 403);
    assertSameAsNginx(run);
  });

  it('applies a limit_except block to other methods, with its own access rules and without the location\'s rewrites', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name acl.test; root html;
    location /get-only/ { limit_except GET { deny all; } ${SERVE} }
    location /return/ { limit_except GET { deny all; } return 200 "returned\\n"; }
    location /get-post/ { limit_except GET POST { allow 10.0.0.1; deny all; } ${SERVE} }
    location /auth/ { limit_except GET { auth_basic "write"; auth_basic_user_file ${USERS}; } ${SERVE} }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']) {
        for (const p of ['/get-only/', '/return/', '/get-post/', '/auth/']) out[`${method} ${p}`] = await s.get(p, { method, headers: { Host: 'acl.test' } });
      }
      out['PUT /auth/ alice'] = await s.get('/auth/', { method: 'PUT', headers: { Host: 'acl.test', Authorization: basic('alice', 'alice-secret') } });
      return out;
    });
    assert.equal(run.nginx.result['POST /return/']!.status, 403);
    assert.equal(run.nginx.result['PUT /get-post/']!.status, 403);
    assertSameAsNginx(run);
  });

  it('proxies the methods a limit_except block lets through in a proxy_pass location, and an if block keeps the location\'s proxy_pass, as nginx', async () => {
    const up = await startUpstream((req, res) => res.end(`upstream ${req.method} ${req.url}\n`));
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name acl.test; root html;
    location /api/ { proxy_pass http://127.0.0.1:${up.port}; limit_except GET { allow 127.0.0.1; deny all; } }
    location /closed/ { proxy_pass http://127.0.0.1:${up.port}; limit_except GET { deny all; } }
    location /if/ { proxy_pass http://127.0.0.1:${up.port}; if ($arg_x) { add_header X-If yes; } }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const method of ['GET', 'POST', 'DELETE']) {
        for (const p of ['/api/ok.txt', '/closed/ok.txt']) out[`${method} ${p}`] = await s.get(p, { method, headers: { Host: 'acl.test' } });
      }
      out['if, matched'] = await s.get('/if/ok.txt?x=1', { headers: { Host: 'acl.test' } });
      out['if, not matched'] = await s.get('/if/ok.txt', { headers: { Host: 'acl.test' } });
      return out;
    });
    assert.equal(run.nginx.result['POST /api/ok.txt']!.body, 'upstream POST /api/ok.txt\n');
    assertSameAsNginx(run);
  });

  it('asks for Basic credentials with 401 and logs unknown users and wrong passwords', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name auth.test;
    root html;
    location / { auth_basic "Authorization required"; auth_basic_user_file ${USERS}; ${SERVE} }
    location /off/ { auth_basic off; ${SERVE} }
    location /var/ { auth_basic "realm $host"; auth_basic_user_file ${USERS}; ${SERVE} }
    location /nofile/ { auth_basic "x"; auth_basic_user_file /nonexistent/htpasswd; ${SERVE} }
  }`),
      files: FILES,
    }, async (s) => {
      const get = (p: string, auth?: string): Promise<Snap> => s.get(p, { headers: { Host: 'auth.test', ...(auth ? { Authorization: auth } : {}) } });
      return {
        none: await get('/'),
        alice: await get('/', basic('alice', 'alice-secret')),
        bob: await get('/', basic('bob', 'bob-secret')),
        bobWrong: await get('/', basic('bob', 'wrong')),
        carol: await get('/', basic('carol', 'x')),
        malformed: await get('/', 'Basic !!!'),
        bearer: await get('/', 'Bearer abc'),
        noColon: await get('/', `Basic ${Buffer.from('alice').toString('base64')}`),
        off: await get('/off/'),
        realmVar: await get('/var/'),
        noFile: await get('/nofile/', basic('alice', 'alice-secret')),
      };
    });
    assert.equal(run.nginx.result.none.status, 401);
    assert.equal(run.nginx.result.none.headers['www-authenticate'], 'Basic realm="Authorization required"');
    assert.ok(run.nginx.errorLog.some((l) => l.includes('user "bob": password mismatch')));
    assert.ok(run.nginx.errorLog.some((l) => l.includes(`user "carol" was not found in "${USERS}"`)));
    assertSameAsNginx(run);
  });

  it('checks every password hash format nginx accepts that jinx supports: $apr1$, $1$, $5$, $6$, bcrypt, DES, {SHA}, {SSHA}, {PLAIN}', async () => {
    // made with openssl passwd (-apr1, -1, -5, -6), bcryptjs and crypt(3) (DES); each user's password is pw-<user>
    const users = [
      'apr1:$apr1$abcdefgh$wT38ABp1Mi8RiNRvA83Bm.',
      'md5:$1$abcdefgh$sRyYqWQj2HqQ6Tw3JJfhq.',
      'sha256:$5$abcdefgh$rTrfFb8PdnDVxIaZUaM8.nfd68gEQjoEEj7jp.SR358',
      'sha512:$6$abcdefgh$u78n/e0wnTeT4eIfuEo4OKPXBWA7EaKJSeQyOAXHFFA1XoHP08X/YSron00ltQdWKHn3X/mv5yTdtKhCEburu0',
      'bcrypt:$2y$04$vndWC3mi39/uE1kihlHMm.ALeYY3Xc7lgoVjlzsiIc93zFj46YhIy',
      'sha:{SHA}G5zynyVKZeHPqXetqic75L7ZkrM=',
      'ssha:{SSHA}DjXTyXWzK460WFceT7aehFS+vjhzYWx0c2FsdA==',
      'plain:{PLAIN}pw-plain',
      'des:abqJwOmWEctKU',
    ];
    const names = users.map((u) => u.slice(0, u.indexOf(':')));
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name auth.test; root html;
    location / { auth_basic "r"; auth_basic_user_file htpasswd; ${SERVE} }
  }`),
      files: { ...FILES, htpasswd: `${users.join('\n')}\n` },
    }, async (s) => {
      const out: Record<string, number> = {};
      for (const u of names) {
        out[`${u} right`] = (await s.get('/', { headers: { Host: 'auth.test', Authorization: basic(u, `pw-${u}`) } })).status;
        out[`${u} wrong`] = (await s.get('/', { headers: { Host: 'auth.test', Authorization: basic(u, 'nope') } })).status;
      }
      return out;
    });
    for (const u of names) assert.deepEqual([run.nginx.result[`${u} right`], run.nginx.result[`${u} wrong`]], [200, 401], u);
    assertSameAsNginx(run);
  });

  it('treats a hash crypt(3) cannot read as a mismatch, and reads a user file named by a variable under the configuration\'s directory', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name auth.test; root html;
    location / { auth_basic "r"; auth_basic_user_file htpasswd; ${SERVE} }
    location /var/ { auth_basic "r"; auth_basic_user_file $arg_f; ${SERVE} }
  }`),
      files: { ...FILES, htpasswd: 'bad:!!xyz\nshort:ab\nempty:\ndollar:$9$x\ndes:abqJwOmWEctKU\n' },
    }, async (s) => {
      const out: Record<string, number> = {};
      for (const u of ['bad', 'short', 'empty', 'dollar']) out[u] = (await s.get('/', { headers: { Host: 'auth.test', Authorization: basic(u, 'password') } })).status;
      for (const f of ['htpasswd', 'nx', '', '/etc', 'html/ok.txt/x']) {
        out[`f=${f}`] = (await s.get(`/var/?f=${f}`, { headers: { Host: 'auth.test', Authorization: basic('des', 'pw-des') } })).status;
      }
      return out;
    });
    assert.equal(run.nginx.result['f=htpasswd'], 200);
    assert.equal(run.nginx.result.bad, 401);
    assertSameAsNginx(run);
  });

  it('answers 500 and names the user when a password hash has a crypt(3) format jinx cannot check (yescrypt)', async () => {
    const { freePort, startJinx, request, logLines } = await import('../helpers/harness.js');
    const port = await freePort();
    const jinx = await startJinx(httpConf(`  server { listen 127.0.0.1:${port}; server_name auth.test; root html;
    location / { auth_basic "r"; auth_basic_user_file htpasswd; ${SERVE} }
  }`), [port], { ...FILES, htpasswd: 'y:$y$j9T$abcdefghijklmnop$7asOTx5b6Exfl3myM6K0pLBn.I2hsEvu7G0F7NMfaO.\n', 'tmp/.keep': '' });
    const resp = await request(port, '/', { headers: { Host: 'auth.test', Authorization: basic('y', 'password') } });
    assert.equal(resp.status, 500);
    assert.ok(logLines(jinx.errorLog()).some((l) => l.startsWith('[error] *CONN user "y": the password hash in "') && l.includes('has a format jinx cannot check')), jinx.errorLog());
  });

  it('combines allow/deny and auth_basic with satisfy any and satisfy all', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name auth.test;
    auth_basic "Restricted"; auth_basic_user_file ${USERS}; root html;
    location /any-allowed/ { satisfy any; allow 127.0.0.1; deny all; ${SERVE} }
    location /any-denied/ { satisfy any; deny all; ${SERVE} }
    location /all-allowed/ { satisfy all; allow 127.0.0.1; deny all; ${SERVE} }
    location /all-denied/ { satisfy all; deny all; ${SERVE} }
  }`),
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of ['/any-allowed/', '/any-denied/', '/all-allowed/', '/all-denied/']) {
        out[`${p} no credentials`] = await s.get(p, { headers: { Host: 'auth.test' } });
        out[`${p} alice`] = await s.get(p, { headers: { Host: 'auth.test', Authorization: basic('alice', 'alice-secret') } });
        out[`${p} wrong password`] = await s.get(p, { headers: { Host: 'auth.test', Authorization: basic('alice', 'nope') } });
      }
      return out;
    });
    assert.equal(run.nginx.result['/any-denied/ no credentials']!.status, 401);
    assert.equal(run.nginx.result['/all-denied/ alice']!.status, 403);
    assertSameAsNginx(run);
  });
});
