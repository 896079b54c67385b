/**
 * Servers on unix domain sockets (`listen unix:PATH`) and proxying to them
 * (`proxy_pass http://unix:PATH:/URI`, `server unix:PATH` in an upstream
 * block), differential against nginx: the socket file made at start and
 * removed at stop, `$remote_addr` `unix:`, `$server_addr` `unix:PATH`,
 * empty ports, `allow`/`deny unix:`, `set_real_ip_from unix:` and with a
 * host name, the Host nginx sends to a socket, the error line of a socket
 * nobody listens on; and `listen` port ranges.
 */
import { strict as assert } from 'node:assert';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, startJinx, tempDir, waitFor } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, lineDiff, parseRaw, snap, type Snap } from '../helpers/differential.js';

/** Sends `data` on the unix domain socket `path` and returns the response (undefined when none came). */
function unixExchange(path: string, data: string): Promise<Snap | undefined> {
  return new Promise((resolve, reject) => {
    const s = connect({ path });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(), 5000);
    s.on('connect', () => (data === '' ? s.end() : s.write(data, 'latin1')));
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', reject);
    s.on('close', () => {
      clearTimeout(timer);
      const parsed = parseRaw(Buffer.concat(chunks).toString('latin1'));
      resolve(parsed && snap(parsed, 'nginx'));
    });
  });
}

/** Echoes what the server on the socket sees of its client and itself. */
const ECHO = 'add_header X-Seen "$remote_addr|$remote_port|$server_addr|$server_port|$realip_remote_addr|$http_host" always;';

describe('unix domain sockets (differential)', () => {
  after(cleanup);

  it('serves a unix socket, proxies to it, and tells unix clients apart in variables, allow/deny and realip', async () => {
    let socketSeen: { exists: boolean; mode: number } | undefined;
    let sockFile = '';
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`
  upstream sock { server unix:${prefix}/app.sock; }
  server { listen 127.0.0.1:${port}; server_name front;
    location /unix/ { proxy_pass http://unix:${prefix}/app.sock:/; proxy_set_header X-Real-IP 192.0.2.1;
      add_header X-Proxy "$proxy_host|$proxy_port|$upstream_addr" always; }
    location /group/ { proxy_pass http://sock/; add_header X-Proxy "$upstream_addr" always; }
    location /tcp/ { proxy_pass http://127.0.0.1:${port}/; proxy_set_header X-Real-IP 192.0.2.1; proxy_set_header Host back; }
    location /gone/ { proxy_pass http://unix:${prefix}/missing.sock:/; }
  }
  server { listen unix:${prefix}/app.sock; listen 127.0.0.1:${port}; server_name back; root html;
    location /allow_unix { allow unix:; deny all; ${ECHO} try_files /ok.txt =404; }
    location /deny_unix { deny unix:; ${ECHO} try_files /ok.txt =404; }
    location /realip_unix { set_real_ip_from unix:; ${ECHO} try_files /ok.txt =404; }
    location /realip_name { set_real_ip_from localhost; ${ECHO} try_files /ok.txt =404; }
    location /vars { ${ECHO} return 200 "$remote_addr|$remote_port|$server_addr|$server_port\\n"; }
  }
  server { listen unix:${prefix}/pp.sock proxy_protocol; set_real_ip_from unix:; real_ip_header proxy_protocol;
    location / { return 200 "$remote_addr|$remote_port|$realip_remote_addr|$proxy_protocol_addr|$proxy_protocol_server_port\\n"; }
  }`),
      files: { 'html/ok.txt': 'ok\n' },
    }, async (s) => {
      const file = join(s.prefix, 'app.sock');
      sockFile = file;
      const out: Record<string, Snap | undefined> = {};
      for (const path of ['/allow_unix', '/deny_unix', '/realip_unix', '/realip_name', '/vars']) {
        out[`unix${path}`] = await s.get(`/unix${path}`);
        out[`group${path}`] = await s.get(`/group${path}`);
        out[`tcp${path}`] = await s.get(`/tcp${path}`);
      }
      // looked at once requests are served (the TCP port accepts while later addresses are still being bound)
      if (s.kind === 'jinx') socketSeen = { exists: existsSync(file), mode: statSync(file).mode & 0o777 };
      out['direct /vars'] = await unixExchange(file, 'GET /vars HTTP/1.0\r\nHost: back\r\n\r\n');
      out['nothing sent'] = await unixExchange(file, '');
      const pp = join(s.prefix, 'pp.sock');
      out['proxy protocol'] = await unixExchange(pp, 'PROXY TCP4 192.0.2.1 192.0.2.2 123 80\r\nGET / HTTP/1.0\r\n\r\n');
      out['broken proxy protocol'] = await unixExchange(pp, 'GET / HTTP/1.0\r\n\r\n');
      out['gone'] = await s.get('/gone/x');
      // the ports of TCP clients differ from run to run
      for (const [key, res] of Object.entries(out)) {
        if (!key.startsWith('tcp') || !res) continue;
        const seen = res.headers['x-seen'];
        out[key] = { ...res, body: res.body.replace(/^127\.0\.0\.1\|\d+\|/, '127.0.0.1|PORT|'), headers: {
          ...res.headers, ...(seen === undefined ? {} : { 'x-seen': seen.replace(/^127\.0\.0\.1\|\d+\|/, '127.0.0.1|PORT|') }),
        } };
      }
      return out;
    });
    // the server proxied to itself: at shutdown nginx's back end sees its kept upstream connections close, jinx's stops them first
    const served = (log: readonly string[]): string[] => log.filter((l) => !l.endsWith('closed keepalive connection'));
    assertSameAsNginx(run, { log: false });
    assert.deepEqual(lineDiff(served(run.nginx.errorLog), served(run.jinx.errorLog)), []);
    assert.equal(run.nginx.result['unix/deny_unix']!.status, 403);
    assert.equal(run.nginx.result['tcp/deny_unix']!.status, 200);
    assert.match(run.nginx.result['unix/realip_unix']!.headers['x-seen'] ?? '', /^192\.0\.2\.1\|/);
    assert.match(run.nginx.result['direct /vars']!.body, /^unix:\|\|unix:\/.*app\.sock\|\n$/);
    assert.equal(run.nginx.result['proxy protocol']!.body, '192.0.2.1|123|unix:|192.0.2.1|80\n');
    assert.ok(run.nginx.errorLog.some((l) => /client closed connection while waiting for request, client: unix:, server: unix:\/.*app\.sock$/.test(l)));
    assert.deepEqual(socketSeen, { exists: true, mode: 0o666 });
    assert.ok(run.nginx.errorLog.some((l) => l.includes('connect() to unix:') && l.includes('(2: No such file or directory)')));
    assert.equal(existsSync(sockFile), false);
  });
});

