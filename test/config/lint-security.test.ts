/**
 * The security lint rules (src/config/lint/rules/security*.ts): for each
 * rule a configuration that must fire (message and FILE:LINE asserted) and a
 * twin that must not; then every rule over Nginx Proxy Manager's, Debian's
 * and the scenario's trees, whose findings are listed whole (each checked
 * true by hand).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { securityRules } from '../../src/config/lint/rules/security.js';
import type { LintRule } from '../../src/config/lint/rule.js';
import { cleanup } from '../helpers/harness.js';
import { findingsOf, lintSubject, lintSubjectOf } from '../helpers/lint-subject.js';
import { prepareDebian, prepareProxyManager, prepareScenario } from '../helpers/corpus-trees.js';

after(cleanup);

function rule(code: string): LintRule {
  const r = securityRules.find((x) => x.code === code);
  assert.ok(r, code);
  return r;
}

/** The findings of rule `code` on an http block holding `body` (line 1 is `events {}`, line 2 `http {`, `body` from line 3). */
async function run(code: string, body: string, files: Readonly<Record<string, string>> = {}): Promise<string[]> {
  const { subject, dir } = await lintSubject(`events {}\nhttp {\n${body}\n}\n`, files);
  assert.ok(subject.root, 'the configuration checks');
  return findingsOf(rule(code), subject, dir);
}

const SERVER = 'server { listen 127.0.0.1:8080; server_tokens off;';

describe('rule metadata', () => {
  test('codes are unique kebab-case, each with a title, an explanation with a fix and a README anchor', () => {
    const codes = securityRules.map((r) => r.code);
    assert.equal(new Set(codes).size, codes.length);
    for (const r of securityRules) {
      assert.match(r.code, /^[a-z]+(-[a-z]+)*$/);
      assert.ok(r.title.length > 0 && r.explanation.includes('Fix:'), r.code);
      assert.equal(r.docUrl, `https://github.com/jinx/jinx#lint-${r.code}`);
    }
  });
});

describe('add-header-inheritance', () => {
  test('fires: a location with its own add_header drops the server\'s', async () => {
    assert.deepEqual(await run('add-header-inheritance', `${SERVER}
  add_header Strict-Transport-Security "max-age=63072000" always;
  add_header X-Frame-Options DENY;
  location /assets/ {
    add_header Cache-Control public;
  }
}`), [
      'DIR/nginx.conf:6 location "/assets/" sets its own add_header (DIR/nginx.conf:7), so Strict-Transport-Security (DIR/nginx.conf:4) and X-Frame-Options (DIR/nginx.conf:5), set above, are not sent with its responses.',
    ]);
  });
  test('fires through an include, and in an if block', async () => {
    assert.deepEqual(await run('add-header-inheritance', `${SERVER}
  add_header X-Robots-Tag noindex;
  include snippet.conf;
  location / {
    if ($arg_debug) { add_header X-Debug 1; }
  }
}`, { 'snippet.conf': 'location /a/ {\n    add_header X-A 1;\n}\n' }), [
      'DIR/snippet.conf:1 location "/a/" sets its own add_header (DIR/snippet.conf:2), so X-Robots-Tag (DIR/nginx.conf:4), set above, is not sent with its responses.',
      'DIR/nginx.conf:7 if ($arg_debug) sets its own add_header (DIR/nginx.conf:7), so X-Robots-Tag (DIR/nginx.conf:4), set above, is not sent with its responses.',
    ]);
  });
  test('twin: the location repeats every header', async () => {
    assert.deepEqual(await run('add-header-inheritance', `${SERVER}
  add_header X-Frame-Options DENY;
  location /assets/ { add_header x-frame-options DENY; add_header Cache-Control public; }
  location / { }
}`), []);
  });
  test('twin: add_header_inherit merge keeps the headers above, off drops them by choice', async () => {
    assert.deepEqual(await run('add-header-inheritance', `${SERVER}
  add_header X-Frame-Options DENY;
  add_header_inherit merge;
  location /assets/ { add_header Cache-Control public; }
  location /private/ { add_header_inherit off; add_header Cache-Control private; }
}`), []);
  });
});

