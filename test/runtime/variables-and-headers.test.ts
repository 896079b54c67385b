/**
 * Variables and the headers module, differential against nginx: what a
 * response carries for `$arg_`, repeated request headers, `$limit_rate`,
 * `$sent_http_*`, the access log's `-` and empty values, `expires` in all its
 * forms, `add_header` replacing `ETag` and sanitizing values, header values
 * with control bytes, `add_trailer` with `$sent_trailer_*`, and what a refused
 * request logs.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Snap } from '../helpers/differential.js';

/** A raw HTTP/1.1 request with `Connection: close` and extra header lines. */
const rawGet = (path: string, ...headers: string[]): string =>
  `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

/** A response with its headers sorted by name (where node:http puts `Connection: close` is not compared here). */
function sorted(r: Snap): Snap {
  return { ...r, headers: Object.fromEntries(Object.entries(r.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
}

/** The value of header `name` in a raw response, up to its CRLF (a bare CR or LF in it kept). */
function rawHeader(raw: string, name: string): string | undefined {
  return new RegExp(`\r\n${name}: ([^]*?)\r\n`, 'i').exec(raw)?.[1];
}

describe('variables (differential)', () => {
  after(cleanup);

  it('$arg_ with an empty name, repeated request headers joined, $limit_rate stored by set, $http2 empty over HTTP/1.1', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location /v { return 200 "arg:[$arg_l][$arg_] ua:[$http_user_agent] ct:[$content_type] ref:[$http_referer] c:[$http_cookie] ca:[$cookie_a] h2:[$http2] ia:[$is_args]\\n"; }
    location /lr { set $limit_rate $arg_l; add_header X-Rate $limit_rate; return 204; }
  }`),
    }, async (s) => ({
      args: await s.raw(rawGet('/v?l=42')),
      repeated: await s.raw(rawGet('/v', 'User-Agent: foo', 'User-Agent: bar', 'Content-Type: a', 'Content-Type: b', 'Referer: x', 'Referer: y',
        'Cookie: a=1, b=2; c=3', 'Cookie: d=4')),
      rate: sorted(await s.get('/lr?l=40k')),
      badRate: sorted(await s.get('/lr')),
    }));
    assert.match(run.jinx.result.args!.body, /^arg:\[42\]\[\] /);
    assert.match(run.jinx.result.repeated!.body, /ua:\[foo, bar\] ct:\[a, b\] ref:\[x, y\] c:\[a=1, b=2; c=3; d=4\] ca:\[1, b=2\]/);
    assert.equal(run.jinx.result.rate.headers['x-rate'], '40960');
    assert.ok(run.jinx.errorLog.some((l) => l.startsWith('[error] *CONN invalid $limit_rate ""')), run.jinx.errorLog.join('\n'));
    assertSameAsNginx(run);
  });

  it('$request_port is the port of the Host header or the request line, leading zeros dropped, empty for none or 0; a Host port past 65535 is 400', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost a.test;
    location / { return 200 "[$request_port][$host]\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, string> = {};
      for (const host of ['a.test', 'a.test:8080', 'a.test:08080', 'a.test:0', 'a.test:65535', 'a.test:65536', 'a.test:99999999999', '[::1]:443', '[::1]', 'a.test:']) {
        const r = await s.raw(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
        out[host] = `${r?.status} ${r?.body}`;
      }
      const line = await s.raw('GET http://a.test:8443/ HTTP/1.1\r\nHost: b.test:81\r\nConnection: close\r\n\r\n');
      out['request line'] = `${line?.status} ${line?.body}`;
      return out;
    });
    assert.equal(run.jinx.result['a.test:08080'], '200 [8080][a.test]\n');
    assert.equal(run.jinx.result['request line'], '200 [8443][a.test]\n');
    assertSameAsNginx(run);
  });

  it('the access log prints - for a variable not found and nothing for an empty one; $sent_http_* joins repeated headers', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format t "[$arg_a][$is_args][$args][$http_x][$sent_http_x][$sent_http_cache_control][$sent_http_link][$request_body]";
  server { listen 127.0.0.1:${port}; server_name localhost; access_log logs/t.log t;
    location / {
      add_header Cache-Control foo; add_header Cache-Control bar; add_header Link <a>; add_header Link <b>;
      add_header X-Sent-CC $sent_http_cache_control; add_header X-Sent-Link $sent_http_link;
      return 200 ok;
    }
  }`),
    }, async (s) => [
      sorted(await s.get('/?a=', { headers: { X: '' } })),
      sorted(await s.get('/')),
    ]);
    assert.equal(run.jinx.result[0]!.headers['x-sent-cc'], 'foo, bar');
    assert.deepEqual(run.jinx.file('logs/t.log'), run.nginx.file('logs/t.log'));
    assertSameAsNginx(run);
  });

  it('a request nginx refuses logs - for the parts it never read, and $request_length leaves out a discarded body', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format v '[$request_uri] [$request_method] [$server_protocol] [$uri] [$document_uri] [$request] $request_length $status';
  server { listen 127.0.0.1:${port}; server_name localhost; access_log logs/v.log v;
    location / { return 200 ok; }
  }`),
    }, async (s) => {
      for (const head of ['GET /r?a=\x01 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n', 'BLAH\r\n\r\n', 'GET /\r\n',
        'GET /../x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n',
        'POST /length HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc',
        'POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n']) {
        await rawExchange(s.port, head);
      }
    });
    const log = run.jinx.file('logs/v.log');
    assert.equal(log[0], '[-] [-] [-] [-] [-] [GET /r?a=\\x01 HTTP/1.1] 0 400');
    assert.equal(log[4], '[/length] [POST] [HTTP/1.1] [/length] [/length] [POST /length HTTP/1.1] 72 200');
    assert.deepEqual(log, run.nginx.file('logs/v.log'));
    assertSameAsNginx(run);
  });
});