describe('unix domain sockets', () => {
  after(cleanup);

  it('creates the socket file at start, keeps it across a reload, and removes it at stop', async () => {
    const port = await freePort();
    const file = join(tempDir('jinx-sock-'), 'app.sock');
    const conf = (word: string): string => `daemon off; pid logs/nginx.pid; error_log logs/error.log info; events {}
http { access_log off; server { listen 127.0.0.1:${port}; listen unix:${file}; return 200 "${word} $remote_addr\\n"; } }`;
    const server = await startJinx(conf('one'), [port]);
    const before = statSync(file).ino;
    assert.equal((await unixExchange(file, 'GET / HTTP/1.0\r\n\r\n'))!.body, 'one unix:\n');
    writeFileSync(join(server.prefix, 'nginx.conf'), conf('two'));
    server.child.kill('SIGHUP');
    await waitFor(async () => (await unixExchange(file, 'GET / HTTP/1.0\r\n\r\n'))?.body === 'two unix:\n', 10_000, 'the new configuration');
    assert.equal(statSync(file).ino, before);
    await server.stop('SIGQUIT');
    assert.equal(existsSync(file), false);
  });

  it('binds every port of a listen port range', async () => {
    let first = 0;
    // on a busy machine the port after a free one is often taken by an outgoing connection: look further
    for (let tries = 0; tries < 200 && first === 0; tries++) {
      const p = await freePort();
      const taken = await new Promise<boolean>((resolve) => {
        const probe = createServer().once('error', () => resolve(true)).listen(p + 1, '127.0.0.1', () => probe.close(() => resolve(false)));
      });
      if (!taken && p < 65535) first = p;
    }
    assert.notEqual(first, 0, 'no two free adjacent ports found');
    const server = await startJinx(`daemon off; pid logs/nginx.pid; error_log logs/error.log info; events {}
http { access_log off; server { listen 127.0.0.1:${first}-${first + 1}; return 200 "port $server_port\\n"; } }`, [first, first + 1]);
    try {
      for (const p of [first, first + 1]) {
        const res = await new Promise<string>((resolve, reject) => {
          const s = connect({ host: '127.0.0.1', port: p }, () => s.write('GET / HTTP/1.0\r\n\r\n'));
          let text = '';
          s.on('data', (c) => (text += c.toString())).on('close', () => resolve(text)).on('error', reject);
        });
        assert.match(res, new RegExp(`port ${p}\\n$`));
      }
    } finally {
      await server.stop('SIGQUIT');
    }
  });
});
