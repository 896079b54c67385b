/**
 * Nginx Proxy Manager's "Cache Assets" switch end to end, on NPM's own tree
 * (`conf.d/include/assets.conf` included by `proxy_host/1.conf`, the
 * `public-cache` zone of its `nginx.conf`, `worker_processes auto`), checked
 * against nginx 1.30 on the same tree. As rendered, host 1's Advanced tab
 * says `proxy_buffering off;`, and nginx caches no unbuffered response: every
 * asset request goes upstream. Without that line, the first request for an
 * asset goes to the upstream and the next ones are served from the entry
 * file at nginx's path (`levels=1:2`, the MD5 of `$host$request_uri`) by
 * whichever worker takes the connection; a restart keeps them, and
 * `max_size` evicts. The response headers are nginx's for that location:
 * NPM's `X-Served-By`, `expires @30m`, `Last-Modified` hidden, and neither
 * the server's `Strict-Transport-Security` nor `X-Robots-Tag` (a location
 * with its own `add_header` inherits none); NPM adds no `X-Cache-Status`.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { prepareProxyManager, type PreparedTree } from '../helpers/corpus-trees.js';
import { cleanup, JINX, startServer, startUpstream, type Response, type ServerProcess } from '../helpers/harness.js';

/** GET https://app.example.com/PATH on `port` (SNI and Host app.example.com), a new connection each time. */
function getAsset(port: number, path: string): Promise<Response> {
  return new Promise((res, rej) => {
    const r = httpsRequest({
      host: '127.0.0.1', port, path, servername: 'app.example.com', headers: { Host: 'app.example.com' },
      rejectUnauthorized: false, agent: false,
    }, (resp) => {
      const chunks: Buffer[] = [];
      resp.on('data', (c: Buffer) => chunks.push(c));
      resp.on('end', () => res({ status: resp.statusCode ?? 0, headers: resp.headers, body: Buffer.concat(chunks).toString('latin1') }));
      resp.on('error', rej);
    });
    r.on('error', rej);
    r.end();
  });
}

/** The entry file of a key in NPM's public cache (`levels=1:2`). */
function entryPath(tree: PreparedTree, key: string): string {
  const md5 = createHash('md5').update(key).digest('hex');
  return join(tree.root, 'var/lib/nginx/cache/public', md5.slice(-1), md5.slice(-3, -1), md5);
}

/** Entry files under NPM's public cache. */
function entries(tree: PreparedTree): string[] {
  const walk = (dir: string): string[] => (existsSync(dir) ? readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  }) : []);
  return walk(join(tree.root, 'var/lib/nginx/cache/public')).filter((p) => !p.endsWith('.tmp'));
}

/**
 * NPM's tree with proxy host 1 forwarding to 127.0.0.1:`upstreamPort` (its
 * `set $server` / `set $port`), the public cache's `max_size` as given, and
 * host 1's `proxy_buffering off;` (its Advanced tab) kept or taken out;
 * returns the tree and host 1's HTTPS port.
 */
async function npmTree(upstreamPort: number, opts: { maxSize: string; advancedBufferingOff: boolean }): Promise<{ tree: PreparedTree; httpsPort: number }> {
  const tree = await prepareProxyManager();
  const host = join(tree.root, 'data/nginx/proxy_host/1.conf');
  const text = readFileSync(host, 'utf8');
  let edited = text.replace('set $server         "192.168.1.20";', 'set $server         "127.0.0.1";')
    .replace('set $port           8080;', `set $port           ${upstreamPort};`);
  if (!opts.advancedBufferingOff) edited = edited.replace('\nproxy_buffering off;\n', '\n\n');
  writeFileSync(host, edited);
  writeFileSync(tree.conf, readFileSync(tree.conf, 'utf8').replace('keys_zone=public-cache:30m max_size=192m', `keys_zone=public-cache:30m max_size=${opts.maxSize}`));
  const httpsPort = Number(/listen (\d+) ssl;/.exec(text)![1]);
  return { tree, httpsPort };
}

/** An upstream that answers every path with a stylesheet naming the path and its count, with headers assets.conf ignores or hides. */
async function assetUpstream(): Promise<{ port: number; counts: Map<string, number> }> {
  const counts = new Map<string, number>();
  const { port } = await startUpstream((req, res) => {
    const n = (counts.get(req.url!) ?? 0) + 1;
    counts.set(req.url!, n);
    res.setHeader('Content-Type', 'text/css');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Set-Cookie', 'session=1');
    res.setHeader('Last-Modified', 'Mon, 02 Jan 2023 03:04:05 GMT');
    res.end(`asset ${req.url} #${n}\n`);
  });
  return { port, counts };
}

