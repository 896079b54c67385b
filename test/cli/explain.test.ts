/**
 * `jinx explain`: the server and location it names are the ones nginx 1.30
 * chooses for the same request. Each location of the configuration makes its
 * choice visible (`return 200 ID` in a configuration written here;
 * `add_header X-Loc FILE:LINE always` and `add_header X-Srv $server_name
 * always` appended to every `server {` and `location … {` line of the
 * scenario's tree and of Nginx Proxy Manager's, which keeps every line
 * number), a real request to nginx says which it chose, and explain must
 * name the same. nginx's answers are recorded beside this file
 * (`npm run -s record -- test/cli/explain.test.ts`). Also: the JSON shape,
 * the text output, and the messages (exit 1) for a bad request line, a
 * bad header and a configuration file that does not exist.
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { explainRequest, type Explanation } from '../../src/cli/explain.js';
import { compileConfig } from '../../src/config/compile.js';
import { prepareProxyManager, prepareScenario, type PreparedTree } from '../helpers/corpus-trees.js';
import { differential, httpConf, ORACLE } from '../helpers/differential.js';
import { cleanup, runJinx, startServer } from '../helpers/harness.js';
import { makePrefix } from '../helpers/cli.js';
import { answer, nextKey } from '../helpers/recorded.js';

/** Explains a request over the configuration `conf` of `prefix` (no trailing slash). */
async function explainIn(prefix: string, conf: string, request: string, headers: readonly string[] = [], port?: number): Promise<Explanation> {
  const compiled = await compileConfig({ confFile: conf, prefix: `${prefix}/` });
  return explainRequest(compiled.table, compiled.root, { request, headers, addr: '127.0.0.1', port, format: 'json' });
}

/** The location explain ends in: the text of the last search's location, or `server` when none matched. */
const lastLocation = (e: Explanation): string => e.locations[e.locations.length - 1]?.location ?? 'server';

/** The locations of the written configuration, by the id their `return` answers with. */
const LOCATIONS: Readonly<Record<string, string>> = {
  exact: '= /exact',
  root: '/',
  static: '^~ /static/',
  docs: '/docs/',
  docsApi: '/docs/api/',
  php: '~ \\.php$',
  docsPhp: '~ ^/docs/.+\\.php$',
  img: '~* \\.(png|jpg)$',
  app: '/app/',
  appJson: '~ \\.json$',
  tf: '/tf/',
  fallback: '@fallback',
  ep: '/ep/',
  notfound: '@notfound',
};

/** One server for each rule of `ngx_http_find_virtual_server`, and locations for each rule of `ngx_http_core_find_location`. */
const SELECTION_CONF = ({ port, prefix }: { port: number; prefix: string }): string => httpConf(`
  server {
    listen 127.0.0.1:${port};
    server_name exact.test;
    root ${prefix}/www;
    location = /exact { return 200 "exact exact"; }
    location / { return 200 "exact root"; }
    location ^~ /static/ { return 200 "exact static"; }
    location /docs/ { return 200 "exact docs"; }
    location /docs/api/ { return 200 "exact docsApi"; }
    location ~ \\.php$ { return 200 "exact php"; }
    location ~ ^/docs/.+\\.php$ { return 200 "exact docsPhp"; }
    location ~* \\.(png|jpg)$ { return 200 "exact img"; }
    location /app/ {
      location ~ \\.json$ { return 200 "exact appJson"; }
      return 200 "exact app";
    }
    location /tf/ { try_files $uri @fallback; }
    location @fallback { return 200 "exact fallback"; }
    location /ep/ { error_page 404 = @notfound; }
    location @notfound { return 200 "exact notfound"; }
    location /old/ { rewrite ^/old/(.*)$ /docs/$1 last; }
  }
  server { listen 127.0.0.1:${port}; server_name *.wild.test; location / { return 200 "wild root"; } }
  server { listen 127.0.0.1:${port}; server_name *.a.wild.test; location / { return 200 "awild root"; } }
  server { listen 127.0.0.1:${port}; server_name www.tail.*; location / { return 200 "tail root"; } }
  server { listen 127.0.0.1:${port}; server_name ~^api\\d+\\.; location / { return 200 "api root"; } }
  server { listen 127.0.0.1:${port}; server_name ~\\.rx\\.test$; location / { return 200 "rx root"; } }
  server { listen 127.0.0.1:${port} default_server; server_name default.test; location / { return 200 "default root"; } }
`);

