/**
 * FastCGI request bodies and the end of a response, differential against
 * nginx with a scripted FastCGI server: `fastcgi_request_buffering off`
 * (STDIN records as the body arrives, `$request_body`), the END_REQUEST
 * record that ends a response, and `fastcgi_catch_stderr`.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, type Snap } from '../helpers/differential.js';
import { END_REQUEST, STDERR, STDOUT, endRequest, fcgiRecord, scriptedFastcgi } from '../helpers/fastcgi-server.js';

/** A response with its headers sorted by name (where node:http puts `Connection: close` is not compared here). */
function sorted(r: Snap): Snap {
  return { ...r, headers: Object.fromEntries(Object.entries(r.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
}

describe('FastCGI bodies and response ends (differential)', () => {
  after(cleanup);

  it('fastcgi_request_buffering off sends the body as STDIN; $request_body holds it when it fits the body buffer', async () => {
    const fcgi = await scriptedFastcgi((req, sock) => {
      const param = (name: string): string => req.params.find(([n]) => n === name)?.[1] ?? '-';
      const seen = `len=${req.stdin.length} sha1=${createHash('sha1').update(req.stdin).digest('hex')} cl=${param('CONTENT_LENGTH')}\n`;
      sock.end(Buffer.concat([fcgiRecord(STDOUT, `Content-Type: text/plain\r\n\r\n${seen}`), fcgiRecord(STDOUT, ''), endRequest()]));
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    client_body_buffer_size 2k;
    fastcgi_param CONTENT_LENGTH $content_length;
    location / { fastcgi_request_buffering off; add_header X-Body "$request_body"; fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => ({
      small: sorted(await s.get('/', { method: 'POST', body: '0123456789' })),
      large: sorted(await s.get('/', { method: 'POST', body: '0123456789'.repeat(1000) })),
      chunked: sorted(await s.get('/', { method: 'POST', chunks: ['01234', '56789'] })),
    }));
    assert.equal(run.jinx.result.small.headers['x-body'], '0123456789');
    assert.equal(run.jinx.result.large.headers['x-body'], undefined);
    assertSameAsNginx(run);
  });

  it('without fastcgi_keep_conn reads a response on after the empty STDOUT record and its END_REQUEST, to the connection\'s end', async () => {
    const closedEarly: boolean[] = [];
    const fcgi = await scriptedFastcgi((_req, sock) => {
      let closed = false;
      sock.once('close', () => {
        closed = true;
      });
      sock.write(Buffer.concat([fcgiRecord(STDOUT, 'Content-Type: text/plain\r\n\r\nbody\n'), fcgiRecord(STDOUT, '')]));
      setTimeout(() => {
        if (!closed) sock.write(fcgiRecord(END_REQUEST, Buffer.alloc(8)));
        setTimeout(() => {
          closedEarly.push(closed);
          sock.end();
        }, 200);
      }, 200);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location / { fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => {
      const r = sorted(await s.get('/'));
      return { response: r, closedEarly: closedEarly.splice(0) };
    });
    assert.deepEqual(run.jinx.result.closedEarly, [false]);
    assertSameAsNginx(run);
  });

  it('a STDERR record with a string of fastcgi_catch_stderr makes the response invalid: 502', async () => {
    const fcgi = await scriptedFastcgi((_req, sock) => {
      sock.end(Buffer.concat([
        fcgiRecord(STDERR, 'some sample text'), fcgiRecord(STDOUT, 'Content-Type: text/plain\r\n\r\nbody\n'), fcgiRecord(STDOUT, ''), endRequest(),
      ]));
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location /catch { fastcgi_catch_stderr sample; fastcgi_pass 127.0.0.1:${fcgi.port}; }
    location /other { fastcgi_catch_stderr nothing; fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => ({ caught: sorted(await s.get('/catch')), passed: sorted(await s.get('/other')) }));
    assert.equal(run.jinx.result.caught.status, 502);
    assert.equal(run.jinx.result.passed.status, 200);
    assertSameAsNginx(run);
  });

  it('a response that ends before its Content-Length still sends its header (with the bytes that came), then closes', async () => {
    const fcgi = await scriptedFastcgi((req, sock) => {
      const body = req.params.find(([n]) => n === 'REQUEST_URI')?.[1] === '/short' ? 'SEE-THIS\n' : '';
      sock.end(Buffer.concat([fcgiRecord(STDOUT, `Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n${body}`), fcgiRecord(STDOUT, ''), endRequest()]));
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost;
    location / { fastcgi_param REQUEST_URI $request_uri; fastcgi_pass 127.0.0.1:${fcgi.port}; }
  }`),
    }, async (s) => {
      const raw = async (path: string): Promise<string> => (await rawExchange(s.port, `GET ${path} HTTP/1.0\r\n\r\n`, 3000))
        .replace(/^Date: .*\r\n/m, '').replace(/^Server: .*\r\n/m, '');
      return { empty: await raw('/empty'), short: await raw('/short') };
    });
    assert.equal(run.nginx.result.empty, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\nConnection: close\r\n\r\n');
    assert.match(run.nginx.result.short, /\r\n\r\nSEE-THIS\n$/);
    assertSameAsNginx(run);
  });
});