describe('add-trailer-inheritance', () => {
  test('fires', async () => {
    assert.deepEqual(await run('add-trailer-inheritance', `${SERVER}
  add_trailer Server-Timing "app;dur=1";
  location / { add_trailer X-Checksum abc; }
}`), [
      'DIR/nginx.conf:5 location "/" sets its own add_trailer (DIR/nginx.conf:5), so Server-Timing (DIR/nginx.conf:4), set above, is not sent with its responses.',
    ]);
  });
  test('twin', async () => {
    assert.deepEqual(await run('add-trailer-inheritance', `${SERVER}
  add_trailer Server-Timing "app;dur=1";
  location / { }
}`), []);
  });
});

describe('proxy-set-header-inheritance', () => {
  test('fires where the list reaches a proxy_pass', async () => {
    assert.deepEqual(await run('proxy-set-header-inheritance', `${SERVER}
  proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
  location /ws/ {
    proxy_set_header Upgrade $http_upgrade;
    proxy_pass http://127.0.0.1:9000;
  }
}`), [
      'DIR/nginx.conf:5 location "/ws/" sets its own proxy_set_header (DIR/nginx.conf:6), so X-Forwarded-For (DIR/nginx.conf:4), set above, is not sent to its upstream.',
    ]);
  });
  test('an entry of the http block dropped by several locations: one finding at the entry, naming each (with its include chain)', async () => {
    assert.deepEqual(await run('proxy-set-header-inheritance', `proxy_set_header Accept-Encoding "";
${SERVER}
  proxy_set_header Upgrade $http_upgrade;
  include host.conf;
}
server { listen 127.0.0.1:8081; server_tokens off;
  location /api/ { proxy_set_header Host $host; proxy_pass http://127.0.0.1:9000; }
}`, {
      'host.conf': 'include proxy.conf;\n',
      'proxy.conf': 'location /app/ {\n  proxy_set_header Host $host;\n  proxy_pass http://127.0.0.1:9000;\n}\n',
    }), [
      'DIR/proxy.conf:1 location "/app/" sets its own proxy_set_header (DIR/proxy.conf:2), so Upgrade (DIR/nginx.conf:5), set above, is not sent to its upstream.',
      'DIR/nginx.conf:3 proxy_set_header Accept-Encoding, set here in the http block, is dropped by 2 locations with their own proxy_set_header, so it is not sent to their upstream: location "/app/" (DIR/proxy.conf:1 via DIR/host.conf:1), location "/api/" (DIR/nginx.conf:9).',
    ]);
  });
  test('twin: a location that writes its own Connection has chosen about Upgrade', async () => {
    assert.deepEqual(await run('proxy-set-header-inheritance', `${SERVER}
  proxy_set_header Upgrade $http_upgrade;
  proxy_set_header Connection $http_connection;
  location /auth { internal; proxy_set_header Connection ""; proxy_pass http://127.0.0.1:9000; }
}`), []);
  });
  test('twin: a server-level list that no proxied location takes, and a location that repeats', async () => {
    assert.deepEqual(await run('proxy-set-header-inheritance', `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
${SERVER}
  proxy_set_header X-Real-IP $remote_addr;
  location / { root html; }
  location /api/ { proxy_set_header X-Real-IP $remote_addr; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; proxy_pass http://127.0.0.1:9000; }
}`), []);
  });
});

