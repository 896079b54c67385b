/**
 * valid_referers and `$invalid_referer`, differential against nginx: no
 * Referer, a blocked one (no `http://`/`https://`), exact names, `*.` / `.` /
 * `.*` wildcards, a URI prefix, ports, case, regexes (case-insensitive,
 * against the Referer after its scheme), `server_names` (regex names matched
 * against the host alone, every name of the server wherever `server_name`
 * stands), the merge across levels; and `-t`'s messages for bad entries.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { defineConfCases, failed, succeeded } from '../helpers/conf-test.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const REFERERS = [
  undefined, '', 'x', 'http://a', 'ftp://www.example.org/', 'http://www.example.org/', 'HTTP://WWW.EXAMPLE.ORG:8080/x',
  'https://www.example.org', 'http://a.example.com/', 'http://example.com/', 'http://example.net/', 'http://b.example.net:1/',
  'http://www.example.co.uk/', 'http://www.example/', 'http://site.org/gal/x', 'http://site.org/ga', 'http://site.org:81/gal/',
  'http://foo.re.x', 'https://foo.re.x', 'http://foo.re.x/abc', 'http://q.com', 'https://Qq', 'http://srv.abc.net/x',
  'https://SRV.abc.net:80', 'http://srv.abc.net.evil/', `http://${'h'.repeat(300)}/`, 'http://late/', 'http://:1234567',
];

describe('valid_referers (differential)', () => {
  after(cleanup);

  it('sets $invalid_referer to 1 for a Referer the level does not list and to empty for one it does, as nginx', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    server_name www.example.org ~^srv\\.(\\w+)\\.net$;
    valid_referers ~^q;
    location / {
      valid_referers none blocked server_names *.example.com .example.net www.example.* site.org/gal/ ~\\.re\\.x$;
      return 200 "[$invalid_referer]\\n";
    }
    location /inherits/ { return 200 "[$invalid_referer]\\n"; }
    location /own/ { valid_referers blocked a.com; return 200 "[$invalid_referer]\\n"; }
  }
  server { listen 127.0.0.1:${port}; server_name other;
    location / { return 200 "[$invalid_referer]\\n"; }
    location /set/ { set $invalid_referer x; return 200 "[$invalid_referer]\\n"; }
  }
  server { listen 127.0.0.1:${port};
    location / { valid_referers server_names; return 200 "[$invalid_referer]\\n"; }
    server_name late;
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const referer of REFERERS) {
        const headers: Record<string, string> = referer === undefined ? {} : { Referer: referer };
        for (const path of ['/', '/inherits/', '/own/']) out[`${path} ${referer ?? '(none)'}`] = await s.get(path, { headers });
        out[`other ${referer ?? '(none)'}`] = await s.get('/', { headers: { ...headers, Host: 'other' } });
        out[`late ${referer ?? '(none)'}`] = await s.get('/', { headers: { ...headers, Host: 'late' } });
        out[`other /set/ ${referer ?? '(none)'}`] = await s.get('/set/', { headers: { ...headers, Host: 'other' } });
      }
      return out;
    });
    assert.equal(run.nginx.result['/own/ http://www.example.org/']!.body, '[1]\n');
    assert.equal(run.nginx.result['/ http://www.example.org/']!.body, '[]\n');
    assertSameAsNginx(run);
  });
});

const conf = (line: string): { 'nginx.conf': string } => ({
  'nginx.conf': `events {}\nhttp {\n  server {\n    location / {\n      ${line}\n      return 200 $invalid_referer;\n    }\n  }\n}\n`,
});

defineConfCases('valid_referers in -t', [
  {
    name: 'none and blocked without a valid referer: nginx\'s message, without a place',
    files: conf('valid_referers none blocked;'), status: 1,
    lines: failed('[emerg] the "none" or "blocked" referers are specified in the "valid_referers" directive without any valid referer'),
  },
  {
    name: 'server_names in a server without server_name lists its empty name: none and blocked are then allowed',
    files: conf('valid_referers none blocked server_names;'), status: 0,
    lines: succeeded(),
  },
  {
    name: 'valid_referers is not allowed at the http level',
    files: { 'nginx.conf': 'events {}\nhttp {\n  valid_referers none a.com;\n}\n' }, status: 1,
    lines: failed('[emerg] "valid_referers" directive is not allowed here in PREFIX/nginx.conf:3'),
  },
  {
    name: 'an empty referer is invalid',
    files: conf('valid_referers none "";'), status: 1,
    lines: failed('[emerg] invalid referer "" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'two dots in a row: invalid hostname or wildcard',
    files: conf('valid_referers a..b;'), status: 1,
    lines: failed('[emerg] invalid hostname or wildcard "a..b" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a name twice, in any case: conflicting parameter',
    files: conf('valid_referers a.com A.com;'), status: 1,
    lines: failed('[emerg] conflicting parameter "a.com" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'a name after its ".name" wildcard: conflicting parameter',
    files: conf('valid_referers .a.com a.com;'), status: 1,
    lines: failed('[emerg] conflicting parameter "a.com" in PREFIX/nginx.conf:5'),
  },
  {
    name: '"~" alone: empty regex',
    files: conf('valid_referers "~";'), status: 1,
    lines: failed('[emerg] empty regex in "~" in PREFIX/nginx.conf:5'),
  },
]);
