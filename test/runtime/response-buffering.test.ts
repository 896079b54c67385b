/**
 * Upstream responses on their way to slow clients, differential against
 * nginx: with `proxy_buffering on` what the client cannot take yet goes to a
 * temp file under `proxy_temp_path` (nginx's warning, once per response) and
 * the upstream connection is released as soon as the response is read;
 * `proxy_max_temp_file_size` limits or disables the file; with
 * `proxy_buffering off` or `X-Accel-Buffering: no` nothing is spooled and
 * streamed events pass at once; a client that hangs up in the middle leaves
 * no temp file or socket behind. The same through `fastcgi_pass`. Over
 * TLS, a client that keeps up gets a large response without a temp file.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { connect as connectH2, type ClientHttp2Session } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, get as httpsGet } from 'node:https';
import { join } from 'node:path';
import { cleanup, hasCommand, onCleanup, startUpstream, waitFor } from '../helpers/harness.js';
import { selfSigned } from '../helpers/pki.js';
import { assertSameAsNginx, differential, httpConf, parseRaw, rawExchange, type Side } from '../helpers/differential.js';
import { listTree, openFiles, rawClient, servingPid, sleep, statusOf } from '../helpers/slow-clients.js';
import { scriptedUpstream } from '../helpers/upstreams.js';
import { STDOUT, endRequest, fcgiRecord, scriptedFastcgi } from '../helpers/fastcgi-server.js';
import { scriptedScgi } from '../helpers/cgi-servers.js';

const HOST = 'spool.test';
const NO_OPENSSL = hasCommand('openssl') ? false : 'no openssl command';
const MiB = 1024 * 1024;
/** A response larger than what the kernel's socket buffers between the three parties can hold. */
const BIG = 32 * MiB;

/** An upstream that answers every request with `size` bytes and tells when each of its connections closed. */
interface BigUpstream {
  readonly port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Connections closed so far. */
  closed(): number;
}

/**
 * Starts an upstream that answers every request with a `size`-byte body
 * (`Content-Length`), as fast as the connection takes it. Stopped at cleanup.
 */
async function bigUpstream(size: number): Promise<BigUpstream> {
  let accepted = 0;
  let closed = 0;
  const sockets = new Set<Socket>();
  const body = Buffer.alloc(size, 0x7a);
  const server = createNetServer((sock) => {
    accepted++;
    sockets.add(sock);
    sock.on('close', () => {
      closed++;
      sockets.delete(sock);
    });
    sock.on('error', () => undefined);
    let head = '';
    sock.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      head = '';
      sock.write(`HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`);
      sock.write(body);
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as AddressInfo).port, accepted: () => accepted, closed: () => closed };
}

/** What a slow client saw of one download. */
interface Download {
  readonly status: number | undefined;
  /** Body bytes received. */
  readonly bodyBytes: number;
  /** The upstream connection was closed while the client had read nothing. */
  readonly releasedBeforeRead: boolean;
  /** Temp files the server held open while the client was not reading (under PREFIX/tmp, `(deleted)` kept). */
  readonly tempFilesDuring: string[];
}

/**
 * GETs `path` without reading for `holdMs` (the response fills the socket
 * buffers, then the server's), then reads everything; with `tls`, over TLS.
 */
async function slowDownload(s: Side, up: BigUpstream, path: string, holdMs: number, tls = false): Promise<Download> {
  // an earlier download's upstream connection may close after its client saw the end: not this one's release
  await waitFor(() => up.closed() === up.accepted(), 5000, 'the earlier upstream connections to close');
  const closedBefore = up.closed();
  const c = await rawClient(s.port, { paused: true, tls: tls ? { servername: HOST } : undefined });
  await c.send(`GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`);
  const deadline = Date.now() + holdMs;
  while (Date.now() < deadline && up.closed() === closedBefore) await sleep(20);
  const releasedBeforeRead = up.closed() > closedBefore;
  const tempFilesDuring = openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp')).tempFiles;
  c.socket.resume();
  const end = await c.ended(30_000);
  const bodyStart = end.text.indexOf('\r\n\r\n') + 4;
  return { status: statusOf(end.text), bodyBytes: end.text.length - bodyStart, releasedBeforeRead, tempFilesDuring };
}