describe('grpc-set-header-inheritance', () => {
  test('fires where the list reaches a grpc_pass', async () => {
    assert.deepEqual(await run('grpc-set-header-inheritance', `${SERVER}
  grpc_set_header X-Real-IP $remote_addr;
  location /api.Service/ {
    grpc_set_header X-Tenant a;
    grpc_pass grpc://127.0.0.1:9000;
  }
}`), [
      'DIR/nginx.conf:5 location "/api.Service/" sets its own grpc_set_header (DIR/nginx.conf:6), so X-Real-IP (DIR/nginx.conf:4), set above, is not sent to its upstream.',
    ]);
  });
  test('twin: a proxied location with its own list does not count', async () => {
    assert.deepEqual(await run('grpc-set-header-inheritance', `${SERVER}
  grpc_set_header X-Real-IP $remote_addr;
  location /api.Service/ { grpc_pass grpc://127.0.0.1:9000; }
  location /web/ { grpc_set_header X-Tenant a; proxy_pass http://127.0.0.1:9001; }
}`), []);
  });
});

describe('proxy-hide-header-inheritance', () => {
  test('fires', async () => {
    assert.deepEqual(await run('proxy-hide-header-inheritance', `proxy_hide_header X-Powered-By;
${SERVER}
  location / { proxy_hide_header X-Runtime; proxy_pass http://127.0.0.1:9000; }
}`), [
      'DIR/nginx.conf:3 proxy_hide_header X-Powered-By, set here in the http block, is dropped by a location with its own proxy_hide_header, so it is not hidden from its responses: location "/" (DIR/nginx.conf:5).',
    ]);
  });
  test('twin', async () => {
    assert.deepEqual(await run('proxy-hide-header-inheritance', `proxy_hide_header X-Powered-By;
${SERVER}
  location / { proxy_pass http://127.0.0.1:9000; }
}`), []);
  });
});

describe('fastcgi-param-inheritance', () => {
  test('fires', async () => {
    assert.deepEqual(await run('fastcgi-param-inheritance', `${SERVER}
  fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
  location ~ \\.php$ {
    fastcgi_param APP_ENV prod;
    fastcgi_pass 127.0.0.1:9001;
  }
}`), [
      'DIR/nginx.conf:5 location "~ \\.php$" sets its own fastcgi_param (DIR/nginx.conf:6), so SCRIPT_FILENAME (DIR/nginx.conf:4), set above, is not passed to its FastCGI server.',
    ]);
  });
  test('twin: the parameters are all at one level', async () => {
    assert.deepEqual(await run('fastcgi-param-inheritance', `${SERVER}
  location ~ \\.php$ {
    fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
    fastcgi_param APP_ENV prod;
    fastcgi_pass 127.0.0.1:9001;
  }
}`), []);
  });
});

describe('uwsgi-param-inheritance and scgi-param-inheritance', () => {
  test('fire where the list reaches their pass', async () => {
    assert.deepEqual(await run('uwsgi-param-inheritance', `${SERVER}
  uwsgi_param HTTPS on;
  location /app/ {
    uwsgi_param UWSGI_SCRIPT app;
    uwsgi_pass 127.0.0.1:9001;
  }
}`), [
      'DIR/nginx.conf:5 location "/app/" sets its own uwsgi_param (DIR/nginx.conf:6), so HTTPS (DIR/nginx.conf:4), set above, is not passed to its uwsgi server.',
    ]);
    assert.deepEqual(await run('scgi-param-inheritance', `${SERVER}
  scgi_param HTTPS on;
  location /app/ {
    scgi_param SCRIPT_NAME /app;
    scgi_pass 127.0.0.1:9001;
  }
}`), [
      'DIR/nginx.conf:5 location "/app/" sets its own scgi_param (DIR/nginx.conf:6), so HTTPS (DIR/nginx.conf:4), set above, is not passed to its SCGI server.',
    ]);
  });
  test('twin: a location without its own parameters inherits them', async () => {
    assert.deepEqual(await run('uwsgi-param-inheritance', `${SERVER}
  uwsgi_param HTTPS on;
  location /app/ { uwsgi_pass 127.0.0.1:9001; }
}`), []);
  });
});

