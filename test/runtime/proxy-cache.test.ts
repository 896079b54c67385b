/**
 * The response cache (`proxy_cache`, `fastcgi_cache`): differential against
 * nginx, a first request is a MISS and the next a HIT without the upstream
 * being asked, with `X-Cache-Status` as nginx's and the entry's file at
 * nginx's path (`levels=1:2` → `c/29/<md5 of the key>`); what the upstream's
 * headers say (`Cache-Control`, `Set-Cookie`, `X-Accel-Expires`),
 * `proxy_cache_valid`, `proxy_cache_bypass`, `proxy_no_cache`, a HEAD sent
 * upstream as GET, ranges and `If-Modified-Since` of a HIT, the client's
 * validators cleared upstream. jinx alone: a restart keeps the HIT (the
 * loader), `max_size` evicts the least recently used entry, a response the
 * upstream did not finish is never cached. Stale entries, against nginx:
 * `stale-while-revalidate=` with `proxy_cache_background_update`,
 * `stale-if-error=`. Variants (`Vary`), against nginx: a response whose
 * `Vary` changed goes to the key's main entry.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { connect, createServer, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, onCleanup, request, startServer, startUpstream, tempDir, waitFor, writeFiles, JINX } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** The entry file of a key under a cache directory with `levels=1:2`. */
function entryPath(dir: string, key: string): string {
  const md5 = createHash('md5').update(key).digest('hex');
  return join(dir, md5.slice(-1), md5.slice(-3, -1), md5);
}

/** The files under `dir`, recursively; one jinx removes while it is listed (a temp file) is left out. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat) return [];
    return stat.isDirectory() ? filesUnder(path) : [path];
  });
}

/**
 * An upstream that counts its requests per path and answers by path:
 * `/h/NAME` sends the header `NAME` from the query (`?v=…`), the body
 * names the path and the count; `/lm` has a Last-Modified and
 * Accept-Ranges (`/lm-cr` a `Content-Range: stub` too); `/echo-ims` echoes the validators it got.
 */
async function countingUpstream(): Promise<{ port: number; counts: Map<string, number> }> {
  const counts = new Map<string, number>();
  const { port } = await startUpstream((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const n = (counts.get(url.pathname) ?? 0) + 1;
    counts.set(url.pathname, n);
    const header = url.pathname.startsWith('/h/') ? url.pathname.slice(3) : undefined;
    if (header) res.setHeader(header, url.searchParams.get('v') ?? '');
    if (url.pathname === '/lm' || url.pathname === '/lm-cr') {
      res.setHeader('Last-Modified', 'Mon, 02 Jan 2023 03:04:05 GMT');
      res.setHeader('Accept-Ranges', 'bytes');
    }
    if (url.pathname === '/lm-cr') res.setHeader('Content-Range', 'stub');
    if (url.pathname === '/echo-ims') {
      res.end(`ims=${req.headers['if-modified-since'] ?? ''} inm=${req.headers['if-none-match'] ?? ''} range=${req.headers.range ?? ''}\n`);
      return;
    }
    res.setHeader('Content-Type', 'text/plain');
    res.end(`${req.method} ${url.pathname} #${n}\n`);
  });
  return { port, counts };
}

