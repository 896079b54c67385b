/**
 * `mirror` and `mirror_request_body`, differential against nginx: the
 * client's response is the location's own, and each mirror URI gets a
 * subrequest with the request's method and arguments, with the client's
 * body (`mirror_request_body on`) or without it (`off`); `mirror off`
 * sends none; with `log_subrequest on` the mirrors are in the access log.
 * The client's request is over once its mirrors are: its access-log line,
 * and the next request on its connection, come after them.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent, request } from 'node:http';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';

/** The lines of a log file of the prefix once it has `count` of them (within 3 s), sorted. */
async function linesOf(prefix: string, rel: string, count: number): Promise<string[]> {
  const path = join(prefix, rel);
  let lines: string[] = [];
  for (let i = 0; i < 60; i++) {
    lines = existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((l) => l !== '') : [];
    if (lines.length >= count) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return lines.sort();
}

describe('mirror (differential)', () => {
  after(cleanup);

  it('sends each request to its mirrors with its method, arguments and body, and answers with its own response', async () => {
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  log_format mirrored '$request_method $request_uri $request_body';
  log_format subrequest '$uri $args $status';
  server { listen 127.0.0.1:${port};
    location / { mirror /mirror; mirror /mirror/second; proxy_pass http://127.0.0.1:${ports[0]}; }
    location /bodiless { mirror /mirror/off; mirror_request_body off; proxy_pass http://127.0.0.1:${ports[0]}; }
    location /unmirrored { mirror /mirror; location /unmirrored/off { mirror off; proxy_pass http://127.0.0.1:${ports[0]}; } }
    location /mirror { internal; proxy_pass http://127.0.0.1:${ports[1]}; log_subrequest on; access_log logs/subrequests.log subrequest; }
    location /mirror/off { internal; proxy_pass http://127.0.0.1:${ports[1]}; proxy_set_header Content-Length ""; }
  }
  server { listen 127.0.0.1:${ports[0]};
    location / { proxy_pass http://127.0.0.1:${ports[0]}/answer; add_header X-Body $request_body; }
    location /answer { return 200 "main $request_uri\\n"; }
  }
  server { listen 127.0.0.1:${ports[1]};
    location / { access_log logs/mirror.log mirrored; proxy_pass http://127.0.0.1:${ports[1]}/sink; }
    location /sink { return 204; }
  }`, { level: 'notice' }),
      extraPorts: 2,
    }, async (s) => {
      const responses = [
        await s.get('/a?x=1', { method: 'POST', body: 'hello' }),
        await s.get('/b?y=2'),
        await s.get('/bodiless?z=3', { method: 'POST', body: 'unseen' }),
        await s.get('/unmirrored/off?w=4', { method: 'PUT', body: 'kept' }),
      ];
      return { responses, mirrored: await linesOf(s.prefix, 'logs/mirror.log', 5), logged: await linesOf(s.prefix, 'logs/subrequests.log', 4) };
    });
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.result.mirrored, [
      'GET /mirror/second?y=2 -', 'GET /mirror?y=2 -', 'POST /mirror/off?z=3 -', 'POST /mirror/second?x=1 hello', 'POST /mirror?x=1 hello',
    ]);
    assert.equal(run.jinx.result.responses[0]!.headers['x-body'], 'hello');
    // log_subrequest: the mirrors of the /mirror location are in its access log
    assert.deepEqual(run.jinx.result.logged, ['/mirror x=1 204', '/mirror y=2 204', '/mirror/second x=1 204', '/mirror/second y=2 204']);
  });

  it('ends the client\'s request, and goes on to the next one of its connection, once its slow mirror has answered', async () => {
    const slow = await startUpstream((_req, res) => {
      setTimeout(() => res.end('slow'), 300);
    });
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  log_format order '$uri $status';
  server { listen 127.0.0.1:${port}; access_log logs/order.log order;
    location / { mirror /slow; proxy_pass http://127.0.0.1:${ports[0]}; }
    location /slow { internal; log_subrequest on; proxy_pass http://127.0.0.1:${slow.port}; }
  }
  server { listen 127.0.0.1:${ports[0]}; location / { return 200 "main $uri\\n"; } }`, { level: 'notice' }),
      extraPorts: 1,
    }, async (s) => {
      // two requests, one after the other, on one keep-alive connection
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const get = (path: string): Promise<string> => new Promise((resolve, reject) => {
        request({ host: '127.0.0.1', port: s.port, path, agent }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve(`${res.statusCode} ${body}`));
        }).on('error', reject).end();
      });
      const bodies = [await get('/one'), await get('/two')];
      agent.destroy();
      const path = join(s.prefix, 'logs/order.log');
      let order: string[] = [];
      for (let i = 0; i < 60 && order.length < 4; i++) {
        await new Promise((r) => setTimeout(r, 50));
        order = existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((l) => l !== '') : [];
      }
      return { bodies, order };
    });
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.result.order, ['/slow 200', '/one 200', '/slow 200', '/two 200']);
  });
});
