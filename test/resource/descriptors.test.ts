/**
 * Every descriptor and temp file has an owner that closes it, whatever ends
 * the request: 1,000 aborted uploads, and 1,000 exchanges where the upstream
 * or the client fails (resets, a close in the header or the body, timeouts,
 * clients leaving mid-upload, after the body, mid-response, while not
 * reading, HTTP/2 streams reset), with bodies and responses in temp files
 * (`client_body_buffer_size 1k`, small `proxy_buffers`), proxied and
 * through FastCGI. Afterwards the serving process has as many open
 * descriptors as before (`/proc/PID/fd`) within 2 s, `client_body_temp_path`,
 * `proxy_temp_path` and `fastcgi_temp_path` hold no file, the
 * runtime never closed a descriptor on garbage collection, and an unrelated
 * client was served throughout. The uploads run on the reference nginx too
 * when it is installed, with the same bounds.
 */
import { strict as assert } from 'node:assert';
import { connect as h2connect, constants as h2 } from 'node:http2';
import { createServer as createNetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, onCleanup, request } from '../helpers/harness.js';
import { TEMP_PATHS } from '../helpers/differential.js';
import {
  bystander, countingUpstream, descriptorCount, descriptorTargets, inBatches, newDescriptors, onEachServer, settles, type ResourceSide,
} from '../helpers/resource.js';
import { endRequest, fcgiRecord, scriptedFastcgi, STDOUT } from '../helpers/fastcgi-server.js';
import { listTree, rawClient, sleep } from '../helpers/slow-clients.js';

const BODY_BYTES = 20_000;
/** A 4 KiB chunk of a chunked body. */
const CHUNK = `1000\r\n${'b'.repeat(4096)}\r\n`;

/** The main context of both servers: one worker, room for the clients. */
const MAIN = 'daemon off;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log notice;\nevents { worker_connections 2048; }\n';

/** Files (not directories) left under the prefix's `tmp/DIR`. */
const filesIn = (s: ResourceSide, dir: string): string[] => listTree(join(s.prefix, 'tmp', dir)).filter((e) => !e.endsWith('/'));

/** What a run left behind, once settled. */
interface Left {
  /** The descriptor count came back to its starting value within 2 s. */
  readonly descriptorsBack: boolean;
  /** Descriptors still open that were not open before (empty when `descriptorsBack`). */
  readonly extra: string[];
  readonly bodyTemp: string[];
  readonly proxyTemp: string[];
  readonly fastcgiTemp: string[];
  readonly gcWarnings: number;
  readonly bystanderServed: boolean;
}

/**
 * Measures what is left 2 s at most after the run, against `before` (the
 * descriptors' targets at the start). The 2 s count from the server having
 * caught up with the clients: a request made after the last of them is
 * answered first (a busy machine may leave connections unaccepted for a
 * while after their clients are gone).
 */
async function leftBehind(s: ResourceSide, before: readonly string[], seen: readonly (number | string)[]): Promise<Left> {
  await request(s.port, '/local');
  const descriptorsBack = await settles(() => descriptorCount(s.pid) <= before.length, 2000);
  return {
    descriptorsBack,
    extra: descriptorsBack ? [] : newDescriptors(s.pid, before),
    bodyTemp: filesIn(s, 'body'),
    proxyTemp: filesIn(s, 'proxy'),
    fastcgiTemp: filesIn(s, 'fastcgi'),
    gcWarnings: (s.server.stderr().match(/Closing file descriptor \d+ on garbage collection/g) ?? []).length,
    bystanderServed: seen.length > 0 && seen.every((st) => st === 200),
  };
}

const CLEAN: Left = { descriptorsBack: true, extra: [], bodyTemp: [], proxyTemp: [], fastcgiTemp: [], gcWarnings: 0, bystanderServed: true };

/** Sends an HTTP/2 POST of `BODY_BYTES` on a connection of its own and resets the stream once it is sent. */
function h2AbortedUpload(port: number, path: string): Promise<void> {
  return new Promise((res) => {
    const session = h2connect(`http://127.0.0.1:${port}`);
    session.on('error', () => undefined);
    const done = (): void => {
      session.destroy();
      res();
    };
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-length': String(BODY_BYTES) });
    stream.on('error', () => undefined);
    stream.on('close', done);
    stream.end('b'.repeat(BODY_BYTES), () => setTimeout(() => stream.close(h2.NGHTTP2_CANCEL), 20));
    setTimeout(done, 3000);
  });
}

