/**
 * Timeouts longer than node's longest timer (2^31-1 ms, about 24.8 days),
 * differential against nginx: `30d` for the client's header, body, send and
 * keep-alive timeouts and the upstream's read timeout must wait, as nginx's
 * do, not fire at once (node's `setTimeout` fires after 1 ms for a longer
 * delay; jinx keeps such a time as 2^31-1 ms, `MAX_TIMER_MS` in
 * src/config/spec.ts).
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';
import { cleanup } from '../helpers/harness.js';
import { echoUpstream } from '../helpers/upstreams.js';

/** Writes `parts` to 127.0.0.1:port, `pauseMs` apart, and resolves to the status codes of the responses read until the server closes or 3 s pass. */
function slowExchange(port: number, parts: readonly string[], pauseMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect(port, '127.0.0.1', async () => {
      for (const part of parts) {
        socket.write(part, 'latin1');
        await new Promise((r) => setTimeout(r, pauseMs));
      }
      setTimeout(() => socket.end(), 500);
    });
    const guard = setTimeout(() => socket.destroy(), parts.length * pauseMs + 3000);
    socket.on('data', (d: Buffer) => { text += d.toString('latin1'); });
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? undefined : reject(err)));
    socket.on('close', () => {
      clearTimeout(guard);
      resolve([...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1]!));
    });
  });
}

describe('timeouts longer than 24.8 days (differential)', () => {
  after(cleanup);

  it('waits for a slow client and a slow upstream with 30d timeouts instead of timing out at once', async () => {
    const up = await echoUpstream('slow', (_req, res) => {
      setTimeout(() => res.end('slow upstream\n'), 1000);
      return true;
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  client_header_timeout 30d; client_body_timeout 30d; send_timeout 30d; keepalive_timeout 30d;
  server { listen 127.0.0.1:${port};
    location / { return 200 "ok\\n"; }
    location /up/ { proxy_read_timeout 30d; proxy_send_timeout 30d; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      // the header in two parts a second apart, then a second request on the idle connection
      header: await slowExchange(s.port, ['GET / HTTP/1.1\r\n', 'Host: a\r\n\r\n', 'GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'], 1000),
      body: await slowExchange(s.port, ['POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nConnection: close\r\n\r\nab', 'cd'], 1000),
      upstream: await slowExchange(s.port, ['GET /up/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n'], 1500),
    }));
    assert.deepEqual(run.nginx.result, { header: ['200', '200'], body: ['200'], upstream: ['200'] });
    assertSameAsNginx(run);
  });
});
