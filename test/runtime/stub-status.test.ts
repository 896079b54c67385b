/**
 * stub_status: nginx's page and counters, differential against nginx for a
 * known sequence (plain requests, pipelined ones, HEAD, POST's 405, a 304,
 * HTTP/2 streams, a connection idle, then reading its request, then
 * answered; `$connections_*` in `add_header`); the page parsed by the rules
 * of the NGINX Prometheus exporter (`nginxinc/nginx-prometheus-exporter`,
 * `client/nginx.go`: its older split rules and its `fmt.Fscanf` template);
 * jinx's Prometheus page (`Accept: text/plain; version=0.0.4`) checked by
 * `promtool check metrics` (Debian's `prometheus`, which test/prepare.sh
 * installs) and its OpenMetrics page; and the figures summed over two
 * worker processes and across a reload.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { connect as http2Connect } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertSameAsNginx, differential, httpConf, TEST_WORKERS, type Side, type Snap } from '../helpers/differential.js';
import { cleanup, freePort, hasCommand, request, startJinx, waitFor } from '../helpers/harness.js';
import { selfSigned } from '../helpers/pki.js';

/** The counters of nginx's page. */
interface Stub {
  active: number;
  accepted: number;
  handled: number;
  requests: number;
  reading: number;
  writing: number;
  waiting: number;
}

/**
 * The exporter's first parser (`parseStubStats` before it used a
 * template): five lines split on `\n`; the first, trimmed, in three words;
 * the third in three numbers; the fourth in six words.
 */
function parseBySplit(body: string): Stub {
  const parts = body.split('\n');
  assert.equal(parts.length, 5, 'five parts');
  const active = parts[0]!.trim().split(' ');
  assert.equal(active.length, 3);
  const misc = parts[2]!.trim().split(' ');
  assert.equal(misc.length, 3);
  const cons = parts[3]!.trim().split(' ');
  assert.equal(cons.length, 6);
  const int = (s: string): number => {
    assert.match(s, /^[+-]?\d+$/);
    return Number(s);
  };
  return {
    active: int(active[2]!), accepted: int(misc[0]!), handled: int(misc[1]!), requests: int(misc[2]!),
    reading: int(cons[1]!), writing: int(cons[3]!), waiting: int(cons[5]!),
  };
}

/**
 * The exporter's current parser: `fmt.Fscanf` with the template
 * `Active connections: %d \nserver accepts handled requests\n%d %d %d \nReading: %d Writing: %d Waiting: %d \n`.
 * Go's scanning rules: a run of spaces in the template matches any spaces
 * (none included), a newline must match a newline, and `%d` skips the
 * spaces before its number.
 */
function parseByTemplate(body: string): Stub {
  const template = 'Active connections: %d \nserver accepts handled requests\n%d %d %d \nReading: %d Writing: %d Waiting: %d \n';
  const pattern = template.split(/(%d| +|\n)/).filter(Boolean).map((t) => {
    if (t === '%d') return ' *([+-]?\\d+)';
    if (/^ +$/.test(t)) return ' *';
    if (t === '\n') return '\\n';
    return t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  }).join('');
  const m = new RegExp(`^${pattern}`).exec(body);
  assert.ok(m, `the template matches ${JSON.stringify(body)}`);
  const [active, accepted, handled, requests, reading, writing, waiting] = m.slice(1).map(Number) as [number, number, number, number, number, number, number];
  return { active, accepted, handled, requests, reading, writing, waiting };
}

/** Both of the exporter's parsers read the same figures from `body`. */
function exporterFigures(body: string): Stub {
  const split = parseBySplit(body);
  assert.deepEqual(parseByTemplate(body), split);
  return split;
}

/** A client connection held open: it sends what it is told when it is told. */
async function openConnection(port: number): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect({ host: '127.0.0.1', port });
  let text = '';
  socket.on('data', (d: Buffer) => { text += d.toString('latin1'); });
  socket.on('error', () => undefined);
  await new Promise((res) => socket.once('connect', res));
  return { socket, received: () => text };
}

