/**
 * Upstream groups with failing servers, differential against nginx:
 * `proxy_next_upstream` (errors, timeouts, response statuses,
 * `non_idempotent`, `off`), `proxy_next_upstream_tries`, `max_fails` and
 * `fail_timeout`, `backup` and `down` servers, and `no live upstreams`. Each
 * case compares the statuses, the server that answered, `$upstream_addr` /
 * `$upstream_status`, and the exact error-log lines.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { freePort, cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side } from '../helpers/differential.js';
import { echoUpstream, scriptedUpstream } from '../helpers/upstreams.js';

/** What a client sees of one proxied request: status, the upstream that answered (its echo name), the `X-Upstream` header. */
interface Seen {
  readonly status: number;
  readonly from: string | undefined;
  readonly upstream: string | undefined;
}

async function seen(s: Side, path: string, method = 'GET'): Promise<Seen> {
  const resp = await s.get(path, method === 'GET' ? {} : { method, body: 'payload' });
  let from: string | undefined;
  if (resp.headers['content-type'] === 'application/json') from = (JSON.parse(resp.body) as { name: string }).name;
  return { status: resp.status, from, upstream: resp.headers['x-upstream'] };
}

/** Lets the tests' ports show as names in assertions. */
const ADD_UPSTREAM = 'add_header X-Upstream "$upstream_addr | $upstream_status" always;';