describe('alias-traversal', () => {
  test('fires', async () => {
    assert.deepEqual(await run('alias-traversal', `${SERVER}
  location /files {
    alias /data/;
  }
  location ~ ^/img(.*)$ { alias /srv/img/$1; }
}`), [
      'DIR/nginx.conf:5 location "/files" (DIR/nginx.conf:4) has no trailing slash but its alias "/data/" has one, so "/files../" reads the directory above the alias.',
      'DIR/nginx.conf:7 alias "/srv/img/$1" puts capture $1 of location "^/img(.*)$" (DIR/nginx.conf:7) after a slash, and the capture can start with "..", so it reads the directory above the alias.',
    ]);
  });
  test('twin: both end with a slash; a regex location', async () => {
    assert.deepEqual(await run('alias-traversal', `${SERVER}
  location /files/ { alias /data/; }
  location /img { alias /data/img; }
  location ~ ^/dl/(.*)$ { alias /data/$1; }
  location ~ ^/icons([a-z0-9]+\\.png)$ { alias /srv/icons/$1; }
}`), []);
  });
});

describe('proxy-pass-ssrf', () => {
  test('fires: a header, a URI capture, a set variable, a uwsgi_pass argument', async () => {
    assert.deepEqual(await run('proxy-pass-ssrf', `${SERVER}
  location /a { proxy_pass http://$http_x_backend; }
  location ~ ^/b/([^/]+)/(.*)$ { proxy_pass http://$1/$2; }
  location /c { set $target $arg_to; proxy_pass https://$target:8443/; }
  location ~ \\.php$ { fastcgi_pass $cookie_pool; }
  location /d { uwsgi_pass uwsgi://$arg_app; }
}`), [
      'DIR/nginx.conf:4 proxy_pass "http://$http_x_backend" takes its host from $http_x_backend, which comes from the request header "x-backend".',
      'DIR/nginx.conf:5 proxy_pass "http://$1/$2" takes its host from $1, which comes from the request URI (capture $1 of "^/b/([^/]+)/(.*)$" at DIR/nginx.conf:5).',
      'DIR/nginx.conf:6 proxy_pass "https://$target:8443/" takes its host from $target, which comes from the query argument "to".',
      'DIR/nginx.conf:7 fastcgi_pass "$cookie_pool" takes its host from $cookie_pool, which comes from the cookie "pool".',
      'DIR/nginx.conf:8 uwsgi_pass "uwsgi://$arg_app" takes its host from $arg_app, which comes from the query argument "app".',
    ]);
  });
  test('twin: fixed hosts, a map with fixed values, the URI after the host (NPM\'s proxy_pass)', async () => {
    assert.deepEqual(await run('proxy-pass-ssrf', `map $http_x_pool $pool { default 127.0.0.1:9000; beta 127.0.0.1:9001; }
map $host $forward_scheme { default http; }
${SERVER}
  set $server 192.168.1.20;
  set $port 8080;
  location / { proxy_pass $forward_scheme://$server:$port$request_uri; }
  location /p/ { proxy_pass http://$pool/$arg_x; }
  location ~ ^/q/(.*)$ { proxy_pass http://127.0.0.1:9000/$1; }
  location ~ ^/r/([a-z]+)/ { proxy_pass http://$1.internal.example; }
  location /s { internal; proxy_pass http://$arg_host; }
}`), []);
  });
});

describe('host-spoofing', () => {
  test('fires', async () => {
    assert.deepEqual(await run('host-spoofing', `${SERVER}
  location / { proxy_set_header Host $http_host; proxy_pass http://127.0.0.1:9000; }
}`), ['DIR/nginx.conf:4 proxy_set_header Host "$http_host" sends the client\'s unchecked $http_host to the upstream; use $host.']);
  });
  test('twin', async () => {
    assert.deepEqual(await run('host-spoofing', `${SERVER}
  location / { proxy_set_header Host $host; proxy_set_header X-Original-Host $http_host; proxy_pass http://127.0.0.1:9000; }
}`), []);
  });
});