/** Two requests over HTTP/2 (prior knowledge), one after the other: their status and bodies. */
async function overHttp2(port: number, paths: readonly string[]): Promise<string[]> {
  const session = http2Connect(`http://127.0.0.1:${port}`);
  const out: string[] = [];
  try {
    for (const path of paths) {
      out.push(await new Promise<string>((res, rej) => {
        const stream = session.request({ ':path': path });
        let status = 0;
        let body = '';
        stream.on('response', (h) => { status = Number(h[':status']); });
        stream.on('data', (d: Buffer) => { body += d.toString('latin1'); });
        stream.on('end', () => res(`${status} ${body}`));
        stream.on('error', rej);
      }));
    }
  } finally {
    await new Promise<void>((res) => session.close(() => res()));
  }
  return out;
}

const SERVER = (port: number): string => `  server {
    listen 127.0.0.1:${port};
    server_name localhost;
    http2 on;
    add_header X-Active $connections_active;
    add_header X-Reading $connections_reading;
    add_header X-Writing $connections_writing;
    add_header X-Waiting $connections_waiting;
    location / { }
    location /stub { stub_status; }
    location /old { stub_status on; }
  }
  server {
    listen 127.0.0.1:${port};
    server_name other;
    stub_status;
    location /inner/ { return 200 "inner\\n"; }
  }`;

describe('stub_status (differential)', () => {
  after(cleanup);

  it('counts connections and requests as nginx does, over HTTP/1.x and HTTP/2, and answers GET, HEAD, POST and conditionals as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(SERVER(port)),
      files: { 'html/index.html': 'index\n' },
    }, async (s: Side) => {
      const out: Record<string, Snap | string | undefined> = {};
      const pause = (): Promise<unknown> => sleep(300);
      out['first'] = await s.get('/stub');
      out['index'] = await s.get('/');
      const pipelined = await s.raw('GET / HTTP/1.1\r\nHost: localhost\r\n\r\nGET /stub HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      // the second response is in the first one's body, with its date
      out['pipelined'] = pipelined && { ...pipelined, body: pipelined.body.replace(/\r\nDate: [^\r]*/, '') };
      out['after pipelined'] = await s.get('/stub');
      out['head'] = await s.raw('HEAD /stub HTTP/1.0\r\nHost: localhost\r\n\r\n');
      out['post'] = await s.get('/stub', { method: 'POST', body: 'abc' });
      out['if-none-match'] = await s.get('/stub', { headers: { 'If-None-Match': '*' } });
      out['if-match'] = await s.get('/stub', { headers: { 'If-Match': '"x"' } });
      out['argument'] = await s.get('/old');
      out['server level'] = await s.get('/x', { headers: { Host: 'other' } });
      out['server level inner'] = await s.get('/inner/', { headers: { Host: 'other' } });
      out['http2'] = (await overHttp2(s.port, ['/', '/stub'])).join('|');
      await pause();
      out['after http2'] = await s.get('/stub');
      const idle = await openConnection(s.port);
      await pause();
      out['waiting'] = await s.get('/stub');
      idle.socket.write('GET / HTTP/1.0\r\n');
      await pause();
      out['reading'] = await s.get('/stub');
      idle.socket.write('Host: localhost\r\n\r\n');
      await new Promise((res) => idle.socket.once('close', res));
      out['idle one answered'] = idle.received().replace(/\r\n(Date|Server): [^\r]*/g, '');
      await pause();
      out['last'] = await s.get('/stub');
      return out;
    });
    const nginx = run.nginx.result;
    assert.match((nginx['first'] as Snap).body, /^Active connections: 1 \nserver accepts handled requests\n \d+ \d+ \d+ \nReading: 0 Writing: 1 Waiting: 0 \n$/);
    assert.match((nginx['waiting'] as Snap).body, /Reading: 0 Writing: 1 Waiting: 1 \n$/);
    assert.match((nginx['reading'] as Snap).body, /Reading: 1 Writing: 1 Waiting: 0 \n$/);
    if (TEST_WORKERS) {
      // with several workers $connections_* are the serving worker's own (README, "Differences from nginx"); the pages are the sums
      for (const side of [run.nginx.result, run.jinx.result]) {
        for (const v of Object.values(side)) {
          if (typeof v === 'object') for (const h of ['x-active', 'x-reading', 'x-writing', 'x-waiting']) delete (v.headers as Record<string, string>)[h];
        }
      }
    }
    assertSameAsNginx(run);
    for (const label of ['first', 'after pipelined', 'after http2', 'waiting', 'reading', 'last']) {
      const snap = run.jinx.result[label] as Snap;
      const figures = exporterFigures(snap.body);
      assert.equal(figures.accepted, figures.handled, label);
    }
  });
});

