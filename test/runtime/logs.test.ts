/**
 * Logs, differential against nginx: the access log in `combined` and Nginx
 * Proxy Manager's `proxy` and `standard` formats, `access_log off`, `if=`,
 * per-location logs, `gzip` buffers, files named by variables with and
 * without `open_log_file_cache`, `escape=json`; the error log's context
 * fields and `error_log` per server and location with their levels.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SHARED, cleanup, freePort } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, lineDiff, mainContext, TEMP_PATHS } from '../helpers/differential.js';
import { echoUpstream } from '../helpers/upstreams.js';

/** NPM's log formats (`log_format proxy …; log_format standard …;`), without its fallback access_log line. */
const NPM_FORMATS = readFileSync(join(SHARED, 'corpus/nginx-proxy-manager/rootfs/etc/nginx/conf.d/include/log-proxy.conf'), 'utf8')
  .split('\n').filter((l) => l.startsWith('log_format')).join('\n');

/** Asserts that the two sides wrote the same lines to a file of the prefix. */
function assertSameFile(run: { nginx: { file(rel: string): string[] }; jinx: { file(rel: string): string[] } }, rel: string): void {
  const diff = lineDiff(run.nginx.file(rel), run.jinx.file(rel));
  assert.ok(diff.length === 0, `${rel} differs:\n  ${diff.join('\n  ')}`);
}

/** An upstream answering every request with `upstream\n` (9 bytes, its length given). */
function upstreamNineBytes(): ReturnType<typeof echoUpstream> {
  return echoUpstream('up', (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '9' });
    res.end('upstream\n');
    return true;
  });
}

