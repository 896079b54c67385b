/**
 * uwsgi_pass and scgi_pass, differential against nginx with scripted uwsgi
 * and SCGI servers: what a server receives (uwsgi's modifiers and
 * `uwsgi_string`, an address made of variables with its scheme, SCGI's
 * CONTENT_LENGTH first, the params in order with the request headers as
 * HTTP_*, the body, a chunked one read whole first), and
 * how responses are taken: an HTTP status line or CGI header lines, a
 * `Status` header (passed on by uwsgi, hidden by SCGI), `Location`, a body
 * held to its Content-Length (more is cut, less is a premature close; two,
 * an invalid one, one with a Transfer-Encoding, an unknown coding), to
 * the connection's end without one, split headers, a header too big or
 * invalid, hop-by-hop headers, an unbuffered response, HEAD and 204, a
 * server that is down, and a 101 that makes the connection a tunnel.
 */
import { strict as assert } from 'node:assert';
import { connect, type Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, onCleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { scriptedScgi, scriptedUwsgi, type SeenCgiRequest } from '../helpers/cgi-servers.js';
import { selfSigned } from '../helpers/pki.js';

/** Writes `parts` `gapMs` apart (separate TCP segments), then closes the connection. */
function writeApart(sock: Socket, parts: readonly string[], gapMs = 0): void {
  const timers: NodeJS.Timeout[] = [];
  onCleanup(() => { for (const t of timers) clearTimeout(t); });
  parts.forEach((p, i) => timers.push(setTimeout(() => {
    if (sock.destroyed) return;
    sock.write(Buffer.from(p, 'latin1'));
    if (i === parts.length - 1) sock.end();
  }, i * gapMs)));
}

const TEXT = 'Content-Type: text/plain\r\n';

/** The answers of both servers, by the request's URI. */
const SCRIPTS: Record<string, (sock: Socket) => void> = {
  '/plain': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\n${TEXT}Content-Length: 3\r\n\r\nok\n`]),
  '/status-line': (s) => writeApart(s, [`HTTP/1.0 201 Made Here\r\n${TEXT}X-A: 1\r\n\r\ncreated\n`]),
  '/status-line-and-header': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nStatus: 500 Ignored\r\n${TEXT}\r\nline wins\n`]),
  '/no-reason': (s) => writeApart(s, [`HTTP/1.1 202\r\n${TEXT}\r\naccepted\n`]),
  '/cgi-status': (s) => writeApart(s, [`Status: 404 Not Here\r\n${TEXT}\r\nmissing\n`]),
  '/cgi-plain': (s) => writeApart(s, [`${TEXT}X-B: 2\r\n\r\ncgi body\n`]),
  '/location': (s) => writeApart(s, ['Location: http://example.test/else\r\n\r\n']),
  '/bad-status': (s) => writeApart(s, [`Status: abc\r\n${TEXT}\r\nx`]),
  '/longer-than-length': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\n${TEXT}Content-Length: 5\r\n\r\nhelloEXTRA`]),
  '/shorter-than-length': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\n${TEXT}Content-Length: 10\r\n\r\nabc`]),
  '/until-close': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\n${TEXT}\r\nfirst `, 'second\n'], 50),
  '/split': (s) => writeApart(s, ['HTTP/1.1 2', `00 OK\r\nContent-Ty`, `pe: text/plain\r\nX-Split: yes\r`, '\n\r\nsplit body\n'], 50),
  '/too-big': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(5000)}\r\n${TEXT}\r\nx`]),
  '/invalid': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nBad Name: x\r\n${TEXT}\r\nx`]),
  '/close-in-header': (s) => writeApart(s, ['HTTP/1.1 200 OK\r\nContent-Type: te']),
  '/no-content': (s) => writeApart(s, [`HTTP/1.1 204 No Content\r\n${TEXT}\r\n`]),
  '/unbuffered': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nX-Accel-Buffering: no\r\n${TEXT}\r\none `, 'two\n'], 100),
  '/lf-only': (s) => writeApart(s, ['HTTP/1.1 200 OK\nX-Lf:  spaced  \nContent-Type: text/plain\n\nlf body\n']),
  '/hop-by-hop': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nConnection: close\r\nKeep-Alive: timeout=5\r\n${TEXT}\r\nbody\n`]),
  '/unknown-coding': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n${TEXT}\r\nbody\n`]),
  '/two-lengths': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 3\r\n${TEXT}\r\nabc`]),
  '/bad-length': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n${TEXT}\r\nab`]),
  '/chunked-and-length': (s) => writeApart(s, [`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n${TEXT}\r\n5\r\nhello\r\n0\r\n\r\n`]),
};

