/**
 * The semantic lint rules (src/config/lint/rules/semantic*.ts): for each, a
 * configuration where it fires (message and file:line asserted) and a twin
 * that differs in the one point that makes it right, where it stays silent.
 * The behaviour each message claims was checked on nginx 1.30 (README "Lint
 * rules"); the shadowed-location claim is also checked here against the
 * reference nginx when one is at hand.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { LintRule } from '../../src/config/lint/rule.js';
import { semanticRules } from '../../src/config/lint/rules/semantic.js';
import { regexCovers, regexCoversPrefix, regexLiteral } from '../../src/config/lint/rules/semantic-regex.js';
import { cleanup, freePort, JINX, referenceNginx, request, ROOT, startServer, tempDir } from '../helpers/harness.js';
import { findingsOf, semanticSubject, semanticSubjectOf } from '../helpers/lint-subject-semantic.js';
import { prepareDebian, prepareProxyManager, prepareScenario, type PreparedTree } from '../helpers/corpus-trees.js';

const rule = (code: string): LintRule => {
  const r = semanticRules.find((x) => x.code === code);
  assert.ok(r, code);
  return r;
};

/** A main file with `http { BODY }`; lines of BODY start at 3. */
const conf = (body: string): string => `events {}\nhttp {\n${body}\n}\n`;

/** The 1-based line of the first line of `text` containing `needle`. */
function lineOf(text: string, needle: string): number {
  const i = text.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(i >= 0, needle);
  return i + 1;
}

/** Runs `code` on `files` and returns `[file:line, message]` of each finding, file relative to the prefix. */
async function lint(code: string, files: Record<string, string>, offline = false): Promise<[string, string][]> {
  const { prefix, subject } = await semanticSubject(files, offline);
  const strip = (s: string): string => s.split(prefix).join('');
  return findingsOf(rule(code), subject).map((f) => [f.loc ? `${strip(f.loc.file)}:${f.loc.line}` : '-', strip(f.message)]);
}

