/**
 * sub_filter, differential against nginx: search strings matched without
 * regard to case across the pieces a proxied upstream sends (strings cut
 * between pieces, strings that begin inside an almost-match, several
 * strings sharing a start), `sub_filter_once` on and off, variables in
 * search strings and replacements (an empty search string left out),
 * `sub_filter_types`, `sub_filter_last_modified` and the headers the filter
 * drops (GET and HEAD), inheritance of the whole list, nginx's error pages
 * and empty responses; and the configuration errors nginx reports.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, JINX, startUpstream, tempDir, writeFiles } from '../helpers/harness.js';
import { ORACLE, assertSameAsNginx, differential, httpConf, takeEach } from '../helpers/differential.js';
import { answerSync, nextKey } from '../helpers/recorded.js';
import { sendInPieces } from '../helpers/upstreams.js';

describe('sub_filter (differential)', () => {
  after(cleanup);

  it('replaces strings cut between an upstream\'s pieces, once or everywhere, as nginx', async () => {
    const up = await startUpstream((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      res.writeHead(200, { 'Content-Type': 'text/html', 'Last-Modified': 'Mon, 02 Jan 2006 15:04:05 GMT', ETag: '"abc"' });
      sendInPieces(res, url.searchParams.get('b') ?? '', Number(url.searchParams.get('n') ?? '3'));
    });
    const body = encodeURIComponent('xxFOOfoofofoo aaab aab AAaAB abpatternyz abpattternyz end fo');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /once/ { sub_filter foo bar; sub_filter aab +; proxy_pass http://127.0.0.1:${up.port}/; }
    location /all/ { sub_filter foo bar; sub_filter aab +; sub_filter_once off; proxy_pass http://127.0.0.1:${up.port}/; }
    location /multi/ {
      sub_filter_once off; sub_filter abpatternyz P; sub_filter abpa Q; sub_filter tter R; sub_filter f _;
      proxy_pass http://127.0.0.1:${up.port}/;
    }
    location /vars/ {
      sub_filter_once off; sub_filter $arg_s "<$arg_r>"; sub_filter x$arg_t "[$uri]";
      proxy_pass http://127.0.0.1:${up.port}/;
    }
    location /lm/ { sub_filter foo bar; sub_filter_last_modified on; proxy_pass http://127.0.0.1:${up.port}/; }
  }`),
    }, async (s) => ({
      ...await takeEach(s, [
        `/once/p?b=${body}`, `/once/p?n=1&b=${body}`, `/all/p?b=${body}`, `/all/p?n=1&b=${body}`, `/all/p?n=7&b=${body}`,
        `/multi/p?b=${body}`, `/multi/p?n=2&b=${body}`, '/multi/p?n=1&b=abpatternyzABCDEabpatternyABCDEabpatternyABCDE',
        `/vars/p?s=FOO&r=R&t=x&b=${body}`, `/vars/p?t=Xf&b=${body}`, `/vars/p?b=${body}`,
        `/lm/p?b=${body}`,
      ]),
      ...await takeEach(s, ['/once/p?b=foo', '/lm/p?b=foo'], 'HEAD'),
    }));
    const n = run.nginx.result;
    assert.equal(n[`GET /all/p?n=1&b=${body}`]!.body, 'xxbarbarfobar a+ + AA+ abpatternyz abpattternyz end fo');
    assert.equal(n['GET /lm/p?b=' + body]!.headers.etag, 'W/"abc"');
    assertSameAsNginx(run);
  });

  it('filters the types it is told to, keeps the list a level has, and leaves empty responses alone, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  types { text/html html; text/plain txt; text/css css; }
  sub_filter foo http;
  server { listen 127.0.0.1:${port}; root html;
    location /own/ { alias html/; sub_filter foo own; sub_filter FOO OWN; }
    location /plain/ { alias html/; sub_filter_types text/plain; }
    location /any/ { alias html/; sub_filter_types *; }
    location = /empty { default_type text/html; return 200 ""; }
    location = /ret { default_type text/html; return 200 "foo $uri foo"; }
    location = /gone { return 404; }
    error_page 403 /page403.html;
    location = /forbidden { return 403; }
  }`),
      files: {
        'html/a.html': 'a foo b FOO c', 'html/a.txt': 'text foo', 'html/a.css': 'css foo', 'html/page403.html': 'denied foo',
      },
    }, async (s) => ({
      ...await takeEach(s, ['/a.html', '/a.txt', '/own/a.html', '/plain/a.txt', '/plain/a.html', '/any/a.css', '/empty', '/ret', '/gone', '/forbidden']),
      ...await takeEach(s, ['/a.html', '/a.txt'], 'HEAD'),
    }));
    assert.equal(run.nginx.result['GET /own/a.html']!.body, 'a own b OWN c');
    assertSameAsNginx(run);
  });

  it('rejects an empty search string and more than 255 of them with nginx\'s messages', () => {
    const many = Array.from({ length: 256 }, (_, i) => `sub_filter s${i} r;`).join(' ');
    for (const directives of ['sub_filter "" x;', many]) {
      const dir = tempDir('jinx-sub-conf-');
      writeFiles(dir, { 'nginx.conf': `events {}\nhttp {\n  server { ${directives} }\n}\n`, 'logs/.keep': '' });
      const check = (binary: string): string => {
        const r = spawnSync(binary, ['-t', '-p', `${dir}/`, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8', timeout: 20_000 });
        return (r.stderr.split('\n').find((l) => l.includes('[emerg]')) ?? '').replace(/^.*\[emerg\] (\d+#\d+: )?/, '');
      };
      const expected = answerSync(nextKey(), ORACLE ? () => check(ORACLE!) : undefined, new Map([[dir, '@PREFIX@']]));
      assert.match(expected, /empty search pattern|number of search patterns exceeds 255/);
      assert.equal(check(JINX), expected);
    }
  });
});
