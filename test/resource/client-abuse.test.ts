/**
 * One client must not take jinx down (issue 14), differential against
 * nginx: a pipelining burst, an HTTP/2 rapid reset (CVE-2023-44487) and a
 * PING flood each cost the upstream no more than they cost it behind nginx,
 * another client is served throughout, and hundreds of idle or slow
 * connections on plain, TLS and HTTP/2 addresses are closed at
 * `client_header_timeout` with nginx's log lines. Every load is bounded.
 */
import { strict as assert } from 'node:assert';
import { connect as netConnect, createServer as createNetServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, describe, it } from 'node:test';
import { cleanup, onCleanup } from '../helpers/harness.js';
import { TEMP_PATHS, differential } from '../helpers/differential.js';
import { END_HEADERS, END_STREAM, FRAME, H2_ERROR, PREFACE, frame, getFields, headerBlock } from '../helpers/h2-frames.js';
import { selfSigned } from '../helpers/pki.js';

/** The connections and requests an upstream saw, counted from `reset`. */
interface Counted {
  readonly port: number;
  connections: number;
  requests: number;
  reset(): void;
}

/** An upstream that answers every request 200 after `delayMs`, counting connections and requests. */
async function countingUpstream(delayMs: number): Promise<Counted> {
  const sockets = new Set<Socket>();
  const counted = { port: 0, connections: 0, requests: 0, reset(): void { this.connections = 0; this.requests = 0; } };
  const server = createNetServer((sock) => {
    counted.connections++;
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let head = '';
    sock.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      let end: number;
      while ((end = head.indexOf('\r\n\r\n')) !== -1) {
        head = head.slice(end + 4);
        counted.requests++;
        setTimeout(() => sock.writable && sock.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nup\n'), delayMs);
      }
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  counted.port = (server.address() as { port: number }).port;
  return counted;
}

const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

/** Requests `/r` (a `return`) every `everyMs` for `forMs`: how many were answered 200, and how many were not. */
async function otherClient(port: number, everyMs: number, forMs: number): Promise<{ ok: number; failed: number }> {
  const tally = { ok: 0, failed: 0 };
  const pending: Promise<void>[] = [];
  for (let t = 0; t < forMs; t += everyMs) {
    pending.push(new Promise<void>((res) => {
      const s = netConnect(port, '127.0.0.1', () => s.write('GET /r HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n'));
      let text = '';
      s.setTimeout(5000, () => s.destroy());
      s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
      s.on('error', () => undefined);
      s.on('close', () => {
        if (text.startsWith('HTTP/1.1 200')) tally.ok++;
        else tally.failed++;
        res();
      });
    }));
    await sleep(everyMs);
  }
  await Promise.all(pending);
  return tally;
}

/** The frames of a server's bytes: type and, for GOAWAY, its error code. */
function framesOf(bytes: Buffer): { types: Map<number, number>; goawayCode: number | undefined } {
  const types = new Map<number, number>();
  let goawayCode: number | undefined;
  for (let at = 0; at + 9 <= bytes.length;) {
    const length = bytes.readUIntBE(at, 3);
    const type = bytes[at + 3]!;
    types.set(type, (types.get(type) ?? 0) + 1);
    if (type === FRAME.GOAWAY && at + 17 <= bytes.length) goawayCode = bytes.readUInt32BE(at + 13);
    at += 9 + length;
  }
  return { types, goawayCode };
}

/** Writes `bytes` on a new h2c connection and reads until the server closes it (or `waitMs` passes). */
function h2cExchange(port: number, bytes: Buffer, waitMs: number): Promise<{ frames: ReturnType<typeof framesOf>; closed: boolean }> {
  return new Promise((res) => {
    const chunks: Buffer[] = [];
    const s = netConnect(port, '127.0.0.1', () => s.write(bytes));
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => undefined);
    const done = (closed: boolean): void => {
      clearTimeout(timer);
      s.destroy();
      res({ frames: framesOf(Buffer.concat(chunks)), closed });
    };
    const timer = setTimeout(() => done(false), waitMs);
    s.on('close', () => done(true));
  });
}

/** The lines of an error log with their stream numbers and counts made alike, each with how often it came. */
function tally(lines: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of lines) {
    const key = l.replace(/stream \d+/, 'stream N').replace(/exceeded \d+/, 'exceeded N').replace(/:\d+(?=[,"/ ])/g, ':PORT');
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

describe('one client cannot take jinx down (differential)', () => {
  after(cleanup);

  const main = 'daemon off;\nuser root;\npid logs/nginx.pid;\nerror_log logs/error.log info;\nworker_rlimit_nofile 4096;\nevents { worker_connections 2048; }\n';

  it('a burst of 1,000 pipelined requests on each of 2 connections that close at once puts no more on the upstream than nginx does, and another client is served throughout', async () => {
    const up = await countingUpstream(50);
    const run = await differential({
      conf: ({ port }) => `${main}http {\n  ${TEMP_PATHS}\n  access_log off;\n  server { listen 127.0.0.1:${port};
    location / { proxy_pass http://127.0.0.1:${up.port}; }
    location /r { return 200 "ok\\n"; } }\n}\n`,
    }, async (side) => {
      up.reset();
      const burst = Array.from({ length: 1000 }, (_, i) => `GET /pipe${i} HTTP/1.1\r\nHost: burst\r\n\r\n`).join('');
      for (let k = 0; k < 2; k++) {
        const s = netConnect(side.port, '127.0.0.1', () => {
          s.write(burst);
          setTimeout(() => s.destroy(), 50);
        });
        s.on('error', () => undefined);
      }
      const other = await otherClient(side.port, 100, 1500);
      await sleep(300);
      return { upstreamConnections: up.connections, upstreamRequests: up.requests, other };
    });
    assert.deepEqual(run.nginx.result.other, { ok: 15, failed: 0 });
    assert.deepEqual(run.jinx.result.other, { ok: 15, failed: 0 }, 'another client is served throughout');
    assert.ok(run.jinx.result.upstreamRequests <= run.nginx.result.upstreamRequests + 2,
      `upstream requests: nginx ${run.nginx.result.upstreamRequests}, jinx ${run.jinx.result.upstreamRequests}`);
    assert.ok(run.jinx.result.upstreamConnections <= run.nginx.result.upstreamConnections + 2,
      `upstream connections: nginx ${run.nginx.result.upstreamConnections}, jinx ${run.jinx.result.upstreamConnections}`);
    assert.ok(!run.jinx.allErrorLog.some((l) => l.includes('worker_connections are not enough')), run.jinx.allErrorLog.join('\n'));
  });

  it('an HTTP/2 rapid reset (1,000 HEADERS, each cancelled at once) sends no request upstream, is refused as nginx refuses it and ends with GOAWAY NO_ERROR', async () => {
    const up = await countingUpstream(50);
    const block = headerBlock(getFields('/x', 'rapid'));
    const parts = [PREFACE, frame(FRAME.SETTINGS, 0, 0)];
    for (let i = 0; i < 1000; i++) {
      const id = 1 + 2 * i;
      const cancel = Buffer.alloc(4);
      cancel.writeUInt32BE(H2_ERROR.CANCEL);
      parts.push(frame(FRAME.HEADERS, END_STREAM | END_HEADERS, id, block), frame(FRAME.RST_STREAM, 0, id, cancel));
    }
    const run = await differential({
      conf: ({ port }) => `${main}http {\n  ${TEMP_PATHS}\n  access_log off;\n  server { listen 127.0.0.1:${port}; http2 on;
    location / { proxy_pass http://127.0.0.1:${up.port}; } }\n}\n`,
    }, async (side) => {
      up.reset();
      const { frames, closed } = await h2cExchange(side.port, Buffer.concat(parts), 3000);
      await sleep(300);
      return {
        closed, goawayCode: frames.goawayCode, resets: frames.types.get(FRAME.RST_STREAM) ?? 0,
        upstreamConnections: up.connections, upstreamRequests: up.requests,
      };
    });
    assert.deepEqual({ ...run.nginx.result, upstreamConnections: 0 }, { closed: true, goawayCode: 0, resets: 129, upstreamConnections: 0, upstreamRequests: 0 });
    assert.deepEqual({ ...run.jinx.result, upstreamConnections: 0 }, { closed: true, goawayCode: 0, resets: 129, upstreamConnections: 0, upstreamRequests: 0 });
    assert.ok(run.jinx.result.upstreamConnections <= run.nginx.result.upstreamConnections + 1,
      `upstream connections: nginx ${run.nginx.result.upstreamConnections}, jinx ${run.jinx.result.upstreamConnections}`);
    const lines = (l: readonly string[]): Record<string, number> => {
      const t = tally(l);
      // how many streams were taken before the refusals began depends on how the bytes were read
      for (const k of Object.keys(t)) if (k.includes('client canceled stream')) t[k] = 1;
      return t;
    };
    assert.deepEqual(lines(run.jinx.errorLog), lines(run.nginx.errorLog));
    assert.equal(run.jinx.errorLog.filter((l) => l.includes('client sent too many refused streams')).length, 1);
  });

  it('an HTTP/2 PING flood is ended with "http2 flood detected"', async () => {
    const ping = frame(FRAME.PING, 0, 0, Buffer.alloc(8));
    // 17 bytes a frame, no payload: past 8 x 0 + 1 MiB within 8 MiB and a little
    const flood = Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0), ...Array<Buffer>(520_000).fill(ping)]);
    const run = await differential({
      conf: ({ port }) => `${main}http {\n  ${TEMP_PATHS}\n  access_log off;\n  server { listen 127.0.0.1:${port}; http2 on; location / { return 200; } }\n}\n`,
    }, async (side) => {
      // (its GOAWAY comes after the PING acknowledgements, and the close of a connection with unread
      // bytes resets it: the client may not see it)
      const { closed } = await h2cExchange(side.port, flood, 10_000);
      return { closed };
    });
    assert.deepEqual(run.nginx.result, { closed: true });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(tally(run.jinx.errorLog), tally(run.nginx.errorLog));
  });

  it('504 idle or slow connections on plain, TLS and HTTP/2 addresses are closed at client_header_timeout, with nginx\'s lines and 408 entries', async () => {
    const { cert, key } = selfSigned('localhost');
    const kinds = ['plain silent', 'plain partial', 'slowloris', 'tls silent', 'tls handshaken', 'tls partial', 'h2c preface', 'h2 tls preface'] as const;
    const each = 63;
    const timeoutMs = 2000;
    const run = await differential({
      extraPorts: 1,
      files: { 'cert.pem': cert, 'cert.key': key },
      conf: ({ port, ports }) => `${main}http {\n  ${TEMP_PATHS}\n  access_log logs/access.log;\n  client_header_timeout 2s;
  server { listen 127.0.0.1:${port}; listen 127.0.0.1:${ports[0]} ssl; http2 on; ssl_certificate cert.pem; ssl_certificate_key cert.key;
    location / { return 200; } }\n}\n`,
    }, async (side) => {
      const tls = side.ports[0]!;
      /** For each kind, how long each connection lived after its TCP connection was made. */
      const closedAfterMs: Record<string, number[]> = {};
      const open = (kind: (typeof kinds)[number]): Socket => {
        const plain = (port: number): Socket => netConnect(port, '127.0.0.1');
        switch (kind) {
          case 'plain silent': return plain(side.port);
          case 'plain partial': return plain(side.port).once('connect', function (this: Socket) { this.write('GET / HTTP/1.1\r\nHost: x\r\n'); });
          case 'slowloris': {
            const s = plain(side.port);
            // two bytes, at 1.2 and 1.5 s: a timer started again at the first would run past 3 s
            const drips = [1200, 1500].map((ms) => setTimeout(() => s.writable && s.write('X'), ms));
            s.once('close', () => drips.forEach(clearTimeout));
            return s;
          }
          case 'tls silent': return plain(tls);
          case 'tls handshaken': return tlsConnect({ port: tls, host: '127.0.0.1', rejectUnauthorized: false });
          case 'tls partial': {
            const s = tlsConnect({ port: tls, host: '127.0.0.1', rejectUnauthorized: false });
            return s.once('secureConnect', () => s.write('GET / HTTP/1.1\r\nHo'));
          }
          case 'h2c preface': return plain(side.port).once('connect', function (this: Socket) { this.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)])); });
          case 'h2 tls preface': {
            const s = tlsConnect({ port: tls, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['h2'] });
            return s.once('secureConnect', () => s.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)])));
          }
        }
      };
      const closed: Promise<void>[] = [];
      for (const kind of kinds) {
        closedAfterMs[kind] = [];
        for (let i = 0; i < each; i++) {
          const s = open(kind);
          let connectedAtMs = Date.now();
          // (a TLS socket's 'connect' is its TCP connection's)
          s.once('connect', () => { connectedAtMs = Date.now(); });
          s.on('error', () => undefined);
          s.resume();
          s.setTimeout(timeoutMs + 4000, () => s.destroy());
          closed.push(new Promise((res) => s.once('close', () => {
            closedAfterMs[kind]!.push(Date.now() - connectedAtMs);
            res();
          })));
        }
      }
      await Promise.all(closed);
      const latest = Object.fromEntries(kinds.map((k) => [k, Math.max(...closedAfterMs[k]!) <= timeoutMs + 1000]));
      return { closedInTime: latest };
    });
    const allInTime = Object.fromEntries(kinds.map((k) => [k, true]));
    assert.deepEqual(run.nginx.result.closedInTime, allInTime);
    assert.deepEqual(run.jinx.result.closedInTime, allInTime, 'every connection closed within client_header_timeout + 1 s');
    assert.deepEqual(tally(run.jinx.errorLog), tally(run.nginx.errorLog));
    const statuses = (lines: readonly string[]): Record<string, number> => tally(lines.map((l) => /" (\d{3}) /.exec(l)?.[1] ?? l));
    assert.deepEqual(statuses(run.jinx.file('logs/access.log')), statuses(run.nginx.file('logs/access.log')));
  });
});
