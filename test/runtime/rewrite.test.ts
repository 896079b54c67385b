/**
 * The rewrite module and error_page, differential against nginx: `set`,
 * `map`, `if`, `return`, `rewrite` flags and arguments, the 10-cycle limit,
 * `error_page` variants, `$status` on the way, the warning for a `set`
 * variable read before it is set.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Snap } from '../helpers/differential.js';

const server = (port: number, body: string, extra = ''): string =>
  httpConf(`${extra}\n  server { listen 127.0.0.1:${port}; server_name rw.test; root html; types {}\n${body}\n  }`);

/** GETs each URI with Host rw.test (and extra headers) and returns the snapshots by URI. */
async function getAll(s: { get(p: string, o?: { headers?: Record<string, string> }): Promise<Snap> }, uris: readonly string[], headers: Record<string, string> = {}): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  for (const u of uris) out[u] = await s.get(u, { headers: { Host: 'rw.test', ...headers } });
  return out;
}

describe('rewrite module (differential)', () => {
  after(cleanup);

  it('evaluates set and map (exact, regex with captures, default, hostnames)', async () => {
    const maps = `
  map $uri $kind {
    default            other;
    /exact             exact-match;
    ~^/re/(?<part>\\w+) regex-$part;
    ~*\\.JPG$          caseless-jpg;
    /var               $request_method-$arg_x;
  }
  map $http_x_host $hostkind {
    hostnames;
    default            none;
    example.com        exact;
    *.example.com      star;
    .example.org       dot;
    www.example.*      tail;
  }
  map $arg_n $mapped_empty { default ""; one 1; }`;
    const run = await differential({
      conf: ({ port }) => server(port, `
    set $greeting "hello";
    location / {
      set $who "$greeting-$arg_name";
      return 200 "kind=$kind part=$part host=$hostkind who=$who empty=[$mapped_empty]\\n";
    }`, maps),
    }, async (s) => {
      const out = await getAll(s, ['/exact', '/EXACT', '/re/abc/def', '/x/a.jpg', '/x/a.JPG', '/var?x=7', '/other?name=bob', '/?n=one', '/exact/']);
      for (const h of ['example.com', 'a.example.com', 'a.b.example.com', 'example.org', 'EXAMPLE.org', 'x.example.org', 'www.example.net', 'nomatch.test']) {
        out[`x-host ${h}`] = await s.get('/', { headers: { Host: 'rw.test', 'X-Host': h } });
      }
      return out;
    });
    assert.equal(run.nginx.result['/re/abc/def']!.body, 'kind=regex-abc part=abc host=none who=hello- empty=[]\n');
    assertSameAsNginx(run);
  });

  it('tests if conditions: =, !=, ~, ~*, !~, !~*, -f, -d, -e, and a bare variable', async () => {
    const ifs = `
    location /if {
      set $r "";
      if ($arg_a = "yes") { set $r "$r eq"; }
      if ($arg_a != "yes") { set $r "$r ne"; }
      if ($arg_b ~ ^(\\d+)-(\\d+)$) { set $r "$r re:$1:$2"; }
      if ($arg_b ~* ^ABC) { set $r "$r rei"; }
      if ($arg_b !~ ^\\d) { set $r "$r nre"; }
      if ($arg_b !~* ^abc) { set $r "$r nrei"; }
      if ($arg_c) { set $r "$r truthy"; }
      if (-f $document_root/$arg_p) { set $r "$r file"; }
      if (!-f $document_root/$arg_p) { set $r "$r notfile"; }
      if (-d $document_root/$arg_p) { set $r "$r dir"; }
      if (!-d $document_root/$arg_p) { set $r "$r notdir"; }
      if (-e $document_root/$arg_p) { set $r "$r exists"; }
      if (!-e $document_root/$arg_p) { set $r "$r missing"; }
      return 200 "[$r]\\n";
    }`;
    const run = await differential({
      conf: ({ port }) => server(port, ifs),
      files: { 'html/file.txt': 'f\n', 'html/dir/inner.txt': 'i\n' },
    }, async (s) => getAll(s, [
      '/if?a=yes', '/if?a=no', '/if?b=12-34', '/if?b=ABCdef', '/if?b=abc', '/if?b=x', '/if?c=0', '/if?c=1', '/if?c=',
      '/if?p=file.txt', '/if?p=dir', '/if?p=none',
    ]));
    // without ?p= the tests see $document_root/ itself: a directory
    assert.equal(run.nginx.result['/if?b=12-34']!.body, '[ ne re:12:34 nrei notfile dir exists]\n');
    assertSameAsNginx(run);
  });

  it('answers return with a code, text, a URL, and 444 by closing the connection', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location = /text { return 200 "text for $uri\\n"; }
    location = /empty200 { return 200; }
    location = /204 { return 204; }
    location = /404 { return 404; }
    location = /404text { return 404 "gone\\n"; }
    location = /418 { return 418; }
    location = /301 { return 301 https://elsewhere.test/x?$args; }
    location = /302rel { return 302 /relative/path; }
    location = /url { return http://elsewhere.test/only-url; }
    location = /307 { return 307 "/kept?$args"; }
    location = /500 { return 500 "oops\\n"; }
    location = /444 { return 444; }`),
    }, async (s) => {
      const out: Record<string, Snap | string> = await getAll(s, ['/text', '/empty200', '/204', '/404', '/404text', '/418', '/301?a=1', '/302rel', '/url', '/307?b=2', '/500']);
      out['HEAD /text'] = await s.get('/text', { method: 'HEAD', headers: { Host: 'rw.test' } });
      out['/444 raw bytes'] = await rawExchange(s.port, 'GET /444 HTTP/1.1\r\nHost: rw.test\r\n\r\n');
      return out;
    });
    assert.equal(run.nginx.result['/444 raw bytes'], '');
    assert.equal((run.nginx.result['/302rel'] as Snap).headers.location, `http://rw.test:${/:(\d+)\//.exec((run.nginx.result['/302rel'] as Snap).headers.location!)![1]}/relative/path`);
    assertSameAsNginx(run);
  });

  it('types a return body by the URI extension, like nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; application/json json; }
  default_type application/octet-stream;
  server { listen 127.0.0.1:${port}; server_name rw.test; location / { return 200 "body\\n"; } }`),
    }, async (s) => getAll(s, ['/page.html', '/data.json', '/noext', '/x.unknown', '/dir.html/x']));
    assert.equal(run.nginx.result['/page.html']!.headers['content-type'], 'text/html');
    assertSameAsNginx(run);
  });

  it('rewrites with last, break, redirect and permanent, and handles arguments', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    rewrite ^/srv/(.*)$ /target/server-$1;
    location /last/ { rewrite ^/last/(.*)$ /target/$1 last; return 200 "not reached\\n"; }
    location /break/ { rewrite ^/break/(.*)$ /moved/$1 break; return 200 "after break uri=$uri\\n"; }
    location /break-static/ { rewrite ^/break-static/(.*)$ /static/$1 break; }
    location /redirect/ { rewrite ^/redirect/(.*)$ /target/$1 redirect; }
    location /permanent/ { rewrite ^/permanent/(.*)$ /target/$1 permanent; }
    location /abs/ { rewrite ^ http://other.test/abs-target; }
    location /args-new/ { rewrite ^ /target/new?n=1 last; }
    location /args-drop/ { rewrite ^ /target/drop? last; }
    location /args-redirect-drop/ { rewrite ^ /target/rdrop? redirect; }
    location /args-redirect/ { rewrite ^ /target/r?n=1 redirect; }
    location /chain/ { rewrite ^/chain/(.*)$ /chain2/$1; rewrite ^/chain2/(.*)$ /target/chained-$1; return 200 "not reached\\n"; }
    location /nomatch/ { rewrite ^/other /target/x last; return 200 "no match uri=$uri\\n"; }
    location /target/ { return 200 "target uri=$uri args=$args is_args=$is_args request_uri=$request_uri\\n"; }`),
      files: { 'html/static/a.txt': 'static a\n' },
    }, async (s) => getAll(s, [
      '/srv/x?q=1', '/last/a?q=1', '/break/b?q=2', '/break-static/a.txt', '/break-static/none', '/redirect/c?q=3', '/permanent/d', '/abs/x?q=4',
      '/args-new/x?q=5', '/args-drop/x?q=6', '/args-redirect-drop/x?q=7', '/args-redirect/x?q=8', '/chain/z?q=9', '/nomatch/y',
    ]));
    assert.equal(run.nginx.result['/args-new/x?q=5']!.body, 'target uri=/target/new args=n=1&q=5 is_args=? request_uri=/args-new/x?q=5\n');
    assert.equal(run.nginx.result['/redirect/c?q=3']!.status, 302);
    assertSameAsNginx(run);
  });

  it('stops a rewrite cycle after 10 URI changes with 500 and logs it', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /loop { rewrite ^ /loop last; }
    location /ping { rewrite ^ /pong last; }
    location /pong { rewrite ^ /ping last; }
    location /ep-loop { error_page 404 /ep-loop-missing; }
    location /ep-loop-missing { recursive_error_pages on; error_page 404 /ep-loop-missing2; }`),
    }, async (s) => getAll(s, ['/loop', '/ping?x=1', '/ep-loop']));
    assert.equal(run.nginx.result['/loop']!.status, 500);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('rewrite or internal redirection cycle while processing "/loop"')));
    assertSameAsNginx(run);
  });

  it('follows error_page with =CODE, = (the target\'s status), a URI, and a full URL', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    error_page 404 /errors/404.html;
    location /plain/ { }
    location /code/ { error_page 404 =200 /errors/404.html; }
    location /from-target/ { error_page 404 = /target-status; }
    location /url/ { error_page 404 http://errors.test/page?x=1; }
    location /url301/ { error_page 404 =301 http://errors.test/moved; }
    location /ret/ { error_page 403 /errors/403.html; return 403; }
    location /ret-text/ { error_page 403 /errors/403.html; return 403 "text\\n"; }
    location /missing-page/ { error_page 404 /errors/none.html; }
    location = /target-status { return 201 "created by target\\n"; }
    location /errors/ { internal; }`),
      files: { 'html/errors/404.html': '<p>custom 404</p>\n', 'html/errors/403.html': '<p>custom 403</p>\n' },
    }, async (s) => {
      const out = await getAll(s, ['/plain/x', '/code/x', '/from-target/x', '/url/x', '/url301/x', '/ret/x', '/ret-text/x', '/missing-page/x', '/errors/404.html']);
      out['HEAD /plain/x'] = await s.get('/plain/x', { method: 'HEAD', headers: { Host: 'rw.test' } });
      out['POST /plain/x'] = await s.get('/plain/x', { method: 'POST', body: 'b', headers: { Host: 'rw.test' } });
      return out;
    });
    assert.equal(run.nginx.result['/plain/x']!.status, 404);
    assert.equal(run.nginx.result['/plain/x']!.body, '<p>custom 404</p>\n');
    assert.equal(run.nginx.result['/url/x']!.status, 302);
    assertSameAsNginx(run);
  });

  it('gives $status in a return\'s text the return\'s code, and in an error page the error_page\'s code (none with =), as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /direct { return 200 "st=$status\\n"; }
    location /page { error_page 404 /target; }
    location /code { error_page 404 =201 /target; }
    location /own { error_page 404 = /target; }
    location /set { error_page 404 = /set-target; }
    location /redirect { error_page 404 =301 http://errors.test/; }
    location = /target { add_header X-S $status always; return 200 "st=$status\\n"; }
    location = /set-target { set $s $status; return 202 "s=$s st=$status\\n"; }`, "  log_format st '$request_uri $status';\n  access_log logs/st.log st;"),
    }, async (s) => getAll(s, ['/direct', '/page', '/code', '/own', '/set', '/redirect']));
    assert.equal(run.jinx.result['/direct']!.body, 'st=200\n');
    assert.equal(run.jinx.result['/page']!.body, 'st=404\n');
    assert.equal(run.jinx.result['/set']!.body, 's=000 st=202\n');
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/st.log'), run.nginx.file('logs/st.log'));
  });

  it('ends keep-alive after a 500 also when an error_page answers it (a URI, a named location, a URL), and keeps it after a 404, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /page { error_page 500 /errors/500.html; return 500; }
    location /named { error_page 500 @n; return 500; }
    location /url { error_page 500 http://errors.test/; return 500; }
    location /ok404 { error_page 404 /errors/500.html; return 404; }
    location @n { return 200 "named\\n"; }
    location /errors/ { internal; }`),
      files: { 'html/errors/500.html': '<p>custom</p>\n' },
    }, async (s) => {
      const out: Record<string, string[]> = {};
      for (const path of ['/page', '/named', '/url', '/ok404']) {
        // two requests on one connection: the second is answered only if the first kept it alive
        const raw = await rawExchange(s.port, `GET ${path} HTTP/1.1\r\nHost: rw.test\r\n\r\nGET /ok404 HTTP/1.1\r\nHost: rw.test\r\nConnection: close\r\n\r\n`);
        out[path] = raw.split('\r\n').filter((l) => l.startsWith('HTTP/1.1 ') || /^Connection: /i.test(l));
      }
      return out;
    });
    assert.deepEqual(run.nginx.result['/named'], ['HTTP/1.1 500 Internal Server Error', 'Connection: close']);
    assertSameAsNginx(run);
  });

  it('sends nginx\'s status line and page for every status of "return CODE"', async () => {
    const codes = [
      300, 301, 302, 303, 304, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416,
      417, 418, 421, 422, 425, 426, 428, 429, 431, 451, 494, 495, 496, 497, 499, 500, 501, 502, 503, 504, 505, 506, 507, 508, 599,
    ];
    const run = await differential({
      conf: ({ port }) => server(port, `${codes.map((c) => `    location = /r${c} { return ${c}; }`).join('\n')}`),
    }, async (s) => {
      const out: Record<string, Snap | string> = {};
      for (const c of codes) out[String(c)] = (await s.raw(`GET /r${c} HTTP/1.1\r\nHost: rw.test\r\nConnection: close\r\n\r\n`)) ?? 'connection closed without a response';
      return out;
    });
    assert.equal((run.nginx.result['404'] as Snap).body.split('\r\n')[1], '<head><title>404 Not Found</title></head>');
    assertSameAsNginx(run);
  });

  it('answers return inside an error_page with the error\'s status, keeping a redirect\'s Location', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location = /return204 { return 204; }
    location = /return200 { return 200; }
    location = /return200text { return 200 "text"; }
    location = /return302text { return 302 "text"; }
    location /error405return204 { error_page 405 /return204; return 405; }
    location /error405return200 { error_page 405 /return200; return 405; }
    location /error302return200text { error_page 302 /return200text; return 302 "text"; }
    location /error302path { error_page 302 /return200text; return 302 /elsewhere; }
    location /error405return302text { error_page 405 /return302text; return 405; }
    location /error302static { error_page 302 /page.html; return 302 /moved; }
    location /error401static { error_page 401 /page.html; auth_basic "zone"; auth_basic_user_file htpasswd; }`),
      files: { 'html/page.html': 'page\n', htpasswd: 'u:{PLAIN}p\n' },
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const u of ['/error405return204', '/error405return200', '/error302return200text', '/error302path', '/error405return302text', '/error302static', '/error401static']) {
        out[u] = await s.raw(`GET ${u} HTTP/1.1\r\nHost: rw.test\r\nConnection: close\r\n\r\n`);
      }
      out['HEAD /error302return200text'] = await s.raw('HEAD /error302return200text HTTP/1.1\r\nHost: rw.test\r\nConnection: close\r\n\r\n');
      return out;
    });
    assert.equal(run.nginx.result['/error405return204']!.status, 405);
    assert.equal(run.nginx.result['/error405return204']!.headers['content-length'], '0');
    assert.equal(run.nginx.result['/error302return200text']!.headers.location, 'text');
    assertSameAsNginx(run);
  });

  it('escapes captures copied into arguments and redirects, and unescapes a redirect\'s value as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /capture { rewrite ^(.*) $1?c=d; return 200 "uri:$uri args:$args\\n"; }
    location /capturedup { rewrite ^(.*) $1?c=$1; return 200 "uri:$uri args:$args\\n"; }
    location /question { rewrite ^/question(.*) /plain$arg_v; }
    location /plain { return 200 "uri:$uri args:$args\\n"; }
    location /redir { rewrite ^(.*) http://x.test$1?c=$1; }
    location /redir2 { rewrite ^(.*) http://x.test$1; }
    location /arg { rewrite ^ $arg_r? redirect; }
    location /empty { rewrite ^ $arg_none; }`),
    }, async (s) => {
      const out = await getAll(s, [
        '/capture/%25?a=b', '/capturedup/%25?a=b', '/capturedup/a+b%26c?x', '/capturedup/plain?x=1', '/question?v=%3Fz',
        '/redir/a%25b+c?x=1', '/redir2/a%3Fb%20c%2Fd?z', '/redir2/%22q%22', '/arg?r=http%3A%2F%2Fexample.com%2F%3Ffrom',
        '/arg?r=http%3A%2F%2Fexample.com%0D%0Asplit', '/arg?r=%zz%4', '/empty',
      ]);
      return out;
    });
    assert.equal(run.nginx.result['/capturedup/%25?a=b']!.body, 'uri:/capturedup/% args:c=/capturedup/%25&a=b\n');
    assertSameAsNginx(run);
  });

  it('traces regex matches and rewrites at notice level with rewrite_log on (server and location levels, if, redirect, an empty URI), as nginx', async () => {
    const conf = (port: number, extra: string): string => server(port, `
    rewrite ^/srv/(.*)$ /loc/$1;
    location /loc/ { if ($arg_a ~* "^x(y)") { return 200 "if $1\\n"; } rewrite ^/loc/(\\w+)$ /final/$1?q=1 last;
      rewrite ^/loc/r/(.*) http://example.com/$1 redirect; return 200 "loc $uri $args\\n"; }
    location /final/ { return 200 "final $uri $args\\n"; }
    location /off/ { rewrite_log off; rewrite ^ /final/off; }
    location /empty/ { rewrite ^/empty/(.*)$ $1 last; }`, extra);
    const uris = ['/srv/abc?z=1', '/loc/a/b?a=XYz', '/loc/r/p?k=v', '/off/x', '/empty/'];
    const run = await differential({ conf: ({ port }) => conf(port, '  rewrite_log on;') }, async (s) => getAll(s, uris));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[notice] *CONN rewritten redirect: "http://example.com/p?k=v"')));
    assertSameAsNginx(run);
    // without rewrite_log, an error_log at debug gets the same lines (nginx's log_level & NGX_LOG_DEBUG_HTTP)
    const debug = await differential({ conf: ({ port }) => conf(port, '').replace(/error_log (\S+) info;/, 'error_log $1 debug;') }, async (s) => getAll(s, uris));
    const notices = (log: readonly string[]): string[] => log.filter((l) => l.startsWith('[notice] '));
    assert.ok(notices(debug.jinx.errorLog).some((l) => l.startsWith('[notice] *CONN "^" matches "/off/x"')));
    assert.deepEqual(notices(debug.jinx.errorLog), notices(debug.nginx.errorLog));
  });

  it('caches a map\'s value for the request across internal redirects, and evaluates a volatile map each time', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /1 { index $uri_cached; }
    location /1/redirect { add_header X-URI $uri_cached always; return 200 "cached $uri_cached\\n"; }
    location /2 { index $uri_uncached; }
    location /2/redirect { add_header X-URI $uri_uncached always; return 200 "volatile $uri_uncached\\n"; }`, `
  map $uri $uri_cached { /1/ /1/redirect; /1/redirect uncached; }
  map $uri $uri_uncached { volatile; /2/ /2/redirect; /2/redirect uncached; }`),
      files: { 'html/1/redirect': 'one\n', 'html/2/redirect': 'two\n' },
    }, async (s) => getAll(s, ['/1/', '/2/']));
    assert.equal(run.nginx.result['/2/']!.headers['x-uri'], 'uncached');
    assertSameAsNginx(run);
  });

  it('warns once per request of a set variable read before it is set, unless uninitialized_variable_warn is off', async () => {
    const run = await differential({
      conf: ({ port }) => server(port, `
    location /setter { set $later "set"; return 200 "$later\\n"; }
    location /unset { return 200 "[$later][$later]\\n"; }
    location /quiet { uninitialized_variable_warn off; return 200 "[$later]\\n"; }
    location /captured { if ($uri ~ (?<named>none)) { return 404; } return 200 "[$named]\\n"; }`),
    }, async (s) => getAll(s, ['/setter', '/unset', '/quiet', '/captured']));
    assert.deepEqual(run.nginx.errorLog.filter((l) => l.includes('uninitialized')).map((l) => l.replace(/, client.*/, '')), [
      '[warn] *CONN using uninitialized "later" variable',
    ]);
    assertSameAsNginx(run);
  });
});