describe('proxy_cache (differential)', () => {
  after(cleanup);

  it('MISS then HIT without the upstream, entries at nginx\'s path, and the headers that keep a response out, as nginx', async () => {
    const up = await countingUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache levels=1:2 keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    location / { proxy_pass http://127.0.0.1:${up.port}; proxy_cache one; proxy_cache_valid 200 1m;
      proxy_cache_bypass $arg_bypass; proxy_no_cache $arg_nocache; }
    location /valid-any/ { proxy_pass http://127.0.0.1:${up.port}/; proxy_cache one; proxy_cache_valid any 1m; }
    location /none/ { proxy_pass http://127.0.0.1:${up.port}/; proxy_cache one; }
    location /ignore/ { proxy_pass http://127.0.0.1:${up.port}/; proxy_cache one; proxy_cache_valid 1m;
      proxy_ignore_headers Set-Cookie Cache-Control; }
    location /off/ { proxy_pass http://127.0.0.1:${up.port}/; proxy_cache off; }
  }`),
    }, async (s) => {
      up.counts.clear();
      const out: Record<string, Snap | boolean | number> = {};
      const get = async (label: string, path: string, opts: { method?: string; headers?: Record<string, string> } = {}): Promise<void> => {
        out[label] = await s.get(path, opts);
      };
      await get('first', '/a');
      await get('second', '/a');
      out['entry file at nginx\'s path'] = existsSync(entryPath(join(s.prefix, 'cache'), `http://127.0.0.1:${up.port}/a`));
      await get('HEAD first', '/head', { method: 'HEAD' });
      await get('GET after HEAD', '/head');
      await get('bypass', '/a?bypass=1');
      await get('no_cache first', '/nc?nocache=1');
      await get('no_cache second', '/nc?nocache=1');
      await get('no-store', '/h/Cache-Control?v=no-store');
      await get('no-store again', '/h/Cache-Control?v=no-store');
      await get('max-age', '/h/Cache-Control?v=max-age=60');
      await get('max-age again', '/h/Cache-Control?v=max-age=60');
      await get('Set-Cookie', '/h/Set-Cookie?v=a=b');
      await get('Set-Cookie again', '/h/Set-Cookie?v=a=b');
      await get('X-Accel-Expires 0', '/h/X-Accel-Expires?v=0');
      await get('X-Accel-Expires 0 again', '/h/X-Accel-Expires?v=0');
      await get('no valid, no headers', '/none/plain');
      await get('no valid, no headers again', '/none/plain');
      await get('ignored Set-Cookie', '/ignore/h/Set-Cookie?v=c=d');
      await get('ignored Set-Cookie again', '/ignore/h/Set-Cookie?v=c=d');
      await get('404 with valid any', '/valid-any/missing-404');
      await get('cached with validators', '/lm');
      await get('HIT with If-Modified-Since', '/lm', { headers: { 'If-Modified-Since': 'Mon, 02 Jan 2023 03:04:05 GMT' } });
      await get('HIT with a range', '/lm', { headers: { Range: 'bytes=4-6' } });
      await get('validators cleared upstream', '/echo-ims', { headers: { 'If-Modified-Since': 'x', 'If-None-Match': '"y"', Range: 'bytes=0-1' } });
      await get('validators kept without a cache', '/off/echo-ims', { headers: { 'If-Modified-Since': 'x', 'If-None-Match': '"y"' } });
      out['upstream requests'] = [...up.counts.values()].reduce((a, b) => a + b, 0);
      return out;
    });
    assertSameAsNginx(run);
  });
});

/**
 * An upstream for the stale-serving tests: `/swr`, `/sie` and `/plain`
 * answer with `Cache-Control: max-age=1` and `stale-while-revalidate=30`,
 * `stale-if-error=30` or nothing more, a body naming the path and its
 * count; `?fail=1` closes the connection without a response (an `error`).
 */
async function staleUpstream(): Promise<{ port: number; counts: Map<string, number> }> {
  const counts = new Map<string, number>();
  const extension: Record<string, string> = { '/swr': ', stale-while-revalidate=30', '/sie': ', stale-if-error=30', '/plain': '' };
  const { port } = await startUpstream((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.searchParams.get('fail') === '1') {
      req.socket.destroy();
      return;
    }
    const n = (counts.get(url.pathname) ?? 0) + 1;
    counts.set(url.pathname, n);
    res.setHeader('Cache-Control', `max-age=1${extension[url.pathname] ?? ''}`);
    res.end(`${url.pathname} #${n}\n`);
  });
  return { port, counts };
}

