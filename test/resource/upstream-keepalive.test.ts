/**
 * The upstream connection cache under load (`ngx_http_upstream_keepalive_module`):
 * after a burst of concurrent proxied requests, the idle connections an
 * upstream server sees settle at `keepalive N` or fewer within a second (32
 * by default in an `upstream` block in nginx 1.30, none for `proxy_pass`
 * to an address), and close after `keepalive_timeout`; a client that goes
 * away, over HTTP/1.1 or HTTP/2, takes its upstream connection with it at
 * once. Counted where a user counts them: in the upstream server. Each
 * scenario runs on jinx and on the reference nginx when it is installed,
 * with the same bounds for both; an unrelated client is served throughout.
 */
import { strict as assert } from 'node:assert';
import { connect as h2connect, constants as h2 } from 'node:http2';
import { request as httpRequest } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { TEMP_PATHS } from '../helpers/differential.js';
import { bystander, countingUpstream, onEachServer, settles, type CountingUpstream } from '../helpers/resource.js';
import { rawClient, sleep } from '../helpers/slow-clients.js';

/** The main context of both servers: one worker (as measured), `worker_connections` room for a burst. */
function mainContext(level: string, workerConnections = 1024): string {
  return `daemon off;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log ${level};\nevents { worker_connections ${workerConnections}; }\n`;
}

/** Concurrent requests in a burst. */
const BURST = 200;

/** Sends `count` requests at once, each on its own connection; resolves to how many got 200. */
async function burst(port: number, path: string, count: number): Promise<number> {
  const one = (): Promise<number> => new Promise((res) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (resp) => {
      resp.resume();
      resp.on('end', () => res(resp.statusCode === 200 ? 1 : 0));
    });
    req.on('error', () => res(0));
    req.end();
  });
  const ok = await Promise.all(Array.from({ length: count }, one));
  return ok.reduce((a, b) => a + b, 0);
}

/** What a burst left: requests served, connections the upstream accepted, and those open 1 s after the burst. */
interface AfterBurst {
  readonly served: number;
  /** The burst needed more connections than are kept. */
  readonly openedMoreThanKept: boolean;
  /** Idle connections open 1 s after the burst are at most the cache's size. */
  readonly settledWithin1s: boolean;
  readonly openAfter1s: number;
}

async function burstOn(port: number, path: string, up: CountingUpstream, kept: number): Promise<AfterBurst> {
  const before = up.accepted();
  const served = await burst(port, path, BURST);
  const settledWithin1s = await settles(() => up.open() <= kept, 1000);
  return { served, openedMoreThanKept: up.accepted() - before > kept, settledWithin1s, openAfter1s: up.open() };
}