describe('http-splitting', () => {
  test('fires: $uri in a header, a capture that can hold CR/LF, a redirect built from $uri', async () => {
    assert.deepEqual(await run('http-splitting', `${SERVER}
  location /a { add_header X-Uri $uri; }
  location ~ ^/b/([^/]*)$ { return 302 https://example.com/$1; }
  location /c { rewrite ^ https://example.com$uri redirect; }
  location ~ /v1/((?<action>[^.]*)\\.json)?$ { add_header X-Action $action; }
  location ~ /proxy/(a|b)/(\\W*)$ { set $path $2; proxy_pass http://127.0.0.1:9000/$path; }
}`), [
      'DIR/nginx.conf:4 add_header "$uri" puts a value that can hold CR/LF into the X-Uri header: $uri is URL-decoded (%0D%0A becomes CR LF).',
      'DIR/nginx.conf:5 return "https://example.com/$1" puts a value that can hold CR/LF into the Location header: capture $1 of "^/b/([^/]*)$" (DIR/nginx.conf:5) can hold CR and LF, and $uri is URL-decoded (%0D%0A becomes CR LF).',
      'DIR/nginx.conf:6 rewrite "https://example.com$uri" puts a value that can hold CR/LF into the Location header: $uri is URL-decoded (%0D%0A becomes CR LF).',
      'DIR/nginx.conf:7 add_header "$action" puts a value that can hold CR/LF into the X-Action header: capture $2 of "/v1/((?<action>[^.]*)\\.json)?$" (DIR/nginx.conf:7) can hold CR and LF, and $uri is URL-decoded (%0D%0A becomes CR LF).',
      'DIR/nginx.conf:8 proxy_pass "http://127.0.0.1:9000/$path" puts a value that can hold CR/LF into the request line sent to the upstream: capture $2 of "/proxy/(a|b)/(\\W*)$" (DIR/nginx.conf:8) can hold CR and LF, and $uri is URL-decoded (%0D%0A becomes CR LF).',
    ]);
  });
  test('twin: $request_uri, captures without CR/LF, escaped rewrite captures, a body', async () => {
    assert.deepEqual(await run('http-splitting', `${SERVER}
  location /a { add_header X-Uri $request_uri; return 301 https://example.com$request_uri; }
  location ~ ^/b/(\\w+)/([a-z0-9-]+)$ { return 302 https://example.com/$1/$2; }
  location /c { rewrite ^/c/(.*)$ https://example.com/$1 permanent; }
  location /d { return 200 "$uri"; }
}`), []);
  });
});