describe('semantic lint rules', () => {
  after(cleanup);

  it('every rule has a kebab-case code, a title, an explanation and a README anchor; codes are unique', () => {
    const codes = new Set<string>();
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const r of semanticRules) {
      assert.match(r.code, /^[a-z]+(-[a-z0-9]+)*$/);
      assert.ok(!codes.has(r.code), r.code);
      codes.add(r.code);
      assert.ok(r.title.length > 0 && r.explanation.length > 100, r.code);
      assert.ok(r.docUrl.endsWith(`#lint-${r.code}`), r.docUrl);
      assert.ok(readme.includes(`<a id="lint-${r.code}"></a>`), r.code);
    }
  });

  it('reads only what a regex\'s literal text proves', () => {
    assert.deepEqual(regexLiteral('^/static/'), { anchored: true, literal: '/static/', acceptsAll: true });
    assert.deepEqual(regexLiteral('\\.php$'), { anchored: false, literal: '.php', acceptsAll: false });
    assert.deepEqual(regexLiteral('^/ab?c'), { anchored: true, literal: '/a', acceptsAll: false });
    assert.deepEqual(regexLiteral('^/a+'), { anchored: true, literal: '/a', acceptsAll: false });
    assert.deepEqual(regexLiteral('^/api/(.*)'), { anchored: true, literal: '/api/', acceptsAll: true });
    assert.equal(regexLiteral('^/a|^/b'), undefined);
    assert.equal(regexLiteral('(?i)^/a'), undefined);
    assert.deepEqual(regexLiteral('^/(a|b)'), { anchored: true, literal: '/', acceptsAll: false });
    assert.ok(regexCoversPrefix('.*', false, '/x/'));
    assert.ok(regexCoversPrefix('^/ST', true, '/static/'));
    assert.ok(!regexCoversPrefix('^/ST', false, '/static/'));
    assert.ok(!regexCoversPrefix('^/st$', false, '/static/'));
    assert.ok(regexCovers('/\\.', false, '^/a/\\.git', false));
    assert.ok(!regexCovers('\\.php', false, '\\.PHP$', true));
    assert.ok(!regexCovers('^/a', false, '/a', false));
  });

  describe('location-shadowed', () => {
    const fires = conf(`server { listen 127.0.0.1:8001;
    location /static/ { return 200 prefix; }
    location ~ ^/st { return 200 regex; }
    location ^~ /img/ { return 200 noregex; }
    location ~ ^/img/.*\\.png$ { return 200 png; }
    location ~* \\.php { return 200 php; }
    location ~ \\.PHP$ { return 200 php2; }
}`);
    it('fires for a prefix a regex covers, a regex behind "^~", a regex behind an earlier broader one', async () => {
      assert.deepEqual(await lint('location-shadowed', { 'nginx.conf': fires }), [
        [`nginx.conf:${lineOf(fires, 'location /static/')}`, `location "/static/" is never chosen: every URI it matches also matches the regex location "~ ^/st" at nginx.conf:${lineOf(fires, '^/st')}, and nginx tries regex locations after the longest prefix unless that prefix is "^~"`],
        [`nginx.conf:${lineOf(fires, '.png')}`, `regex location "~ ^/img/.*\\.png$" is never chosen: every URI it matches starts with "/img/", whose location "^~ /img/" at nginx.conf:${lineOf(fires, '^~ /img/')} stops the search for regex locations`],
        [`nginx.conf:${lineOf(fires, '\\.PHP$')}`, `regex location "~ \\.PHP$" is never chosen: the regex location "~* \\.php" at nginx.conf:${lineOf(fires, '~* \\.php')} comes first and matches every URI it matches`],
      ]);
    });
    it('fires for a nested prefix that a regex around its plain prefix covers; with "^~" the regex is the dead one', async () => {
      const text = (outer: string): string => conf(`server { listen 127.0.0.1:8001;
    location ${outer}/a/ { location /a/b/ { return 200 nested; } return 200 a; }
    location ~ ^/a/b { return 200 outer; }
}`);
      assert.deepEqual(await lint('location-shadowed', { 'nginx.conf': text('') }), [
        ['nginx.conf:4', 'location "/a/b/" is never chosen: every URI it matches also matches the regex location "~ ^/a/b" at nginx.conf:5, and nginx tries regex locations after the longest prefix unless that prefix is "^~"'],
      ]);
      assert.deepEqual(await lint('location-shadowed', { 'nginx.conf': text('^~ ') }), [
        ['nginx.conf:5', 'regex location "~ ^/a/b" is never chosen: every URI it matches starts with "/a/", whose location "^~ /a/" at nginx.conf:4 stops the search for regex locations'],
      ]);
    });
    it('stays silent when the prefix is "^~", the regex is narrower, a longer plain prefix lets regexes run, or the order is reversed', async () => {
      const twin = conf(`server { listen 127.0.0.1:8001;
    location ^~ /static/ { return 200 prefix; }
    location ~ ^/st { return 200 regex; }
    location ^~ /img/ { return 200 noregex; }
    location /img/png/ { return 200 plain; }
    location ~ ^/img/.*\\.png$ { return 200 png; }
    location ~ \\.php$ { return 200 php2; }
    location ~* \\.php { return 200 php; }
    location /a/ { return 200 a; }
    location ~ ^/a/.*\\.x$ { return 200 ax; }
}`);
      assert.deepEqual(await lint('location-shadowed', { 'nginx.conf': twin }), []);
    });
    it('nginx never chooses the locations it reports (reference nginx, add_header)', { skip: referenceNginx() === undefined }, async () => {
      const port = await freePort();
      const dir = tempDir('jinx-lint-sem-ng-');
      mkdirSync(join(dir, 'logs'));
      const text = `daemon off; master_process off; pid logs/nginx.pid; error_log logs/error.log;\n${fires.replace('8001', String(port))}`;
      writeFileSync(join(dir, 'nginx.conf'), text);
      const nginx = await startServer(referenceNginx()!, dir + '/', join(dir, 'nginx.conf'), [port]);
      try {
        const bodies = await Promise.all(['/static/', '/static/a', '/img/a.png', '/x.PHP'].map(async (p) => (await request(port, p)).body.toString()));
        assert.deepEqual(bodies, ['regex', 'regex', 'noregex', 'php']);
      } finally {
        await nginx.stop();
      }
    });
  });

  describe('try-files-loop', () => {
    it('fires when the fallback comes back to the location and no file exists for it', async () => {
      const root = tempDir('jinx-lint-sem-root-');
      const text = conf(`server { listen 127.0.0.1:8001; root ${root};
    location / { try_files $uri $uri/ /index.html; }
    location /app/ { try_files $uri @app; }
    location @app { try_files /maintenance.html @app; }
}`);
      assert.deepEqual(await lint('try-files-loop', { 'nginx.conf': text }), [
        [`nginx.conf:4`, `try_files falls back to "/index.html", which location "/" at nginx.conf:4 handles again with the same try_files, and none of its files exists for "/index.html": nginx redirects until it stops with 500 "rewrite or internal redirection cycle"`],
        [`nginx.conf:6`, `try_files falls back to "@app", which location "@app" at nginx.conf:6 handles again with the same try_files, and none of its files exists: nginx redirects until it stops with 500 "rewrite or internal redirection cycle"`],
      ]);
    });
    it('follows a snippet of locations included in several servers into each server', async () => {
      const files = {
        'nginx.conf': conf(`server { listen 127.0.0.1:8001; root /nonexistent; include snip.conf; }
server { listen 127.0.0.1:8002; root /nonexistent; include snip.conf; location = /index.html { return 200; } }`),
        'snip.conf': 'location / { try_files $uri /index.html; }\n',
      };
      assert.deepEqual(await lint('try-files-loop', files), [
        ['snip.conf:1', 'try_files falls back to "/index.html", which location "/" at snip.conf:1 handles again with the same try_files, and none of its files exists for "/index.html": nginx redirects until it stops with 500 "rewrite or internal redirection cycle"'],
      ]);
      assert.deepEqual(await lint('try-files-loop', { ...files, 'nginx.conf': files['nginx.conf'].replace('include snip.conf; }\nserver', 'include snip.conf; location = /index.html { return 200; } }\nserver') }), []);
    });
    it('stays silent when the fallback file exists, goes to another location, is a status, or with --offline', async () => {
      const root = tempDir('jinx-lint-sem-root-');
      writeFileSync(join(root, 'index.html'), 'x');
      const exists = conf(`server { listen 127.0.0.1:8001; root ${root};
    location / { try_files $uri $uri/ /index.html; }
}`);
      assert.deepEqual(await lint('try-files-loop', { 'nginx.conf': exists }), []);
      const other = conf(`server { listen 127.0.0.1:8001; root /nonexistent;
    location / { try_files $uri /index.php?$args; }
    location ~ \\.php$ { return 200; }
    location /s/ { try_files $uri =404; }
}`);
      assert.deepEqual(await lint('try-files-loop', { 'nginx.conf': other }), []);
      const offline = conf(`server { listen 127.0.0.1:8001; root /nonexistent;
    location / { try_files $uri /index.html; }
}`);
      assert.deepEqual(await lint('try-files-loop', { 'nginx.conf': offline }, true), []);
    });
  });

  describe('error-page-loop', () => {
    it('fires when the error page location answers the same status itself, with and without recursive_error_pages', async () => {
      const text = conf(`server { listen 127.0.0.1:8001;
    location /a/ { error_page 404 /err/; return 404; }
    location /err/ { return 404; }
    location /b/ { recursive_error_pages on; error_page 404 /err2/; return 404; }
    location /err2/ { recursive_error_pages on; error_page 404 /err2/; return 404; }
}`);
      assert.deepEqual(await lint('error-page-loop', { 'nginx.conf': text }), [
        ['nginx.conf:4', 'error_page 404 redirects to "/err/", whose location "/err/" at nginx.conf:5 answers 404 itself (return at nginx.conf:5): nginx then sends its built-in 404 page, as error_page does not apply to the error page\'s own failure without recursive_error_pages'],
        ['nginx.conf:6', 'error_page 404 redirects to "/err2/", whose location "/err2/" at nginx.conf:7 answers 404 itself (return at nginx.conf:7): recursive_error_pages is on and error_page at nginx.conf:7 sends it there again, so nginx redirects until its limit of 10 URI changes, then sends its built-in 404 page'],
        ['nginx.conf:7', 'error_page 404 redirects to "/err2/", whose location "/err2/" at nginx.conf:7 answers 404 itself (return at nginx.conf:7): recursive_error_pages is on and error_page at nginx.conf:7 sends it there again, so nginx redirects until its limit of 10 URI changes, then sends its built-in 404 page'],
      ]);
    });
    it('stays silent when the error page location serves the page or fails with another code handled elsewhere', async () => {
      const text = conf(`server { listen 127.0.0.1:8001;
    location /a/ { error_page 404 /err/; return 404; }
    location /err/ { return 200 "custom page"; }
    location /b/ { error_page 404 = /c/; return 404; }
    location /c/ { return 404 "not here"; }
}`);
      assert.deepEqual(await lint('error-page-loop', { 'nginx.conf': text }), []);
    });
    it('checks an http-level error_page in the servers that inherit it', async () => {
      const text = conf(`error_page 403 /denied.html;
server { listen 127.0.0.1:8001; location = /denied.html { return 403; } }
server { listen 127.0.0.1:8002; error_page 404 /x; location = /denied.html { return 403; } }`);
      assert.deepEqual(await lint('error-page-loop', { 'nginx.conf': text }), [
        ['nginx.conf:3', 'error_page 403 redirects to "/denied.html", whose location "= /denied.html" at nginx.conf:4 answers 403 itself (return at nginx.conf:4): nginx then sends its built-in 403 page, as error_page does not apply to the error page\'s own failure without recursive_error_pages'],
      ]);
      assert.deepEqual(await lint('error-page-loop', { 'nginx.conf': text.replace('server { listen 127.0.0.1:8001; location = /denied.html { return 403; } }', '') }), []);
    });
  });

  describe('auth-request-not-internal', () => {
    it('fires when the subrequest location is not internal; silent when it is', async () => {
      const text = (internal: string): string => conf(`server { listen 127.0.0.1:8001;
    location /app/ { auth_request /check; return 200; }
    location = /check { ${internal}return 204; }
}`);
      assert.deepEqual(await lint('auth-request-not-internal', { 'nginx.conf': text('') }), [
        ['nginx.conf:4', 'auth_request "/check" is answered by location "= /check" at nginx.conf:5, which is not internal: clients can request "/check" directly; add "internal;" to it'],
      ]);
      assert.deepEqual(await lint('auth-request-not-internal', { 'nginx.conf': text('internal; ') }), []);
      assert.deepEqual(await lint('auth-request-not-internal', { 'nginx.conf': text('deny all; ') }), []);
    });
  });

  describe('proxy_pass URI rules', () => {
    const text = conf(`server { listen 127.0.0.1:8001;
    location /p/ { rewrite ^/p/(.*)$ /q/$1 break; proxy_pass http://127.0.0.1:9/up/; }
    location /v/ { set $b 127.0.0.1:9; proxy_pass http://$b/up/; }
    location /d { proxy_pass http://127.0.0.1:9/up/; }
}`);
    const twin = conf(`server { listen 127.0.0.1:8001;
    location /p/ { rewrite ^/p/(.*)$ /up/q/$1 break; proxy_pass http://127.0.0.1:9; }
    location /v/ { set $b 127.0.0.1:9; proxy_pass http://$b; }
    location ~ ^/w/(.*)$ { set $b 127.0.0.1:9; proxy_pass http://$b/up/$1; }
    location /d/ { proxy_pass http://127.0.0.1:9/up/; }
    location /e { proxy_pass http://127.0.0.1:9/up; }
}`);
    it('proxy-pass-uri-ignored: a URI part with rewrite … break', async () => {
      assert.deepEqual(await lint('proxy-pass-uri-ignored', { 'nginx.conf': text }), [
        ['nginx.conf:4', 'proxy_pass "http://127.0.0.1:9/up/" has the URI part "/up/", but "rewrite … break" at nginx.conf:4 changes the URI in this location: nginx then sends the rewritten URI as it is and ignores "/up/"'],
      ]);
      assert.deepEqual(await lint('proxy-pass-uri-ignored', { 'nginx.conf': twin }), []);
    });
    it('proxy-pass-variable-uri: variables and a URI part in a prefix location', async () => {
      assert.deepEqual(await lint('proxy-pass-variable-uri', { 'nginx.conf': text }), [
        ['nginx.conf:5', 'proxy_pass "http://$b/up/" has variables, so its URI part "/up/" is the whole URI sent: "/v/x" goes upstream as "/up/", not with the rest of the URI after "/v/"'],
      ]);
      assert.deepEqual(await lint('proxy-pass-variable-uri', { 'nginx.conf': twin }), []);
    });
    it('proxy-pass-double-slash: a prefix without "/" and a URI part with one', async () => {
      assert.deepEqual(await lint('proxy-pass-double-slash', { 'nginx.conf': text }), [
        ['nginx.conf:6', 'location "/d" at nginx.conf:6 has no final "/" but proxy_pass\'s URI part "/up/" has: "/d/x" goes upstream as "/up//x"'],
      ]);
      assert.deepEqual(await lint('proxy-pass-double-slash', { 'nginx.conf': twin }), []);
    });
  });

  describe('upstream-host-name', () => {
    it('fires for an upstream named like a host that proxy_pass uses; silent for a plain name', async () => {
      const text = (name: string): string => conf(`upstream ${name} { server 127.0.0.1:9; }
server { listen 127.0.0.1:8001;
    location / { proxy_pass https://${name}/; }
}`);
      assert.deepEqual(await lint('upstream-host-name', { 'nginx.conf': text('api.example.com') }), [
        ['nginx.conf:3', 'upstream "api.example.com" is named like a host name: proxy_pass "https://api.example.com/" at nginx.conf:5 goes to this block\'s servers, and nginx never resolves "api.example.com" in DNS'],
      ]);
      assert.deepEqual(await lint('upstream-host-name', { 'nginx.conf': text('api_backend') }), []);
    });
  });

  describe('grpc-pass-without-http2', () => {
    it('fires for grpc_pass in a server without HTTP/2; silent with http2 on (its own or the http block\'s) or listen … http2 on its port', async () => {
      const text = conf(`server { listen 127.0.0.1:8001;
    location /api.Echo/ { grpc_pass grpc://127.0.0.1:50051; }
}`);
      assert.deepEqual(await lint('grpc-pass-without-http2', { 'nginx.conf': text }), [
        ['nginx.conf:4', 'grpc_pass grpc://127.0.0.1:50051 is in a server that speaks no HTTP/2 (no "http2 on", no "listen … http2" on its port): gRPC clients, which call over HTTP/2, cannot reach it'],
      ]);
      const twins = [
        conf(`server { listen 127.0.0.1:8001; http2 on;
    location /api.Echo/ { grpc_pass grpc://127.0.0.1:50051; }
}`),
        conf(`http2 on;
server { listen 127.0.0.1:8001;
    location /api.Echo/ { grpc_pass grpc://127.0.0.1:50051; }
}`),
        conf(`server { listen 127.0.0.1:8001 http2; server_name a.test; }
server { listen 127.0.0.1:8001; server_name b.test;
    location /api.Echo/ { grpc_pass grpc://127.0.0.1:50051; }
}`),
      ];
      for (const twin of twins) assert.deepEqual(await lint('grpc-pass-without-http2', { 'nginx.conf': twin }), []);
    });
  });

  describe('tls-weaker-than-intermediate', () => {
    it('fires for TLSv1/TLSv1.1 and for cipher strings selecting other suites; silent for the intermediate profile', async () => {
      const text = conf(`server { listen 127.0.0.1:8001;
    ssl_protocols TLSv1 TLSv1.1 TLSv1.2;
    ssl_ciphers HIGH:!aNULL:!MD5;
}`);
      const found = await lint('tls-weaker-than-intermediate', { 'nginx.conf': text });
      assert.deepEqual(found[0], ['nginx.conf:4', 'ssl_protocols enables TLSv1, TLSv1.1, older than Mozilla\'s intermediate profile (TLSv1.2 TLSv1.3)']);
      assert.equal(found.length, 2);
      assert.equal(found[1]![0], 'nginx.conf:5');
      assert.match(found[1]![1], /^ssl_ciphers "HIGH:!aNULL:!MD5" selects \d+ TLS 1\.2 suites outside Mozilla's intermediate profile: .*(CBC|SHA|CCM|ARIA|CAMELLIA)/);
      const twin = conf(`server { listen 127.0.0.1:8001;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305;
}`);
      assert.deepEqual(await lint('tls-weaker-than-intermediate', { 'nginx.conf': twin }), []);
    });
  });

  describe('server-name-conflict', () => {
    it('names both places of a name two servers on one address claim, across includes; silent on different addresses', async () => {
      const files = {
        'nginx.conf': conf('include sites/*.conf;'),
        'sites/a.conf': 'server {\n    listen 127.0.0.1:8001;\n    server_name example.test www.example.test;\n}\n',
        'sites/b.conf': 'server {\n    listen 127.0.0.1:8001;\n    server_name Example.test;\n}\nserver {\n    listen 127.0.0.1:8002;\n    server_name example.test;\n}\n',
      };
      assert.deepEqual(await lint('server-name-conflict', files), [
        ['sites/b.conf:3', 'server name "Example.test" on 127.0.0.1:8001 is already used by server_name at sites/a.conf:3: nginx ignores it here (nginx -t: conflicting server name "example.test" on 127.0.0.1:8001, ignored)'],
      ]);
      assert.deepEqual(await lint('server-name-conflict', { ...files, 'sites/b.conf': 'server {\n    listen 127.0.0.1:8002;\n    server_name example.test;\n}\n' }), []);
    });
  });

  describe('map-redefined and map-variable-set', () => {
    const text = conf(`map $uri $v { default a; }
map $uri $v { default b; }
map $uri $w { default c; }
server { listen 127.0.0.1:8001;
    set $w server-wide;
    location /s/ { set $v x; set $other y; return 200 "$v$w$other"; }
}`);
    it('map-redefined: the second, different map of a variable (an identical repeat is silent)', async () => {
      assert.deepEqual(await lint('map-redefined', { 'nginx.conf': text }), [
        ['nginx.conf:3', 'this map of "$v" has no effect: the map at nginx.conf:4 defines "$v" again, differently, and nginx uses the last definition'],
      ]);
      assert.deepEqual(await lint('map-redefined', { 'nginx.conf': text.replace('map $uri $v { default b; }', 'map $uri $v { default a; }') }), []);
    });
    it('map-variable-set: set in a location on a variable a map defines (a set directly in the server is silent)', async () => {
      assert.deepEqual(await lint('map-variable-set', { 'nginx.conf': text }), [
        ['nginx.conf:8', 'set "$v" overrides the map at nginx.conf:3 for the rest of the request'],
      ]);
      assert.deepEqual(await lint('map-variable-set', { 'nginx.conf': text.replace('set $v x;', '') }), []);
    });
  });

  describe('timeout-never-fires', () => {
    it('fires for limits of what another directive disables everywhere they apply', async () => {
      const text = conf(`keepalive_timeout 0;
keepalive_requests 50;
upstream u { server 127.0.0.1:9; keepalive_requests 10; }
server { listen 127.0.0.1:8001;
    proxy_next_upstream off;
    proxy_next_upstream_tries 3;
    location / { proxy_pass http://u; }
}`);
      assert.deepEqual(await lint('timeout-never-fires', { 'nginx.conf': text }), [
        ['nginx.conf:4', 'keepalive_requests never takes effect: keepalive_timeout 0 disables keep-alive connections (keepalive_timeout at nginx.conf:3)'],
        ['nginx.conf:8', 'proxy_next_upstream_tries never takes effect: proxy_next_upstream off never tries a next server (proxy_next_upstream at nginx.conf:7)'],
      ]);
    });
    it('stays silent when one level the setting applies to enables what it limits', async () => {
      const text = conf(`keepalive_timeout 0;
keepalive_requests 50;
upstream u { server 127.0.0.1:9; keepalive_requests 10; }
server { listen 127.0.0.1:8001;
    keepalive_timeout 30s;
    proxy_next_upstream off;
    proxy_next_upstream_tries 3;
    location / { proxy_next_upstream error; proxy_pass http://u; }
}`);
      assert.deepEqual(await lint('timeout-never-fires', { 'nginx.conf': text }), []);
    });
  });

  describe('the real trees (each finding reviewed: see README "Lint rules")', () => {
    /** Every semantic finding on a prepared tree, as `code file:line`, paths relative to the tree's root. */
    async function all(tree: PreparedTree, offline: boolean): Promise<string[]> {
      const subject = await semanticSubjectOf(tree.prefix, tree.conf, offline);
      assert.ok(subject.table, 'the tree compiles');
      return semanticRules.flatMap((r) => findingsOf(r, subject).map((f) => `${r.code} ${f.loc!.file.replace(tree.root, '')}:${f.loc!.line}`));
    }
    it('Nginx Proxy Manager: the admin UI\'s try_files loops while its files are absent here; the last host file\'s HSTS map wins for all hosts', async () => {
      const tree = await prepareProxyManager();
      assert.deepEqual(await all(tree, false), [
        'try-files-loop /etc/nginx/conf.d/production.conf:31',
        'map-redefined /data/nginx/proxy_host/1.conf:7',
      ]);
      assert.deepEqual(await all(tree, true), ['map-redefined /data/nginx/proxy_host/1.conf:7']);
    });
    it('Debian: ssl_protocols keeps TLSv1 and TLSv1.1', async () => {
      for (const tree of [await prepareDebian(), await prepareDebian({ ssl: true })]) {
        assert.deepEqual(await all(tree, false), ['tls-weaker-than-intermediate /etc/nginx/nginx.conf:33']);
      }
    });
    it('the scenario tree: nothing', async () => {
      assert.deepEqual(await all(await prepareScenario(), false), []);
    });
  });

  describe('what the messages claim, asked of a running server', () => {
    /** One server per claim's twin: the rules fire on it, and the answers show the behaviour they describe. */
    const claims = (port: number, up: number): string => conf(`map $uri $v { default first; }
map $uri $v { default last; }
server { listen 127.0.0.1:${up}; location / { return 200 "up:$request_uri"; } }
server { listen 127.0.0.1:${port}; root /nonexistent;
    location /p/ { rewrite ^/p/(.*)$ /q/$1 break; proxy_pass http://127.0.0.1:${up}/up/; }
    location /v/ { set $b 127.0.0.1:${up}; proxy_pass http://$b/up/; }
    location /d { proxy_pass http://127.0.0.1:${up}/up/; }
    location /e/ { error_page 404 /err/; return 404; }
    location /err/ { return 404; }
    location /t/ { try_files $uri /t/index.html; }
    location /m/ { return 200 "$v"; }
    location /s/ { set $v set; return 200 "$v"; }
}`);
    const servers: [string, () => string | undefined][] = [['nginx', referenceNginx], ['jinx', () => JINX]];
    for (const [name, binary] of servers) {
      it(`${name} answers as the findings say`, { skip: binary() === undefined }, async () => {
        const [port, up] = [await freePort(), await freePort()];
        const dir = tempDir('jinx-lint-sem-claims-');
        mkdirSync(join(dir, 'logs'));
        const text = claims(port, up);
        const codes = new Set<string>();
        const { subject } = await semanticSubject({ 'nginx.conf': text });
        for (const r of semanticRules) if (findingsOf(r, subject).length > 0) codes.add(r.code);
        assert.deepEqual([...codes].sort(), ['error-page-loop', 'map-redefined', 'map-variable-set', 'proxy-pass-double-slash', 'proxy-pass-uri-ignored', 'proxy-pass-variable-uri', 'try-files-loop']);
        writeFileSync(join(dir, 'nginx.conf'), `daemon off; master_process off; pid logs/nginx.pid; error_log logs/error.log;\n${text}`);
        const server = await startServer(binary()!, dir + '/', join(dir, 'nginx.conf'), [port, up]);
        try {
          const get = async (p: string): Promise<string> => {
            const r = await request(port, p);
            return `${r.status} ${r.status === 200 ? r.body : ''}`;
          };
          assert.deepEqual(
            [await get('/p/x'), await get('/v/x'), await get('/d/x'), await get('/m/'), await get('/s/')],
            ['200 up:/q/x', '200 up:/up/', '200 up:/up//x', '200 last', '200 set'],
          );
          const errorPage = await request(port, '/e/');
          assert.equal(errorPage.status, 404);
          assert.match(errorPage.body, /<center><h1>404 Not Found<\/h1><\/center>/);
          const loop = await request(port, '/t/x');
          assert.equal(loop.status, 500);
        } finally {
          await server.stop();
        }
        assert.match(server.errorLog(), /rewrite or internal redirection cycle while internally redirecting to "\/t\/index.html"/);
      });
    }
  });
});