/** Requests and the rule explain must give for each: [Host or null for none, path, server rule, location rule]. */
const SELECTION_CASES: readonly (readonly [string | null, string, string, string])[] = [
  ['exact.test', '/exact', 'exact', 'exact'],
  ['exact.test', '/exact/more', 'exact', 'prefix'],
  ['EXACT.test', '/static/a.php', 'exact', 'prefix-no-regex'],
  ['exact.test', '/docs/api/x', 'exact', 'prefix'],
  ['exact.test', '/docs/a.php', 'exact', 'regex'],
  ['exact.test', '/docs/a.PNG', 'exact', 'regex'],
  ['exact.test', '/app/data.json', 'exact', 'regex'],
  ['exact.test', '/app/page', 'exact', 'prefix'],
  ['exact.test', '/tf/missing', 'exact', 'named'],
  ['exact.test', '/ep/missing', 'exact', 'named'],
  ['exact.test', '/old/guide', 'exact', 'prefix'],
  ['x.wild.test', '/', 'leading wildcard', 'prefix'],
  ['x.a.wild.test', '/', 'leading wildcard', 'prefix'],
  ['www.tail.example', '/', 'trailing wildcard', 'prefix'],
  ['api1.rx.test', '/', 'regex', 'prefix'],
  ['other.rx.test', '/', 'regex', 'prefix'],
  ['nomatch.example', '/', 'default server', 'prefix'],
  [null, '/', 'default server', 'prefix'],
];

/**
 * `GET PATH HTTP/1.0` with `Host: host` (none when null: HTTP/1.0 may go
 * without), on its own connection; resolves with the status, the headers
 * (lowercase names) and the body.
 */