describe('headers module (differential)', () => {
  after(cleanup);

  it('expires: epoch, max, off, access times, negative, 0, modified from Last-Modified, variables (invalid ones set nothing)', async () => {
    const run = await differential({
      files: { 'f.txt': 'file\n' },
      conf: ({ port, prefix }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost; root ${prefix};
    location = /epoch { expires epoch; return 200 x; }
    location = /max { expires max; return 200 x; }
    location = /off { add_header Cache-Control keep; expires off; return 200 x; }
    location = /access { add_header X y; expires 2048; return 200 x; }
    location = /negative { expires -1h; return 200 x; }
    location = /zero { expires 0; return 200 x; }
    location = /f.txt { expires modified 1h; }
    location = /notfound { expires 1h; return 404; }
    location = /var { expires $arg_e; return 200 x; }
    location = /varmod { expires modified $arg_e; return 200 x; }
  }`),
    }, async (s) => {
      const out: Record<string, Record<string, string | undefined>> = {};
      const paths = ['/epoch', '/max', '/off', '/access', '/negative', '/zero', '/f.txt', '/notfound', '/var?e=epoch', '/var?e=max', '/var?e=off', '/var?e=2048',
        '/var?e=-2048', '/var?e=bad', '/var', '/varmod?e=epoch', '/varmod?e=2048'];
      for (const p of paths) {
        const r = await s.get(p);
        // an Expires computed from now is compared as present; one from a date (epoch, max, the file's mtime) whole
        const expires = r.headers['expires'];
        const fromNow = expires !== undefined && !/1970|2037/.test(expires) && p !== '/f.txt';
        out[p] = { status: String(r.status), expires: fromNow ? 'NOW+' : expires, cc: r.headers['cache-control']?.replace(/max-age=3\d\d\d$/, 'max-age=ABOUT-AN-HOUR') };
      }
      return out;
    });
    assert.equal(run.jinx.result['/access']!.cc, 'max-age=2048');
    assert.equal(run.jinx.result['/var?e=bad']!.expires, undefined);
    assertSameAsNginx(run);
  });

  it('add_header replaces ETag and Last-Modified (an empty value removes them) and sends values with control bytes, CR and LF included', async () => {
    const run = await differential({
      files: { 'f.txt': 'file\n' },
      conf: ({ port, prefix }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost; root ${prefix};
    location = /f.txt { add_header ETag foo always; add_header ETag '' always; add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT"; }
    location /nl { add_header X-Foo "a\\nb\\rc"; return 204; }
    location /u { add_header X-URI "x $uri x"; return 204; }
  }`),
    }, async (s) => ({
      file: sorted(await s.get('/f.txt')),
      newline: rawHeader(await rawExchange(s.port, rawGet('/nl')), 'X-Foo'),
      control: rawHeader(await rawExchange(s.port, rawGet('/u/%02')), 'X-URI'),
    }));
    assert.equal(run.jinx.result.file.headers['etag'], undefined);
    assert.equal(run.jinx.result.control, 'x /u/\x02 x');
    assertSameAsNginx(run);
  });

  it('add_header_inherit and add_trailer_inherit: merge appends the list above, off drops it, on restores the array merge, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  add_header X-Http h; add_header_inherit merge;
  server { listen 127.0.0.1:${port}; server_name localhost; add_header X-Srv s;
    location /merge { add_header X-Loc l; return 200 "m"; }
    location /none { return 200 "n"; }
    location /off { add_header_inherit off; return 200 "o"; }
    location /on { add_header_inherit on; add_header X-Loc l; return 200 "on"; }
    location /on-empty { add_header_inherit on; return 200 "oe"; }
    location /nest { add_header X-Loc l; location /nest/in { add_header X-In i; return 200 "in"; } }
    location /nest-off { add_header_inherit off; add_header X-Loc l; location /nest-off/in { return 200 "in"; } }
    location /if { add_header X-Loc l; if ($arg_a) { add_header X-If i; } return 200 "if"; }
    location /same { add_header X-Srv s2; return 200 "s"; }
    location /tr { add_trailer X-T1 t; add_trailer_inherit merge; location /tr/in { add_trailer X-T2 t2; return 200 "tr"; } }
  }`),
    }, async (s) => {
      const out: Record<string, string> = {};
      for (const p of ['/merge', '/none', '/off', '/on', '/on-empty', '/nest/in', '/nest-off/in', '/if?a=1', '/if', '/same']) {
        const text = await rawExchange(s.port, rawGet(p));
        out[p] = text.split('\r\n').filter((l) => l.startsWith('X-')).join(', ');
      }
      const trailers = await rawExchange(s.port, rawGet('/tr/in'));
      out['/tr/in'] = trailers.slice(trailers.indexOf('\r\n\r\n'));
      return out;
    });
    assert.equal(run.jinx.result['/merge'], 'X-Loc: l, X-Srv: s, X-Http: h');
    assert.equal(run.jinx.result['/nest-off/in'], '');
    assertSameAsNginx(run);
  });

  it('add_trailer ends a chunked HTTP/1.1 response with its trailers, $sent_trailer_* seeing those before; not for a 404 without always', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location /t { add_trailer Foo foo; add_trailer Foo bar; add_trailer X-Sent $sent_trailer_foo; return 200 "body"; }
    location /nf { add_trailer X-T nf; return 404; }
  }`),
    }, async (s) => {
      const trailers = await rawExchange(s.port, rawGet('/t'));
      const http10 = await rawExchange(s.port, 'GET /t HTTP/1.0\r\nHost: localhost\r\n\r\n');
      const nf = await rawExchange(s.port, rawGet('/nf'));
      return {
        // the body part; node:http writes Transfer-Encoding in another place among the headers than nginx
        chunked: trailers.slice(trailers.indexOf('\r\n\r\n')),
        te: /Transfer-Encoding: chunked/.test(trailers),
        http10: http10.slice(http10.indexOf('\r\n\r\n')),
        nf: /X-T|Transfer-Encoding/.test(nf),
      };
    });
    assert.equal(run.jinx.result.chunked, '\r\n\r\n4\r\nbody\r\n0\r\nFoo: foo\r\nFoo: bar\r\nX-Sent: foo, bar\r\n\r\n');
    assertSameAsNginx(run);
  });
});