describe('descriptors and temp files', () => {
  after(cleanup);

  it('closes every temp file and socket of 1,000 aborted uploads (after the body, mid-body, chunked, unbuffered, HTTP/2 reset, FastCGI)', async () => {
    const slow = await countingUpstream((_req, res) => {
      setTimeout(() => res.end('ok\n'), 1000);
    });
    const slowFastcgi = await faultyFastcgi(1000);
    const result = await onEachServer({
      extraPorts: 1,
      conf: ({ port, ports }) => `${MAIN}http {
  ${TEMP_PATHS}
  access_log off;
  client_body_buffer_size 1k;
  client_body_timeout 5s;
  upstream slow { server 127.0.0.1:${slow.port}; keepalive 8; keepalive_timeout 500ms; }
  server { listen 127.0.0.1:${port}; listen 127.0.0.1:${ports[0]}; http2 on;
    location / { proxy_pass http://slow; }
    location /unbuffered/ { proxy_request_buffering off; proxy_pass http://slow; }
    location /fastcgi/ { fastcgi_pass 127.0.0.1:${slowFastcgi.port}; }
    location /fastcgi-unbuffered/ { fastcgi_request_buffering off; fastcgi_pass 127.0.0.1:${slowFastcgi.port}; }
    location /local { return 200 "ok\\n"; }
  }
}
`,
    }, async (s) => {
      // the first uploads open what stays open (temp directories, the log), then nothing is in flight
      for (const path of ['/', '/unbuffered/', '/fastcgi/ok']) {
        const c = await rawClient(s.port);
        await c.send(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: ${BODY_BYTES}\r\n\r\n${'b'.repeat(BODY_BYTES)}`);
        await c.ended(5000);
      }
      await settles(() => slow.open() === 0, 2000);
      const before = descriptorTargets(s.pid);
      const other = bystander(s.port, '/local');
      const body = 'b'.repeat(BODY_BYTES);
      const head = (path: string): string => `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: ${BODY_BYTES}\r\n\r\n`;
      await inBatches(1000, 50, async (i) => {
        const kind = i % 8;
        if (kind === 4) return h2AbortedUpload(s.ports[0]!, '/');
        const c = await rawClient(s.port);
        if (kind === 0) await c.send(head('/') + body);
        else if (kind === 1) await c.send(head('/') + body.slice(0, BODY_BYTES / 2));
        else if (kind === 2) await c.send(`POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNK}${CHUNK}`);
        else if (kind === 3) await c.send(head('/unbuffered/') + body.slice(0, BODY_BYTES / 2));
        else if (kind === 5) await c.send(head('/fastcgi/ok') + body);
        else if (kind === 6) await c.send(head('/fastcgi/ok') + body.slice(0, BODY_BYTES / 2));
        else await c.send(head('/fastcgi-unbuffered/ok') + body.slice(0, BODY_BYTES / 2));
        // a moment for the server to start on it, then the client is gone
        await sleep(i % 3 === 0 ? 0 : 20);
        c.socket.destroy();
      });
      const seen = await other.stop();
      return leftBehind(s, before, seen);
    });
    if (result.nginx) assert.deepEqual(result.nginx, CLEAN, 'nginx');
    assert.deepEqual(result.jinx, CLEAN, 'jinx');
  });

  it('closes every temp file and socket of 1,000 exchanges with upstream and client faults', async () => {
    const faulty = await faultyUpstream();
    const faultyFcgi = await faultyFastcgi(0);
    const result = await onEachServer({
      extraPorts: 1,
      jinxOnly: true,
      conf: ({ port, ports }) => `${MAIN}http {
  ${TEMP_PATHS}
  access_log off;
  client_body_buffer_size 1k;
  proxy_buffers 4 4k;
  proxy_read_timeout 200ms;
  proxy_send_timeout 200ms;
  proxy_cache_path tmp/cache keys_zone=faults:1m;
  upstream faulty { server 127.0.0.1:${faulty.port}; keepalive 8; keepalive_timeout 500ms; }
  server { listen 127.0.0.1:${port}; listen 127.0.0.1:${ports[0]}; http2 on;
    location /buffered/ { proxy_pass http://faulty; }
    location /unbuffered-body/ { proxy_request_buffering off; proxy_pass http://faulty; }
    location /unbuffered/ { proxy_buffering off; proxy_pass http://faulty; }
    location /no-file/ { proxy_max_temp_file_size 0; proxy_pass http://faulty; }
    location /cached/ { proxy_cache faults; proxy_cache_valid 200 1s; proxy_pass http://faulty; }
    location /fastcgi/ { fastcgi_buffers 4 4k; fastcgi_read_timeout 200ms; fastcgi_pass 127.0.0.1:${faultyFcgi.port}; }
    location /local { return 200 "ok\\n"; }
  }
}
`,
    }, async (s) => {
      for (const c of CLIENTS) await exchange(s, 0, '/buffered/', 'ok', c);
      await settles(() => faulty.open() === 0, 2000);
      const before = descriptorTargets(s.pid);
      const other = bystander(s.port, '/local');
      await inBatches(1000, 50, (i) => {
        const location = LOCATIONS[i % LOCATIONS.length]!;
        const upstream = UPSTREAMS[Math.floor(i / LOCATIONS.length) % UPSTREAMS.length]!;
        const client = CLIENTS[Math.floor(i / (LOCATIONS.length * UPSTREAMS.length)) % CLIENTS.length]!;
        return exchange(s, i, location, upstream, client);
      });
      const seen = await other.stop();
      const left = await leftBehind(s, before, seen);
      // a cache temp file is put in place or removed: only entries remain
      const cacheTemp = listTree(join(s.prefix, 'tmp/cache')).filter((e) => e.endsWith('.tmp'));
      return { ...left, proxyTemp: [...left.proxyTemp, ...cacheTemp] };
    });
    assert.deepEqual(result.jinx, CLEAN);
  });
});

/** Locations of the fault scenario: buffered both ways, body passed as it arrives, response unbuffered, no response temp file, cached, FastCGI. */
const LOCATIONS = ['/buffered/', '/unbuffered-body/', '/unbuffered/', '/no-file/', '/cached/', '/fastcgi/'] as const;
/** What the upstream does (the last path segment tells it). */
const UPSTREAMS = ['ok', 'reset', 'close-in-header', 'close-in-body', 'reset-in-body', 'silent', 'stall-in-body'] as const;
/** What the client does. */
const CLIENTS = ['reads', 'leaves-mid-upload', 'leaves-after-body', 'leaves-mid-response', 'stops-reading', 'h2-reads', 'h2-resets'] as const;

/** The size of the upstream's responses: larger than the proxy's buffers, so they go to temp files. */
const RESPONSE_BYTES = 200_000;

/**
 * An upstream whose behaviour is named by the request's last path segment
 * (see `UPSTREAMS`); it waits for the whole request, body included. `ok`
 * keeps the connection for the next request.
 */
async function faultyUpstream(): Promise<{ port: number; open(): number }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let request = '';
    socket.on('data', (d: Buffer) => {
      request += d.toString('latin1');
      const end = request.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = request.slice(0, end);
      const length = /content-length: *(\d+)/i.exec(head);
      if (length && request.length - end - 4 < Number(length[1])) return;
      if (/transfer-encoding: *chunked/i.test(head) && !request.endsWith('0\r\n\r\n')) return;
      const kind = /^\w+ [^ ]*\/([\w-]+?)\d* HTTP/.exec(head)?.[1];
      request = '';
      const header = `HTTP/1.1 200 OK\r\nContent-Length: ${RESPONSE_BYTES}\r\n\r\n`;
      switch (kind) {
        case 'reset': socket.resetAndDestroy(); break;
        case 'close-in-header': socket.end('HTTP/1.1 200 OK\r\nContent-Le'); break;
        case 'close-in-body': socket.write(header); socket.end('x'.repeat(RESPONSE_BYTES / 4)); break;
        case 'reset-in-body': socket.write(header + 'x'.repeat(RESPONSE_BYTES / 4), () => setTimeout(() => socket.resetAndDestroy(), 20)); break;
        case 'silent': break;
        case 'stall-in-body': socket.write(header + 'x'.repeat(RESPONSE_BYTES / 2)); break;
        default: socket.write(header + 'x'.repeat(RESPONSE_BYTES)); break;
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as { port: number }).port, open: () => sockets.size };
}

/**
 * A FastCGI server whose behaviour is named by the request URI's last path
 * segment, as `faultyUpstream`'s, answering after `delayMs`; `ok` sends
 * `RESPONSE_BYTES` and ends the request, closing the connection.
 */
async function faultyFastcgi(delayMs: number): Promise<{ port: number }> {
  const records = (data: Buffer): Buffer[] => {
    const out: Buffer[] = [];
    for (let at = 0; at < data.length; at += 32_768) out.push(fcgiRecord(STDOUT, data.subarray(at, at + 32_768)));
    return out;
  };
  const header = Buffer.from('Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n', 'latin1');
  return scriptedFastcgi((req, socket) => {
    const uri = req.params.find(([name]) => name === 'REQUEST_URI')?.[1] ?? '';
    const kind = /\/([\w-]+?)\d*$/.exec(uri)?.[1];
    const body = Buffer.alloc(RESPONSE_BYTES, 'x');
    setTimeout(() => {
      if (socket.destroyed) return;
      switch (kind) {
        case 'reset': socket.resetAndDestroy(); break;
        case 'close-in-header': socket.end(fcgiRecord(STDOUT, 'Status: 200 OK\r\nContent-Ty')); break;
        case 'close-in-body': socket.end(Buffer.concat([fcgiRecord(STDOUT, header), ...records(body.subarray(0, RESPONSE_BYTES / 4))])); break;
        case 'reset-in-body': socket.write(Buffer.concat([fcgiRecord(STDOUT, header), ...records(body.subarray(0, RESPONSE_BYTES / 4))]), () => setTimeout(() => socket.resetAndDestroy(), 20)); break;
        case 'silent': break;
        case 'stall-in-body': socket.write(Buffer.concat([fcgiRecord(STDOUT, header), ...records(body.subarray(0, RESPONSE_BYTES / 2))])); break;
        default: socket.end(Buffer.concat([fcgiRecord(STDOUT, header), ...records(body), endRequest()])); break;
      }
    }, delayMs);
  });
}

/** One exchange of the fault scenario; resolves when the client is done (1 s at most). */
async function exchange(s: ResourceSide, i: number, location: string, upstream: string, client: string): Promise<void> {
  const post = i % 2 === 0;
  // a cached location's responses are each their own entry
  const path = `${location}${upstream}${location === '/cached/' ? i : ''}`;
  const body = post ? 'b'.repeat(BODY_BYTES) : '';
  if (client.startsWith('h2-')) {
    await new Promise<void>((res) => {
      const session = h2connect(`http://127.0.0.1:${s.ports[0]}`);
      session.on('error', () => undefined);
      const done = (): void => {
        session.destroy();
        res();
      };
      const stream = session.request({ ':method': post ? 'POST' : 'GET', ':path': path, ...(post ? { 'content-length': String(BODY_BYTES) } : {}) });
      stream.on('error', () => undefined);
      stream.on('close', done);
      stream.end(body);
      if (client === 'h2-resets') setTimeout(() => stream.close(h2.NGHTTP2_CANCEL), 30 + (i % 5) * 20);
      else stream.resume();
      setTimeout(done, 1000);
    });
    return;
  }
  const c = await rawClient(s.port);
  const head = `${post ? 'POST' : 'GET'} ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${post ? `Content-Length: ${BODY_BYTES}\r\n` : ''}\r\n`;
  if (client === 'leaves-mid-upload' && post) {
    await c.send(head + body.slice(0, BODY_BYTES / 2));
    await sleep(20 + (i % 4) * 30);
    c.socket.destroy();
    return;
  }
  await c.send(head + body);
  if (client === 'leaves-after-body') {
    c.socket.destroy();
    return;
  }
  if (client === 'leaves-mid-response') {
    await settles(() => c.received().length > 0, 1000);
    await sleep(10);
    c.socket.destroy();
    return;
  }
  if (client === 'stops-reading') {
    c.socket.pause();
    await sleep(150 + (i % 3) * 100);
    c.socket.destroy();
    return;
  }
  await c.ended(1000);
}
