/**
 * limit_rate, differential against nginx: a download under `limit_rate`
 * and `limit_rate_after` takes as long as nginx's write filter makes it
 * (a second's worth at once, then a second's worth a second), within a
 * tolerance; an upstream's `X-Accel-Limit-Rate` sets the rate of a proxied
 * response; `$limit_rate` reads the rate taken; a client that leaves during
 * a pause ends the response with nginx's line.
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';

describe('limit_rate (differential)', () => {
  after(cleanup);

  it('throttles a file and a proxied response as nginx does', async () => {
    const run = await differential({
      extraPorts: 1,
      files: { 'html/data': 'X'.repeat(25_000) },
      conf: ({ port, ports }) => httpConf(`  log_format rate '$uri $status $limit_rate $body_bytes_sent';
  server {
    listen 127.0.0.1:${port};
    access_log logs/rate.log rate;
    location = /data { limit_rate 10k; limit_rate_after 1k; }
    location = /proxied { proxy_pass http://127.0.0.1:${ports[0]}/data; }
  }
  server {
    listen 127.0.0.1:${ports[0]};
    location = /data { add_header X-Accel-Limit-Rate 20000; }
  }`),
    }, async (s) => {
      const out: Record<string, { status: number; bytes: number; ms: number }> = {};
      for (const path of ['/data', '/proxied']) {
        // nginx's rate counts whole seconds from the second the request started (ngx_time() - r->start_sec + 1):
        // a request that starts at the end of a second may send a second's worth more at once; start each at a second's start
        await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 20));
        const startedMs = Date.now();
        const snap = await s.get(path);
        out[path] = { status: snap.status, bytes: snap.body.length, ms: Date.now() - startedMs };
      }
      return out;
    });
    for (const path of ['/data', '/proxied']) {
      const nginx = run.nginx.result[path]!;
      const jinx = run.jinx.result[path]!;
      assert.deepEqual({ status: jinx.status, bytes: jinx.bytes }, { status: nginx.status, bytes: nginx.bytes });
      assert.ok(Math.abs(jinx.ms - nginx.ms) < 400, `${path} took ${jinx.ms} ms, nginx's ${nginx.ms} ms`);
    }
    // 10k a second after the first 1k (a second's worth at once): about 2 s; 20000 a second: about 1 s
    assert.ok(run.nginx.result['/data']!.ms >= 1500, `nginx took ${run.nginx.result['/data']!.ms} ms`);
    assert.ok(run.nginx.result['/proxied']!.ms >= 700, `nginx took ${run.nginx.result['/proxied']!.ms} ms`);
    assert.deepEqual(run.jinx.file('logs/rate.log'), run.nginx.file('logs/rate.log'));
  });

  it('ends a throttled response whose client leaves during a pause, with nginx\'s line', async () => {
    const run = await differential({
      files: { 'html/data': 'X'.repeat(25_000) },
      conf: ({ port }) => httpConf(`  server {
    listen 127.0.0.1:${port};
    location = /data { limit_rate 10k; }
  }`),
    }, async (s) => {
      const received = await new Promise<number>((resolve) => {
        let bytes = 0;
        const socket = connect(s.port, '127.0.0.1', () => socket.write('GET /data HTTP/1.1\r\nHost: localhost\r\n\r\n'));
        socket.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
        });
        // the first second's worth arrives at once, then the response pauses
        setTimeout(() => {
          socket.destroy();
          resolve(bytes);
        }, 400);
      });
      // nginx logs when it sees the close
      await new Promise((resolve) => setTimeout(resolve, 300));
      return { partial: received > 10_000 && received < 25_000 };
    });
    assertSameAsNginx(run);
  });
});