describe('access log (differential)', () => {
  after(cleanup);

  it('writes combined, and NPM\'s proxy and standard formats, like nginx', async () => {
    const up = await upstreamNineBytes();
    const run = await differential({
      conf: ({ port }) => httpConf(`${NPM_FORMATS}
  server { listen 127.0.0.1:${port}; server_name log.test; root html;
    set $server "127.0.0.1"; set $port ${up.port}; set $forward_scheme http;
    access_log logs/combined.log;
    access_log logs/proxy.log proxy;
    access_log logs/standard.log standard;
    location /app/ { proxy_pass $forward_scheme://$server:$port$request_uri; }
    location /file/ { }
    location = /ret { return 200 "ret\\n"; }
  }`),
      files: { 'html/file/a.txt': 'file a\n' },
      literals: { UPSTREAM_PORT: up.port },
    }, async (s) => {
      await s.get('/app/x?q=1', { headers: { Host: 'log.test', 'User-Agent': 'agent "quoted"', Referer: 'http://ref.test/page' } });
      await s.get('/file/a.txt', { headers: { Host: 'Log.Test:8080' } });
      await s.get('/file/a.txt', { method: 'HEAD', headers: { Host: 'log.test' } });
      await s.get('/ret?a=%20b', { method: 'POST', body: 'data', headers: { Host: 'log.test', 'User-Agent': 'ua/1' } });
      return null;
    });
    assert.match(run.nginx.file('logs/combined.log')[0]!, /^127\.0\.0\.1 - - \[TIME\] "GET \/app\/x\?q=1 HTTP\/1\.1" 200 9 "http:\/\/ref\.test\/page" "agent \\x22quoted\\x22"$/);
    assert.match(run.nginx.file('logs/proxy.log')[0]!, /^\[TIME\] - 200 200 - GET http log\.test "\/app\/x\?q=1" \[Client 127\.0\.0\.1\] \[Length 9\] \[Gzip -\] \[Sent-to 127\.0\.0\.1\] "agent \\x22quoted\\x22" "http:\/\/ref\.test\/page"$/);
    for (const f of ['logs/combined.log', 'logs/proxy.log', 'logs/standard.log']) assertSameFile(run, f);
  });

  it('logs a proxied response\'s $upstream_response_time and $upstream_header_time as seconds, also when its body came with its header, as nginx', async () => {
    const up = await upstreamNineBytes();
    const run = await differential({
      // each time as "s" when it is seconds with milliseconds (the line is then the same from run to run)
      conf: ({ port }) => httpConf(`  map $upstream_response_time $response_time { ~^\\d+\\.\\d\\d\\d$ s; default $upstream_response_time; }
  map $upstream_header_time $header_time { ~^\\d+\\.\\d\\d\\d$ s; default $upstream_header_time; }
  map $upstream_connect_time $connect_time { ~^\\d+\\.\\d\\d\\d$ s; default $upstream_connect_time; }
  log_format times $uri:$upstream_status:$response_time:$header_time:$connect_time;
  server { listen 127.0.0.1:${port}; access_log logs/times.log times;
    location /app/ { proxy_pass http://127.0.0.1:${up.port}; }
  }`),
      literals: { UPSTREAM_PORT: up.port },
    }, async (s) => {
      await s.get('/app/small');
      return null;
    });
    for (const side of [run.nginx, run.jinx]) {
      assert.deepEqual(side.file('logs/times.log'), ['/app/small:200:s:s:s']);
    }
  });

  it('honours access_log off, per-location logs and if=', async () => {
    const run = await differential({
      conf: ({ port }) => `${mainContext()}http {
  ${TEMP_PATHS}
  log_format short '$request_method $uri $status $arg_tag';
  map $status $loggable { ~^[23] 0; default 1; }
  access_log logs/http.log short;
  server { listen 127.0.0.1:${port}; server_name log.test;
    location /default/ { return 200 "d\\n"; }
    location /off/ { access_log off; return 200 "o\\n"; }
    location /own/ { access_log logs/own.log short; return 200 "own\\n"; }
    location /cond/ { access_log logs/errors-only.log short if=$loggable; return 200 "c\\n"; }
    location /cond-missing/ { access_log logs/errors-only.log short if=$loggable; return 404; }
  }
}`,
    }, async (s) => {
      for (const p of ['/default/?tag=1', '/off/?tag=2', '/own/?tag=3', '/cond/?tag=4', '/cond-missing/?tag=5']) await s.get(p, { headers: { Host: 'log.test' } });
      return null;
    });
    assert.deepEqual(run.nginx.file('logs/http.log'), ['GET /default/ 200 1']);
    for (const f of ['logs/http.log', 'logs/own.log', 'logs/errors-only.log']) assertSameFile(run, f);
  });
  it('writes a gzip log in members nginx can read, flushed by flush=', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format short '$uri:$status';
  server { listen 127.0.0.1:${port}; server_name log.test;
    location / { access_log logs/gz.log short gzip=6 buffer=1m flush=100ms; return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      await s.get('/one', { headers: { Host: 'log.test' } });
      await s.get('/two', { headers: { Host: 'log.test' } });
      await new Promise((res) => setTimeout(res, 500));
      const bytes = readFileSync(join(s.prefix, 'logs/gz.log'));
      return { magic: bytes.subarray(0, 2).toString('hex'), text: gunzipSync(bytes).toString('latin1') };
    });
    assert.deepEqual(run.nginx.result, { magic: '1f8b', text: '/one:200\n/two:200\n' });
    assert.deepEqual(run.jinx.result, run.nginx.result);
  });

  it('opens files named by variables per line, keeps those open_log_file_cache holds, and logs what it cannot open', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format short '$uri:$status';
  server { listen 127.0.0.1:${port}; server_name log.test;
    location /var { access_log logs/var_$arg_name short; return 200 "ok\\n"; }
    location /noroot { root /nonexistent; access_log logs/var_$arg_name short; return 200 "ok\\n"; }
    location /cache {
      open_log_file_cache max=3 inactive=20s valid=1m min_uses=2;
      access_log cachelogs/cache_$arg_name short;
      return 200 "ok\\n";
    }
  }`, { oneWorker: true }),
      dirs: ['html'],
    }, async (s) => {
      rmSync(join(s.prefix, 'cachelogs'), { recursive: true, force: true });
      mkdirSync(join(s.prefix, 'cachelogs'));
      const get = (path: string): Promise<unknown> => s.get(path, { headers: { Host: 'log.test' } });
      for (const name of ['', '0', 'a']) await get(`/var?name=${name}`);
      await get('/noroot?name=b');
      // a request is logged once its response is sent: the directory moves only after the last line is written
      const logged = (): Promise<void> => new Promise((res) => setTimeout(res, 300));
      for (const name of ['lru', 'lru', 'once', 'first', 'first', 'second', 'second']) await get(`/cache?name=${name}`);
      await logged();
      renameSync(join(s.prefix, 'cachelogs'), join(s.prefix, 'moved'));
      for (const name of ['lru', 'once', 'first', 'second']) await get(`/cache?name=${name}`);
      await logged();
      renameSync(join(s.prefix, 'moved'), join(s.prefix, 'cachelogs'));
      const count = (name: string): number => readFileSync(join(s.prefix, 'cachelogs', `cache_${name}`), 'latin1').split('\n').length - 1;
      return { lru: count('lru'), once: count('once'), first: count('first'), second: count('second') };
    });
    // what nginx-tests' access_log.t expects of nginx (the reference does not give it on every run: its cache
    // orders entries by access times in whole seconds)
    assert.deepEqual(run.jinx.result, { lru: 2, once: 1, first: 3, second: 3 });
    assert.deepEqual(run.nginx.file('logs/var_0'), ['/var:200']);
    for (const f of ['logs/var_', 'logs/var_0', 'logs/var_a', 'logs/var_b']) assertSameFile(run, f);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN testing "/nonexistent" existence failed (2: No such file or directory)')));
    const crit = (side: typeof run.nginx): string[] => side.errorLog.filter((l) => l.startsWith('[crit]') || l.startsWith('[error]'));
    assert.deepEqual(crit(run.jinx).filter((l) => !l.includes('cache_second')), crit(run.nginx).filter((l) => !l.includes('cache_second')));
  });

  it('escapes values with escape=json as nginx (upper-case \\u00XX)', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format json escape=json '{"uri":"$uri","a":"$arg_a"}';
  server { listen 127.0.0.1:${port}; server_name log.test; location / { access_log logs/json.log json; return 200 "ok\\n"; } }`),
    }, async (s) => {
      await s.get('/x%22y%1B%0A%5C?a=%E2%82%AC\\', { headers: { Host: 'log.test' } });
      return null;
    });
    assert.deepEqual(run.nginx.file('logs/json.log'), ['{"uri":"/x\\"y\\u001B\\n\\\\","a":"%E2%82%AC\\\\"}']);
    assertSameFile(run, 'logs/json.log');
  });
});

