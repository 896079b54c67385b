/**
 * Misbehaving upstreams, differential against nginx: one that never accepts
 * the connection, one that never answers,
 * one that answers slowly but within the read timeout between reads, one that
 * stalls or resets in the middle of the body, one that stops reading a large
 * request body, one with a 64 KiB header, one
 * that speaks plain HTTP on the port jinx reaches over TLS, and names a local
 * DNS server answers NXDOMAIN for or never answers. Each case checks the
 * status (or the cut body), the exact error-log line, and that the server
 * still serves a healthy location afterwards.
 */
import { strict as assert } from 'node:assert';
import { createServer as createNetServer } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, onCleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, parseRaw, rawExchange } from '../helpers/differential.js';
import { dnsServer, echoUpstream, scriptedUpstream, unacceptingPort } from '../helpers/upstreams.js';

/** What a client saw of one exchange: the status, the body bytes received, and the declared length. */
interface Seen {
  readonly status: number | undefined;
  readonly bodyBytes: number;
  readonly contentLength: string | undefined;
}

/** One request on its own connection; body bytes and length are kept for 200 responses (error pages name the server). */
async function exchange(port: number, path: string, host: string): Promise<Seen> {
  const text = await rawExchange(port, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, 10_000);
  const parsed = parseRaw(text);
  const end = text.indexOf('\r\n\r\n');
  if (parsed?.status !== 200) return { status: parsed?.status, bodyBytes: 0, contentLength: undefined };
  return { status: 200, bodyBytes: Buffer.byteLength(text.slice(end + 4), 'latin1'), contentLength: parsed.headers['content-length'] as string | undefined };
}

/**
 * A server whose `/` goes to the misbehaving upstream on `upPort` and `/ok/`
 * to a healthy one on `okPort`, with server-level `settings`.
 */
const faultsConf = (port: number, upPort: number, okPort: number, settings: string): string => httpConf(`  server { listen 127.0.0.1:${port}; server_name faults.test;
    ${settings}
    location / { proxy_pass http://127.0.0.1:${upPort}; }
    location /ok/ { proxy_pass http://127.0.0.1:${okPort}; }
  }`);

const HEAD_200 = (length: number): string => `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\n\r\n`;