describe('proxy_cache: stale entries (differential)', () => {
  after(cleanup);

  it('sends each client its own bytes of cached entries when one client reads a large one slowly while another takes one at once', async () => {
    // the slow client's connection keeps read buffers the worker cannot fill again while it waits
    const lines = (tag: string, bytes: number): string => Array.from({ length: bytes / 16 }, (_, i) => `${tag}${String(i).padStart(14, '0')}\n`).join('');
    const bodies: Record<string, string> = { '/slow': lines('s', 24 * 1024 * 1024), '/fast': lines('f', 2 * 1024 * 1024) };
    const sha256 = (text: string): string => createHash('sha256').update(text, 'latin1').digest('hex');
    const { port: up } = await startUpstream((req, res) => {
      const body = bodies[req.url ?? ''] ?? '';
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body, 'latin1');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    location / { proxy_pass http://127.0.0.1:${up}; proxy_cache one; proxy_cache_valid 200 1m; }
  }`),
    }, async (s) => {
      for (const path of ['/slow', '/fast']) await s.get(path);
      await new Promise((res) => setTimeout(res, 200));
      const socket = connect({ host: '127.0.0.1', port: s.port });
      socket.pause();
      socket.write('GET /slow HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      await new Promise((res) => setTimeout(res, 300));
      const fasts: string[] = [];
      for (let i = 0; i < 3; i++) {
        const snap = await s.get('/fast');
        fasts.push(`${snap.headers['x-cache-status']} ${sha256(snap.body)}`);
      }
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      await new Promise((res) => socket.on('close', res).resume());
      const text = Buffer.concat(chunks).toString('latin1');
      const at = text.indexOf('\r\n\r\n');
      return { slow: `${/x-cache-status: (\w+)/i.exec(text.slice(0, at))?.[1]} ${sha256(text.slice(at + 4))}`, fast: fasts };
    });
    const fast = `HIT ${sha256(bodies['/fast']!)}`;
    assert.deepEqual(run.nginx.result, { slow: `HIT ${sha256(bodies['/slow']!)}`, fast: [fast, fast, fast] });
    assertSameAsNginx(run);
  });

  it('stale-while-revalidate sends the expired entry (STALE) while a background update fetches it, stale-if-error sends it when the upstream fails, and an if block keeps its location\'s proxy_pass, as nginx', async () => {
    const up = await staleUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache levels=1:2 keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    proxy_cache one; proxy_cache_key $uri;
    location /bg/ { proxy_pass http://127.0.0.1:${up.port}/; proxy_cache_background_update on; }
    location /fg/ { proxy_pass http://127.0.0.1:${up.port}/; }
    location /if/ { proxy_pass http://127.0.0.1:${up.port}/; if ($arg_x) { } }
  }`),
    }, async (s) => {
      up.counts.clear();
      const out: Record<string, Snap | number> = {};
      const get = async (label: string, path: string): Promise<void> => {
        out[label] = await s.get(path);
      };
      const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
      await get('background, first', '/bg/swr');
      await get('background, fresh', '/bg/swr');
      await get('foreground, first', '/fg/swr');
      await get('stale-if-error, first', '/fg/sie');
      await get('max-age alone, first', '/fg/plain');
      await get('if block, proxied', '/if/plain?x=1');
      // every entry expires (max-age=1)
      await sleep(2200);
      await get('background, expired: the old entry while it is updated', '/bg/swr');
      await sleep(500);
      await get('background, updated', '/bg/swr');
      await get('no background update: fetched in the foreground', '/fg/swr');
      await get('stale-if-error, upstream failed', '/fg/sie?fail=1');
      await get('max-age alone, upstream failed', '/fg/plain?fail=1');
      out['upstream requests'] = [...up.counts.values()].reduce((a, b) => a + b, 0);
      return out;
    });
    assertSameAsNginx(run);
  });
});

