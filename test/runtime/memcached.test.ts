/**
 * memcached_pass, differential against nginx: with a real memcached, a
 * value typed by the location (200, HEAD, a range of it), one flagged as
 * gzip (`memcached_gzip_flag`), a key escaped as nginx escapes it, a
 * missing key (404 and nginx's info line, or the `error_page`), a kept
 * connection through an `upstream` block, POST (405),
 * an unset `$memcached_key` (500); with a scripted server, the answers
 * nginx refuses (invalid line, key, flags or length, a bad trailer, a
 * value cut short, a line too long) and a server that is down.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, onCleanup, startTcpServer } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { NO_MEMCACHED, startMemcached } from '../helpers/memcached-server.js';
import { sleep } from '../helpers/slow-clients.js';

/**
 * A memcached stand-in: answers each `get KEY` with `scripts[KEY]` (`END`
 * for others; parts of a list 100 ms apart, separate reads), then closes.
 */
function scriptedMemcached(scripts: Readonly<Record<string, string | readonly string[]>>): Promise<number> {
  return startTcpServer((sock) => {
    let line = '';
    sock.on('data', (d: Buffer) => {
      line += d.toString('latin1');
      const m = /^get (\S+)\r\n/.exec(line);
      if (!m) return;
      const script = scripts[m[1]!] ?? 'END\r\n';
      const parts = typeof script === 'string' ? [script] : script;
      parts.forEach((part, i) => {
        const timer = setTimeout(() => {
          if (sock.destroyed) return;
          sock.write(Buffer.from(part, 'latin1'));
          if (i === parts.length - 1) sock.end();
        }, i * 100);
        onCleanup(() => clearTimeout(timer));
      });
    });
  });
}

describe('memcached_pass (differential)', () => {
  after(cleanup);

  it('answers with memcached\'s values and nginx\'s 404, 405 and 500', { skip: NO_MEMCACHED }, async () => {
    const mc = await startMemcached();
    await mc.set('/page.html', '<p>cached page</p>\n');
    await mc.set('/packed', Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 2);
    await mc.set('/with%20space', 'escaped key\n');
    await mc.set('/ranged.txt', '0123456789');
    await mc.set('/fallback/hit', 'kept\n');
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; } default_type application/octet-stream;
  upstream mc { server 127.0.0.1:${mc.port}; }
  server { listen 127.0.0.1:${port}; server_name mc.test;
    location / { set $memcached_key $uri; memcached_pass 127.0.0.1:${mc.port}; memcached_gzip_flag 2; }
    location /fallback/ { set $memcached_key $uri; memcached_pass mc; error_page 404 = @origin; }
    location @origin { return 200 "from the origin\\n"; }
    location /unset/ { memcached_pass 127.0.0.1:${mc.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      out.page = await s.get('/page.html');
      out.head = await s.get('/page.html', { method: 'HEAD' });
      out.gzip = await s.get('/packed');
      out.escaped = await s.get('/with%20space');
      out.range = await s.get('/ranged.txt', { headers: { Range: 'bytes=2-4' } });
      out.missing = await s.get('/missing');
      out.fallback = await s.get('/fallback/none');
      // through an upstream block, which keeps connections: the one the 404 above left serves a value, a missing key and a value again
      const before = await mc.connections();
      for (const uri of ['/fallback/hit', '/fallback/none', '/fallback/hit']) out[`kept ${uri}`] = await s.get(uri);
      const opened = (await mc.connections()) - before - 1;
      out.post = await s.get('/page.html', { method: 'POST', body: 'x' });
      out.unset = await s.get('/unset/x');
      return { responses: out, opened };
    });
    const n = run.nginx.result.responses;
    assert.equal(n.page!.body, '<p>cached page</p>\n');
    assert.equal(n.range!.status, 206);
    assert.equal(n.missing!.status, 404);
    assert.equal(n.fallback!.body, 'from the origin\n');
    assert.equal(run.nginx.result.opened, 0);
    assertSameAsNginx(run);
  });

  it('refuses what nginx refuses of a memcached answer, with its lines', async () => {
    const port = await scriptedMemcached({
      '/invalid': 'HELLO\r\n',
      '/no-cr': 'END\n',
      '/wrong-key': 'VALUE /other 0 2\r\nhi\r\nEND\r\n',
      '/bad-flags': 'VALUE /bad-flags x1 2\r\nhi\r\nEND\r\n',
      '/bad-length': 'VALUE /bad-length 0 2x\r\nhi\r\nEND\r\n',
      '/bad-trailer': 'VALUE /bad-trailer 0 2\r\nhiXXXXXXX',
      // the close in a read of its own: nginx notices it reading the upstream
      '/short': ['VALUE /short 0 10\r\nabc', ''],
      '/long-line': `VALUE /long-line 0 ${'1'.repeat(5000)}\r\n`,
      '/good': 'VALUE /good 0 5\r\nhello\r\nEND\r\n',
      // the first line in three reads: what came of it is kept from read to read
      '/split': ['VAL', 'UE /split 0 5\r', '\nhello\r\nEND\r\n'],
    });
    const down = await freePort();
    const run = await differential({
      conf: ({ port: listen }) => httpConf(`  server { listen 127.0.0.1:${listen}; server_name mc.test;
    location / { set $memcached_key $uri; memcached_pass 127.0.0.1:${port}; memcached_gzip_flag 1; }
    location /down/ { set $memcached_key $uri; memcached_pass 127.0.0.1:${down}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const key of ['/invalid', '/no-cr', '/wrong-key', '/bad-flags', '/bad-length', '/bad-trailer', '/short', '/long-line', '/good', '/down/x']) {
        out[key] = await s.raw(`GET ${key} HTTP/1.1\r\nHost: mc.test\r\nConnection: close\r\n\r\n`);
      }
      // other answers read between the parts of /split's first line
      const others = (async (): Promise<void> => {
        for (const wait of [50, 100]) {
          await sleep(wait);
          await s.raw('GET /good HTTP/1.1\r\nHost: mc.test\r\nConnection: close\r\n\r\n');
        }
      })();
      out['/split'] = await s.raw('GET /split HTTP/1.1\r\nHost: mc.test\r\nConnection: close\r\n\r\n');
      await others;
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n['/invalid']!.status, 502);
    assert.equal(n['/good']!.body, 'hello');
    assert.equal(n['/split']!.body, 'hello');
    assert.ok(run.nginx.errorLog.some((l) => l.includes('memcached sent invalid trailer')));
    assertSameAsNginx(run);
  });
});