describe('upstream faults (differential)', () => {
  after(cleanup);

  it('answers 504 to an upstream that never answers, and passes a slow body whose reads come within proxy_read_timeout', async () => {
    const timers = new Set<NodeJS.Timeout>();
    onCleanup(() => { for (const t of timers) clearTimeout(t); });
    const up = await scriptedUpstream((line, sock) => {
      if (line.includes('/never')) return;
      // three 100-byte chunks 600 ms apart: 1.2 s in all, each read within the 1 s timeout
      sock.write(HEAD_200(300));
      let sent = 0;
      const next = (): void => {
        sock.write('x'.repeat(100));
        if (++sent < 3) timers.add(setTimeout(next, 600));
      };
      timers.add(setTimeout(next, 600));
    });
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port }) => faultsConf(port, up.port, ok.port, 'proxy_read_timeout 1s;'),
    }, async (s) => ({
      never: await exchange(s.port, '/never', 'faults.test'),
      slow: await exchange(s.port, '/slow', 'faults.test'),
      ok: (await exchange(s.port, '/ok/', 'faults.test')).status,
    }));
    assert.equal(run.nginx.result.never.status, 504);
    assert.deepEqual(run.nginx.result.slow, { status: 200, bodyBytes: 300, contentLength: '300' });
    assert.equal(run.nginx.result.ok, 200);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading response header from upstream')));
    assertSameAsNginx(run);
  });

  it('times proxy_read_timeout out when it runs out, not up to half a second early or late, waiting for the header and in the body', async () => {
    const up = await scriptedUpstream((line, sock) => {
      if (line.includes('/stall')) sock.write(HEAD_200(1000) + 'y'.repeat(100));
    });
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port }) => faultsConf(port, up.port, ok.port, 'proxy_read_timeout 1200ms;'),
    }, async (s) => {
      // started 130 ms apart, so that a timer checked on a coarse tick cannot land every one of them in the window
      const timed = async (path: string, delayMs: number): Promise<boolean> => {
        await new Promise((res) => setTimeout(res, delayMs));
        const start = performance.now();
        await exchange(s.port, path, 'faults.test');
        const elapsedMs = performance.now() - start;
        return elapsedMs >= 1190 && elapsedMs < 1400;
      };
      return { onTime: await Promise.all([timed('/never', 0), timed('/stall', 130), timed('/never', 260), timed('/stall', 390)]) };
    });
    assert.deepEqual(run.nginx.result, { onTime: [true, true, true, true] });
    assert.equal(run.nginx.errorLog.filter((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading response header from upstream')).length, 2);
    assert.equal(run.nginx.errorLog.filter((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading upstream')).length, 2);
    assertSameAsNginx(run);
  });

  it('cuts the body and logs "while reading upstream" when the upstream stalls or resets after the header', async () => {
    const up = await scriptedUpstream((line, sock) => {
      sock.write(HEAD_200(1000) + 'y'.repeat(100));
      if (line.includes('/reset')) setTimeout(() => sock.resetAndDestroy(), 200);
    });
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port }) => faultsConf(port, up.port, ok.port, 'proxy_read_timeout 1s;'),
    }, async (s) => ({
      stall: await exchange(s.port, '/stall', 'faults.test'),
      reset: await exchange(s.port, '/reset', 'faults.test'),
      ok: (await exchange(s.port, '/ok/', 'faults.test')).status,
    }));
    // with proxy_buffering on, nginx holds a partly filled buffer: the 100 bytes never reach the client
    assert.deepEqual(run.nginx.result.stall, { status: 200, bodyBytes: 0, contentLength: '1000' });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while reading upstream')));
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN readv() failed (104: Connection reset by peer) while reading upstream')));
    assertSameAsNginx(run);
  });

  it('passes what came of a body cut short by a closed connection (Content-Length or chunked, buffered or not), with nginx\'s "prematurely closed … while reading upstream" line', async () => {
    // the header first, the cut body and the close a moment later: nginx names what it was doing when it
    // saw the close (with proxy_buffering off, "sending to client" if it came with the header)
    const up = await scriptedUpstream((line, sock) => {
      sock.write(line.includes('/chunked') ? 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' : HEAD_200(100));
      setTimeout(() => sock.end(line.includes('/chunked') ? 'ff\r\nunfinished\r\n' : 'unfinished\r\n'), 100);
    });
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name faults.test;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /un/ { proxy_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
    location /ok/ { proxy_pass http://127.0.0.1:${ok.port}; }
  }`),
    }, async (s) => {
      const body = async (path: string): Promise<string> => {
        const text = await rawExchange(s.port, `GET ${path} HTTP/1.1\r\nHost: faults.test\r\n\r\n`, 5000);
        return text.slice(text.indexOf('\r\n\r\n') + 4);
      };
      return {
        length: await body('/length'), chunked: await body('/chunked'), unLength: await body('/un/length'), unChunked: await body('/un/chunked'),
        ok: (await exchange(s.port, '/ok/', 'faults.test')).status,
      };
    });
    assert.equal(run.nginx.result.length, 'unfinished\r\n');
    // what came, as one chunk, and no last chunk
    assert.equal(run.nginx.result.chunked, 'c\r\nunfinished\r\n\r\n');
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream prematurely closed connection while reading upstream')));
    assertSameAsNginx(run);
  });

  it('passes the body as it comes with proxy_buffering off or "X-Accel-Buffering: no", unless proxy_ignore_headers names it', async () => {
    const up = await scriptedUpstream((line, sock) => {
      const accel = line.includes('/accel') ? 'X-Accel-Buffering: no\r\n' : '';
      sock.write(`HTTP/1.1 200 OK\r\n${accel}Content-Length: 1000\r\n\r\n${'z'.repeat(100)}`);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name faults.test;
    proxy_read_timeout 1s;
    location /off/ { proxy_buffering off; proxy_pass http://127.0.0.1:${up.port}; }
    location /accel/ { proxy_pass http://127.0.0.1:${up.port}; }
    location /ignored/accel/ { proxy_ignore_headers X-Accel-Buffering; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({
      off: await exchange(s.port, '/off/', 'faults.test'),
      accel: await exchange(s.port, '/accel/', 'faults.test'),
      ignored: await exchange(s.port, '/ignored/accel/', 'faults.test'),
    }));
    assert.deepEqual(run.nginx.result, {
      off: { status: 200, bodyBytes: 100, contentLength: '1000' },
      accel: { status: 200, bodyBytes: 100, contentLength: '1000' },
      ignored: { status: 200, bodyBytes: 0, contentLength: '1000' },
    });
    assertSameAsNginx(run);
  });

  it('answers 502 to a response header larger than proxy_buffer_size ("upstream sent too big header")', async () => {
    const up = await scriptedUpstream((_line, sock) => {
      sock.end(`HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(64 * 1024)}\r\nContent-Length: 2\r\n\r\nok`);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name faults.test;
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /small/ { proxy_buffer_size 1k; proxy_pass http://127.0.0.1:${up.port}; }
  }`),
    }, async (s) => ({ big: (await exchange(s.port, '/big', 'faults.test')).status, small: (await exchange(s.port, '/small/', 'faults.test')).status }));
    assert.deepEqual(run.nginx.result, { big: 502, small: 502 });
    assert.ok(run.nginx.errorLog.every((l) => l.startsWith('[error] *CONN upstream sent too big header while reading response header from upstream')));
    assertSameAsNginx(run);
  });

  it('answers 502 with OpenSSL\'s "wrong version number" when the upstream speaks plain HTTP on the TLS port', async () => {
    const plain = createNetServer((sock) => {
      sock.on('error', () => undefined);
      sock.once('data', () => sock.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n'));
    });
    await new Promise<void>((res) => plain.listen(0, '127.0.0.1', () => res()));
    onCleanup(() => new Promise<void>((res) => plain.close(() => res())));
    const port = (plain.address() as { port: number }).port;
    const run = await differential({
      conf: ({ port: p }) => httpConf(`  server { listen 127.0.0.1:${p}; server_name faults.test;
    location / { proxy_pass https://127.0.0.1:${port}; }
  }`),
    }, async (s) => (await exchange(s.port, '/tls', 'faults.test')).status);
    assert.equal(run.nginx.result, 502);
    // the differential helper compares OpenSSL errors without their function field (Debian's OpenSSL 3 leaves it empty)
    assert.ok(run.nginx.errorLog.some((l) => l.includes('SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines::wrong version number) while SSL handshaking to upstream')));
    assert.ok(run.jinx.file('logs/error.log').some((l) => l.includes('SSL_do_handshake() failed (SSL: error:0A00010B:SSL routines:ssl3_get_record:wrong version number) while SSL handshaking to upstream')));
    assertSameAsNginx(run);
  });

  it('answers 502 when a name cannot be resolved: NXDOMAIN, a DNS server that never answers, no resolver', async () => {
    const nx = await dnsServer('nxdomain');
    const silent = await dnsServer('silent');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name faults.test;
    location /nx/ { resolver 127.0.0.1:${nx}; set $name nope.test; proxy_pass http://$name; }
    location /silent/ { resolver 127.0.0.1:${silent}; resolver_timeout 1s; set $name quiet.test; proxy_pass http://$name; }
    location /none/ { set $name other.test; proxy_pass http://$name; }
  }`),
    }, async (s) => ({
      nx: (await exchange(s.port, '/nx/', 'faults.test')).status,
      silent: (await exchange(s.port, '/silent/', 'faults.test')).status,
      none: (await exchange(s.port, '/none/', 'faults.test')).status,
    }));
    assert.deepEqual(run.nginx.result, { nx: 502, silent: 502, none: 502 });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN nope.test could not be resolved (3: Host not found)')));
    assertSameAsNginx(run);
  });
  it('answers 504 "while sending request to upstream" when the upstream stops reading a large body for proxy_send_timeout', async () => {
    // reads the request header, then nothing more: the body fills the socket buffers
    const up = await scriptedUpstream((_line, sock) => sock.pause());
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port }) => faultsConf(port, up.port, ok.port, 'client_max_body_size 64m; proxy_send_timeout 1s;'),
    }, async (s) => ({
      upload: (await s.get('/upload', { method: 'POST', body: Buffer.alloc(32 * 1024 * 1024, 0x61) })).status,
      ok: (await s.get('/ok/')).status,
    }));
    assert.deepEqual(run.nginx.result, { upload: 504, ok: 200 });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while sending request to upstream')));
    assertSameAsNginx(run);
  });
  it('answers 504 "while connecting to upstream" when connecting takes longer than proxy_connect_timeout', async () => {
    const port = await unacceptingPort();
    const ok = await echoUpstream('ok');
    const run = await differential({
      conf: ({ port: listen }) => faultsConf(listen, port, ok.port, 'proxy_connect_timeout 1s;'),
    }, async (s) => ({ slow: (await s.get('/slow')).status, ok: (await s.get('/ok/')).status }));
    assert.deepEqual(run.nginx.result, { slow: 504, ok: 200 });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN upstream timed out (110: Operation timed out) while connecting to upstream')));
    assertSameAsNginx(run);
  });
});