describe('proxy_cache: the default key (differential)', () => {
  after(cleanup);

  it('keys an entry by the upstream request\'s URL (proxy_pass\'s URI part, a rewritten URI, a URL from variables): requests that go upstream alike share it, as nginx', async () => {
    const up = await countingUpstream();
    const base = `http://127.0.0.1:${up.port}`;
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache levels=1:2 keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    proxy_cache one; proxy_cache_valid 200 1m;
    location /api/ { proxy_pass ${base}/; }
    location /api2/ { proxy_pass ${base}/; }
    location /rw/ { rewrite ^/rw/(.*)$ /new/$1 break; proxy_pass ${base}; }
    location /new/ { proxy_pass ${base}; }
    location /var/ { set $u ${base}/v/; proxy_pass $u; }
  }`),
    }, async (s) => {
      up.counts.clear();
      const out: Record<string, Snap | number> = {};
      for (const path of ['/api/x?a=1', '/api2/x?a=1', '/rw/y', '/new/y', '/var/w', '/var/other']) out[path] = await s.get(path);
      out['upstream requests'] = [...up.counts.values()].reduce((a, b) => a + b, 0);
      return out;
    });
    assert.equal((run.nginx.result['/api2/x?a=1'] as Snap).headers['x-cache-status'], 'HIT');
    assertSameAsNginx(run);
  });
});

describe('proxy_cache: ranges of a response being cached (differential)', () => {
  after(cleanup);

  it('sends one range of a MISS whose upstream says Accept-Ranges (206, the upstream\'s Content-Range cleared), the whole body for two ranges or without Accept-Ranges, 416 for a range it cannot satisfy (not cached), as nginx', async () => {
    const up = await countingUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache levels=1:2 keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    proxy_cache one; proxy_cache_valid 200 1m; proxy_cache_key $uri;
    location = /one { proxy_pass http://127.0.0.1:${up.port}/lm; }
    location = /two { proxy_pass http://127.0.0.1:${up.port}/lm; }
    location = /plain { proxy_pass http://127.0.0.1:${up.port}/plain; }
    location = /stub { proxy_pass http://127.0.0.1:${up.port}/h/Content-Range?v=stub; }
    location = /bad { proxy_pass http://127.0.0.1:${up.port}/lm; }
    location = /bad-ep { proxy_pass http://127.0.0.1:${up.port}/lm; error_page 416 /err; }
    location = /bad-cr { proxy_pass http://127.0.0.1:${up.port}/lm-cr; }
    location = /err { return 200 "custom\\n"; }
  }`),
    }, async (s) => {
      up.counts.clear();
      const out: Record<string, Snap | number> = {};
      const range = async (label: string, path: string, value: string): Promise<void> => {
        out[label] = await s.get(path, { headers: { Range: value } });
      };
      await range('one range, MISS', '/one', 'bytes=4-6');
      await range('one range, HIT', '/one', 'bytes=4-6');
      await range('two ranges, MISS', '/two', 'bytes=0-2,4-6');
      await range('two ranges, HIT', '/two', 'bytes=0-2,4-6');
      await range('no Accept-Ranges upstream, MISS', '/plain', 'bytes=0-2');
      await range('upstream Content-Range, no Accept-Ranges', '/stub', 'bytes=0-2');
      await range('unsatisfiable range, MISS', '/bad', 'bytes=1000-');
      out['after the 416, still a MISS'] = await s.get('/bad');
      await range('unsatisfiable range, HIT', '/bad', 'bytes=1000-');
      await range('unsatisfiable range, MISS, error_page', '/bad-ep', 'bytes=1000-');
      await range('unsatisfiable range, upstream Content-Range, MISS', '/bad-cr', 'bytes=1000-');
      out['upstream Content-Range, cached'] = await s.get('/bad-cr');
      await range('unsatisfiable range, upstream Content-Range, HIT', '/bad-cr', 'bytes=1000-');
      out['upstream requests'] = [...up.counts.values()].reduce((a, b) => a + b, 0);
      return out;
    });
    assert.equal(run.nginx.result['one range, MISS'] && (run.nginx.result['one range, MISS'] as Snap).status, 206);
    assert.equal((run.nginx.result['unsatisfiable range, MISS'] as Snap).status, 416);
    assert.equal((run.nginx.result['after the 416, still a MISS'] as Snap).headers['x-cache-status'], 'MISS');
    assertSameAsNginx(run);
  });
});

