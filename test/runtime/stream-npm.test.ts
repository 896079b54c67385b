/**
 * Nginx Proxy Manager's "Streams" on NPM's own tree (`nginx.conf`'s
 * `stream { include /data/nginx/stream/*.conf; }`, the `stream` log format
 * of `conf.d/include/log-stream.conf`, `worker_processes auto`), with two
 * stream hosts rendered as NPM's `backend/templates/stream.conf` writes them
 * (host 1 TCP and UDP forwarding to local echo servers, host 2 TCP to a
 * closed port; no certificate, IPv6 on): a `server` per
 * protocol with `listen PORT` / `listen [::]:PORT`, `proxy_pass HOST:PORT`,
 * its own `access_log … stream` and `error_log … warn`, and the optional
 * `/data/nginx/custom/server_stream*[.]conf` includes. The UDP custom file
 * (NPM's "custom nginx configuration" for UDP streams) says
 * `proxy_responses 1;`, so that a UDP session ends with its answer instead of
 * NPM's default 10 minutes (`proxy_timeout`). A TCP and a UDP exchange with
 * the echo servers, both ways, and a TCP session to host 2 (502 and
 * nginx's `connect() failed` line); the answers and the access and error
 * log lines of both hosts are nginx 1.30's on the same tree (recorded beside
 * the test).
 */
import { strict as assert } from 'node:assert';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { prepareProxyManager, type PreparedTree } from '../helpers/corpus-trees.js';
import { ORACLE } from '../helpers/differential.js';
import { cleanup, freePort, JINX, startServer, waitFor } from '../helpers/harness.js';
import { answer, nextKey, stable } from '../helpers/recorded.js';

/**
 * Stream host `id` as NPM's stream.conf template renders it (ipv6 on, no
 * certificate): a TCP server when `tcp`, a UDP one when `udp`, forwarding to
 * 127.0.0.1:`forwardingPort`.
 */
function renderedStreamHost(id: number, incomingPort: number, forwardingPort: number, opts: { tcp: boolean; udp: boolean }): string {
  const server = (proto: 'tcp' | 'udp'): string => `server {
  listen ${incomingPort}${proto === 'udp' ? ' udp' : ''};
  listen [::]:${incomingPort}${proto === 'udp' ? ' udp' : ''};

  proxy_pass 127.0.0.1:${forwardingPort};

  access_log /data/logs/stream-${id}_access.log stream;
  error_log /data/logs/stream-${id}_error.log warn;

  # Custom
  include /data/nginx/custom/server_stream[.]conf;
  include /data/nginx/custom/server_stream_${proto}[.]conf;
}
`;
  return `# ------------------------------------------------------------
# ${incomingPort} TCP: ${opts.tcp} UDP: ${opts.udp}
# ------------------------------------------------------------


${opts.tcp ? server('tcp') : ''}

${opts.udp ? server('udp') : ''}

`;
}

/** A port free for both TCP and UDP on 127.0.0.1 and on `::`. */
async function freeTcpUdpPort(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await freePort();
    const ok = await new Promise<boolean>((resolve) => {
      const u = createSocket('udp6');
      u.once('error', () => resolve(false));
      u.bind(port, '::', () => u.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error('no port free for both TCP and UDP');
}

/**
 * Sends `text` on a TCP connection, reads until `text.length` bytes came
 * back, then shuts down; resolves with what came back by the close (a reset
 * included: a server closing with the text unread may send one).
 */
function tcpExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => { s.destroy(); reject(new Error('TCP exchange timed out')); }, 5000);
    s.on('connect', () => s.write(text));
    s.on('data', (d: Buffer) => {
      out += d.toString('latin1');
      if (out.length >= text.length) s.end();
    });
    s.on('error', () => undefined);
    s.on('close', () => { clearTimeout(timer); resolve(out); });
  });
}

/** Sends one datagram to 127.0.0.1:`port`; resolves with the first answer. */
function udpExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    const timer = setTimeout(() => { s.close(); reject(new Error('UDP exchange timed out')); }, 5000);
    s.on('message', (m: Buffer) => { clearTimeout(timer); s.close(); resolve(m.toString('latin1')); });
    s.send(text, port, '127.0.0.1');
  });
}

/** The lines of a file of the tree (none when it is not there). */
const lines = (tree: PreparedTree, rel: string): string[] =>
  (existsSync(join(tree.root, rel)) ? readFileSync(join(tree.root, rel), 'latin1').split('\n').filter(Boolean) : []);

/**
 * An access-log line of NPM's `stream` format with what changes from run to
 * run made fixed: the local time, the client's port, `$session_time` and
 * `$upstream_connect_time` (milliseconds of this run).
 */
function comparableAccess(line: string): string {
  return line
    .replace(/^\[[^\]]+\]/, '[TIME]')
    .replace(/\[Client 127\.0\.0\.1:\d+\]/, '[Client 127.0.0.1:PORT]')
    .replace(/ (\d+\.\d{3}) \[Sent-to /, ' S.SSS [Sent-to ')
    .replace(/\[Time (\d+\.\d{3}|-)\]/, (_m, t: string) => `[Time ${t === '-' ? '-' : 'C.CCC'}]`);
}

