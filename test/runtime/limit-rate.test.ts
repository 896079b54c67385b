/**
 * limit_rate, differential against nginx: a download under `limit_rate`
 * and `limit_rate_after` takes as long as nginx's write filter makes it
 * (a second's worth at once, then a second's worth a second), within a
 * tolerance; an upstream's `X-Accel-Limit-Rate` sets the rate of a proxied
 * response; `$limit_rate` reads the rate taken.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { differential, httpConf } from '../helpers/differential.js';

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
});