/** Sockets beyond `baseline` and temp files the serving process still holds. */
function leftOpen(s: Side, baseline: number): { tempFiles: string[]; extraSockets: number } {
  const open = openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp'));
  return { tempFiles: open.tempFiles, extraSockets: Math.max(0, open.sockets - baseline) };
}

const socketsNow = (s: Side): number => openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp')).sockets;

/** The temp-file warnings of a log: `PATH-UNDER-tmp request-uri`. */
const spoolLines = (lines: readonly string[]): string[] => lines.flatMap((l) => {
  const m = /^\[warn\] \*CONN an upstream response is buffered to a temporary file \/.*?\/tmp\/(\S+) while reading upstream, client: 127\.0\.0\.1, server: spool\.test, request: "GET (\S+) HTTP\/1\.1", upstream: "http:\/\/127\.0\.0\.1:\d+\S*", host: "spool\.test"$/.exec(l);
  return m ? [`${m[1]} ${m[2]}`] : [];
});

/** A response's status, body length and the body's SHA-256. */
interface BodySeen {
  readonly status: number;
  readonly bytes: number;
  readonly sha256: string;
}

/** GETs `path` over HTTPS (HTTP/1.1, a connection of its own). */
function httpsBody(port: number, path: string): Promise<BodySeen> {
  return new Promise((resolve, reject) => {
    const req = httpsGet({ host: '127.0.0.1', port, path, servername: HOST, headers: { host: HOST }, rejectUnauthorized: false, agent: false }, (res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      res.on('data', (c: Buffer) => { bytes += c.length; hash.update(c); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, sha256: hash.digest('hex') }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** GETs `path` on an HTTP/2 session. */
function h2Body(session: ClientHttp2Session, path: string): Promise<BodySeen> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':path': path, ':authority': HOST });
    let status = 0;
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('response', (h) => { status = Number(h[':status']); });
    req.on('data', (c: Buffer) => { bytes += c.length; hash.update(c); });
    req.on('end', () => resolve({ status, bytes, sha256: hash.digest('hex') }));
    req.on('error', reject);
    req.end();
  });
}

/** A 200's body length, else -1. */
const bodyBytes = (seen: BodySeen): number => (seen.status === 200 ? seen.bytes : -1);

/** A 200's body's SHA-256, else its status. */
const bodySha = (seen: BodySeen): string => (seen.status === 200 ? seen.sha256 : `status ${seen.status}`);

/**
 * A FastCGI responder that answers every request, once its empty STDIN
 * record arrived, with `size` bytes (`Content-Length`) in STDOUT records,
 * then END_REQUEST, and closes; `written()` counts the responses it wrote
 * whole (the socket took the last byte).
 */
async function fastcgiUpstream(size: number): Promise<{ port: number; written(): number }> {
  const sockets = new Set<Socket>();
  let written = 0;
  const server = createNetServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let input = Buffer.alloc(0);
    sock.on('data', (d: Buffer) => {
      input = Buffer.concat([input, d]);
      for (;;) {
        if (input.length < 8) return;
        const type = input[1]!;
        const length = input.readUInt16BE(4) + input[6]!;
        if (input.length < 8 + length) return;
        input = input.subarray(8 + length);
        if (type !== 5 || length !== 0) continue;
        const records = [fcgiRecord(6, Buffer.from(`Status: 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`))];
        const chunk = Buffer.alloc(32 * 1024, 0x66);
        for (let sent = 0; sent < size; sent += chunk.length) records.push(fcgiRecord(6, chunk.subarray(0, Math.min(chunk.length, size - sent))));
        records.push(fcgiRecord(3, Buffer.alloc(8)));
        sock.end(Buffer.concat(records), () => { written++; });
        return;
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => { for (const x of sockets) x.destroy(); server.close(() => res()); }));
  return { port: (server.address() as AddressInfo).port, written: () => written };
}

/** Lines of 16 bytes tagged `tag`, `bytes` of them in all: each piece of a body is told from the others by its place. */
const taggedLines = (tag: string, bytes: number): string => Array.from({ length: bytes / 16 }, (_, i) => `${tag}${String(i).padStart(14, '0')}\n`).join('');

/** The bodies `ownBytesHandler` answers with: one slow client's, and two that other clients take at once. */
const OWN_BYTES_BODIES: Record<string, string> = { '/slow': taggedLines('s', 24 * MiB), '/fast': taggedLines('f', 2 * MiB), '/chunked': taggedLines('c', 2 * MiB) };

const sha256 = (text: string): string => createHash('sha256').update(text, 'latin1').digest('hex');

/** An upstream's handler: `/slow` and `/fast` with a `Content-Length`, `/chunked` in chunks of 10,000 bytes. */
function ownBytesHandler(req: IncomingMessage, res: ServerResponse): void {
  const body = OWN_BYTES_BODIES[req.url ?? ''] ?? '';
  if (req.url === '/chunked') {
    res.writeHead(200);
    for (let at = 0; at < body.length; at += 10000) res.write(body.slice(at, at + 10000), 'latin1');
    res.end();
    return;
  }
  res.writeHead(200, { 'Content-Length': body.length });
  res.end(body, 'latin1');
}

/**
 * Through the server's locations `/` (buffered) and `/off/` (not), given by
 * `locations` (directives of `location / {…}` and `location /off/ {…}`),
 * to an upstream answering with `OWN_BYTES_BODIES` by the last part of the
 * path: one client asks for `/slow` and does not read while other requests
 * take `/fast`, `/chunked` and `/fast` at once, then reads it whole.
 * Asserts every client got its own bytes, as from nginx.
 */
async function assertOwnBytes(locations: { readonly buffered: string; readonly off: string }, extra = ''): Promise<void> {
  const run = await differential({
    conf: ({ port }) => httpConf(`${extra}  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { ${locations.buffered} }
    location /off/ { ${locations.off} }
  }`),
  }, async (s) => {
    const out: Record<string, string> = {};
    for (const prefix of ['/', '/off/']) {
      const socket = connect({ host: '127.0.0.1', port: s.port });
      socket.pause();
      socket.write(`GET ${prefix}slow HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`);
      await sleep(300);
      for (const path of ['fast', 'chunked', 'fast']) {
        out[`${prefix}${path}`] = sha256((await s.get(`${prefix}${path}`, { headers: { Host: HOST } })).body);
      }
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      await new Promise((res) => socket.on('close', res).resume());
      const text = Buffer.concat(chunks).toString('latin1');
      out[`${prefix}slow`] = sha256(text.slice(text.indexOf('\r\n\r\n') + 4));
    }
    return out;
  });
  for (const prefix of ['/', '/off/']) {
    for (const path of ['slow', 'fast', 'chunked']) assert.equal(run.nginx.result[`${prefix}${path}`], sha256(OWN_BYTES_BODIES[`/${path}`]!), `${prefix}${path}`);
  }
  assertSameAsNginx(run);
}

/** `proxy_pass SCHEME://` to the upstream on `up`, as `assertOwnBytes` takes it. */
function proxiedTo(scheme: 'http' | 'https', up: number): [{ buffered: string; off: string }, string] {
  const pass = `proxy_http_version 1.1; proxy_set_header Connection "";`;
  return [
    { buffered: `proxy_pass ${scheme}://up; ${pass}`, off: `proxy_pass ${scheme}://up/; ${pass} proxy_buffering off;` },
    `  upstream up { server 127.0.0.1:${up}; keepalive 8; }\n`,
  ];
}

/** The body `OWN_BYTES_BODIES` holds for the last part of `path` (`/off/fast`: `/fast`'s). */
const ownBody = (path: string): string => OWN_BYTES_BODIES[path.slice(path.lastIndexOf('/'))] ?? '';

/** Sizes of the STDOUT records `ownBytesFastcgi` sends a body in, in turn: some longer than a buffer, some not, none aligned to one. */
const RECORD_BYTES = [1000, 65535, 4097, 32768, 17];

/**
 * A FastCGI server answering `OWN_BYTES_BODIES` by the path of its
 * `SCRIPT_NAME` parameter, in STDOUT records of `RECORD_BYTES` in turn:
 * with a `Content-Length` but for `chunked`, whose body ends with the
 * connection's END_REQUEST.
 */
async function ownBytesFastcgi(): Promise<number> {
  const fcgi = await scriptedFastcgi((req, sock) => {
    const path = req.params.find(([n]) => n === 'SCRIPT_NAME')?.[1] ?? '';
    const body = Buffer.from(ownBody(path), 'latin1');
    const head = `Content-Type: application/octet-stream\r\n${path.endsWith('/chunked') ? '' : `Content-Length: ${body.length}\r\n`}\r\n`;
    const records = [fcgiRecord(STDOUT, head)];
    for (let at = 0, i = 0; at < body.length; i++) {
      const size = RECORD_BYTES[i % RECORD_BYTES.length]!;
      records.push(fcgiRecord(STDOUT, body.subarray(at, at + size)));
      at += size;
    }
    records.push(fcgiRecord(STDOUT, ''), endRequest());
    sock.end(Buffer.concat(records));
  });
  return fcgi.port;
}

/** An SCGI server answering `OWN_BYTES_BODIES` by the path of its `SCRIPT_NAME` parameter; `chunked` without a length, to the connection's end. */
async function ownBytesScgi(): Promise<number> {
  const scgi = await scriptedScgi((req, sock) => {
    const path = req.params.find(([n]) => n === 'SCRIPT_NAME')?.[1] ?? '';
    const body = ownBody(path);
    sock.end(`Status: 200 OK\r\nContent-Type: application/octet-stream\r\n${path.endsWith('/chunked') ? '' : `Content-Length: ${body.length}\r\n`}\r\n${body}`, 'latin1');
  });
  return scgi.port;
}

describe('response buffering (differential)', () => {
  after(cleanup);

  it('spools what a slow client cannot take to one temp file under proxy_temp_path\'s levels, logs it once, and releases the upstream at once', async () => {
    const up = await bigUpstream(BIG);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_temp_path tmp/levels 1 2; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const sockets = socketsNow(s);
      const download = await slowDownload(s, up, '/image', 5000);
      await sleep(200);
      return { download, tree: listTree(join(s.prefix, 'tmp/levels')), left: leftOpen(s, sockets) };
    });
    assert.deepEqual(run.nginx.result, {
      download: { status: 200, bodyBytes: BIG, releasedBeforeRead: true, tempFilesDuring: ['/levels/1/00/0000000001 (deleted)'] },
      tree: ['1/', '1/00/'],
      left: { tempFiles: [], extraSockets: 0 },
    });
    assert.deepEqual(spoolLines(run.nginx.errorLog), ['levels/1/00/0000000001 /image']);
    assertSameAsNginx(run);
  });

  it('sends 1 MiB responses to fast HTTPS clients over HTTP/1.1 and HTTP/2 without a temp file, and spools what a slow HTTPS client cannot take', { skip: NO_OPENSSL }, async () => {
    const tls = selfSigned(HOST);
    const fast = await bigUpstream(MiB);
    const slow = await bigUpstream(BIG);
    const run = await differential({
      files: { 'spool.pem': tls.cert, 'spool.key': tls.key },
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port} ssl; http2 on; server_name ${HOST};
    ssl_certificate spool.pem; ssl_certificate_key spool.key;
    location /fast/ { proxy_pass http://127.0.0.1:${fast.port}; }
    location /slow/ { proxy_pass http://127.0.0.1:${slow.port}; }
  }`),
    }, async (s) => {
      const http1: number[] = [];
      for (let i = 0; i < 3; i++) http1.push(bodyBytes(await httpsBody(s.port, `/fast/${i}`)));
      // windows as wide as curl's: flow control does not hold the responses back
      const session = connectH2(`https://127.0.0.1:${s.port}`, { servername: HOST, rejectUnauthorized: false, settings: { initialWindowSize: 32 * MiB } });
      session.on('connect', () => session.setLocalWindowSize(32 * MiB));
      const http2: number[] = [];
      try {
        for (let i = 0; i < 3; i++) http2.push(bodyBytes(await h2Body(session, `/fast/h2-${i}`)));
      } finally {
        session.close();
      }
      return { http1, http2, slow: await slowDownload(s, slow, '/slow/', 5000, true) };
    });
    assert.deepEqual(run.nginx.result, {
      http1: [MiB, MiB, MiB],
      http2: [MiB, MiB, MiB],
      slow: { status: 200, bodyBytes: BIG, releasedBeforeRead: true, tempFilesDuring: ['/proxy/0000000001 (deleted)'] },
    });
    assert.deepEqual(spoolLines(run.nginx.errorLog), ['proxy/0000000001 /slow/']);
    assertSameAsNginx(run);
  });

  it('sends each client its own bytes when one client reads a large response slowly while another takes responses at once, buffered or not, chunked or not', async () => {
    // the upstream connections read into buffers of their own: one a slow client keeps is not filled again
    const { port: up } = await startUpstream(ownBytesHandler);
    await assertOwnBytes(...proxiedTo('http', up));
  });

  it('sends each client its own bytes from an HTTPS upstream when one client reads a large response slowly while another takes responses at once', { skip: NO_OPENSSL }, async () => {
    // decrypted bytes, too, are read into the connection's own buffer, 16 KiB at a time
    const server = createHttpsServer(selfSigned('up.test'), ownBytesHandler);
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => { server.closeAllConnections(); server.close(() => res()); }));
    await assertOwnBytes(...proxiedTo('https', (server.address() as AddressInfo).port));
  });

  it('sends each client its own bytes of FastCGI and SCGI responses when one client reads a large one slowly while another takes responses at once, buffered or not', async () => {
    // FastCGI and SCGI connections read into buffers of their own too, the pieces of a read sent in one write
    const fcgi = await ownBytesFastcgi();
    const scgi = await ownBytesScgi();
    await assertOwnBytes({
      buffered: `fastcgi_param SCRIPT_NAME $uri; fastcgi_pass 127.0.0.1:${fcgi};`,
      off: `fastcgi_param SCRIPT_NAME $uri; fastcgi_pass 127.0.0.1:${fcgi}; fastcgi_buffering off;`,
    });
    await assertOwnBytes({
      buffered: `scgi_param SCRIPT_NAME $uri; scgi_pass 127.0.0.1:${scgi};`,
      off: `scgi_param SCRIPT_NAME $uri; scgi_pass 127.0.0.1:${scgi}; scgi_buffering off;`,
    });
  });

  it('sends each HTTPS client and HTTP/2 stream its own bytes when many of them, over TLS and h2c, take large responses at once', { skip: NO_OPENSSL }, async () => {
    // the upstream connections' read buffers are read into again once what came in them went out or was copied
    const { port: up } = await startUpstream(ownBytesHandler);
    const tls = selfSigned(HOST);
    // /big/: reads of 64 KiB (proxy_buffers 8 8k), whose HTTP/2 frames are longer than what TLS is handed at once
    const paths = ['/fast', '/chunked', '/big/fast', '/big/chunked', '/fast', '/chunked', '/big/fast', '/big/chunked'];
    const run = await differential({
      files: { 'own.pem': tls.cert, 'own.key': tls.key },
      extraPorts: 1,
      conf: ({ port, ports: [h2cPort] }) => httpConf(`  upstream up { server 127.0.0.1:${up}; keepalive 8; }
  server { listen 127.0.0.1:${port} ssl; listen 127.0.0.1:${h2cPort}; http2 on; server_name ${HOST};
    ssl_certificate own.pem; ssl_certificate_key own.key;
    # no temp file (which streams nginx spools is a race): the upstream waits for the client instead
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_max_temp_file_size 0; }
    location /big/ { proxy_pass http://up/; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_max_temp_file_size 0; proxy_buffers 8 8k; }
  }`),
    }, async (s) => {
      const sessions = [
        connectH2(`https://127.0.0.1:${s.port}`, { servername: HOST, rejectUnauthorized: false, settings: { initialWindowSize: 32 * MiB } }),
        connectH2(`http://127.0.0.1:${s.ports[0]}`, { settings: { initialWindowSize: 32 * MiB } }),
      ];
      for (const session of sessions) session.on('connect', () => session.setLocalWindowSize(32 * MiB));
      try {
        const [overTls, h2c, https] = await Promise.all([
          ...sessions.map((session) => Promise.all(paths.map(async (path) => bodySha(await h2Body(session, path))))),
          Promise.all(paths.map(async (path) => bodySha(await httpsBody(s.port, path)))),
        ]);
        return { overTls, h2c, https };
      } finally {
        for (const session of sessions) session.close();
      }
    });
    const expected = paths.map((path) => sha256(OWN_BYTES_BODIES[path.replace(/^\/big/, '')]!));
    assert.deepEqual(run.nginx.result, { overTls: expected, h2c: expected, https: expected });
    assertSameAsNginx(run);
  });

  it('passes a response header that two reads of the upstream cut in the middle whole', async () => {
    // the part of the header the first read (over 16 KiB: not copied out) brought waits in undici's
    // parser: the second read takes another buffer
    const big = 'b'.repeat(20000);
    const up = await scriptedUpstream((_line, socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nX-Cut-In-Two: first-half-`);
      setTimeout(() => socket.end('second-half\r\nX-After: after\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'), 100);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_buffer_size 64k; proxy_buffers 4 64k; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const r = parseRaw(await rawExchange(s.port, `GET / HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`))!;
      return { status: r.status, big: r.headers['x-big'] === big, cut: r.headers['x-cut-in-two'], after: r.headers['x-after'], body: r.body };
    });
    assert.deepEqual(run.nginx.result, { status: 200, big: true, cut: 'first-half-second-half', after: 'after', body: 'ok' });
    assertSameAsNginx(run);
  });

  it('keeps the upstream waiting instead of spooling with proxy_max_temp_file_size 0 or proxy_buffering off', async () => {
    const up = await bigUpstream(BIG);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location /nofile/ { proxy_max_temp_file_size 0; proxy_pass http://127.0.0.1:${up.port}; }
    location /unbuffered/ { proxy_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      nofile: await slowDownload(s, up, '/nofile/', 1500),
      unbuffered: await slowDownload(s, up, '/unbuffered/', 1500),
      tree: listTree(join(s.prefix, 'tmp/proxy')),
    }));
    const waited = { status: 200, bodyBytes: BIG, releasedBeforeRead: false, tempFilesDuring: [] };
    assert.deepEqual(run.nginx.result, { nofile: waited, unbuffered: waited, tree: [] });
    assert.deepEqual(spoolLines(run.nginx.errorLog), []);
    assertSameAsNginx(run);
  });

  it('spools up to proxy_max_temp_file_size, then keeps the upstream waiting', async () => {
    const up = await bigUpstream(BIG);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { proxy_max_temp_file_size 1m; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => slowDownload(s, up, '/limited', 1500));
    assert.deepEqual(run.nginx.result, { status: 200, bodyBytes: BIG, releasedBeforeRead: false, tempFilesDuring: ['/proxy/0000000001 (deleted)'] });
    assert.deepEqual(spoolLines(run.nginx.errorLog), ['proxy/0000000001 /limited']);
    assertSameAsNginx(run);
  });

  it('leaves no temp file or socket behind when a client hangs up in the middle of a download or before the header (499)', async () => {
    const up = await bigUpstream(BIG);
    const silent = await scriptedUpstream(() => undefined);
    const run = await differential({
      conf: ({ port }) => httpConf(`  log_format st '$status $upstream_status';
  server { listen 127.0.0.1:${port}; server_name ${HOST}; access_log logs/access.log st;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /nofile/ { proxy_max_temp_file_size 0; proxy_pass http://127.0.0.1:${up.port}; }
    location /silent/ { proxy_pass http://127.0.0.1:${silent.port}; }
  }`),
    }, async (s) => {
      const sockets = socketsNow(s);
      const out: Record<string, unknown> = {};
      // counted from this side's start: without nginx, jinx's side is the first
      const asked = silent.requestLines.length;
      const c = await rawClient(s.port);
      await c.send(`GET /silent/ HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      await waitFor(() => silent.requestLines.length > asked, 5000, 'the request upstream');
      c.socket.destroy();
      await sleep(300);
      out['/silent/'] = leftOpen(s, sockets);
      for (const path of ['/spooled', '/nofile/']) {
        const closed = up.closed();
        const c = await rawClient(s.port, { paused: true });
        await c.send(`GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
        // /spooled: the client leaves once the whole body is in the temp file (the upstream released); /nofile/: while the upstream waits
        if (path === '/spooled') await waitFor(() => up.closed() > closed, 5000, 'the body in the temp file');
        else await sleep(700);
        c.socket.destroy();
        await waitFor(() => up.closed() > closed, 5000, 'the upstream connection to close');
        await sleep(200);
        out[path] = leftOpen(s, sockets);
      }
      return out;
    });
    const none = { tempFiles: [], extraSockets: 0 };
    assert.deepEqual(run.nginx.result, { '/silent/': none, '/spooled': none, '/nofile/': none });
    assert.deepEqual(run.nginx.file('logs/access.log'), ['499 -', '200 200', '200 200']);
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.file('logs/access.log'), run.nginx.file('logs/access.log'));
  });

  it('passes server-sent events at once: chunk by chunk with buffering, as they come with X-Accel-Buffering: no or proxy_buffering off; a stream with a length waits for whole buffers', async () => {
    const timers = new Set<NodeJS.Timeout>();
    onCleanup(() => { for (const t of timers) clearTimeout(t); });
    const sockets = new Set<Socket>();
    const server = createNetServer((sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
      sock.on('error', () => undefined);
      sock.once('data', (d: Buffer) => {
        const line = d.toString('latin1');
        const accel = line.includes('/accel') ? 'X-Accel-Buffering: no\r\n' : '';
        // events of a fixed length: 4 of them make the whole body when it has a Content-Length
        const event = (n: number): string => `data: {"n":${n},"at":${Date.now()}}\n\n`;
        const length = line.includes('/length');
        const framing = length ? `Content-Length: ${4 * event(0).length}` : 'Transfer-Encoding: chunked';
        sock.write(`HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n${accel}${framing}\r\n\r\n`);
        let n = 0;
        const tick = (): void => {
          const e = event(n);
          sock.write(length ? e : `${e.length.toString(16)}\r\n${e}\r\n`);
          if (++n < 4) timers.add(setTimeout(tick, 250));
          else if (!length) sock.end('0\r\n\r\n');
        };
        tick();
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => { for (const s of sockets) s.destroy(); server.close(() => res()); }));
    const upPort = (server.address() as AddressInfo).port;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location /accel/ { proxy_pass http://127.0.0.1:${upPort}; }
    location /off/ { proxy_buffering off; proxy_pass http://127.0.0.1:${upPort}; }
    location /on/ { proxy_pass http://127.0.0.1:${upPort}; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const path of ['/accel/', '/off/', '/on/', '/on/length', '/off/length']) {
        const c = await rawClient(s.port);
        const prompt: boolean[] = [];
        let seen = 0;
        c.socket.on('data', () => {
          const events = [...c.received().matchAll(/data: \{"n":(\d+),"at":(\d+)\}/g)];
          for (const e of events.slice(seen)) prompt.push(Date.now() - Number(e[2]) < 150);
          seen = events.length;
        });
        await c.send(`GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`);
        const end = await c.ended();
        out[path] = { status: statusOf(end.text), events: seen, prompt };
      }
      return out;
    });
    const prompt = { status: 200, events: 4, prompt: [true, true, true, true] };
    // with buffering, a chunked response passes chunk by chunk; one with a length fills a buffer first
    assert.deepEqual(run.nginx.result, {
      '/accel/': prompt, '/off/': prompt, '/on/': prompt, '/on/length': { status: 200, events: 4, prompt: [false, false, false, true] }, '/off/length': prompt,
    });
    assertSameAsNginx(run);
  });

  it('spools a FastCGI response to fastcgi_temp_path the same way, and keeps the server waiting with fastcgi_buffering off', async () => {
    const up = await fastcgiUpstream(BIG);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name ${HOST};
    location / { fastcgi_temp_path tmp/fcgi 1 2; fastcgi_pass 127.0.0.1:${up.port}; }
    location /off/ { fastcgi_buffering off; fastcgi_pass 127.0.0.1:${up.port}; }
  }`),
    }, async (s) => {
      const out: Record<string, unknown> = {};
      for (const path of ['/script', '/off/script']) {
        const before = up.written();
        const c = await rawClient(s.port, { paused: true });
        await c.send(`GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`);
        const deadline = Date.now() + 1500;
        while (Date.now() < deadline && up.written() === before) await sleep(20);
        const readWhole = up.written() > before;
        const tempFiles = openFiles(servingPid(s.server.child.pid!), join(s.prefix, 'tmp')).tempFiles;
        c.socket.resume();
        const end = await c.ended(30_000);
        out[path] = { status: statusOf(end.text), bodyBytes: end.text.length - end.text.indexOf('\r\n\r\n') - 4, readWhole, tempFiles };
      }
      out.tree = listTree(join(s.prefix, 'tmp/fcgi'));
      return out;
    });
    assert.deepEqual(run.nginx.result, {
      '/script': { status: 200, bodyBytes: BIG, readWhole: true, tempFiles: ['/fcgi/1/00/0000000001 (deleted)'] },
      '/off/script': { status: 200, bodyBytes: BIG, readWhole: false, tempFiles: [] },
      tree: ['1/', '1/00/'],
    });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[warn] *CONN an upstream response is buffered to a temporary file ') && l.includes('/tmp/fcgi/1/00/0000000001 while reading upstream')));
    assertSameAsNginx(run);
  });
});