describe('error log (differential)', () => {
  after(cleanup);

  it('prints client, server, request, upstream, host and referrer as nginx does', async () => {
    const dead = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name first.test second.test; root html;
    location /up/ { proxy_pass http://127.0.0.1:${dead}/base/; }
  }
  server { listen 127.0.0.1:${port}; server_name ""; root html; }`),
    }, async (s) => ({
      plain: await s.get('/none?x=1', { headers: { Host: 'first.test' } }),
      alias: await s.get('/none', { headers: { Host: 'Second.Test:81' } }),
      referrer: await s.get('/none', { headers: { Host: 'first.test', Referer: 'http://ref.test/a "b"' } }),
      upstream: await s.get('/up/a?b=1', { headers: { Host: 'first.test', Referer: 'http://ref.test/' } }),
      http10: await s.raw('GET /none HTTP/1.0\r\n\r\n'),
      unnamed: await s.get('/none', { headers: { Host: 'other.test' } }),
    }));
    assert.ok(run.nginx.errorLog.some((l) => l.endsWith(`, upstream: "http://127.0.0.1:${dead}/base/a?b=1", host: "first.test", referrer: "http://ref.test/"`)));
    assertSameAsNginx(run);
  });

  it('writes to the error_log of the server and location, each with its level', async () => {
    const run = await differential({
      conf: ({ port }) => `${mainContext('warn')}http {
  ${TEMP_PATHS}
  access_log off;
  error_log logs/http.log error;
  server { listen 127.0.0.1:${port}; server_name a.test; root html;
    error_log logs/server-a.log warn;
    location /loc/ { error_log logs/loc.log crit; }
    location /two/ { error_log logs/two-1.log error; error_log logs/two-2.log info; }
    location /limited/ { deny all; }
  }
  server { listen 127.0.0.1:${port}; server_name b.test; root html; }
}`,
    }, async (s) => {
      for (const [host, path] of [['a.test', '/none'], ['a.test', '/loc/none'], ['a.test', '/two/none'], ['b.test', '/none'], ['a.test', '/limited/x']]) {
        await s.get(path!, { headers: { Host: host! } });
      }
      return null;
    });
    const files = ['logs/http.log', 'logs/server-a.log', 'logs/loc.log', 'logs/two-1.log', 'logs/two-2.log'];
    const strip = (lines: string[]): string[] => lines.map((l) => l.replace(/^(?:\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d|\[DATE\]) (\[\w+\]) (?:\d+#\d+|PID#TID): \*\d+ /, '$1 *CONN '))
      .filter((l) => l.includes('*CONN'));
    const diffs: string[] = [];
    for (const f of files) diffs.push(...lineDiff(strip(run.nginx.file(f)), strip(run.jinx.file(f))).map((d) => `${f}: ${d}`));
    assert.deepEqual(strip(run.nginx.file('logs/loc.log')), []);
    assert.equal(strip(run.nginx.file('logs/server-a.log')).length, 2);
    assert.ok(diffs.length === 0, `jinx differs from nginx:\n  ${diffs.join('\n  ')}`);
  });

  it('writes nginx\'s debug lines of the request head and location choice (server\'s log) and of its end (location\'s log) to error_logs of level debug only', async () => {
    const run = await differential({
      conf: ({ port }) => `${mainContext('warn')}http {
  ${TEMP_PATHS}
  access_log off;
  server { listen 127.0.0.1:${port}; server_name a.test;
    error_log logs/server.log debug;
    location /debug/ { error_log logs/debug.log debug; error_log logs/info.log info; return 200 "d\\n"; }
    location = /exact { error_log logs/debug.log debug; return 200 "e\\n"; }
  }
}`,
    }, async (s) => {
      await s.get('/debug/x?a=1', { headers: { Host: 'a.test', 'X-Probe': 'one' } });
      await s.get('/exact', { headers: { Host: 'a.test' } });
      return null;
    });
    const debugLines = (lines: string[]): string[] => lines.filter((l) => l.includes('[debug]')).map((l) => l.replace(/^.*?\[debug\] (?:\d+#\d+|PID#TID): \*\d+ /, ''));
    const wanted: [string, string[]][] = [
      ['logs/server.log', [
        'http request line: "GET /debug/x?a=1 HTTP/1.1"', 'http uri: "/debug/x"', 'http args: "a=1"', 'http exten: ""', 'http header: "X-Probe: one"',
        'http header done', 'using configuration "/debug/"', 'using configuration "=/exact"',
      ]],
      ['logs/debug.log', ['http close request', 'http log handler']],
    ];
    for (const [file, want] of wanted) {
      const jinx = debugLines(run.jinx.file(file));
      const nginx = new Set(debugLines(run.nginx.file(file)));
      for (const w of want) assert.ok(jinx.includes(w), `${file} of jinx has ${w}:\n  ${jinx.join('\n  ')}`);
      assert.deepEqual(jinx.filter((l) => !nginx.has(l)), [], `every debug line jinx writes to ${file} is one nginx writes there`);
    }
    assert.deepEqual(debugLines(run.jinx.file('logs/info.log')), []);
  });

  it('logs at info a client that closes its connection without a request, or after a keep-alive response', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name conn.test; location / { return 200 "ok\\n"; } }`),
    }, async (s) => {
      const { connect } = await import('node:net');
      const exchange = (data: string | undefined): Promise<void> => new Promise((res, rej) => {
        const sock = connect({ host: '127.0.0.1', port: s.port }, () => {
          if (data === undefined) sock.end();
          else sock.write(data);
        });
        sock.on('data', (d: Buffer) => { if (d.toString().includes('ok\n')) sock.end(); });
        sock.on('error', rej);
        sock.on('close', () => res());
        setTimeout(() => sock.destroy(), 3000);
      });
      await exchange(undefined);
      await exchange('GET / HTTP/1.1\r\nHost: conn.test\r\n\r\n');
      return null;
    });
    const lines = (all: readonly string[]): string[] => all.filter((l) => /closed (keepalive )?connection/.test(l));
    // the harness's readiness probe adds one "waiting for request" line on each side
    assert.deepEqual(lines(run.nginx.allErrorLog).map((l) => l.replace(/:\d+$/, ':PORT')), [
      '[info] *CONN client closed connection while waiting for request, client: 127.0.0.1, server: 127.0.0.1:PORT',
      '[info] *CONN client closed connection while waiting for request, client: 127.0.0.1, server: 127.0.0.1:PORT',
      '[info] *CONN client 127.0.0.1 closed keepalive connection',
    ]);
    assert.deepEqual(lines(run.jinx.allErrorLog), lines(run.nginx.allErrorLog));
  });
});