function answer(req: SeenCgiRequest, sock: Socket): void {
  const uri = req.params.find(([n]) => n === 'DOCUMENT_URI')?.[1] ?? '';
  (SCRIPTS[uri.replace(/^\/(uwsgi|scgi)/, '')] ?? SCRIPTS['/plain']!)(sock);
}

/** What a server received, comparable between the two runs: the client's port left out. */
const received = (req: SeenCgiRequest): object => ({
  modifiers: [req.modifier1, req.modifier2], params: req.params.filter(([n]) => n !== 'REMOTE_PORT'), body: req.body.toString('latin1', 0, 64), bodyLength: req.body.length,
});

/** The params a Debian-style `uwsgi_params`/`scgi_params` file sets. */
const params = (prefix: 'uwsgi' | 'scgi'): string => ['REQUEST_METHOD $request_method', 'QUERY_STRING $query_string',
  ...(prefix === 'uwsgi' ? ['CONTENT_LENGTH $content_length'] : []), 'CONTENT_TYPE $content_type', 'REQUEST_URI $request_uri',
  'DOCUMENT_URI $document_uri', 'SERVER_PROTOCOL $server_protocol', 'HTTPS $https if_not_empty', 'REMOTE_ADDR $remote_addr', 'REMOTE_PORT $remote_port',
].map((p) => `${prefix}_param ${p};`).join(' ');

