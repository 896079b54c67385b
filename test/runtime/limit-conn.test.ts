/**
 * limit_conn, differential against nginx: while a proxied request is held
 * by a slow upstream, a second request under the same key is refused (503
 * and `limiting connections by zone "NAME"`), one in another zone passes,
 * `limit_conn_status` and `limit_conn_log_level` change the answer and the
 * line, `limit_conn_dry_run` lets it through with `REJECTED_DRY_RUN`, and
 * once the held request ended the key is free again; `$limit_conn_status`
 * in a header and the access log. Then nginx's `-t` messages for the
 * module's directives.
 */
import { strict as assert } from 'node:assert';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { defineConfCases, failed, HTTP_TEMP_PATHS, succeeded } from '../helpers/conf-test.js';

/** An upstream that holds each request until `release()`; `arrived` resolves when one is waiting. */
async function holdingUpstream(): Promise<{ port: number; arrived(): Promise<void>; release(): void; close(): void }> {
  const held: ServerResponse[] = [];
  let wake: (() => void) | undefined;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    held.push(res);
    wake?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    arrived: () => (held.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => { wake = resolve; })),
    release: () => {
      for (const res of held.splice(0)) res.end('slow\n');
      wake = undefined;
    },
    close: () => server.close(),
  };
}

describe('limit_conn (differential)', () => {
  after(cleanup);

  it('refuses a second request under a held key, by zone, with the status and level configured, and lets it through in dry run', async () => {
    const up = await holdingUpstream();
    try {
      const run = await differential({
        literals: { UP: up.port },
        files: { 'html/one': 'one\n', 'html/other': 'other\n', 'html/custom': 'custom\n', 'html/dry': 'dry\n', 'html/none': 'none\n' },
        conf: ({ port }) => httpConf(`  limit_conn_zone $binary_remote_addr zone=addr:1m;
  limit_conn_zone $binary_remote_addr zone=other:1m;
  log_format lc '$uri $status $limit_conn_status';
  server {
    listen 127.0.0.1:${port};
    access_log logs/lc.log lc;
    add_header X-Status $limit_conn_status always;
    location /hold { limit_conn addr 1; proxy_pass http://127.0.0.1:${up.port}; }
    location = /one { limit_conn addr 1; }
    location = /other { limit_conn other 1; }
    location = /custom { limit_conn_log_level warn; limit_conn_status 429; limit_conn addr 1; }
    location = /dry { limit_conn_dry_run on; limit_conn addr 1; }
    location = /none { }
  }`),
      }, async (s) => {
        const out: Record<string, Snap> = {};
        const holding = s.get('/hold');
        await up.arrived();
        for (const path of ['/one', '/other', '/custom', '/dry', '/none']) out[`held ${path}`] = await s.get(path);
        up.release();
        out['held request'] = await holding;
        out['after /one'] = await s.get('/one');
        return out;
      });
      assert.equal(run.nginx.result['held /one']!.status, 503);
      assertSameAsNginx(run);
      assert.deepEqual(run.jinx.file('logs/lc.log'), run.nginx.file('logs/lc.log'));
    } finally {
      up.close();
    }
  });

  it('counts a request once in each of its zones, and gives the first zone back when the second refuses', async () => {
    const up = await holdingUpstream();
    try {
      const run = await differential({
        literals: { UP: up.port },
        files: { 'html/a': 'a\n', 'html/b': 'b\n' },
        conf: ({ port }) => httpConf(`  limit_conn_zone $binary_remote_addr zone=ip:1m;
  limit_conn_zone $arg_k zone=k:1m;
  server {
    listen 127.0.0.1:${port};
    limit_conn ip 2;
    location /hold { limit_conn k 1; limit_conn ip 2; proxy_pass http://127.0.0.1:${up.port}; }
    location = /a { limit_conn ip 2; limit_conn k 1; }
    location = /b { }
  }`),
      }, async (s) => {
        const out: Record<string, Snap> = {};
        const holding = s.get('/hold?k=x');
        await up.arrived();
        // ip counts it (2 of 2), then k=x refuses it: ip gives it back
        out['same key'] = await s.get('/a?k=x');
        // so that ip has room for this one
        out['other key'] = await s.get('/a?k=y');
        // an empty key is not counted in k; ip (inherited from the server) still counts
        out['inherited'] = await s.get('/b');
        up.release();
        out['held request'] = await holding;
        return out;
      });
      assertSameAsNginx(run);
    } finally {
      up.close();
    }
  });
});

