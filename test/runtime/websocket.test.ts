/**
 * WebSockets through `proxy_pass`, differential against nginx: the
 * handshake's `101 Switching Protocols` and its headers, messages both ways
 * (text, and binary larger than the socket buffers), a close from the client
 * reaching the upstream, `proxy_read_timeout` closing an idle tunnel with
 * nginx's info line, Nginx Proxy Manager's `Connection $http_connection`
 * form, and handshakes that do not upgrade (refused by the upstream, or to a
 * location that does not proxy), and `$bytes_sent` of a tunnel.
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { WebSocket } from 'undici';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';
import { wsEchoUpstream } from '../helpers/upstreams.js';

/** A WebSocket handshake as a browser sends it; `connection` may add `close`. */
const handshake = (path: string, connection = 'Upgrade'): string =>
  `GET ${path} HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: ${connection}\r\n`
  + 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

/** Opens a WebSocket, sends each message in turn awaiting its echo, and returns the echoes (binary as length and first byte). */
async function roundTrips(url: string, messages: readonly (string | Buffer)[]): Promise<string[]> {
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  const incoming: (string | ArrayBuffer)[] = [];
  let wake: (() => void) | undefined;
  ws.addEventListener('message', (e) => {
    incoming.push(e.data as string | ArrayBuffer);
    wake?.();
  });
  await new Promise<void>((res, rej) => {
    ws.addEventListener('open', () => res());
    ws.addEventListener('error', () => rej(new Error(`${url} did not open`)));
  });
  const echoes: string[] = [];
  for (const m of messages) {
    const arrived = new Promise<void>((res) => { wake = res; });
    ws.send(m);
    await arrived;
    const got = incoming.shift()!;
    echoes.push(typeof got === 'string' ? got : `binary ${got.byteLength} bytes, first ${new Uint8Array(got)[0]}`);
  }
  const closed = new Promise<number>((res) => ws.addEventListener('close', (e) => res(e.code)));
  ws.close(1000);
  echoes.push(`closed ${await closed}`);
  return echoes;
}

/** Opens a WebSocket and waits for the server side to close it; returns the close code and how long it stayed open. */
async function idleClose(url: string): Promise<{ code: number; afterMs: number }> {
  const ws = new WebSocket(url);
  const opened = Date.now();
  return new Promise((res, rej) => {
    ws.addEventListener('error', () => undefined);
    ws.addEventListener('close', (e) => res({ code: e.code, afterMs: Date.now() - opened }));
    setTimeout(() => rej(new Error('the idle tunnel was not closed')), 10_000);
  });
}

async function until(cond: () => boolean, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!cond() && Date.now() < end) await new Promise((res) => setTimeout(res, 20));
  return cond();
}

describe('WebSockets through proxy_pass (differential)', () => {
  after(cleanup);

  it('tunnels a WebSocket both ways, closes the upstream when the client closes, and closes an idle tunnel after proxy_read_timeout', async () => {
    const up = await wsEchoUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`
  map $http_upgrade $connection_upgrade { default upgrade; '' close; }
  server { listen 127.0.0.1:${port}; server_name ws.test;
    location /ws/ {
      proxy_pass http://127.0.0.1:${up.port};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_read_timeout 1s;
      add_header X-Not-On-101 yes;
    }
    location /npm/ {
      proxy_pass http://127.0.0.1:${up.port}/ws/;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $http_connection;
    }
    location /static { return 200 "static\\n"; }
  }`),
    }, async (s) => {
      const base = `ws://127.0.0.1:${s.port}`;
      const handshake101 = await s.raw(handshake('/ws/raw'));
      const openBefore = up.open();
      const echoes = await roundTrips(`${base}/ws/echo`, ['hello', Buffer.alloc(512 * 1024, 7), 'bye']);
      const upstreamClosed = await until(() => up.open() <= openBefore, 3000);
      const npm = await roundTrips(`${base}/npm/echo`, ['npm']);
      const idle = await idleClose(`${base}/ws/idle`);
      const refused = await s.raw(handshake('/ws/refuse', 'Upgrade, close'));
      const stat = await s.raw(handshake('/static', 'Upgrade, close'));
      return {
        handshake101: handshake101 && { status: handshake101.status, reason: handshake101.reason, headers: handshake101.headers },
        echoes, upstreamClosed, npm, idleCode: idle.code, idleWithinTimeout: idle.afterMs >= 900 && idle.afterMs < 5000,
        refused: refused && { status: refused.status, body: refused.body },
        static: stat && { status: stat.status, body: stat.body },
      };
    });
    const n = run.nginx.result;
    assert.equal(n.handshake101?.status, 101);
    assert.equal(n.handshake101?.headers['sec-websocket-accept'], 's3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
    assert.deepEqual(n.echoes, ['hello', 'binary 524288 bytes, first 7', 'bye', 'closed 1000']);
    assert.equal(n.upstreamClosed, true);
    assert.deepEqual(n.npm, ['npm', 'closed 1000']);
    assert.equal(n.idleCode, 1006);
    assert.deepEqual(n.refused, { status: 403, body: 'refused' });
    assert.deepEqual(n.static, { status: 200, body: 'static\n' });
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[info] *CONN upstream timed out (110: Operation timed out) while proxying upgraded connection')));
    assertSameAsNginx(run);
  });

  it('counts what a tunnel carried to the client in $bytes_sent and $body_bytes_sent', async () => {
    const up = await wsEchoUpstream();
    const run = await differential({
      conf: ({ port }) => httpConf(`
  log_format sent '$bytes_sent $body_bytes_sent';
  server { listen 127.0.0.1:${port}; server_name ws.test;
    location /ws/ {
      access_log logs/sent.log sent;
      proxy_pass http://127.0.0.1:${up.port};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection upgrade;
    }
  }`),
    }, async (s) => {
      // one masked text frame "hi" out, its echo (4 bytes) back, then the client closes
      const read = await new Promise<Buffer>((res, rej) => {
        const c = connect(s.port, '127.0.0.1', () => c.write(handshake('/ws/echo')));
        let got = Buffer.alloc(0);
        let sentFrame = false;
        c.on('data', (chunk: Buffer) => {
          got = Buffer.concat([got, chunk]);
          const headEnd = got.indexOf('\r\n\r\n');
          if (headEnd !== -1 && !sentFrame) {
            sentFrame = true;
            c.write(Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x68, 0x69]));
          }
          if (headEnd !== -1 && got.length >= headEnd + 4 + 4) c.end();
        });
        c.on('close', () => res(got));
        c.on('error', rej);
      });
      await until(() => false, 300);
      return { readBytes: read.length, headBytes: read.indexOf('\r\n\r\n') + 4 };
    });
    for (const side of [run.nginx, run.jinx]) {
      const { readBytes, headBytes } = side.result;
      assert.deepEqual(side.file('logs/sent.log'), [`${readBytes} ${readBytes - headBytes}`], `${side === run.nginx ? 'nginx' : 'jinx'} logs what its client read`);
    }
  });
});
