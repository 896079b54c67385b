/**
 * Client connections and their limits, differential against nginx:
 * `worker_connections` (idle connections closed to make room with the
 * "reusing connections" warning, new ones refused when nothing can be
 * reused), `keepalive_timeout` with its `Keep-Alive` header,
 * `keepalive_requests`, `keepalive_time`, `keepalive_min_timeout` through a
 * graceful stop, `client_header_timeout`,
 * `send_timeout`, lingering close after a refused body (`lingering_time`,
 * `lingering_timeout`) and `reset_timedout_connection`, each with real slow
 * clients on 127.0.0.1: status, error-log lines, and when and how the
 * connection ends.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream, waitFor } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';
import { scriptedUpstream } from '../helpers/upstreams.js';
import { rawClient, sleep, statusOf, type RawClient } from '../helpers/slow-clients.js';

const HOST = 'conn.test';

/** `httpConf` with an `events` block of its own, on one worker (`worker_connections` counts each worker's). */
const withEvents = (events: string, body: string, opts: { accessLog?: string } = {}): string =>
  httpConf(body, { ...opts, oneWorker: true }).replace('events {}', `events { ${events} }`);

/** A GET on an open connection, keeping it alive. */
const get = (path: string, extra = ''): string => `GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\n${extra}\r\n`;

/** Waits until `c` has received `count` complete responses to small requests (their bodies end with "ok\n"). */
async function responses(c: RawClient, count: number, timeoutMs = 5000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const parts = c.received().split(/(?=HTTP\/1\.1 \d{3})/).filter((p) => p.endsWith('ok\n'));
    if (parts.length >= count || Date.now() > deadline) return parts;
    await sleep(10);
  }
}

/** The header lines that tell how a connection goes on: `Connection` and `Keep-Alive`. */
const connectionHeaders = (response: string): string[] =>
  response.split('\r\n').filter((l) => /^(connection|keep-alive):/i.test(l)).map((l) => l.toLowerCase());

/** Rounds a duration to the nearest half second, for comparing when connections closed. */
const halfSeconds = (ms: number): number => Math.round(ms / 500) / 2;

/** The error-log lines about `worker_connections`. */
const workerConnectionLines = (lines: readonly string[]): string[] => lines.filter((l) => l.includes('worker_connections'));