/** An error-log line without its time and pid. */
const comparableError = (line: string): string => line.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: \*\d+ /, '$1 *CONN ');

describe('Nginx Proxy Manager stream host (stream.conf), differential', () => {
  let tcpEcho: Server;
  let udpEcho: UdpSocket;
  let echoPort = 0;

  before(async () => {
    echoPort = await freeTcpUdpPort();
    tcpEcho = createServer({ allowHalfOpen: true }, (s) => {
      s.on('data', (d: Buffer) => s.write(d.toString('latin1').toUpperCase()));
      s.on('end', () => s.end());
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => tcpEcho.listen(echoPort, '127.0.0.1', resolve));
    udpEcho = createSocket('udp4');
    udpEcho.on('message', (m: Buffer, from) => udpEcho.send(m.toString('latin1').toUpperCase(), from.port, from.address));
    await new Promise<void>((resolve) => udpEcho.bind(echoPort, '127.0.0.1', resolve));
  });

  after(async () => {
    tcpEcho.close();
    udpEcho.close();
    await cleanup();
  });

  it('forwards TCP and UDP both ways, fails a stream to a closed port with 502, and logs each session in NPM\'s stream format, as nginx', async () => {
    const tree = await prepareProxyManager();
    const incoming = await freeTcpUdpPort();
    const incomingDead = await freeTcpUdpPort();
    const dead = await freePort();
    mkdirSync(join(tree.root, 'data/nginx/stream'), { recursive: true });
    mkdirSync(join(tree.root, 'data/nginx/custom'), { recursive: true });
    // their paths moved into the tree's root, as prepareProxyManager moves the rest of the tree's
    const inRoot = (text: string): string => text.replaceAll(' /data/', ` ${tree.root}/data/`);
    writeFileSync(join(tree.root, 'data/nginx/stream/1.conf'), inRoot(renderedStreamHost(1, incoming, echoPort, { tcp: true, udp: true })));
    writeFileSync(join(tree.root, 'data/nginx/stream/2.conf'), inRoot(renderedStreamHost(2, incomingDead, dead, { tcp: true, udp: false })));
    writeFileSync(join(tree.root, 'data/nginx/custom/server_stream_udp.conf'), 'proxy_responses 1;\n');
    const subs = new Map<string, string>([
      [tree.root, '@ROOT@'], [String(incoming), '@INCOMING@'], [String(incomingDead), '@INCOMING_DEAD@'], [String(echoPort), '@ECHO@'], [String(dead), '@DEAD@'],
    ]);
    const files = ['stream-1_access.log', 'stream-1_error.log', 'stream-2_access.log', 'stream-2_error.log'];

    const runOne = async (binary: string): Promise<{ tcp: string; udp: string; dead: string; logs: Record<string, string[]> }> => {
      for (const f of files) rmSync(join(tree.root, 'data/logs', f), { force: true });
      const server = await startServer(binary, tree.prefix, tree.conf, [incoming, incomingDead]);
      let result: { tcp: string; udp: string; dead: string };
      const skip: Record<string, number> = {};
      try {
        // the start-up probes' sessions are done (and logged) before the test's: their lines are left out
        await new Promise((r) => setTimeout(r, 300));
        for (const f of files) skip[f] = lines(tree, `data/logs/${f}`).length;
        const count = (f: string): number => lines(tree, `data/logs/${f}`).length - skip[f]!;
        const tcp = await tcpExchange(incoming, 'hello over tcp\n');
        await waitFor(() => count('stream-1_access.log') >= 1, 5000, 'the TCP session\'s line');
        const udp = await udpExchange(incoming, 'hello over udp\n');
        await waitFor(() => count('stream-1_access.log') >= 2, 5000, 'the UDP session\'s line');
        const deadAnswer = await tcpExchange(incomingDead, 'hello\n');
        await waitFor(() => count('stream-2_access.log') >= 1, 5000, 'the failed session\'s line');
        result = { tcp, udp, dead: deadAnswer };
      } finally {
        await server.stop('SIGQUIT');
      }
      const logs: Record<string, string[]> = {};
      for (const f of files) {
        const all = lines(tree, `data/logs/${f}`).slice(skip[f]);
        logs[f] = f.endsWith('_access.log') ? all.map(comparableAccess) : all.map(comparableError);
      }
      return { ...result, logs };
    };

    const nginx = await answer(nextKey(), ORACLE ? () => runOne(ORACLE!) : undefined, subs, stable);
    const jinx = await runOne(JINX);
    assert.deepEqual(jinx, nginx);
    assert.equal(nginx.tcp, 'HELLO OVER TCP\n');
    assert.equal(nginx.udp, 'HELLO OVER UDP\n');
    assert.equal(nginx.dead, '');
    assert.equal(nginx.logs['stream-1_access.log']!.length, 2);
    assert.equal(nginx.logs['stream-2_error.log']!.length, 1);
  });
});
