/**
 * The stream module, differential against nginx: a TCP echo upstream and a
 * UDP echo upstream started by the test, bytes forwarded both ways through
 * `proxy_pass` (an address and an `upstream` block), `return` with
 * variables, `deny`, and a connection refused by the upstream (`$status`
 * 502 and nginx's `connect() failed (111: Connection refused) while
 * connecting to upstream …` line); the access-log lines and the error-log
 * lines (`client … connected to …`, `proxy … connected to …`, `client
 * disconnected, bytes from/to …`, `udp done, packets from/to …`) compared
 * with nginx's. And a reload: a session of the old configuration goes on
 * with it while new sessions get the new one.
 */
import { strict as assert } from 'node:assert';
import { createHash, randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { readReloadStatus } from '../../src/cli/reload-status.js';
import { streamModulePath } from '../helpers/corpus-trees.js';
import { differential, mainContext } from '../helpers/differential.js';
import { cleanup, freePort, startJinx, waitFor } from '../helpers/harness.js';
import { tcpSession } from '../helpers/stream-clients.js';

/** Lines whose ephemeral ports change from run to run: compared with the ports taken out. */
const EPHEMERAL = /(?:client|proxy) \S+ connected to /;
const withoutPorts = (lines: readonly string[]): string[] =>
  lines.filter((l) => EPHEMERAL.test(l)).map((l) => l.replace(/(client|proxy) (\S+):\d+ connected/, '$1 $2:PORT connected'));

/**
 * How many access-log lines and connection error-log entries the start-up
 * probes (a connection to each port, closed at once) left, once settled:
 * the comparison starts after them, as their order races the probes.
 */
async function afterProbes(prefix: string): Promise<{ access: number; settled: number; ephemeral: number }> {
  await new Promise((r) => setTimeout(r, 300));
  const read = (rel: string): string => (existsSync(join(prefix, rel)) ? readFileSync(join(prefix, rel), 'latin1') : '');
  const entries = read('logs/error.log').split('\n').filter((l) => /^\S+ \S+ \[\w+\] \d+#\d+: \*\d+ /.test(l));
  return {
    access: read('logs/stream.log').split('\n').filter(Boolean).length,
    settled: entries.filter((l) => !EPHEMERAL.test(l)).length,
    ephemeral: entries.filter((l) => EPHEMERAL.test(l)).length,
  };
}

/** One datagram and its answer ('' after 1 s without one). */
function udpExchange(port: number, message: string): Promise<string> {
  return new Promise((resolve) => {
    const u = createSocket('udp4');
    const timer = setTimeout(() => {
      u.close();
      resolve('');
    }, 1000);
    u.on('message', (m) => {
      clearTimeout(timer);
      u.close();
      resolve(m.toString('latin1'));
    });
    u.send(message, port, '127.0.0.1');
  });
}

describe('stream (differential)', () => {
  let tcpEcho: Server;
  let udpEcho: ReturnType<typeof createSocket>;
  let upstreamPort = 0;
  let deadPort = 0;

  before(async () => {
    upstreamPort = await freePort();
    deadPort = await freePort();
    tcpEcho = createServer({ allowHalfOpen: true }, (s) => {
      s.on('data', (d) => s.write(d.toString('latin1').replace(/foo/g, 'bar')));
      s.on('end', () => s.end());
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => tcpEcho.listen(upstreamPort, '127.0.0.1', resolve));
    udpEcho = createSocket('udp4');
    udpEcho.on('message', (m, r) => udpEcho.send(m.toString('latin1').replace(/foo/g, 'bar'), r.port, r.address));
    await new Promise<void>((resolve) => udpEcho.bind(upstreamPort, '127.0.0.1', resolve));
  });

  after(() => {
    tcpEcho.close();
    udpEcho.close();
    cleanup();
  });

  it('proxies TCP and UDP both ways, answers return and deny, and fails a refused upstream with 502, with nginx\'s log lines', async () => {
    const run = await differential({
      extraPorts: 4,
      literals: { STREAM_MODULE: streamModulePath(), UP: upstreamPort, DEAD: deadPort },
      racing: EPHEMERAL,
      conf: ({ port, ports }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  log_format s '$remote_addr $protocol $status $bytes_sent $bytes_received "$upstream_addr" $upstream_bytes_sent $upstream_bytes_received [$v]';
  access_log logs/stream.log s;
  map $server_port $v { ${ports[2]} returned; default proxied; }
  upstream echo { server 127.0.0.1:${upstreamPort}; }
  server { listen 127.0.0.1:${port}; proxy_pass 127.0.0.1:${upstreamPort}; }
  server { listen 127.0.0.1:${port} udp; proxy_pass 127.0.0.1:${upstreamPort}; proxy_responses 1; }
  server { listen 127.0.0.1:${ports[0]}; proxy_pass echo; proxy_connect_timeout 2s; }
  server { listen 127.0.0.1:${ports[1]}; proxy_pass 127.0.0.1:${deadPort}; }
  server { listen 127.0.0.1:${ports[2]}; set $who "$remote_addr/$protocol"; return "hello $who $v\\n"; }
  server { listen 127.0.0.1:${ports[3]}; deny all; proxy_pass echo; }
}
`,
    }, async (s) => ({
      probes: await afterProbes(s.prefix),
      tcp: await tcpSession(s.port, ['foo1', 'foo22'], [4, 5]),
      udp: await udpExchange(s.port, 'foo333'),
      block: await tcpSession(s.ports[0]!, ['xfoox'], [5]),
      refused: await tcpSession(s.ports[1]!, [], []),
      returned: await tcpSession(s.ports[2]!, [], []),
      denied: await tcpSession(s.ports[3]!, [], []),
    }));
    const { probes: nginxProbes, ...nginxResult } = run.nginx.result;
    const { probes: jinxProbes, ...jinxResult } = run.jinx.result;
    assert.deepEqual(jinxResult, nginxResult);
    assert.deepEqual(nginxResult, {
      tcp: 'bar1bar22', udp: 'bar333', block: 'xbarx', refused: '', returned: 'hello 127.0.0.1/TCP returned\n', denied: '',
    });
    const jinxAccess = run.jinx.file('logs/stream.log').slice(jinxProbes.access);
    assert.deepEqual(jinxAccess, run.nginx.file('logs/stream.log').slice(nginxProbes.access));
    assert.ok(jinxAccess.includes(`127.0.0.1 TCP 502 0 0 "127.0.0.1:${deadPort}" 0 0 [proxied]`));
    const settled = (lines: readonly string[], probes: { settled: number }): string[] => lines.filter((l) => !EPHEMERAL.test(l)).slice(probes.settled);
    const ephemeral = (lines: readonly string[], probes: { ephemeral: number }): string[] => withoutPorts(lines).slice(probes.ephemeral);
    const jinxErrors = settled(run.jinx.errorLog, jinxProbes);
    assert.deepEqual(jinxErrors, settled(run.nginx.errorLog, nginxProbes));
    assert.ok(jinxErrors.some((l) => l.startsWith('[error] *CONN connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: 127.0.0.1:')
      && l.endsWith(`upstream: "127.0.0.1:${deadPort}", bytes from/to client:0/0, bytes from/to upstream:0/0`)));
    // the lines with ephemeral ports: nginx's live answer only (its recording leaves them out)
    if (run.nginx.errorLog.some((l) => EPHEMERAL.test(l))) {
      assert.deepEqual(ephemeral(run.jinx.errorLog, jinxProbes), ephemeral(run.nginx.errorLog, nginxProbes));
    }
  });

  it('keeps a session of the old configuration across a reload, which new sessions no longer get, until it ends by itself', async () => {
    const port = await freePort();
    const conf = (word: string): string => `daemon off; master_process off; pid logs/nginx.pid; error_log logs/error.log info; events {}
stream {
  log_format s '$status $bytes_received $v';
  access_log logs/stream.log s;
  map $server_port $v { default ${word}; }
  server { listen 127.0.0.1:${port}; proxy_pass 127.0.0.1:${upstreamPort}; }
}
`;
    const server = await startJinx(conf('one'), [port]);
    try {
      const old = connect(port, '127.0.0.1');
      let oldOut = '';
      old.on('data', (d) => { oldOut += d.toString('latin1'); });
      const oldClosed = new Promise<void>((resolve) => old.on('close', () => resolve()));
      await new Promise<void>((resolve) => old.on('connect', () => resolve()));
      old.write('foo1');
      await waitFor(async () => oldOut === 'bar1', 5000, 'the first answer');
      writeFileSync(join(server.prefix, 'nginx.conf'), conf('two'));
      server.child.kill('SIGHUP');
      await waitFor(() => readReloadStatus(join(server.prefix, 'logs/nginx.pid'))?.ok === true, 10_000, 'the reload');
      assert.equal(await tcpSession(port, ['foo2'], [4]), 'bar2');
      old.write('foo3');
      await waitFor(async () => oldOut === 'bar1bar3', 5000, 'the old session still proxied');
      old.end();
      await oldClosed;
      // (the start-up probe's session, which sent nothing, is left out)
      const lines = (): string[] => readFileSync(join(server.prefix, 'logs/stream.log'), 'latin1').split('\n').filter((l) => l !== '' && !l.startsWith('200 0 '));
      await waitFor(() => lines().length === 2, 5000, 'both lines');
      assert.deepEqual(lines(), ['200 4 two', '200 8 one']);
    } finally {
      await server.stop('SIGQUIT');
    }
  });
});

describe('stream (jinx only)', () => {
  after(cleanup);

  it('forwards an upstream\'s bytes intact to fast and slow clients at once (each session\'s read buffer is read into again only once written)', async () => {
    const sizeBytes = 8 * 1024 * 1024;
    const data = randomBytes(sizeBytes);
    const want = createHash('sha256').update(data).digest('hex');
    // writes of 1 to 100,000 bytes, as fast as the socket takes them
    const source = createServer((s) => {
      s.on('error', () => undefined);
      let offset = 0;
      const pump = (): void => {
        while (offset < sizeBytes) {
          const n = Math.min(sizeBytes - offset, 1 + ((offset * 7919) % 100_000));
          const ok = s.write(data.subarray(offset, offset + n));
          offset += n;
          if (!ok) {
            s.once('drain', pump);
            return;
          }
        }
        s.end();
      };
      pump();
    });
    await new Promise<void>((resolve) => source.listen(0, '127.0.0.1', () => resolve()));
    const port = await freePort();
    const server = await startJinx(`daemon off; master_process off; pid logs/nginx.pid; error_log logs/error.log warn; events {}
stream {
  server { listen 127.0.0.1:${port}; proxy_buffer_size 4k; proxy_pass 127.0.0.1:${(source.address() as { port: number }).port}; }
}
`, [port]);
    try {
      // a slow client stops reading for 300 ms after 1 MiB and after 4 MiB: the kernel's buffers fill, the proxy's writes to it wait
      const session = (slow: boolean): Promise<{ bytes: number; sha: string }> => new Promise((resolve, reject) => {
        const hash = createHash('sha256');
        let bytes = 0;
        const stops = slow ? [1024 * 1024, 4 * 1024 * 1024] : [];
        const s = connect(port, '127.0.0.1');
        s.on('data', (d: Buffer) => {
          hash.update(d);
          bytes += d.length;
          if (stops.length > 0 && bytes >= stops[0]!) {
            stops.shift();
            s.pause();
            setTimeout(() => s.resume(), 300);
          }
        });
        s.on('error', reject);
        s.on('close', () => resolve({ bytes, sha: hash.digest('hex') }));
      });
      const results = await Promise.all([session(false), session(true), session(false), session(true)]);
      for (const r of results) assert.deepEqual(r, { bytes: sizeBytes, sha: want });
    } finally {
      await server.stop('SIGQUIT');
      source.close();
    }
  });
});
