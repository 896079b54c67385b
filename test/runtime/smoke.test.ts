import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, logLines, request, startJinx, startUpstream } from '../helpers/harness.js';

describe('a proxied location and a return location', () => {
  after(cleanup);

  it('proxies to the upstream and answers return directly', async () => {
    const up = await startUpstream((req, res) => {
      res.setHeader('Content-Type', 'text/plain');
      res.end(`upstream saw ${req.url} host=${req.headers.host}`);
    });
    const port = await freePort();
    const jinx = await startJinx(`
      daemon off;
      error_log logs/error.log warn;
      events {}
      http {
        access_log off;
        server {
          listen 127.0.0.1:${port};
          location /api/ { proxy_pass http://127.0.0.1:${up.port}/v1/; }
          location = /health { return 200 "ok\\n"; }
        }
      }`, [port]);
    const proxied = await request(port, '/api/users?id=7');
    assert.equal(proxied.status, 200);
    assert.equal(proxied.body, `upstream saw /v1/users?id=7 host=127.0.0.1:${up.port}`);
    assert.match(String(proxied.headers.server), /^jinx\//);
    const health = await request(port, '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body, 'ok\n');
    assert.equal(health.headers['content-type'], 'text/plain');
    assert.equal(await jinx.stop(), 0);
    assert.deepEqual(logLines(jinx.errorLog()), []);
  });

  it('answers 502 and logs connect() failed when the upstream refuses', async () => {
    const dead = await freePort();
    const port = await freePort();
    const jinx = await startJinx(`
      daemon off;
      error_log logs/error.log warn;
      events {}
      http {
        access_log off;
        server { listen 127.0.0.1:${port}; server_name app.test; location / { proxy_pass http://127.0.0.1:${dead}; } }
      }`, [port]);
    const res = await request(port, '/x?y=1', { headers: { Host: 'app.test' } });
    assert.equal(res.status, 502);
    await jinx.stop();
    assert.deepEqual(logLines(jinx.errorLog()), [
      `[error] *CONN connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: app.test, request: "GET /x?y=1 HTTP/1.1", upstream: "http://127.0.0.1:${dead}/x?y=1", host: "app.test"`,
    ]);
  });
});