/** The status page over TLS (HTTP/1.0), its lines joined by `|`. */
function statusOverTls(port: number): Promise<string> {
  return new Promise((res, rej) => {
    const socket = tlsConnect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] }, () => socket.write('GET /stub HTTP/1.0\r\n\r\n'));
    let text = '';
    socket.on('data', (d: Buffer) => { text += d.toString('latin1'); });
    socket.on('end', () => res(text.slice(text.indexOf('\r\n\r\n') + 4).replace(/\n/g, '|')));
    socket.on('error', rej);
  });
}

describe('stub_status over TLS (differential)', () => {
  after(cleanup);

  it('counts a TLS connection idle after its handshake, a TCP one that sent nothing and an HTTP/2 one between streams as waiting, as nginx', async () => {
    const { cert, key } = selfSigned('status.test');
    const run = await differential({
      files: { 'cert.pem': cert, 'cert.key': key },
      conf: ({ port }) => httpConf(`  server {
    listen 127.0.0.1:${port} ssl;
    http2 on;
    ssl_certificate cert.pem;
    ssl_certificate_key cert.key;
    location /stub { stub_status; }
    location / { return 200 "ok\\n"; }
  }`),
    }, async (s: Side) => {
      const out: Record<string, string> = {};
      const pause = (): Promise<unknown> => sleep(300);
      out['start'] = await statusOverTls(s.port);
      const idle = tlsConnect({ port: s.port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
      idle.on('error', () => undefined);
      await new Promise((res) => idle.once('secureConnect', res));
      await pause();
      out['tls idle'] = await statusOverTls(s.port);
      const plain = await openConnection(s.port);
      await pause();
      out['tcp idle'] = await statusOverTls(s.port);
      const h2 = http2Connect(`https://127.0.0.1:${s.port}`, { rejectUnauthorized: false });
      h2.on('error', () => undefined);
      await new Promise((res) => h2.once('connect', res));
      await pause();
      out['h2 idle'] = await statusOverTls(s.port);
      await new Promise((res) => {
        const stream = h2.request({ ':path': '/' });
        stream.resume();
        stream.on('end', res);
      });
      await pause();
      out['h2 after a stream'] = await statusOverTls(s.port);
      idle.destroy();
      plain.socket.destroy();
      h2.destroy();
      await pause();
      out['end'] = await statusOverTls(s.port);
      return out;
    });
    // the harness's probe of the port is the first connection
    assert.equal(run.nginx.result['h2 after a stream'], 'Active connections: 4 |server accepts handled requests| 9 9 6 |Reading: 0 Writing: 1 Waiting: 3 |');
    assertSameAsNginx(run);
  });
});

/** The text of a `promtool check metrics` run on `text`: its exit code and findings. */
function promtool(text: string): { status: number | null; findings: string[] } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: r.status, findings: `${r.stdout}${r.stderr}`.split('\n').filter(Boolean) };
}