describe('proxy_cache: variants (differential)', () => {
  after(cleanup);

  it('stores a response whose Vary makes another variant than the one looked up under the key\'s main entry, a matching one under its own, as nginx', async () => {
    const up = await countingUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`  proxy_cache_path cache levels=1:2 keys_zone=one:1m;
  server { listen 127.0.0.1:${port};
    add_header X-Cache-Status $upstream_cache_status always;
    location / { proxy_pass http://127.0.0.1:${up.port}; proxy_cache one; proxy_cache_valid 200 1m; proxy_cache_key $uri; }
  }`),
    }, async (s) => {
      up.counts.clear();
      const out: Record<string, Snap | number> = {};
      const get = async (label: string, vary: string, headers: Record<string, string>): Promise<void> => {
        out[label] = await s.get(`/h/Vary?v=${vary}`, { headers });
      };
      await get('Vary: z', 'z', { Z: '1' });
      await get('Vary changed to x,y, another variant', 'x,y', { X: '1' });
      await get('x:1 again', 'x,y', { X: '1' });
      await get('x:2, a second variant', 'x,y', { X: '2' });
      await get('x:2 again', 'x,y', { X: '2' });
      await get('x:1 after x:2', 'x,y', { X: '1' });
      out['upstream requests'] = [...up.counts.values()].reduce((a, b) => a + b, 0);
      return out;
    });
    assert.equal((run.nginx.result['x:2, a second variant'] as Snap).headers['x-cache-status'], 'MISS');
    assertSameAsNginx(run);
  });
});

/** A jinx with a cache under `prefix`, proxying to `upstreamPort`. */
async function startCachingJinx(prefix: string, port: number, upstreamPort: number, pathParams = ''): Promise<ReturnType<typeof startServer>> {
  writeFiles(prefix, {
    'nginx.conf': `daemon off; error_log logs/error.log info; events {}
http { access_log off; proxy_temp_path tmp/proxy;
  proxy_cache_path cache levels=1:2 keys_zone=one:1m ${pathParams};
  server { listen 127.0.0.1:${port};
    location / { proxy_pass http://127.0.0.1:${upstreamPort}; proxy_cache one; proxy_cache_valid 1h;
      add_header X-Cache-Status $upstream_cache_status; }
  }
}
`,
  });
  return startServer(JINX, prefix, join(prefix, 'nginx.conf'), [port]);
}