describe('origin-regex', () => {
  test('fires: unanchored and unescaped Origin and Referer checks, a valid_referers regex', async () => {
    assert.deepEqual(await run('origin-regex', `${SERVER}
  location / {
    if ($http_origin ~* "example\\.com") { return 403; }
    if ($http_referer !~ "^https://www.example.com/") { return 403; }
    valid_referers ~\\.example\\.com;
  }
}
map $http_origin $cors {
  ~^https://.*example\\.com $http_origin;
  ~^https://(www\\.)?example\\.org$ $http_origin;
}`), [
      'DIR/nginx.conf:11 the map key "~^https://.*example\\.com" on $http_origin also matches "https://example.com.evil.invalid", which is not example.com.',
      'DIR/nginx.conf:5 the regex "example\\.com" on $http_origin also matches "https://example.com.evil.invalid", which is not example.com.',
      'DIR/nginx.conf:6 the regex "^https://www.example.com/" on $http_referer also matches "https://wwwxexample.com/", which is not www.example.com.',
      'DIR/nginx.conf:7 valid_referers regex "~\\.example\\.com" also accepts the Referer "https://www.example.com.evil.invalid/", which is not example.com.',
    ]);
  });
  test('fires: a wildcard that spans the host (gixy\'s example), found by generating values from the pattern', async () => {
    assert.deepEqual(await run('origin-regex', `${SERVER}
  location / {
    if ($http_referer !~ "^https?://([^/]+\\.)?metrika.*yandex\\.ru/") { return 403; }
    if ($http_origin !~ "^https://[a-z.]*example\\.com$") { return 403; }
  }
}`), [
      'DIR/nginx.conf:5 the regex "^https?://([^/]+\\.)?metrika.*yandex\\.ru/" on $http_referer also matches "http://evil.invalid.metrikayandex.ru/", which is not yandex.ru.',
      'DIR/nginx.conf:6 the regex "^https://[a-z.]*example\\.com$" on $http_origin also matches "https://evilexample.com", which is not example.com.',
    ]);
  });
  test('twin: anchored and escaped', async () => {
    assert.deepEqual(await run('origin-regex', `${SERVER}
  location / {
    if ($http_origin !~* "^https://(www\\.)?example\\.com$") { return 403; }
    if ($http_referer !~ "^https://www\\.example\\.com/") { return 403; }
    valid_referers ~^(www\\.)?example\\.com/;
    if ($http_origin !~ "^https://[a-z0-9-]+\\.example\\.com$") { return 403; }
    if ($http_referer !~ "^https://([a-z0-9-]+\\.)*example\\.com(/.*)?$") { return 403; }
  }
}`), []);
  });
});

describe('valid-referers-none', () => {
  test('fires', async () => {
    assert.deepEqual(await run('valid-referers-none', `${SERVER}
  location /img/ { valid_referers none server_names; if ($invalid_referer) { return 403; } }
}`), ['DIR/nginx.conf:4 valid_referers "none" accepts every request without a Referer header, which any client can send.']);
  });
  test('twin', async () => {
    assert.deepEqual(await run('valid-referers-none', `${SERVER}
  location /img/ { valid_referers server_names; if ($invalid_referer) { return 403; } }
}`), []);
  });
});

describe('add-header-multiline', () => {
  test('fires', async () => {
    assert.deepEqual(await run('add-header-multiline', `${SERVER}
  add_header Content-Security-Policy "default-src 'self';
      script-src 'self'";
}`), ["DIR/nginx.conf:5 add_header Content-Security-Policy has a value over 2 lines; its line breaks are sent inside the header."]);
  });
  test('twin', async () => {
    assert.deepEqual(await run('add-header-multiline', `${SERVER}
  add_header Content-Security-Policy "default-src 'self'; script-src 'self'";
}`), []);
  });
});

describe('version-disclosure', () => {
  test('fires: written on, and the default', async () => {
    assert.deepEqual(await run('version-disclosure', `server { listen 127.0.0.1:8080; location / { server_tokens on; } }`), [
      'DIR/nginx.conf:2 server_tokens is not set, and nginx\'s default (on) sends the version in the Server header and error pages.',
      'DIR/nginx.conf:3 server_tokens on sends the version in the Server header and error pages of location "/" (DIR/nginx.conf:3).',
    ]);
  });
  test('fires: a server that does not turn it off when another does', async () => {
    assert.deepEqual(await run('version-disclosure', `server { listen 127.0.0.1:8080; server_tokens off; }\nserver { listen 127.0.0.1:8081; }`), [
      'DIR/nginx.conf:2 server_tokens is not set in the http block nor in the server at DIR/nginx.conf:4, and nginx\'s default (on) sends the version in the Server header and error pages.',
    ]);
  });
  test('twin', async () => {
    assert.deepEqual(await run('version-disclosure', `server_tokens off;\nserver { listen 127.0.0.1:8080; }`), []);
    assert.deepEqual(await run('version-disclosure', `server { listen 127.0.0.1:8080; server_tokens off; }`), []);
  });
});