describe('upstream retries and failing servers (differential)', () => {
  after(cleanup);

  it('tries the next server after connect() failed, disables the failed one, uses backups, says "no live upstreams" when none is left, and numbers connections as nginx', async () => {
    const ok = await echoUpstream('ok');
    const [r1, r2] = [await freePort(), await freePort()];
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream two { server 127.0.0.1:${r1}; server 127.0.0.1:${ok.port}; }
  upstream dead { server 127.0.0.1:${r1}; server 127.0.0.1:${r2}; }
  upstream spare { server 127.0.0.1:${r2}; server 127.0.0.1:${ok.port} backup; }
  upstream off { server 127.0.0.1:${ok.port} down; }
  server { listen 127.0.0.1:${port}; server_name retry.test; ${ADD_UPSTREAM}
    location /two/ { proxy_pass http://two; }
    location /dead/ { proxy_pass http://dead; }
    location /spare/ { proxy_pass http://spare; }
    location /off/ { proxy_pass http://off; }
  }`, { oneWorker: true }),
    }, async (s) => ({
      two: await seen(s, '/two/1'),
      twoAgain: await seen(s, '/two/2'),
      dead: await seen(s, '/dead/1'),
      deadAgain: await seen(s, '/dead/2'),
      spare: await seen(s, '/spare/1'),
      off: await seen(s, '/off/1'),
    }));
    const n = run.nginx.result;
    assert.deepEqual(n.two, { status: 200, from: 'ok', upstream: `127.0.0.1:${r1}, 127.0.0.1:${ok.port} | 502, 200` });
    assert.equal(n.twoAgain.upstream, `127.0.0.1:${ok.port} | 200`);
    assert.equal(n.dead.status, 502);
    assert.equal(n.deadAgain.status, 502);
    assert.equal(n.spare.from, 'ok');
    assert.equal(n.off.status, 502);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[warn] *CONN upstream server temporarily disabled while connecting to upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN no live upstreams while connecting to upstream') && l.includes('upstream: "http://dead/dead/2"')));
    assertSameAsNginx(run);
    // upstream connections take connection numbers too: the *N of later clients tell how many were opened
    const numbers = (lines: string[]): number[] => {
      const ns = lines.filter((l) => l.includes('request: "')).map((l) => Number(/\*(\d+) /.exec(l)![1]));
      return ns.map((n) => n - ns[0]!);
    };
    assert.deepEqual(numbers(run.jinx.file('logs/error.log')), numbers(run.nginx.file('logs/error.log')));
  });

  it('passes a request on for a status named in proxy_next_upstream, and answers with the status otherwise', async () => {
    const ok = await echoUpstream('ok');
    const busy = await echoUpstream('busy', (_req, res) => {
      res.writeHead(503, { 'Content-Type': 'text/plain', 'Content-Length': '5' });
      res.end('busy\n');
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream retried { server 127.0.0.1:${busy.port}; server 127.0.0.1:${ok.port}; }
  upstream passed { server 127.0.0.1:${busy.port}; server 127.0.0.1:${ok.port}; }
  server { listen 127.0.0.1:${port}; server_name retry.test; ${ADD_UPSTREAM}
    location /retried/ { proxy_pass http://retried; proxy_next_upstream error timeout http_503; }
    location /passed/ { proxy_pass http://passed; }
  }`),
    }, async (s) => ({ retried: await seen(s, '/retried/'), passed: await seen(s, '/passed/') }));
    assert.deepEqual(run.nginx.result.retried, { status: 200, from: 'ok', upstream: `127.0.0.1:${busy.port}, 127.0.0.1:${ok.port} | 503, 200` });
    const { passed } = run.nginx.result;
    assert.deepEqual([passed.status, passed.from, passed.upstream], [503, undefined, `127.0.0.1:${busy.port} | 503`]);
    assertSameAsNginx(run);
  });

  it('does not pass on a POST that reached a server unless non_idempotent; off and proxy_next_upstream_tries 1 stop at the first server', async () => {
    const ok = await echoUpstream('ok');
    // reads the request, then closes without answering
    const closer = await scriptedUpstream((_line, sock) => sock.destroy());
    const refused = await freePort();
    const group = (name: string, first: number): string => `upstream ${name} { server 127.0.0.1:${first}; server 127.0.0.1:${ok.port}; }`;
    const run = await differential({
      conf: ({ port }) => httpConf(`
  ${group('post', closer.port)}
  ${group('idempotent', closer.port)}
  ${group('get', closer.port)}
  ${group('off', refused)}
  ${group('tries', refused)}
  server { listen 127.0.0.1:${port}; server_name retry.test; ${ADD_UPSTREAM}
    location /post/ { proxy_pass http://post; }
    location /idempotent/ { proxy_pass http://idempotent; proxy_next_upstream error timeout non_idempotent; }
    location /get/ { proxy_pass http://get; }
    location /off/ { proxy_pass http://off; proxy_next_upstream off; }
    location /tries/ { proxy_pass http://tries; proxy_next_upstream_tries 1; }
  }`),
    }, async (s) => ({
      post: await seen(s, '/post/', 'POST'),
      idempotent: await seen(s, '/idempotent/', 'POST'),
      get: await seen(s, '/get/'),
      off: await seen(s, '/off/'),
      tries: await seen(s, '/tries/'),
    }));
    const n = run.nginx.result;
    assert.equal(n.post.status, 502);
    assert.equal(n.idempotent.from, 'ok');
    assert.equal(n.get.from, 'ok');
    assert.equal(n.off.status, 502);
    assert.equal(n.tries.status, 502);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream prematurely closed connection while reading response header from upstream')
      && l.includes('request: "POST /post/ HTTP/1.1"')));
    assertSameAsNginx(run);
  });

  it('counts max_fails within fail_timeout and tries a disabled server again once fail_timeout has passed', async () => {
    const ok = await echoUpstream('ok');
    const refused = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream mf { server 127.0.0.1:${refused} max_fails=2 fail_timeout=1s; server 127.0.0.1:${ok.port}; }
  server { listen 127.0.0.1:${port}; server_name retry.test; ${ADD_UPSTREAM}
    location / { proxy_pass http://mf; }
  }`, { oneWorker: true }),
    }, async (s) => {
      const before: string[] = [];
      for (let i = 0; i < 5; i++) before.push((await seen(s, `/${i}`)).upstream ?? '');
      await new Promise((res) => setTimeout(res, 2500));
      const afterTimeout: string[] = [];
      for (let i = 0; i < 3; i++) afterTimeout.push((await seen(s, `/after/${i}`)).upstream ?? '');
      return { before, afterTimeout };
    });
    const retriedBefore = run.nginx.result.before.filter((u) => u.startsWith(`127.0.0.1:${refused},`)).length;
    // two failures disable the server: the last requests before the pause all go to the good one
    assert.equal(retriedBefore, 2);
    assert.ok(run.nginx.result.before.at(-1) === `127.0.0.1:${ok.port} | 200`);
    assert.ok(run.nginx.result.afterTimeout.some((u) => u === `127.0.0.1:${refused}, 127.0.0.1:${ok.port} | 502, 200`));
    assertSameAsNginx(run);
  });

  it('answers an intercepted upstream error with the error_page and keeps serving other locations', async () => {
    const ok = await echoUpstream('ok');
    const failing = await echoUpstream('failing', (_req, res) => {
      res.writeHead(500, { 'Content-Type': 'text/plain', 'Content-Length': '6' });
      res.end('oops!\n');
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; server_name retry.test;
    location /intercepted/ { proxy_pass http://127.0.0.1:${failing.port}; proxy_intercept_errors on; error_page 500 /oops.html; }
    location /plain/ { proxy_pass http://127.0.0.1:${failing.port}; error_page 500 /oops.html; }
    location = /oops.html { return 200 "intercepted\\n"; }
    location /ok/ { proxy_pass http://127.0.0.1:${ok.port}; }
  }`),
    }, async (s) => ({
      intercepted: await s.get('/intercepted/'),
      plain: await s.get('/plain/'),
      ok: (await seen(s, '/ok/')).from,
    }));
    assert.equal(run.nginx.result.intercepted.body, 'intercepted\n');
    assert.equal(run.nginx.result.plain.body, 'oops!\n');
    assert.equal(run.nginx.result.ok, 'ok');
    assertSameAsNginx(run);
  });

  it('keeps the upstream\'s WWW-Authenticate headers with the error_page of an intercepted 401', async () => {
    const auth = await echoUpstream('auth', (req, res) => {
      const headers: Record<string, string | string[]> = { 'Content-Type': 'text/plain', 'Content-Length': '6' };
      headers['WWW-Authenticate'] = req.url === '/multi' ? ['Basic realm="a"', 'Bearer'] : 'Basic realm="up"';
      res.writeHead(req.url === '/forbidden' ? 403 : 401, headers);
      res.end('nope!\n');
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port}; server_name retry.test; root html;
    location / { proxy_pass http://127.0.0.1:${auth.port}; proxy_intercept_errors on; proxy_hide_header WWW-Authenticate; error_page 401 403 /page; }
    location /static/ { proxy_pass http://127.0.0.1:${auth.port}/; proxy_intercept_errors on; error_page 401 /page.txt; }
    location = /page { return 200 "intercepted\\n"; }
  }`),
      files: { 'html/page.txt': 'static page\n' },
    }, async (s) => ({
      one: await s.get('/one'),
      multi: await s.get('/multi'),
      forbidden: await s.get('/forbidden'),
      static: await s.get('/static/one'),
    }));
    assert.equal(run.nginx.result.one.headers['www-authenticate'], 'Basic realm="up"');
    assert.equal(run.nginx.result.multi.headers['www-authenticate'], 'Basic realm="a", Bearer');
    assertSameAsNginx(run);
  });
});