describe('proxy_cache (jinx)', () => {
  after(cleanup);

  it('removes at start the temporary files of processes that have ended, not those a live process is writing (another worker\'s)', async () => {
    const up = await countingUpstream();
    const prefix = tempDir('jinx-cache-');
    // a process that has ended: a child that ran and exited
    const ended = spawnSync('true').pid!;
    const live = process.pid;
    const name = (pid: number): string => `0123456789abcdef0123456789abcdef.${pid}.7.tmp`;
    writeFiles(prefix, { 'logs/.keep': '', 'tmp/.keep': '', [`cache/${name(ended)}`]: 'x', [`cache/${name(live)}`]: 'y' });
    const port = await freePort();
    const server = await startCachingJinx(prefix, port, up.port);
    assert.equal((await request(port, '/loaded')).headers['x-cache-status'], 'MISS');
    await waitFor(() => !existsSync(join(prefix, 'cache', name(ended))), 5000, 'the ended process\'s temporary file removed');
    assert.ok(existsSync(join(prefix, 'cache', name(live))), 'the live process\'s temporary file kept');
    await server.stop('SIGQUIT');
  });

  it('keeps its entries across a restart: the HIT needs no upstream', async () => {
    const up = await countingUpstream();
    const prefix = tempDir('jinx-cache-');
    writeFiles(prefix, { 'logs/.keep': '', 'tmp/.keep': '' });
    const port = await freePort();
    let server = await startCachingJinx(prefix, port, up.port);
    assert.equal((await request(port, '/kept')).headers['x-cache-status'], 'MISS');
    assert.equal((await request(port, '/kept')).headers['x-cache-status'], 'HIT');
    await server.stop('SIGQUIT');
    server = await startCachingJinx(prefix, port, up.port);
    const again = await request(port, '/kept');
    assert.equal(again.headers['x-cache-status'], 'HIT');
    assert.equal(again.body, 'GET /kept #1\n');
    assert.equal(up.counts.get('/kept'), 1);
    assert.ok(existsSync(entryPath(join(prefix, 'cache'), `http://127.0.0.1:${up.port}/kept`)));
    await server.stop('SIGQUIT');
  });

  it('an entry an earlier jinx wrote (format 2, without stale-while-revalidate and stale-if-error) is still a HIT after an upgrade', async () => {
    const up = await countingUpstream();
    const prefix = tempDir('jinx-cache-');
    writeFiles(prefix, { 'logs/.keep': '', 'tmp/.keep': '' });
    const port = await freePort();
    const key = `http://127.0.0.1:${up.port}/old`;
    const json = `${JSON.stringify({ key, dateSec: 1, status: 200, reason: 'OK', headers: [['Content-Type', 'text/plain']], upstreamHeaders: [] })}\n`;
    const validSec = Math.floor(Date.now() / 1000) + 3600;
    const path = entryPath(join(prefix, 'cache'), key);
    writeFiles(join(path, '..'), {
      [path.slice(path.lastIndexOf('/') + 1)]: `JINXCACHE 2 ${String(json.length).padStart(10, '0')} ${String(validSec).padStart(12, '0')}\n${json}from an earlier jinx\n`,
    });
    const server = await startCachingJinx(prefix, port, up.port);
    const r = await request(port, '/old');
    assert.equal(r.headers['x-cache-status'], 'HIT');
    assert.equal(r.body, 'from an earlier jinx\n');
    assert.equal(up.counts.get('/old'), undefined);
    await server.stop('SIGQUIT');
  });

  it('max_size evicts the least recently used entries', async () => {
    const big = 'x'.repeat(6000);
    const { port: upstreamPort } = await startUpstream((_req, res) => res.end(big));
    const prefix = tempDir('jinx-cache-');
    writeFiles(prefix, { 'logs/.keep': '', 'tmp/.keep': '' });
    const port = await freePort();
    const server = await startCachingJinx(prefix, port, upstreamPort, 'max_size=16k');
    for (const path of ['/one', '/two', '/three']) assert.equal((await request(port, path)).headers['x-cache-status'], 'MISS');
    const files = filesUnder(join(prefix, 'cache'));
    assert.equal(files.length, 2, `entries left: ${files.join(', ')}`);
    assert.equal((await request(port, '/three')).headers['x-cache-status'], 'HIT');
    assert.equal((await request(port, '/one')).headers['x-cache-status'], 'MISS');
    await server.stop('SIGQUIT');
  });

  it('never caches a response the upstream did not finish', async () => {
    let requests = 0;
    const upstream = createServer((socket: Socket) => {
      requests++;
      socket.once('data', () => {
        socket.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\nCache-Control: max-age=60\r\n\r\nunfinished');
      });
    });
    await new Promise<void>((res) => upstream.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => upstream.close(() => res())));
    const prefix = tempDir('jinx-cache-');
    writeFiles(prefix, { 'logs/.keep': '', 'tmp/.keep': '' });
    const port = await freePort();
    const server = await startCachingJinx(prefix, port, (upstream.address() as { port: number }).port);
    await request(port, '/cut').catch(() => undefined);
    const second = await request(port, '/cut').catch(() => undefined);
    assert.equal(requests, 2);
    if (second) assert.equal(second.headers['x-cache-status'], 'MISS');
    // no entry, and the temporary file of the cut response goes away
    await waitFor(() => filesUnder(join(prefix, 'cache')).length === 0, 5000, 'an empty cache directory');
    assert.match(server.errorLog(), /upstream prematurely closed connection/);
    await server.stop('SIGQUIT');
  });
});