describe('resolver-external', () => {
  test('fires', async () => {
    assert.deepEqual(await run('resolver-external', `resolver 127.0.0.1 8.8.8.8 [2001:4860:4860::8888] valid=30s;`), [
      'DIR/nginx.conf:3 resolver 8.8.8.8, 2001:4860:4860::8888 is a public DNS server; its plain UDP answers can be spoofed.',
    ]);
  });
  test('twin: local, private and Docker resolvers', async () => {
    assert.deepEqual(await run('resolver-external', `resolver 127.0.0.11 valid=10s;\n${SERVER} resolver 10.0.0.2 [::1]:5353 [fd00::53]; }`), []);
  });
});

describe('allow-without-deny', () => {
  test('fires', async () => {
    assert.deepEqual(await run('allow-without-deny', `${SERVER}
  deny all;
  location /admin/ {
    allow 10.0.0.0/8;
    allow 192.168.0.0/16;
  }
}`), ['DIR/nginx.conf:6 location "/admin/" (DIR/nginx.conf:5) has allow 10.0.0.0/8, 192.168.0.0/16 (DIR/nginx.conf:6) and no deny, so every address is allowed.']);
  });
  test('twin: a deny at the level, and a lone allow all', async () => {
    assert.deepEqual(await run('allow-without-deny', `${SERVER}
  location /admin/ { allow 10.0.0.0/8; deny all; }
  location /.well-known/ { allow all; }
}`), []);
  });
});

describe('if-is-evil', () => {
  test('fires', async () => {
    assert.deepEqual(await run('if-is-evil', `${SERVER}
  location / {
    try_files $uri /index.html;
    if ($http_user_agent ~ Mobile) {
      add_header Vary User-Agent;
      rewrite ^ /m$uri break;
    }
  }
  location /app/ {
    try_files $uri /app/index.html;
    if ($cookie_beta) { set $variant beta; }
  }
}`), [
      "DIR/nginx.conf:6 if ($http_user_agent ~ Mobile) inside a location holds add_header (DIR/nginx.conf:7), rewrite … break (DIR/nginx.conf:8); when it matches, the request is served with the if block's settings.",
      'DIR/nginx.conf:13 if ($cookie_beta) inside a location drops its try_files (DIR/nginx.conf:12) for every request it matches, as the if block does not inherit try_files.',
    ]);
  });
  test('twin: return, rewrite last and set in a location, anything in a server-level if', async () => {
    assert.deepEqual(await run('if-is-evil', `${SERVER}
  if ($scheme = http) { set $x 1; }
  location / {
    try_files $uri /index.html;
    if ($request_method = POST) { return 405; }
    if ($arg_v) { set $v $arg_v; rewrite ^ /v last; }
  }
}`), []);
  });
});