describe('uwsgi_pass and scgi_pass (differential, scripted servers)', () => {
  after(cleanup);

  it('sends the packet or netstring with the params in nginx\'s order, the request headers as HTTP_* and the body', async () => {
    const uwsgi = await scriptedUwsgi(answer);
    const scgi = await scriptedScgi(answer);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name cgi.test; client_max_body_size 1m;
    location /uwsgi/ { ${params('uwsgi')} uwsgi_param EMPTY ""; uwsgi_param HTTP_X_OVERRIDDEN from-param; uwsgi_pass uwsgi://127.0.0.1:${uwsgi.port}; }
    location /uwsgi/mod/ { ${params('uwsgi')} uwsgi_modifier1 5; uwsgi_modifier2 9; uwsgi_string "extra bytes"; uwsgi_pass 127.0.0.1:${uwsgi.port}; }
    location /uwsgi/var/ { ${params('uwsgi')} set $backend "uwsgi://127.0.0.1:${uwsgi.port}"; uwsgi_pass $backend; }
    location /scgi/ { ${params('scgi')} scgi_param EMPTY ""; scgi_param HTTP_X_OVERRIDDEN from-param; scgi_pass 127.0.0.1:${scgi.port}; }
    location /scgi/unbuffered/ { ${params('scgi')} scgi_request_buffering off; scgi_pass 127.0.0.1:${scgi.port}; }
  }`),
    }, async (s) => {
      const before = [uwsgi.requests.length, scgi.requests.length];
      const headers = { 'X-One': '1', Cookie: 'a=1', 'X-Overridden': 'from-header' };
      for (const prefix of ['/uwsgi', '/scgi']) {
        await s.get(`${prefix}/get?q=1`, { headers });
        await s.raw(`GET ${prefix}/dup HTTP/1.1\r\nHost: cgi.test:8080\r\nX-Dup: a\r\nX-Dup: b\r\nCookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n`);
        await s.get(`${prefix}/post`, { method: 'POST', body: Buffer.alloc(100_000, 'p') });
        await s.get(`${prefix}/chunked`, { method: 'POST', chunks: ['abc', 'def'] });
      }
      await s.get('/uwsgi/mod/x');
      await s.get('/uwsgi/var/x');
      await s.get('/scgi/unbuffered/post', { method: 'POST', body: 'streamed body' });
      return { uwsgi: uwsgi.requests.slice(before[0]).map(received), scgi: scgi.requests.slice(before[1]).map(received) };
    });
    const n = run.nginx.result as { uwsgi: { modifiers: number[]; params: [string, string][]; bodyLength: number }[]; scgi: { params: [string, string][]; bodyLength: number }[] };
    assert.deepEqual(n.uwsgi.map((r) => r.modifiers), [[0, 0], [0, 0], [0, 0], [0, 0], [5, 9], [0, 0]]);
    assert.deepEqual(n.scgi.map((r) => r.params[0]), [['CONTENT_LENGTH', '0'], ['CONTENT_LENGTH', '0'], ['CONTENT_LENGTH', '100000'], ['CONTENT_LENGTH', '6'], ['CONTENT_LENGTH', '13']]);
    assert.deepEqual(n.scgi[1]!.params.find(([k]) => k === 'HTTP_COOKIE'), ['HTTP_COOKIE', 'a=1; b=2']);
    assert.equal(n.uwsgi[2]!.bodyLength, 100_000);
    assertSameAsNginx(run);
  });

  it('takes status lines, CGI headers and bodies as nginx does, and refuses what nginx refuses', async () => {
    const uwsgi = await scriptedUwsgi(answer);
    const scgi = await scriptedScgi(answer);
    const down = await freePort();
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name cgi.test;
    location /uwsgi/ { uwsgi_param DOCUMENT_URI $document_uri; uwsgi_pass 127.0.0.1:${uwsgi.port}; }
    location /scgi/ { scgi_param DOCUMENT_URI $document_uri; scgi_pass 127.0.0.1:${scgi.port}; }
    location /down/ { uwsgi_pass 127.0.0.1:${down}; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const prefix of ['/uwsgi', '/scgi']) {
        for (const script of Object.keys(SCRIPTS)) {
          out[prefix + script] = await s.raw(`GET ${prefix}${script} HTTP/1.1\r\nHost: cgi.test\r\nConnection: close\r\n\r\n`);
        }
        out[`${prefix} HEAD`] = await s.get(`${prefix}/longer-than-length`, { method: 'HEAD' });
      }
      out.down = await s.get('/down/x');
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n['/uwsgi/status-line']!.status, 201);
    assert.equal(n['/uwsgi/cgi-status']!.status, 404);
    assert.equal(n['/uwsgi/too-big']!.status, 502);
    assert.equal(n.down!.status, 502);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('upstream sent more data than specified in "Content-Length" header')));
    assertSameAsNginx(run);
  });

  it('speaks uwsgi over TLS to a suwsgi:// server, and checks its certificate with uwsgi_ssl_verify, as nginx does', async () => {
    const { cert, key } = selfSigned('uwsgi.test');
    const uwsgi = await scriptedUwsgi(answer, { cert, key });
    const plain = await scriptedUwsgi(answer);
    const run = await differential({
      files: { 'uwsgi.pem': cert },
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name cgi.test;
    location / { ${params('uwsgi')} uwsgi_pass suwsgi://127.0.0.1:${uwsgi.port}; }
    location /verified/ {
      ${params('uwsgi')} uwsgi_ssl_verify on; uwsgi_ssl_trusted_certificate uwsgi.pem; uwsgi_ssl_name uwsgi.test; uwsgi_ssl_server_name on;
      uwsgi_pass suwsgi://127.0.0.1:${uwsgi.port};
    }
    location /mismatch/ { ${params('uwsgi')} uwsgi_ssl_verify on; uwsgi_ssl_trusted_certificate uwsgi.pem; uwsgi_pass suwsgi://127.0.0.1:${uwsgi.port}; }
    location /untrusted/ { ${params('uwsgi')} uwsgi_ssl_verify on; uwsgi_ssl_trusted_certificate uwsgi.pem; uwsgi_ssl_name uwsgi.test; uwsgi_ssl_verify_depth 0;
      uwsgi_pass suwsgi://127.0.0.1:${uwsgi.port}; }
    location /var/ { ${params('uwsgi')} set $backend "suwsgi://127.0.0.1:${uwsgi.port}"; uwsgi_pass $backend; }
    location /not-tls/ { ${params('uwsgi')} uwsgi_pass suwsgi://127.0.0.1:${plain.port}; }
  }`),
      literals: { TLS: uwsgi.port, PLAIN: plain.port },
    }, async (s) => {
      const before = uwsgi.requests.length;
      const out: Record<string, Snap> = {};
      for (const path of ['/plain', '/status-line', '/verified/plain', '/mismatch/plain', '/untrusted/plain', '/var/cgi-status', '/not-tls/plain']) {
        out[path] = await s.get(path, { method: path === '/status-line' ? 'POST' : 'GET', ...(path === '/status-line' ? { body: 'sent over tls' } : {}) });
      }
      return { out, received: uwsgi.requests.slice(before).map(received) };
    });
    const n = run.nginx.result;
    assert.equal(n.out['/plain']!.status, 200);
    assert.equal(n.out['/verified/plain']!.status, 200);
    assert.equal(n.out['/mismatch/plain']!.status, 502);
    assert.equal(n.out['/not-tls/plain']!.status, 502);
    assertSameAsNginx(run);
  });

  it('makes the connection a tunnel after a 101 to a request that asked to upgrade, as nginx does', async () => {
    /** Answers with a 101, bytes after its header, then each line it gets back in capitals. */
    const upgrade = (_req: SeenCgiRequest, sock: Socket): void => {
      sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\nX-Tunnel: yes\r\n\r\nhello\n');
      sock.on('data', (d: Buffer) => sock.write(d.toString('latin1').toUpperCase()));
      sock.on('end', () => sock.end());
    };
    const uwsgi = await scriptedUwsgi(upgrade);
    const scgi = await scriptedScgi(upgrade);
    /** Upgrades, reads what comes after the header, sends a line, reads its echo, closes: the transcript without the date. */
    const talk = (port: number, path: string): Promise<string> => new Promise((resolve, reject) => {
      const sock = connect({ host: '127.0.0.1', port });
      let got = '';
      let sent = false;
      sock.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        if (!sent && got.includes('hello\n')) {
          sent = true;
          sock.write('ping\n');
        } else if (got.endsWith('PING\n')) sock.end();
      });
      sock.on('close', () => resolve(got.replace(/^Date: .*\r\n/m, '').replace(/^Server: .*\r\n/m, '')));
      sock.on('error', reject);
      sock.setTimeout(5000, () => sock.destroy(new Error('no echo')));
      sock.write(`GET ${path} HTTP/1.1\r\nHost: cgi.test\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\n`);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name cgi.test;
    location /uwsgi/ { uwsgi_pass 127.0.0.1:${uwsgi.port}; }
    location /scgi/ { scgi_pass 127.0.0.1:${scgi.port}; }
  }`),
    }, async (s) => ({ uwsgi: await talk(s.port, '/uwsgi/ws'), scgi: await talk(s.port, '/scgi/ws') }));
    assert.match(run.nginx.result.uwsgi, /^HTTP\/1.1 101 Switching Protocols\r\n[^]*\r\n\r\nhello\nPING\n$/);
    assertSameAsNginx(run);
  });
});
