/**
 * uwsgi_pass to a real uWSGI running a WSGI application (Debian's
 * uwsgi-core and python3 plugin), differential against nginx with Debian's
 * `uwsgi_params`: the WSGI environ the application sees (method, path,
 * query, Host, the request body and its length, a chunked body read whole
 * first), statuses and headers it sets (several Set-Cookie), a body of
 * unknown length streamed by the application, a large one, uWSGI's own 500
 * for an application error, and `uwsgi_intercept_errors` with `error_page`.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';
import { NO_UWSGI, startUwsgi } from '../helpers/uwsgi-server.js';

/** The WSGI application: answers by the last segment of the path. */
const APP = `
import json

def application(environ, start_response):
    path = '/' + environ.get('PATH_INFO', '').split('/')[-1]
    if path == '/environ':
        body = environ['wsgi.input'].read()
        keys = ['REQUEST_METHOD', 'PATH_INFO', 'QUERY_STRING', 'REQUEST_URI', 'CONTENT_TYPE', 'CONTENT_LENGTH', 'HTTP_HOST',
                'HTTP_X_CUSTOM', 'HTTP_COOKIE', 'SERVER_PROTOCOL', 'REQUEST_SCHEME', 'SERVER_NAME']
        seen = {k: environ.get(k) for k in keys}
        seen['body'] = body.decode('latin1')
        out = json.dumps(seen, sort_keys=True).encode()
        start_response('200 OK', [('Content-Type', 'application/json'), ('Content-Length', str(len(out)))])
        return [out]
    if path == '/created':
        start_response('201 Created', [('Content-Type', 'text/plain'), ('Set-Cookie', 'a=1; Path=/'), ('Set-Cookie', 'b=2; Path=/'), ('X-App', 'yes')])
        return [b'created\\n']
    if path == '/stream':
        start_response('200 OK', [('Content-Type', 'text/plain')])
        return (('line %d\\n' % i).encode() for i in range(2000))
    if path == '/large':
        start_response('200 OK', [('Content-Type', 'application/octet-stream'), ('Content-Length', str(1 << 20))])
        return [b'x' * (1 << 20)]
    if path == '/missing':
        start_response('404 Not Found', [('Content-Type', 'text/plain')])
        return [b'no such thing\\n']
    if path == '/redirect':
        start_response('302 Found', [('Location', 'http://uwsgi.test/elsewhere')])
        return [b'']
    if path == '/crash':
        raise RuntimeError('boom')
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [b'hello from uwsgi\\n']
`;

const PARAMS = `uwsgi_param QUERY_STRING $query_string; uwsgi_param REQUEST_METHOD $request_method; uwsgi_param CONTENT_TYPE $content_type;
      uwsgi_param CONTENT_LENGTH $content_length; uwsgi_param REQUEST_URI $request_uri; uwsgi_param PATH_INFO $document_uri;
      uwsgi_param DOCUMENT_ROOT $document_root; uwsgi_param SERVER_PROTOCOL $server_protocol; uwsgi_param REQUEST_SCHEME $scheme;
      uwsgi_param HTTPS $https if_not_empty; uwsgi_param REMOTE_ADDR $remote_addr; uwsgi_param REMOTE_PORT $remote_port;
      uwsgi_param SERVER_PORT $server_port; uwsgi_param SERVER_NAME $server_name;`;

describe('uwsgi_pass to uWSGI (differential, real uWSGI)', { skip: NO_UWSGI }, () => {
  after(cleanup);

  it('passes the request to the WSGI application and its answers to the client as nginx does', async () => {
    const uwsgi = await startUwsgi(APP);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name uwsgi.test; client_max_body_size 4m;
    location / { ${PARAMS} uwsgi_pass 127.0.0.1:${uwsgi.port}; }
    location /intercepted/ { ${PARAMS} uwsgi_intercept_errors on; error_page 404 = /fallback; uwsgi_pass 127.0.0.1:${uwsgi.port}; }
    location = /fallback { return 200 "fallback\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      out.get = await s.get('/environ?q=1&r=2', { headers: { 'X-Custom': 'v', Cookie: 'c=1' } });
      out.post = await s.get('/environ', { method: 'POST', body: 'form=data', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      out.chunked = await s.get('/environ', { method: 'POST', chunks: ['abc', 'def'] });
      out.big = await s.get('/environ', { method: 'POST', body: Buffer.alloc(200_000, 'z') });
      out.created = await s.get('/created');
      out.stream = await s.get('/stream');
      out.large = await s.get('/large');
      out.head = await s.get('/created', { method: 'HEAD' });
      out.missing = await s.get('/missing');
      out.redirect = await s.get('/redirect');
      out.crash = await s.get('/crash');
      out.intercepted = await s.get('/intercepted/missing');
      out.plain = await s.get('/');
      return out;
    });
    const n = run.nginx.result;
    assert.equal(n.created!.status, 201);
    assert.equal(n.intercepted!.body, 'fallback\n');
    assert.match(n.get!.body, /"QUERY_STRING": "q=1&r=2"/);
    assertSameAsNginx(run);
  });
});