describe('connections (differential)', () => {
  after(cleanup);

  it('closes idle connections to make room when worker_connections runs out, with nginx\'s warning and no request fields', async () => {
    const run = await differential({
      conf: ({ port }) => withEvents('worker_connections 24;', `  server { listen 127.0.0.1:${port}; server_name ${HOST}; location / { return 200 "ok\\n"; } }`),
    }, async (s) => {
      // nginx warns at most once a second (ngx_drain_connections): the connections are made early in a second,
      // so that both servers reuse within the same one
      await sleep(1010 - (Date.now() % 1000));
      const idle: RawClient[] = [];
      for (let i = 0; i < 24; i++) {
        idle.push(await rawClient(s.port));
        await sleep(5);
      }
      const c = await rawClient(s.port);
      await c.send(get('/', 'Connection: close\r\n'));
      const end = await c.ended();
      await sleep(200);
      return { status: statusOf(end.text), closedIdle: idle.filter((x) => x.socket.readableEnded || x.socket.destroyed).length };
    });
    assert.equal(run.nginx.result.status, 200);
    assert.deepEqual(workerConnectionLines(run.nginx.allErrorLog), ['[warn] 24 worker_connections are not enough, reusing connections']);
    assert.deepEqual(workerConnectionLines(run.jinx.allErrorLog), workerConnectionLines(run.nginx.allErrorLog));
    assertSameAsNginx(run);
  });

  it('refuses a new connection with nginx\'s alert when every connection is busy and none can be reused', async () => {
    const silent = await scriptedUpstream(() => undefined);
    const run = await differential({
      conf: ({ port }) => withEvents('worker_connections 8;', `  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_read_timeout 3s; proxy_pass http://127.0.0.1:${silent.port}; }
  }`),
    }, async (s) => {
      const busy: RawClient[] = [];
      for (let i = 0; i < 3; i++) {
        const c = await rawClient(s.port);
        await c.send(get(`/busy/${i}`, 'Connection: close\r\n'));
        busy.push(c);
        await sleep(100);
      }
      const refused = await rawClient(s.port);
      await refused.send(get('/refused'));
      const end = await refused.ended(2000);
      return { refused: { text: end.text, closedAt: end.afterMs < 1000 }, busy: (await Promise.all(busy.map((b) => b.ended()))).map((e) => statusOf(e.text)) };
    });
    assert.deepEqual(run.nginx.result, { refused: { text: '', closedAt: true }, busy: [504, 504, 504] });
    assert.deepEqual(workerConnectionLines(run.nginx.allErrorLog), ['[alert] 8 worker_connections are not enough']);
    assert.deepEqual(workerConnectionLines(run.jinx.allErrorLog), workerConnectionLines(run.nginx.allErrorLog));
    // the three read timeouts, 100 ms apart, fire in one tick of undici's timers (README, Differences): their order is undici's
    assertSameAsNginx(run, { log: false });
    assert.deepEqual([...run.jinx.errorLog].sort(), [...run.nginx.errorLog].sort());
  });

  it('answers 500 with nginx\'s alert when no connection is left for the upstream, and counts upstream connections among worker_connections', async () => {
    const silent = await scriptedUpstream(() => undefined);
    const run = await differential({
      conf: ({ port }) => withEvents('worker_connections 7;', `  log_format st '$status $upstream_status';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    location / { proxy_read_timeout 2s; proxy_pass http://127.0.0.1:${silent.port}; }
  }`),
    }, async (s) => {
      // listening socket, the master's channel, then a client and an upstream connection per request
      const busy: RawClient[] = [];
      for (let i = 0; i < 3; i++) {
        const c = await rawClient(s.port);
        await c.send(get(`/busy/${i}`, 'Connection: close\r\n'));
        busy.push(c);
        await sleep(150);
      }
      return (await Promise.all(busy.map((b) => b.ended()))).map((e) => statusOf(e.text));
    });
    assert.deepEqual(run.nginx.result, [504, 504, 500]);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[alert] *CONN 7 worker_connections are not enough while connecting to upstream, client: 127.0.0.1')));
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('keeps a connection alive for keepalive_timeout with its Keep-Alive header, ends it after keepalive_requests, and not past keepalive_time', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { return 200 "ok\\n"; }
    location /header/ { keepalive_timeout 1s 7; return 200 "ok\\n"; }
    location /requests/ { keepalive_requests 2; return 200 "ok\\n"; }
    location /time/ { keepalive_time 1s; return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      // idle after a response: closed after keepalive_timeout
      const a = await rawClient(s.port);
      await a.send(get('/header/'));
      const [first] = await responses(a, 1);
      out.header = { headers: connectionHeaders(first ?? ''), closedAfter: halfSeconds((await a.ended()).afterMs) };
      const b = await rawClient(s.port);
      await b.send(get('/requests/'));
      await responses(b, 1);
      await b.send(get('/requests/'));
      const both = await responses(b, 2);
      out.requests = { headers: both.map(connectionHeaders), closed: halfSeconds((await b.ended(3000)).afterMs) < 2 };
      const c = await rawClient(s.port);
      await c.send(get('/time/'));
      await responses(c, 1);
      await sleep(1300);
      await c.send(get('/time/'));
      const later = await responses(c, 2);
      out.time = { headers: later.map(connectionHeaders), closed: halfSeconds((await c.ended(3000)).afterMs) < 3 };
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      header: { headers: ['connection: keep-alive', 'keep-alive: timeout=7'], closedAfter: 1 },
      requests: { headers: [['connection: keep-alive'], ['connection: close']], closed: true },
      time: { headers: [['connection: keep-alive'], ['connection: close']], closed: true },
    });
    assertSameAsNginx(run);
  });

  it('keeps a kept-alive connection through a graceful stop for keepalive_min_timeout, serving a request on it with Connection: close', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST}; keepalive_min_timeout 2s;
    location / { return 200 "ok\\n"; }
    location /none/ { keepalive_min_timeout 0; return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const kept = await rawClient(s.port);
      await kept.send(get('/'));
      await responses(kept, 1);
      const plain = await rawClient(s.port);
      await plain.send(get('/none/'));
      await responses(plain, 1);
      const stopping = s.server.stop('SIGQUIT');
      await sleep(700);
      const plainClosed = plain.socket.destroyed || plain.socket.readableEnded;
      await kept.send(get('/'));
      const both = await responses(kept, 2);
      await stopping;
      return { plainClosed, second: both[1] === undefined ? undefined : connectionHeaders(both[1]) };
    });
    assert.deepEqual(run.nginx.result, { plainClosed: true, second: ['connection: close'] });
    assertSameAsNginx(run);
  });

  it('ends keep-alive for POSTs from MSIE 6 and older, and for Safari where keepalive_disable says so', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { return 200 "ok\\n"; }
    location /safari { keepalive_disable safari; return 200 "ok\\n"; }
    location /none { keepalive_disable none; return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      const agents = { msie5: 'MSIE 5.0', msie6sv1: 'Mozilla/4.0 (compatible; MSIE 6.0; SV1)', msie7: 'MSIE 7.0', safari: 'Mac OS X Safari/7534.48.3', opera: 'MSIE 5.0 Opera' };
      for (const path of ['/', '/safari', '/none']) {
        for (const method of ['GET', 'POST']) {
          for (const [name, ua] of Object.entries(agents)) {
            const c = await rawClient(s.port);
            await c.send(`${method} ${path} HTTP/1.1\r\nHost: ${HOST}\r\nUser-Agent: ${ua}\r\nContent-Length: 0\r\n\r\n`);
            const [answer] = await responses(c, 1);
            out[`${method} ${path} ${name}`] = connectionHeaders(answer ?? '');
            c.socket.destroy();
          }
        }
      }
      return out;
    });
    assert.deepEqual(run.nginx.result['POST / msie5'], ['connection: close']);
    assert.deepEqual(run.nginx.result['GET /safari safari'], ['connection: close']);
    assertSameAsNginx(run, { log: false });
  });

  it('closes a connection whose request header does not arrive within client_header_timeout, logged at info', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status "$request"';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    client_header_timeout 1s;
    location / { return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const [name, sent] of [['nothing', ''], ['line', 'GET /partial'], ['headers', `GET /partial HTTP/1.1\r\nHost: ${HOST}\r\nX-Slow: 1`]] as const) {
        const c = await rawClient(s.port);
        if (sent) await c.send(sent);
        const end = await c.ended();
        out[name] = { text: end.text, reset: end.reset, closedAfter: halfSeconds(end.afterMs) };
      }
      return out;
    });
    const closed = { text: '', reset: false, closedAfter: 1 };
    assert.deepEqual(run.nginx.result, { nothing: closed, line: closed, headers: closed });
    const timedOut = '[info] *CONN client timed out (110: Operation timed out) while';
    assert.deepEqual(run.nginx.errorLog.filter((l) => l.startsWith(timedOut)).map((l) => l.replace(/:\d+$/, ':PORT')), [
      `${timedOut} waiting for request, client: 127.0.0.1, server: 127.0.0.1:PORT`,
      `${timedOut} reading client request line, client: 127.0.0.1, server: ${HOST}, request: "GET /partial"`,
      `${timedOut} reading client request headers, client: 127.0.0.1, server: ${HOST}, request: "GET /partial HTTP/1.1", host: "${HOST}"`,
    ]);
    assert.deepEqual(run.nginx.file('logs/access.log'), ['408 "GET /partial"', '408 "GET /partial HTTP/1.1"']);
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.jinx.errorLog, run.nginx.errorLog);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('times out a kept-alive connection\'s next request whose head stops coming after client_header_timeout, not after keepalive_timeout', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status "$request"';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    client_header_timeout 1s; keepalive_timeout 30s;
    location / { return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const c = await rawClient(s.port);
      // two whole requests on one connection, each after the response before it (kept alive), then one cut in its header
      await c.send(`GET /one HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      await waitFor(() => c.received().endsWith('ok\n'), 5000, 'the first response');
      await c.send(`GET /two HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      await waitFor(() => c.received().split('ok\n').length === 3, 5000, 'the second response');
      await c.send(`GET /partial HTTP/1.1\r\nHost: ${HOST}\r\n`);
      const end = await c.ended();
      return { responses: end.text.split('HTTP/1.1 200').length - 1, reset: end.reset, closedAfter: halfSeconds(end.afterMs) };
    });
    assert.deepEqual(run.nginx.result, { responses: 2, reset: false, closedAfter: 1 });
    assert.deepEqual(run.nginx.file('logs/access.log'), ['200 "GET /one HTTP/1.1"', '200 "GET /two HTTP/1.1"', '408 "GET /partial HTTP/1.1"']);
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.jinx.errorLog, run.nginx.errorLog);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('closes a connection whose client takes nothing for send_timeout, and resets timed-out connections with reset_timedout_connection', async () => {
    const body = Buffer.alloc(32 * 1024 * 1024, 0x62);
    const big = await startUpstream((_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    send_timeout 1s;
    location / { root www; }
    location /reset/ { reset_timedout_connection on; alias www/; }
    location /close/ { reset_timedout_connection on; return 444; }
    location /proxied/ { proxy_pass http://127.0.0.1:${big.port}/; }
  }`),
      files: { 'www/big.bin': 'b'.repeat(32 * 1024 * 1024) },
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const path of ['/big.bin', '/reset/big.bin', '/proxied/big.bin']) {
        const c = await rawClient(s.port, { paused: true });
        await c.send(get(path, 'Connection: close\r\n'));
        await sleep(3000);
        c.socket.resume();
        const end = await c.ended();
        // a reset drops what the client had not read yet: far less arrives
        out[path] = { status: statusOf(end.text), truncated: end.text.length < 32 * 1024 * 1024, lost: end.reset || end.text.length < 1024 * 1024 };
      }
      const c = await rawClient(s.port);
      await c.send(get('/close/'));
      const end = await c.ended();
      out['/close/'] = { text: end.text, reset: end.reset };
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      '/big.bin': { status: 200, truncated: true, lost: false },
      '/reset/big.bin': { status: 200, truncated: true, lost: true },
      '/proxied/big.bin': { status: 200, truncated: true, lost: false },
      '/close/': { text: '', reset: true },
    });
    const timedOut = run.nginx.errorLog.filter((l) => l.includes('client timed out (110: Operation timed out)'));
    assert.ok(timedOut.some((l) => l.includes('while sending response to client') && l.includes('request: "GET /big.bin HTTP/1.1"')));
    assert.ok(timedOut.some((l) => l.includes('while sending to client') && l.includes('request: "GET /proxied/big.bin HTTP/1.1"')));
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('keeps sending to a client that stops for less than send_timeout each time, though its stops add up to more', async () => {
    const body = Buffer.alloc(32 * 1024 * 1024, 0x62);
    const big = await startUpstream((_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status $body_bytes_sent';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    send_timeout 1s;
    location / { root www; }
    location /proxied/ { proxy_pass http://127.0.0.1:${big.port}/; }
  }`),
      files: { 'www/big.bin': 'b'.repeat(32 * 1024 * 1024) },
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const path of ['/big.bin', '/proxied/big.bin']) {
        const c = await rawClient(s.port, { paused: true });
        let taken = 0;
        c.socket.on('data', (d: Buffer) => { taken += d.length; });
        await c.send(get(path, 'Connection: close\r\n'));
        // three stops of 700 ms (2.1 s in all, against a send_timeout of 1 s), 2 MiB taken between them
        for (let stop = 0; stop < 3; stop++) {
          await sleep(700);
          const until = taken + 2 * 1024 * 1024;
          c.socket.resume();
          await waitFor(() => taken >= until || c.socket.destroyed, 10_000, `2 MiB more of ${path}`);
          c.socket.pause();
        }
        c.socket.resume();
        const end = await c.ended();
        out[path] = { status: statusOf(end.text), whole: end.text.length > body.length && end.text.endsWith('b'.repeat(64)) };
      }
      return out;
    });
    assert.deepEqual(run.nginx.result, { '/big.bin': { status: 200, whole: true }, '/proxied/big.bin': { status: 200, whole: true } });
    assert.ok(!run.nginx.errorLog.some((l) => l.includes('timed out')), run.nginx.errorLog.join('\n'));
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('answers 413 to a body that is still coming and reads the rest before closing (lingering close), for lingering_timeout between reads and lingering_time in all', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    client_max_body_size 1k; lingering_timeout 1s; lingering_time 2s;
    location / { return 200 "ok\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      // the whole body at once: the client gets the 413 and a clean close
      const whole = await rawClient(s.port);
      await whole.send(`POST /whole HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 300000\r\n\r\n${'w'.repeat(300_000)}`);
      const wholeEnd = await whole.ended();
      out.whole = { status: statusOf(wholeEnd.text), reset: wholeEnd.reset };
      // part of the body, then silence: closed lingering_timeout later
      const quiet = await rawClient(s.port);
      await quiet.send(`POST /quiet HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 300000\r\n\r\n${'q'.repeat(10_000)}`);
      const quietEnd = await quiet.ended();
      out.quiet = { status: statusOf(quietEnd.text), reset: quietEnd.reset, closedAfter: halfSeconds(quietEnd.afterMs) };
      // a body trickling in: closed after lingering_time
      const slow = await rawClient(s.port);
      await slow.send(`POST /slow HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 300000\r\n\r\n${'s'.repeat(2000)}`);
      const trickle = setInterval(() => { void slow.send('s'.repeat(100)); }, 200);
      const slowEnd = await slow.ended();
      clearInterval(trickle);
      // nginx counts lingering_time in whole seconds: the close comes 1 to 2 s after the response
      out.slow = { status: statusOf(slowEnd.text), closedInLingeringTime: slowEnd.afterMs >= 900 && slowEnd.afterMs < 2600 };
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      whole: { status: 413, reset: false },
      quiet: { status: 413, reset: false, closedAfter: 1 },
      slow: { status: 413, closedInLingeringTime: true },
    });
    assertSameAsNginx(run);
  });
});