function start(tree: PreparedTree, port: number): Promise<ServerProcess> {
  return startServer(JINX, tree.prefix, tree.conf, [port]);
}

describe('Nginx Proxy Manager asset cache (assets.conf)', () => {
  after(cleanup);

  it('as rendered (proxy_buffering off in the Advanced tab), caches nothing: every asset request reaches the upstream, as with nginx', async () => {
    const { port, counts } = await assetUpstream();
    const { tree, httpsPort } = await npmTree(port, { maxSize: '192m', advancedBufferingOff: true });
    const server = await start(tree, httpsPort);
    for (let i = 1; i <= 3; i++) assert.equal((await getAsset(httpsPort, '/css/app.css')).body, `asset /css/app.css #${i}\n`);
    assert.equal(counts.get('/css/app.css'), 3);
    assert.deepEqual(entries(tree), []);
    await server.stop('SIGQUIT');
  });

  it('serves an asset from the upstream once, then from the cache file on every worker and after a restart, with nginx\'s headers', async () => {
    const { port, counts } = await assetUpstream();
    const { tree, httpsPort } = await npmTree(port, { maxSize: '192m', advancedBufferingOff: false });
    let server = await start(tree, httpsPort);
    const first = await getAsset(httpsPort, '/css/app.css');
    assert.equal(first.status, 200);
    assert.equal(first.body, 'asset /css/app.css #1\n');
    assert.equal(first.headers['x-served-by'], 'app.example.com');
    assert.match(String(first.headers['cache-control']), /^max-age=\d+$/);
    assert.ok(first.headers['expires'], 'expires @30m sets Expires');
    assert.equal(first.headers['last-modified'], undefined);
    assert.equal(first.headers['strict-transport-security'], undefined);
    assert.equal(first.headers['x-robots-tag'], undefined);
    assert.equal(first.headers['x-cache-status'], undefined);
    assert.ok(existsSync(entryPath(tree, 'app.example.com/css/app.css')), 'the entry file at nginx\'s path');
    // new connections, spread over the workers (worker_processes auto): each is a HIT
    for (let i = 0; i < 8; i++) {
      const again = await getAsset(httpsPort, '/css/app.css');
      assert.equal(again.status, 200);
      assert.equal(again.body, 'asset /css/app.css #1\n');
      assert.equal(again.headers['x-served-by'], 'app.example.com');
    }
    assert.equal(counts.get('/css/app.css'), 1, 'the upstream was asked once');
    // a page is not an asset: location / asks for a password (NPM's access list)
    assert.equal((await getAsset(httpsPort, '/index.html')).status, 401);
    await server.stop('SIGQUIT');
    server = await start(tree, httpsPort);
    assert.equal((await getAsset(httpsPort, '/css/app.css')).body, 'asset /css/app.css #1\n');
    assert.equal(counts.get('/css/app.css'), 1, 'the restart kept the entry');
    await server.stop('SIGQUIT');
  });

  it('evicts the least recently used asset once the public cache is over max_size', async () => {
    const counts = new Map<string, number>();
    const big = 'x'.repeat(40 * 1024);
    const up = await startUpstream((req, res) => {
      counts.set(req.url!, (counts.get(req.url!) ?? 0) + 1);
      res.setHeader('Content-Type', 'application/javascript');
      res.end(big);
    });
    const { tree, httpsPort } = await npmTree(up.port, { maxSize: '100k', advancedBufferingOff: false });
    // one worker, so that one index sees every entry (README: each worker indexes what it cached itself);
    // jinx evicts as it stores the entry over max_size, nginx's cache manager a moment later
    writeFileSync(tree.conf, readFileSync(tree.conf, 'utf8').replace('worker_processes auto;', 'worker_processes 1;'));
    const server = await start(tree, httpsPort);
    for (const path of ['/a.js', '/b.js', '/c.js']) assert.equal((await getAsset(httpsPort, path)).body.length, big.length);
    assert.equal(entries(tree).length, 2, `entries left: ${entries(tree).join(', ')}`);
    assert.ok(!existsSync(entryPath(tree, 'app.example.com/a.js')), 'the least recently used entry is gone');
    await getAsset(httpsPort, '/c.js');
    assert.equal(counts.get('/c.js'), 1);
    await getAsset(httpsPort, '/a.js');
    assert.equal(counts.get('/a.js'), 2);
    await server.stop('SIGQUIT');
  });
});