function get10(port: number, path: string, host: string | null, tls = false): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const s = tls
      ? tlsConnect({ host: '127.0.0.1', port, servername: host ?? undefined, rejectUnauthorized: false })
      : connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer to ${path}`)); }, 20_000);
    s.on(tls ? 'secureConnect' : 'connect', () => s.write(`GET ${path} HTTP/1.0\r\n${host === null ? '' : `Host: ${host}\r\n`}\r\n`));
    s.on('data', (d: Buffer) => { data += d.toString('latin1'); });
    s.on('error', reject);
    s.on('close', () => {
      clearTimeout(timer);
      const end = data.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = data.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const c = l.indexOf(':');
        headers[l.slice(0, c).toLowerCase()] = l.slice(c + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: data.slice(end + 4) });
    });
  });
}

/** The servers of the written configuration, by the id their locations answer with. */
const SERVERS: Readonly<Record<string, string>> = {
  exact: 'exact.test', wild: '*.wild.test', awild: '*.a.wild.test', tail: 'www.tail.*', api: '~^api\\d+\\.', rx: '~\\.rx\\.test$', default: 'default.test',
};

/** An answer `SERVER-ID LOCATION-ID` as explain's server name and location text. */
function expectedOf(body: string): { server: string; location: string } {
  const [server = '', location = ''] = body.split(' ');
  return { server: SERVERS[server] ?? `unknown server id ${server}`, location: LOCATIONS[location] ?? `unknown location id ${location}` };
}

/** Appends the X-Loc and X-Srv headers to every `server {` and `location … {` line of the tree's files. */
function markTree(root: string, dir: string): void {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      markTree(root, path);
      continue;
    }
    const text = readFileSync(path, 'utf8');
    if (!/\b(server|location)\b/.test(text)) continue;
    const rel = relative(root, path);
    const marked = text.split('\n').map((line, i) => {
      if (!/^\s*(server\s*|location\s[^{#]*)\{\s*(#.*)?$/.test(line)) return line;
      return line.replace(/\{/, `{ add_header X-Loc "${rel}:${i + 1}" always; add_header X-Srv $server_name always;`);
    }).join('\n');
    writeFileSync(path, marked);
  }
}

/** nginx's X-Srv and X-Loc for a request (Host null: none; over TLS with it as SNI when `tls`). */
async function marks(port: number, path: string, host: string | null, tls: boolean): Promise<{ srv: string; loc: string }> {
  const r = await get10(port, path, host, tls);
  return { srv: r.headers['x-srv'] ?? '', loc: r.headers['x-loc'] ?? '' };
}

/** The plain-HTTP and the TLS port of a tree that most servers listen on, and every port it listens on. */
async function treePorts(t: PreparedTree): Promise<{ http: number; https: number; ports: number[] }> {
  const compiled = await compileConfig({ confFile: t.conf, prefix: `${t.prefix}/` });
  const most = (ssl: boolean): number => {
    const groups = compiled.table.listens.filter((g) => g.ssl === ssl && g.unixPath === undefined);
    groups.sort((a, b) => b.servers.exact.size - a.servers.exact.size);
    return groups[0]!.port;
  };
  return { http: most(false), https: most(true), ports: [...new Set(compiled.table.listens.filter((g) => g.unixPath === undefined).map((g) => g.port))] };
}

/**
 * For each request: nginx's X-Srv and X-Loc (live or recorded), and
 * explain's server name and the place (FILE:LINE relative to the tree) of
 * the location it ends in, or of the server when no location matched.
 */
async function treeDifferential(t: PreparedTree, cases: readonly (readonly [string | null, string, ('https' | undefined)?])[]): Promise<void> {
  markTree(t.root, t.root);
  const { http, https, ports } = await treePorts(t);
  const live = ORACLE
    ? async () => {
        const server = await startServer(ORACLE!, t.prefix, t.conf, ports);
        try {
          const out: { srv: string; loc: string }[] = [];
          for (const [host, path, scheme] of cases) out.push(await marks(scheme ? https : http, path, host, scheme !== undefined));
          return out;
        } finally {
          await server.stop('SIGQUIT');
        }
      }
    : undefined;
  const nginx = await answer(nextKey(), live);
  for (let i = 0; i < cases.length; i++) {
    const [host, path, scheme] = cases[i]!;
    const e = scheme
      ? await explainIn(t.prefix, t.conf, `GET https://${host}${path}`, [], https)
      : await explainIn(t.prefix, t.conf, `GET ${path}`, host === null ? [] : [`Host: ${host}`], http);
    const last = e.locations[e.locations.length - 1];
    const place = last?.file ? `${relative(t.root, last.file)}:${last.line}` : `${relative(t.root, e.server.file)}:${e.server.line}`;
    assert.deepEqual({ srv: e.server.name, loc: place }, { srv: nginx[i]!.srv, loc: nginx[i]!.loc }, `${host ?? '(no host)'} ${path}: explain differs from nginx\n${JSON.stringify(e.locations, null, 2)}\n${e.server.why}`);
  }
}

describe('jinx explain', () => {
  after(cleanup);

  it('names the server and location nginx chooses, for every selection rule', async () => {
    const explained: Explanation[] = [];
    const run = await differential({ conf: SELECTION_CONF, files: { 'www/index.html': 'index\n' } }, async (side) => {
      const bodies: string[] = [];
      for (const [host, path] of SELECTION_CASES) bodies.push((await get10(side.port, path, host)).body);
      if (side.kind === 'jinx') {
        for (const [host, path] of SELECTION_CASES) {
          explained.push(await explainIn(side.prefix, join(side.prefix, 'nginx.conf'), `GET ${path}`, host === null ? [] : [`Host: ${host}`], side.port));
        }
      }
      return bodies;
    });
    assert.deepEqual(run.jinx.result, run.nginx.result, 'jinx serving the configuration answers as nginx');
    SELECTION_CASES.forEach(([host, path, serverRule, locationRule], i) => {
      const e = explained[i]!;
      const want = expectedOf(run.nginx.result[i]!);
      const what = `${host ?? '(no host)'} ${path}`;
      assert.equal(e.server.name, want.server, `${what}: server (${e.server.why})`);
      assert.equal(lastLocation(e), want.location, `${what}: location (${JSON.stringify(e.locations)})`);
      assert.equal(e.server.rule, serverRule, `${what}: ${e.server.why}`);
      assert.equal(e.locations[e.locations.length - 1]!.rule, locationRule, `${what}: ${JSON.stringify(e.locations)}`);
    });
  });

  it('says why: the wildcard and regex that matched, the regex tried first, nesting, the prefix a regex won over, the rewrite step', async () => {
    const prefix = makePrefix({ 'nginx.conf': SELECTION_CONF({ port: 1, prefix: '/nonexistent' }) });
    const conf = join(prefix, 'nginx.conf');
    const wild = await explainIn(prefix, conf, 'GET http://x.a.wild.test/', [], 1);
    assert.match(wild.server.why, /leading wildcard "\*\.a\.wild\.test"/);
    const rx = await explainIn(prefix, conf, 'GET http://api1.rx.test/', [], 1);
    assert.match(rx.server.why, /regex "~\^api\\d\+\\\." is the first that matches/);
    const rx2 = await explainIn(prefix, conf, 'GET http://other.rx.test/', [], 1);
    assert.match(rx2.server.why, /tried before it: ~\^api/);
    const php = await explainIn(prefix, conf, 'GET http://exact.test/docs/a.php', [], 1);
    assert.match(php.locations[0]!.why, /first regex in configuration order/);
    assert.match(php.locations[0]!.why, /wins over the longest prefix "\/docs\/"/);
    const json = await explainIn(prefix, conf, 'GET http://exact.test/app/data.json', [], 1);
    assert.deepEqual(json.locations[0]!.nestedIn, ['/app/']);
    const old = await explainIn(prefix, conf, 'GET http://exact.test/old/guide?x=1', [], 1);
    assert.equal(old.steps[0]!.directive, 'rewrite ^/old/(.*)$ /docs/$1 last;');
    assert.equal(old.steps[0]!.uri, '/docs/guide');
    assert.deepEqual(old.locations.map((l) => l.location), ['/old/', '/docs/']);
    const none = await explainIn(prefix, conf, 'GET /', [], 1);
    assert.match(none.server.why, /no Host: the default server, "default_server" at .*nginx\.conf:\d+/);
  });

  it('the scenario tree: server and location as nginx chooses them', async () => {
    const t = await prepareScenario();
    await treeDifferential(t, [
      ['octoprint.example.com', '/sockjs/info'],
      ['octoprint.example.com', '/'],
      ['octoprint.example.com', '/.well-known/acme-challenge/'],
      ['octoprint.example.com', '/.well-known/acme-challenge/token'],
      ['www.example.com', '/'],
      ['example.com', '/a/b'],
      ['unknown.example.com', '/'],
      [null, '/'],
      ['unknown.example.com', '/index.php'],
      ['octoprint.example.com', '/sockjs/info', 'https'],
      ['grafana.example.com', '/api/health', 'https'],
      ['www.example.com', '/.well-known/acme-challenge/x', 'https'],
    ]);
  });

  it('Nginx Proxy Manager\'s tree: server and location as nginx chooses them', async () => {
    const t = await prepareProxyManager();
    await treeDifferential(t, [
      ['app.example.com', '/metrics'],
      ['www.app.example.com', '/'],
      ['git.example.org', '/api'],
      ['git.example.org', '/api/v1'],
      ['git.example.org', '/static/app.css'],
      ['old.example.com', '/'],
      ['example.net', '/page'],
      ['nobody.example', '/'],
      ['app.example.com', '/.well-known/acme-challenge/x'],
      ['app.example.com', '/.well-known/acme-challenge/'],
      ['app.example.com', '/metrics', 'https'],
      ['app.example.com', '/', 'https'],
      ['www.app.example.com', '/.well-known/acme-challenge/x', 'https'],
      ['app.example.com', '/.well-known/acme-challenge/', 'https'],
    ]);
  });

  it('the status nginx answers after error_page: a redirect elsewhere (302 unless =code is one), a page served with the error\'s status, =code, =', async () => {
    const conf = ({ port, prefix }: { port: number; prefix: string }): string => httpConf(`
  server {
    listen 127.0.0.1:${port};
    root ${prefix}/www;
    location /a/ { error_page 404 =200 http://example.com/x; }
    location /b/ { error_page 404 =301 http://example.com/x; }
    location /c/ { error_page 404 /err.html; }
    location /d/ { error_page 404 =200 /err.html; }
    location /e/ { error_page 404 = /gone; }
    location = /gone { return 410; }
    location /f/ { deny all; error_page 403 /text; }
    location = /text { return 200 "text"; }
  }
`);
    const paths = ['/a/missing', '/b/missing', '/c/missing', '/d/missing', '/e/missing', '/f/x'];
    const explained: (number | null)[] = [];
    const run = await differential({ conf, files: { 'www/err.html': 'error page\n' } }, async (side) => {
      const statuses: number[] = [];
      for (const path of paths) statuses.push((await get10(side.port, path, 'localhost')).status);
      if (side.kind === 'jinx') {
        for (const path of paths) explained.push((await explainIn(side.prefix, join(side.prefix, 'nginx.conf'), `GET ${path}`, ['Host: localhost'], side.port)).status);
      }
      return statuses;
    });
    assert.deepEqual(run.jinx.result, run.nginx.result, 'jinx serving the configuration answers as nginx');
    assert.deepEqual(explained, run.nginx.result, `explain's statuses for ${paths.join(' ')}`);
  });

  it('--format json: request, listen, server, steps, locations, access, handler, directives with file:line', () => {
    const prefix = makePrefix({
      'nginx.conf': `events {}
http {
    proxy_set_header X-From http;
    server { listen 127.0.0.1:1; server_name other.test; }
    server {
        listen 127.0.0.1:1;
        server_name api.test;
        location /api/ {
            allow 127.0.0.0/8;
            deny all;
            proxy_pass http://127.0.0.1:2/v1/;
        }
    }
}
`,
    });
    const r = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nginx.conf', 'GET http://api.test:1/api/users?id=7', '-H', 'X-Trace: abc', '--addr', '127.0.0.9', '--format', 'json']);
    assert.equal(r.status, 0, r.stderr);
    const e = JSON.parse(r.stdout) as Explanation;
    assert.deepEqual(Object.keys(e), ['request', 'listen', 'server', 'realip', 'steps', 'locations', 'access', 'handler', 'status', 'notes', 'directives']);
    assert.equal(e.request.uri, '/api/users');
    assert.equal(e.request.args, 'id=7');
    assert.equal(e.listen.address, '127.0.0.1:1');
    assert.deepEqual([e.server.name, e.server.rule], ['api.test', 'exact']);
    assert.deepEqual([e.locations[0]!.location, e.locations[0]!.rule, e.locations[0]!.line], ['/api/', 'prefix', 8]);
    assert.equal(e.access.decision, 'allowed');
    assert.match(e.access.lines[0]!, /^allow 127\.0\.0\.0\/8; \(.*nginx\.conf:9\) matches 127\.0\.0\.9: allowed$/);
    assert.equal(e.handler.kind, 'proxy_pass');
    assert.ok(e.handler.lines.includes('proxy_pass → http://127.0.0.1:2/v1/users?id=7'), e.handler.lines.join('\n'));
    assert.ok(e.handler.lines.includes('header: X-From: http'), e.handler.lines.join('\n'));
    assert.ok(e.handler.lines.includes('header: X-Trace: abc'), e.handler.lines.join('\n'));
    const from = Object.fromEntries(e.directives.map((d) => [d.directive, d.from]));
    assert.equal(from['proxy_pass http://127.0.0.1:2/v1/;'], 'here');
    assert.equal(from['proxy_set_header X-From http;'], 'inherited from http');
    const denied = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nginx.conf', 'GET http://api.test:1/api/', '--addr', '10.0.0.1', '--format', 'json']);
    const d = JSON.parse(denied.stdout) as Explanation;
    assert.equal(d.access.decision, '403');
    assert.equal(d.status, 403);
    assert.match(d.access.lines[1]!, /^deny all; \(.*nginx\.conf:10\) matches 10\.0\.0\.1: 403/);
  });

  it('text: one line per decision', () => {
    const prefix = makePrefix({ 'nginx.conf': 'events {}\nhttp {\n    server {\n        listen 127.0.0.1:1;\n        server_name t.test;\n        location = /x { return 204; }\n    }\n}\n' });
    const r = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nginx.conf', 'GET http://t.test:1/x']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^listen {4}127\.0\.0\.1:1 \(.*nginx\.conf:4\): port 1 \(from the URL\)$/m);
    assert.match(r.stdout, /^server {4}"t\.test" \(.*nginx\.conf:3\): the only server on 127\.0\.0\.1:1: nginx does not compare names$/m);
    assert.match(r.stdout, /^location {2}"= \/x" \(.*nginx\.conf:6\) for \/x: exact match "= \/x": the search stops there$/m);
    assert.match(r.stdout, /^ {2}rewrite: return 204; \(.*nginx\.conf:6\): applies → \/x$/m);
    assert.match(r.stdout, /^status {4}204$/m);
  });

  it('the handler of uwsgi_pass (its params), memcached_pass (its key) and dav_methods (the file a PUT writes)', () => {
    const prefix = makePrefix({ 'nginx.conf': `events {}
http {
    server {
        listen 127.0.0.1:1;
        server_name t.test;
        root /srv/www;
        location /app/ { uwsgi_param PATH_INFO $document_uri; uwsgi_pass uwsgi://127.0.0.1:3031; }
        location /cached/ { set $memcached_key "page:$uri"; memcached_pass 127.0.0.1:11211; }
        location /files/ { dav_methods PUT DELETE; }
    }
}
` });
    const text = (request: string): string => {
      const r = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nginx.conf', request]);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    assert.match(text('GET http://t.test:1/app/x'), /^ +param: PATH_INFO = \/app\/x$/m);
    assert.match(text('GET http://t.test:1/cached/y'), /^ +key: page:\/cached\/y$/m);
    assert.match(text('PUT http://t.test:1/files/new.txt'), /^ +dav_methods: PUT acts on \/srv\/www\/files\/new\.txt$/m);
  });

  it('the handler of grpc_pass: the upstream, the HTTP/2 pseudo-headers and the headers sent', () => {
    const prefix = makePrefix({ 'nginx.conf': `events {}
http {
    upstream backends { server 127.0.0.1:50051; server 127.0.0.1:50052; }
    server {
        listen 127.0.0.1:1;
        server_name t.test;
        grpc_set_header X-Real-IP $remote_addr;
        location /api.Echo/ { grpc_pass grpcs://127.0.0.1:9000; }
        location /kept/ { grpc_set_header Host backend.test; grpc_pass backends; }
    }
}
` });
    const text = (request: string): string => {
      const r = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nginx.conf', request]);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const direct = text('POST http://t.test:1/api.Echo/Say');
    assert.match(direct, /^handler {3}grpc_pass\n {10}grpc_pass → grpcs:\/\/127\.0\.0\.1:9000$/m);
    assert.match(direct, /^ +request: HTTP\/2 :method POST, :path \/api\.Echo\/Say, :authority 127\.0\.0\.1:9000$/m);
    assert.match(direct, /^ +header: X-Real-IP: /m);
    const kept = text('POST http://t.test:1/kept/Say');
    assert.match(kept, /^ +upstream backends: 127\.0\.0\.1:50051, 127\.0\.0\.1:50052$/m);
    assert.match(kept, /^ +request: HTTP\/2 :method POST, :path \/kept\/Say$/m);
    assert.match(kept, /^ +header: Host: backend\.test$/m);
  });

  it('an `if` that matches and `limit_except` switch the settings in effect, as the runtime does', async () => {
    const prefix = makePrefix({
      'nginx.conf': `events {}
http {
    add_header X-Http 1;
    server {
        listen 127.0.0.1:1;
        location /a/ {
            set $flag "";
            if ($arg_x = 1) {
                add_header X-If 1;
                set $flag yes;
            }
            limit_except GET { deny all; }
            return 200 $flag;
        }
    }
}
`,
    });
    const conf = join(prefix, 'nginx.conf');
    const get = await explainIn(prefix, conf, 'GET http://a:1/a/b?x=1 HTTP/1.0');
    assert.deepEqual(get.steps.map((st) => [st.directive, st.matched]), [
      ['set $flag "";', true], ['if ($arg_x = 1) { … }', true], ['set $flag yes;', true], ['return 200 $flag;', true],
    ]);
    assert.equal(get.status, 200);
    assert.ok(get.notes.includes('rewrite: return 200 "yes"'), get.notes.join('\n'));
    assert.deepEqual(get.directives.filter((d) => d.from !== 'default').map((d) => [d.directive, d.from]), [['add_header X-If 1;', 'here']]);
    const other = await explainIn(prefix, conf, 'GET http://a:1/a/b');
    assert.deepEqual(other.directives.filter((d) => d.from !== 'default').map((d) => [d.directive, d.from]), [['add_header X-Http 1;', 'inherited from http']]);
    const post = await explainIn(prefix, conf, 'POST http://a:1/a/b');
    assert.equal(post.steps.length, 0, 'the limit_except block has no rewrite directives');
    assert.equal(post.access.decision, '403');
    assert.equal(post.status, 403);
  });

  it('a bad request line, a bad header, a missing file, a port nothing listens on: a message naming it, exit 1', () => {
    const prefix = makePrefix({ 'nginx.conf': 'events {}\nhttp { server { listen 127.0.0.1:1; } }\n' });
    const base = ['explain', '-p', `${prefix}/`, '-c', 'nginx.conf'];
    const bad = runJinx([...base, 'GET']);
    assert.equal(bad.status, 1);
    assert.equal(bad.stderr, `jinx explain: invalid request line "GET": expected METHOD and an absolute URL or a path, as in 'GET https://example.com/path?query'\n`);
    const rel = runJinx([...base, 'GET example.com/']);
    assert.equal(rel.status, 1);
    assert.match(rel.stderr, /^jinx explain: invalid request line "GET example\.com\/": "example\.com\/" is neither an http\(s\) URL nor a path/);
    const header = runJinx([...base, 'GET http://a:1/', '-H', 'NoColon']);
    assert.equal(header.status, 1);
    assert.equal(header.stderr, `jinx explain: invalid header "NoColon": expected 'Name: value'\n`);
    const missing = runJinx(['explain', '-p', `${prefix}/`, '-c', 'nope.conf', 'GET http://a:1/']);
    assert.equal(missing.status, 1);
    assert.equal(missing.stderr, `jinx explain: open() "${prefix}/nope.conf" failed (2: No such file or directory)\n`);
    const port = runJinx([...base, 'GET http://a/']);
    assert.equal(port.status, 1);
    assert.equal(port.stderr, 'jinx explain: no listen socket on port 80 (the http default); the configuration listens on: 127.0.0.1:1\n');
    assert.equal(bad.stdout + missing.stdout + port.stdout, '');
  });
});