describe('real trees', () => {
  /** Every security rule's findings on a prepared tree, `DIR` for its temp root. */
  async function treeFindings(prepare: () => Promise<{ root: string; prefix: string; conf: string }>): Promise<string[]> {
    const t = await prepare();
    const subject = await lintSubjectOf(t.conf, t.prefix.endsWith('/') ? t.prefix : `${t.prefix}/`);
    assert.ok(subject.root && subject.table, 'the tree compiles');
    return securityRules.flatMap((r) => findingsOf(r, subject, t.root).map((f) => `${r.code} ${f}`));
  }

  test('Nginx Proxy Manager: the assets location drops Strict-Transport-Security and X-Robots-Tag', async () => {
    const found = await treeFindings(prepareProxyManager);
    const assets = 'DIR/etc/nginx/conf.d/include/assets.conf:1';
    const assetsName = String.raw`location "~* ^.*\.(css|js|jpe?g|gif|png|webp|woff|woff2|eot|ttf|svg|ico|css\.map|js\.map)$"`;
    assert.deepEqual(found, [
      `add-header-inheritance ${assets} ${assetsName} sets its own add_header (DIR/etc/nginx/conf.d/include/proxy.conf:1), so Strict-Transport-Security (DIR/data/nginx/proxy_host/1.conf:48) and X-Robots-Tag (DIR/data/nginx/proxy_host/1.conf:76), set above, are not sent with its responses.`,
      'add-header-inheritance DIR/data/nginx/proxy_host/1.conf:78 location "/metrics" sets its own add_header (DIR/etc/nginx/conf.d/include/proxy.conf:1), so Strict-Transport-Security (DIR/data/nginx/proxy_host/1.conf:48) and X-Robots-Tag (DIR/data/nginx/proxy_host/1.conf:76), set above, are not sent with its responses.',
      'add-header-inheritance DIR/data/nginx/proxy_host/1.conf:88 location "/" sets its own add_header (DIR/data/nginx/proxy_host/1.conf:125), so X-Robots-Tag (DIR/data/nginx/proxy_host/1.conf:76), set above, is not sent with its responses.',
      `proxy-set-header-inheritance ${assets} ${assetsName} sets its own proxy_set_header (DIR/etc/nginx/conf.d/include/proxy.conf:2), so Upgrade (DIR/data/nginx/proxy_host/1.conf:63) and Connection (DIR/data/nginx/proxy_host/1.conf:64), set above, are not sent to its upstream.`,
      'proxy-set-header-inheritance DIR/data/nginx/proxy_host/1.conf:78 location "/metrics" sets its own proxy_set_header (DIR/etc/nginx/conf.d/include/proxy.conf:2), so Upgrade (DIR/data/nginx/proxy_host/1.conf:63) and Connection (DIR/data/nginx/proxy_host/1.conf:64), set above, are not sent to its upstream.',
      `proxy-set-header-inheritance DIR/etc/nginx/nginx.conf:44 proxy_set_header Accept-Encoding, set here in the http block, is dropped by 8 locations with their own proxy_set_header, so it is not sent to their upstream: ${assetsName} (${assets} via DIR/etc/nginx/conf.d/default.conf:13), location "/api/" (DIR/etc/nginx/conf.d/production.conf:14), ${assetsName} (${assets} via DIR/data/nginx/proxy_host/1.conf:39), location "/metrics" (DIR/data/nginx/proxy_host/1.conf:78), location "/" (DIR/data/nginx/proxy_host/1.conf:88), location "/api" (DIR/data/nginx/proxy_host/2.conf:49), location "/static/" (DIR/data/nginx/proxy_host/2.conf:73), location "/" (DIR/data/nginx/proxy_host/2.conf:101).`,
    ]);
  });

  test('Debian: only the version, as server_tokens stays commented out', async () => {
    assert.deepEqual(await treeFindings(() => prepareDebian()), [
      'version-disclosure DIR/etc/nginx/nginx.conf:12 server_tokens is not set, and nginx\'s default (on) sends the version in the Server header and error pages.',
    ]);
  });

  test('the scenario tree: headers lost where locations set their own, an http block\'s entry once', async () => {
    const found = await treeFindings(prepareScenario);
    assert.ok(found.every((f) => f.startsWith('proxy-set-header-inheritance ')), found.join('\n'));
    assert.ok(found.includes('proxy-set-header-inheritance DIR/conf/proxy_host/6.conf:33 location "/" sets its own proxy_set_header (DIR/conf/snippets/authelia-authrequest.conf:14), so Upgrade (DIR/conf/proxy_host/6.conf:22) and Connection (DIR/conf/proxy_host/6.conf:23), set above, are not sent to its upstream.'), found.join('\n'));
    // the http block's Accept-Encoding (16 locations) and X-Forwarded-Scheme (the two /authelia locations): one finding each
    assert.equal(found.filter((f) => f.includes(', set here in the http block, ')).length, 2, found.join('\n'));
    assert.equal(found.length, 4, found.join('\n'));
  });
});
