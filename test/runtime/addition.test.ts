/**
 * add_before_body and add_after_body, differential against nginx: the
 * subrequests' bodies around a static file, a `return` and a proxied
 * response (the main body and a subrequest's body each arriving in pieces),
 * each body passing its own location's sub_filter; a subrequest that fails
 * (nginx's page in its place) or adds itself; only a main request's 200 of
 * an `addition_types` type gets them, nothing for HEAD; the headers nginx
 * drops or weakens; and an upstream response cut short, which gets no
 * after-body.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, takeEach } from '../helpers/differential.js';
import { sendInPieces } from '../helpers/upstreams.js';

describe('addition (differential)', () => {
  after(cleanup);

  it('puts the subrequests\' bodies before and after static, returned and proxied bodies, as nginx', async () => {
    const up = await startUpstream((req, res) => {
      const path = req.url ?? '/';
      if (path.startsWith('/cut')) {
        // a length longer than what comes: the response is cut short
        res.socket?.end('HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nSEE-THIS-SHORT\n');
        return;
      }
      res.writeHead(path.startsWith('/created') ? 201 : 200, { 'Content-Type': 'text/html', ETag: '"up"' });
      sendInPieces(res, `upstream foo body of ${path} foo`);
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; }
  server { listen 127.0.0.1:${port}; root html;
    location /static/ { alias html/; add_before_body /parts/before.html; add_after_body /parts/after.html; }
    location /after-only/ { alias html/; add_after_body /parts/after.html; }
    location /typed/ { alias html/; addition_types text/plain; add_after_body /parts/after.html; }
    location /missing/ { alias html/; add_before_body /parts/nonexistent.html; add_after_body /up/sub; }
    location /self.html { add_after_body /self.html; default_type text/html; return 200 "self "; }
    location /up/ {
      sub_filter foo MAIN; add_before_body /parts/before.html; add_after_body /filtered/after.html;
      proxy_pass http://127.0.0.1:${up.port}/;
    }
    location /filtered/ { alias html/parts/; sub_filter foo SUB; }
    location /ret { add_before_body /up/sub; default_type text/html; return 200 "returned foo"; }
    location /status { add_after_body /parts/after.html; default_type text/html; return 202 "accepted"; }
    location /empty { add_after_body /parts/after.html; default_type text/html; return 200 ""; }
    location /parts/ { }
  }`),
      files: {
        'html/a.html': 'static foo page', 'html/a.txt': 'plain text',
        'html/parts/before.html': '[before foo]', 'html/parts/after.html': '[after foo]',
      },
    }, async (s) => ({
      pages: {
        ...await takeEach(s, [
          '/static/a.html', '/static/a.txt', '/after-only/a.html', '/typed/a.txt', '/typed/a.html', '/missing/a.html', '/self.html',
          '/up/page', '/up/created', '/ret', '/status', '/empty',
        ]),
        ...await takeEach(s, ['/static/a.html', '/up/page'], 'HEAD'),
      },
      cut: (await rawExchange(s.port, 'GET /up/cut HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'))
        .replace(/^(Date|Server): .*\r\n/gm, ''),
    }));
    const n = run.nginx.result;
    assert.equal(n.pages['GET /up/page']!.body, '[before foo]upstream MAIN body of /page foo[after SUB]');
    // what the sub filter still held when the upstream closed is lost (nginx holds up to the search string's length less one byte)
    for (const side of [run.nginx, run.jinx]) {
      assert.match(side.result.cut, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nc\r\n\[before foo\]\r\n[0-9a-f]+\r\nSEE-THIS-SHOR[T\n]{0,2}\r\n$/);
    }
    assertSameAsNginx({ nginx: { ...run.nginx, result: run.nginx.result.pages }, jinx: { ...run.jinx, result: run.jinx.result.pages } });
  });
});