describe('upstream keepalive under load', () => {
  after(cleanup);

  it('keeps at most keepalive N idle upstream connections after a burst of 200 requests (32 by default in an upstream block, none for an address) and closes them after keepalive_timeout', async () => {
    const slow = (_req: unknown, res: { end(b: string): void }): void => {
      setTimeout(() => res.end('hello\n'), 150);
    };
    const capped = await countingUpstream(slow);
    const plain = await countingUpstream(slow);
    const direct = await countingUpstream(slow);
    const result = await onEachServer({
      conf: ({ port }) => `${mainContext('notice', 2048)}http {
  ${TEMP_PATHS}
  access_log off;
  upstream capped { server 127.0.0.1:${capped.port}; keepalive 16; keepalive_timeout 2s; }
  upstream plain { server 127.0.0.1:${plain.port}; }
  server { listen 127.0.0.1:${port};
    location /capped/ { proxy_pass http://capped; }
    location /plain/ { proxy_pass http://plain; }
    location /direct/ { proxy_pass http://127.0.0.1:${direct.port}; }
    location /local { return 200 "ok\\n"; }
  }
}
`,
    }, async (s) => {
      const other = bystander(s.port, '/local', 50);
      const cappedBurst = await burstOn(s.port, '/capped/', capped, 16);
      const plainBurst = await burstOn(s.port, '/plain/', plain, 32);
      const directBurst = await burstOn(s.port, '/direct/', direct, 0);
      // keepalive_timeout 2s, counted from the burst's end (more than 1 s ago)
      const cappedClosed = await settles(() => capped.open() === 0, 2000);
      const seen = await other.stop();
      // the next side starts with no connection left over
      for (const up of [capped, plain, direct]) await settles(() => up.open() === 0, 3000);
      return { cappedBurst, plainBurst, directBurst, cappedClosed, bystander: seen.length > 0 && seen.every((st) => st === 200) };
    });
    for (const [kind, r] of Object.entries(result)) {
      if (!r) continue;
      const all = { served: BURST, openedMoreThanKept: true, settledWithin1s: true };
      assert.deepEqual({ ...r.cappedBurst, openAfter1s: undefined }, { ...all, openAfter1s: undefined }, `${kind}: keepalive 16 (${r.cappedBurst.openAfter1s} open after 1 s)`);
      assert.ok(r.cappedBurst.openAfter1s > 0, `${kind}: keepalive 16 keeps connections`);
      assert.deepEqual({ ...r.plainBurst, openAfter1s: undefined }, { ...all, openAfter1s: undefined }, `${kind}: default keepalive (${r.plainBurst.openAfter1s} open after 1 s)`);
      assert.ok(r.plainBurst.openAfter1s > 0, `${kind}: an upstream block keeps connections by default`);
      assert.deepEqual(r.directBurst, { ...all, openAfter1s: 0 }, `${kind}: proxy_pass to an address`);
      assert.equal(r.cappedClosed, true, `${kind}: keepalive_timeout closes the idle connections`);
      assert.equal(r.bystander, true, `${kind}: an unrelated client is served throughout`);
    }
  });

  it('closes the upstream connection at once when the client goes away: HTTP/1.1 before and after its body, an HTTP/2 stream reset, an HTTP/2 connection closed', async () => {
    const hold = await countingUpstream(() => undefined);
    const result = await onEachServer({
      extraPorts: 1,
      conf: ({ port, ports }) => `${mainContext('info')}http {
  ${TEMP_PATHS}
  log_format st '$request_method $uri $status';
  access_log logs/access.log st;
  client_body_buffer_size 1k;
  upstream hold { server 127.0.0.1:${hold.port}; keepalive 8; }
  server { listen 127.0.0.1:${port};
    location / { proxy_pass http://hold; }
    location /local { access_log off; return 200 "ok\\n"; }
  }
  server { listen 127.0.0.1:${ports[0]}; http2 on;
    location / { proxy_pass http://hold; }
  }
}
`,
    }, async (s) => {
      const other = bystander(s.port, '/local', 50);
      const out: Record<string, unknown> = {};
      // the upstream has the request; the client closes: the upstream connection closes at once
      const closesUpstream = async (path: string, start: () => Promise<() => void>): Promise<void> => {
        const requests = hold.requests();
        const leave = await start();
        const reached = await settles(() => hold.requests() > requests, 5000);
        const open = hold.open();
        leave();
        out[path] = { reached, closedWithin500ms: await settles(() => hold.open() < open, 500) };
        await settles(() => hold.open() === 0, 2000);
      };
      await closesUpstream('/h1', async () => {
        const c = await rawClient(s.port);
        await c.send('GET /h1 HTTP/1.1\r\nHost: localhost\r\n\r\n');
        return () => c.socket.destroy();
      });
      const session = h2connect(`http://127.0.0.1:${s.ports[0]}`);
      session.on('error', () => undefined);
      await closesUpstream('/h2-reset', async () => {
        const stream = session.request({ ':path': '/h2-reset' });
        stream.on('error', () => undefined);
        stream.end();
        return () => stream.close(h2.NGHTTP2_CANCEL);
      });
      await closesUpstream('/h2-close', async () => {
        const stream = session.request({ ':path': '/h2-close' });
        stream.on('error', () => undefined);
        stream.end();
        return () => session.destroy();
      });
      // a client that closes right after its body (in a temp file): the request never stays upstream
      const accepted = hold.accepted();
      const c = await rawClient(s.port);
      await c.send(`POST /after-body HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20000\r\n\r\n${'b'.repeat(20000)}`);
      c.socket.destroy();
      await sleep(500);
      out['/after-body'] = { openUpstream: hold.open(), requestsStayed: hold.accepted() > accepted && hold.open() > 0 };
      const seen = await other.stop();
      await settles(() => readFileSync(join(s.prefix, 'logs/access.log'), 'latin1').split('\n').length > 4, 2000);
      return {
        out,
        access: readFileSync(join(s.prefix, 'logs/access.log'), 'latin1').split('\n').filter(Boolean).sort(),
        bystander: seen.length > 0 && seen.every((st) => st === 200),
      };
    });
    const closed = { reached: true, closedWithin500ms: true };
    const expected = {
      out: { '/h1': closed, '/h2-reset': closed, '/h2-close': closed, '/after-body': { openUpstream: 0, requestsStayed: false } },
      access: ['GET /h1 499', 'GET /h2-close 499', 'GET /h2-reset 499', 'POST /after-body 499'],
      bystander: true,
    };
    if (result.nginx) assert.deepEqual(result.nginx, expected, 'nginx');
    assert.deepEqual(result.jinx, expected, 'jinx');
  });
});