describe('stub_status: the Prometheus page', () => {
  after(cleanup);

  it('answers an Accept of the Prometheus text format or of OpenMetrics with the counters and per-server and per-upstream tallies', {
    skip: hasCommand('promtool') ? false : 'no promtool installed (test/prepare.sh installs Debian\'s prometheus)',
  }, async () => {
    const [port, backend, dead] = [await freePort(), await freePort(), await freePort()];
    await startJinx(`daemon off;\nmaster_process off;\nerror_log logs/error.log crit;\nevents {}\nhttp {
  access_log off;
  upstream backend { server 127.0.0.1:${backend}; }
  upstream gone { server 127.0.0.1:${dead}; }
  server { listen 127.0.0.1:${backend}; return 200 "backend\\n"; }
  server {
    listen 127.0.0.1:${port};
    server_name metrics.test;
    location / { return 204; }
    location /missing { return 404; }
    location /up { proxy_pass http://backend; }
    location /down { proxy_pass http://gone; }
    location /metrics { stub_status; }
  }
}
`, [port, backend]);
    for (const path of ['/', '/', '/missing', '/up', '/up', '/down']) await request(port, path);
    const prometheus = await request(port, '/metrics', { headers: { Accept: 'text/plain;version=0.0.4;q=0.5,*/*;q=0.1' } });
    assert.equal(prometheus.status, 200);
    assert.equal(prometheus.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8');
    const text = prometheus.body;
    const samples = new Map(text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]));
    // six requests, two to the backend, this page's
    assert.equal(samples.get('nginx_http_requests_total'), 9);
    assert.equal(samples.get('nginx_connections_accepted'), samples.get('nginx_connections_handled'));
    assert.ok(samples.get('nginx_connections_accepted')! >= 9);
    assert.equal(samples.get('nginx_connections_writing'), 1);
    for (const line of [
      'nginx_up 1',
      'jinx_http_requests_by_server_total{server="metrics.test",code="2xx"} 4',
      'jinx_http_requests_by_server_total{server="metrics.test",code="4xx"} 1',
      'jinx_http_requests_by_server_total{server="metrics.test",code="5xx"} 1',
      'jinx_upstream_responses_total{upstream="backend",code="2xx"} 2',
      'jinx_upstream_responses_total{upstream="gone",code="5xx"} 1',
      'jinx_upstream_response_time_seconds_count{upstream="backend"} 2',
      'jinx_upstream_response_time_seconds_bucket{upstream="backend",le="+Inf"} 2',
      '# TYPE jinx_upstream_response_time_seconds histogram',
    ]) assert.ok(text.split('\n').includes(line), `${line} in\n${text}`);
    // the requests to the backend server and the status page's own, which is not finished yet
    assert.ok(text.includes('jinx_http_requests_by_server_total{server="",code="2xx"} 2'), text);
    // promtool's only findings: the exporter's two counters that lack `_total`, as the exporter's own page has them
    const checked = promtool(text);
    assert.deepEqual(checked.findings, [
      'nginx_connections_accepted counter metrics should have "_total" suffix',
      'nginx_connections_handled counter metrics should have "_total" suffix',
    ]);
    assert.equal(checked.status, 3, 'lint findings only, no parse error');
    const openMetrics = await request(port, '/metrics', { headers: { Accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' } });
    assert.equal(openMetrics.headers['content-type'], 'application/openmetrics-text; version=1.0.0; charset=utf-8');
    const om = openMetrics.body.split('\n');
    assert.equal(om.at(-2), '# EOF');
    for (const line of ['# TYPE nginx_connections_accepted counter', '# TYPE nginx_http_requests counter', 'nginx_http_requests_total 10']) {
      assert.ok(om.includes(line), `${line} in\n${openMetrics.body}`);
    }
    const plain = await request(port, '/metrics', { headers: { Accept: 'text/plain' } });
    assert.equal(plain.headers['content-type'], 'text/plain');
    assert.equal(exporterFigures(plain.body).requests, 11);
  });
});

describe('stub_status with worker processes', () => {
  after(cleanup);

  it('sums the workers\' figures, and keeps those of workers that exited across a reload', async () => {
    const port = await freePort();
    const server = await startJinx(`daemon off;\nworker_processes 2;\npid logs/nginx.pid;\nerror_log logs/error.log notice;\nevents {}\nhttp {
  access_log off;
  server {
    listen 127.0.0.1:${port};
    location / { return 200 "ok\\n"; }
    location /stub { stub_status; }
  }
}
`, [port]);
    for (let i = 0; i < 20; i++) await request(port, '/');
    // 20 requests and this page's, on connections of their own (and the start's probe, without a request)
    const before = exporterFigures((await request(port, '/stub')).body);
    assert.equal(before.requests, 21);
    assert.equal(before.handled, before.accepted);
    assert.ok(before.accepted - before.requests <= 1, JSON.stringify(before));
    assert.equal(before.writing, 1);
    server.child.kill('SIGHUP');
    await waitFor(() => (server.errorLog().match(/exited with code 0/g) ?? []).length === 2, 20_000, 'the old workers to exit');
    const after = exporterFigures((await request(port, '/stub')).body);
    assert.equal(after.requests, 22, 'what the old workers counted stays');
    assert.equal(after.accepted - after.requests, before.accepted - before.requests);
    assert.equal(after.active, 1);
  });
});
