/**
 * The slice module, differential against nginx: a file fetched from the
 * upstream in `slice`-sized ranges (`$slice_range` sent as `Range`) and
 * joined, for a request without a range, with one range inside a piece,
 * across pieces, open-ended, a suffix, several ranges, `If-Range` (the
 * first piece, then a jump to the client's range), HEAD; through a cache
 * whose key holds `$slice_range` (each piece cached, then served from it);
 * an upstream that ignores ranges (passed whole); and the pieces nginx
 * refuses (a range other than asked for, an ETag that changed), logged and
 * the connection closed.
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side, type Snap } from '../helpers/differential.js';

/** 1000 bytes, each telling its offset. */
const FILE = Array.from({ length: 100 }, (_, i) => `${String(i * 10).padStart(9, '0')}\n`).join('');

/**
 * Whether a response read until its connection closes came whole: its
 * status line, and as many body bytes as its `Content-Length` (nginx may
 * close before sending anything, jinx after the first piece).
 */
function cameWhole(port: number, path: string): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`));
    socket.on('data', (c) => chunks.push(c));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const at = text.indexOf('\r\n\r\n');
      const length = /\r\nContent-Length: (\d+)/i.exec(text)?.[1];
      resolve(at !== -1 && length !== undefined && text.length - at - 4 === Number(length) ? `whole: ${text.slice(0, text.indexOf('\r\n'))}` : 'cut off');
    });
    socket.on('error', () => socket.destroy());
  });
}

describe('slice (differential)', () => {
  after(cleanup);

  it('joins the pieces of a file into the whole or the one range asked for, from the upstream or a cache of pieces', async () => {
    const run = await differential({
      files: { 'www/f.txt': FILE },
      dirs: ['cache'],
      conf: ({ port, ports, prefix }) => httpConf(`
  proxy_cache_path ${prefix}/cache keys_zone=pieces:1m;
  upstream files { server 127.0.0.1:${ports[0]}; }
  server { listen 127.0.0.1:${ports[0]}; root ${prefix}/www; etag off; add_header ETag '"v1"'; add_header X-Asked $http_range;
    location /whole/ { alias ${prefix}/www/; max_ranges 0; }
  }
  server { listen 127.0.0.1:${port};
    proxy_hide_header Last-Modified; proxy_hide_header X-Asked;
    location / { slice 300; proxy_set_header Range $slice_range; proxy_pass http://files; add_header X-Slice $slice_range; }
    location /cached/ {
      slice 256; proxy_cache pieces; proxy_cache_key $uri$slice_range; proxy_cache_valid 200 206 1h;
      proxy_set_header Range $slice_range; proxy_pass http://files/; add_header X-Cache $upstream_cache_status;
    }
    location /unsliced/ { slice 300; proxy_pass http://files/; }
  }`),
      extraPorts: 1,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<void> => {
        out[label] = await s.get(path, { headers, method });
      };
      await get('whole', '/f.txt');
      await get('inside one piece', '/f.txt', { Range: 'bytes=10-29' });
      await get('across pieces', '/f.txt', { Range: 'bytes=250-700' });
      await get('open-ended', '/f.txt', { Range: 'bytes=650-' });
      await get('suffix', '/f.txt', { Range: 'bytes=-100' });
      await get('several ranges', '/f.txt', { Range: 'bytes=0-0,5-6' });
      await get('past the end', '/f.txt', { Range: 'bytes=2000-' });
      await get('If-Range that matches', '/f.txt', { Range: 'bytes=700-750', 'If-Range': '"v1"' });
      await get('If-Range that does not', '/f.txt', { Range: 'bytes=700-750', 'If-Range': '"v0"' });
      await get('HEAD', '/f.txt', {}, 'HEAD');
      await get('cached, first', '/cached/f.txt');
      await get('cached, again', '/cached/f.txt');
      await get('cached, a range', '/cached/f.txt', { Range: 'bytes=500-520' });
      await get('upstream ignores ranges', '/whole/f.txt');
      await get('not sliced without $slice_range', '/unsliced/f.txt', { Range: 'bytes=5-9' });
      return out;
    });
    assert.equal(run.nginx.result['whole']!.body, FILE);
    assert.equal(run.nginx.result['across pieces']!.body, FILE.slice(250, 701));
    assert.equal(run.nginx.result['cached, again']!.headers['x-cache'], 'HIT');
    assertSameAsNginx(run);
  });

  it('closes the connection after a piece of another range or ETag than the first, with nginx\'s error', async () => {
    // pieces of 300 bytes of a 1000-byte file: /fixed always sends the first, /etags the one asked for with an ETag of its own
    const upstream = await startUpstream((req, res) => {
      const m = /^bytes=(\d+)-/.exec(req.headers.range ?? '');
      if (!m || req.url === '/plain') {
        res.end('whole\n');
        return;
      }
      const start = req.url === '/fixed' ? 0 : Number(m[1]);
      const end = Math.min(start + 300, 1000);
      res.writeHead(206, { 'Content-Range': `bytes ${start}-${end - 1}/1000`, ETag: `"${start}"` });
      res.end(FILE.slice(start, end));
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  server { listen 127.0.0.1:${port};
    location / { slice 300; proxy_set_header Range $slice_range; proxy_pass http://127.0.0.1:@UPSTREAM@; }
  }`.replace('@UPSTREAM@', String(upstream.port))),
      literals: { UPSTREAM: upstream.port },
    }, async (s: Side) => ({
      'another range': await cameWhole(s.port, '/fixed'),
      'another ETag': await cameWhole(s.port, '/etags'),
      'a 200': await cameWhole(s.port, '/plain'),
    }));
    assert.deepEqual(run.nginx.result, { 'another range': 'cut off', 'another ETag': 'cut off', 'a 200': 'whole: HTTP/1.1 200 OK' });
    assertSameAsNginx(run);
  });
});