const conf = (body: string): Record<string, string> => ({
  'nginx.conf': `events {}\nhttp {\n    ${HTTP_TEMP_PATHS}\n    access_log off;\n${body}\n}\n`,
});

defineConfCases('limit_conn configuration checks', [
  {
    name: 'accepts zones, limits at every level, the status, level and dry run',
    files: conf(`    limit_conn_zone $binary_remote_addr zone=a:1m;
    limit_conn_zone $server_name$uri zone=b:64k;
    limit_conn a 10;
    limit_conn_status 429;
    limit_conn_log_level notice;
    server { limit_conn b 1; limit_conn a 2; location / { limit_conn_dry_run on; } }`),
    status: 0,
    lines: succeeded(),
  },
  {
    name: 'a zone no limit_conn_zone defines',
    files: conf('    limit_conn none 1;'),
    status: 1,
    lines: ['nginx: the configuration file PREFIX/nginx.conf syntax is ok', '[emerg] zero size shared memory zone "none"', 'nginx: configuration file PREFIX/nginx.conf test failed'],
  },
  {
    name: 'two limits of one zone at one level',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z:1m;\n    limit_conn z 1;\n    limit_conn z 2;'),
    status: 1,
    lines: failed('[emerg] "limit_conn" directive is duplicate in PREFIX/nginx.conf:7'),
  },
  {
    name: 'a number of connections that is not a positive number',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z:1m;\n    limit_conn z 0;'),
    status: 1,
    lines: failed('[emerg] invalid number of connections "0" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a limit of 65536 or more',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z:1m;\n    limit_conn z 65536;'),
    status: 1,
    lines: failed('[emerg] connection limit must be less 65536 in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a zone bound to another key',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z:1m;\n    limit_conn_zone $uri zone=z:1m;'),
    status: 1,
    lines: failed('[emerg] limit_conn_zone "z" is already bound to key "$binary_remote_addr" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a zone too small',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z:16k;'),
    status: 1,
    lines: failed('[emerg] zone "zone=z:16k" is too small in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a zone without a size',
    files: conf('    limit_conn_zone $binary_remote_addr zone=z;'),
    status: 1,
    lines: failed('[emerg] invalid zone size "zone=z" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'an unknown parameter',
    files: conf('    limit_conn_zone $binary_remote_addr size=1m;'),
    status: 1,
    lines: failed('[emerg] invalid parameter "size=1m" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a zone with an empty name',
    files: conf('    limit_conn_zone $binary_remote_addr zone=:1m;'),
    status: 1,
    lines: failed('[emerg] "limit_conn_zone" must have "zone" parameter in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a zone of limit_req given to limit_conn',
    files: conf('    limit_req_zone $binary_remote_addr zone=z:1m rate=1r/s;\n    limit_conn z 1;'),
    status: 1,
    lines: failed('[emerg] the shared memory zone "z" is already declared for a different use in PREFIX/nginx.conf:6'),
  },
  {
    name: 'a status out of range',
    files: conf('    limit_conn_status 399;'),
    status: 1,
    lines: failed('[emerg] value must be between 400 and 599 in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a log level limit_conn does not have',
    files: conf('    limit_conn_log_level debug;'),
    status: 1,
    lines: failed('[emerg] invalid value "debug" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'limit_conn_dry_run twice',
    files: conf('    limit_conn_dry_run on;\n    limit_conn_dry_run off;'),
    status: 1,
    lines: failed('[emerg] "limit_conn_dry_run" directive is duplicate in PREFIX/nginx.conf:6'),
  },
]);
