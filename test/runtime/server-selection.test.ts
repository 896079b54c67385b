/**
 * Virtual server selection, differential against nginx: exact names,
 * wildcards, regexes in order with captures, default_server (and `default`),
 * `_`, Host normalization, a missing or invalid Host.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side, type Snap } from '../helpers/differential.js';

const servers = (port: number, port2: number): string => `
  server { listen 127.0.0.1:${port}; server_name first.test; return 200 "first $server_name $host\\n"; }
  server { listen 127.0.0.1:${port} default_server; server_name default.test; return 200 "default $server_name $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name exact.test alias.test; return 200 "exact $server_name $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name *.example.com; return 200 "head-wildcard $server_name $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name *.deep.example.com; return 200 "longer-head-wildcard $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name .example.org; return 200 "dot-wildcard $server_name $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name www.example.*; return 200 "tail-wildcard $server_name $host\\n"; }
  server { listen 127.0.0.1:${port}; server_name ~^(?<sub>[a-z]+)\\.regex\\.test$; return 200 "regex-named sub=$sub 1=$1 $server_name\\n"; }
  server { listen 127.0.0.1:${port}; server_name ~^([a-z]+)\\.([a-z]+)\\.regex\\.test$ ~^(.*)\\.regex\\.test$; return 200 "regex-second 1=$1 2=$2\\n"; }
  server { listen 127.0.0.1:${port}; server_name _; return 200 "underscore $server_name $host\\n"; }
  server { listen 127.0.0.1:${port2}; server_name other.test; return 200 "port2-first $host\\n"; }
  server { listen 127.0.0.1:${port2} default; server_name old-default.test; return 200 "port2-default $server_name $host\\n"; }
`;

/** Requests with these Host headers, each answered by some server. */
const HOSTS = [
  'exact.test', 'alias.test', 'EXACT.Test', 'exact.test:8080', 'exact.test.', 'unknown.test', '',
  'a.example.com', 'www.example.com', 'x.deep.example.com', 'deep.example.com', 'example.com',
  'example.org', 'www.example.org', 'a.b.example.org',
  'www.example.net', 'www.example', 'abc.regex.test', 'ABC.Regex.Test', 'a.b.regex.test', 'a.b.c.regex.test',
  '_', '127.0.0.1', '[::1]', 'first.test',
];

describe('server selection by Host (differential)', () => {
  after(cleanup);

  it('picks exact names, wildcards, regexes and the default server as nginx does', async () => {
    const { nginx, jinx } = await differential({ conf: ({ port, ports }) => httpConf(servers(port, ports[0]!)), extraPorts: 1 }, async (s: Side) => {
      const out: Record<string, Snap> = {};
      for (const h of HOSTS) out[`Host: ${h}`] = await s.get('/', { headers: { Host: h } });
      for (const h of ['other.test', 'unknown.test']) out[`port2 Host: ${h}`] = await s.get('/', { headers: { Host: h }, port: s.ports[0] });
      return out;
    });
    assert.equal(nginx.result['Host: www.example.com']!.body, 'head-wildcard *.example.com www.example.com\n');
    assert.equal(nginx.result['Host: abc.regex.test']!.body, 'regex-named sub=abc 1=abc ~^(?<sub>[a-z]+)\\.regex\\.test$\n');
    assert.equal(nginx.result['port2 Host: unknown.test']!.body, 'port2-default old-default.test unknown.test\n');
    assertSameAsNginx({ nginx, jinx });
  });

  it('treats a missing Host on HTTP/1.0 as the default server and rejects one on HTTP/1.1', async () => {
    const { nginx, jinx } = await differential({ conf: ({ port, ports }) => httpConf(servers(port, ports[0]!)), extraPorts: 1 }, async (s) => ({
      http10: await s.raw('GET /path HTTP/1.0\r\n\r\n'),
      http11: await s.raw('GET /path HTTP/1.1\r\nConnection: close\r\n\r\n'),
      absoluteUri: await s.raw('GET http://exact.test/path HTTP/1.1\r\nHost: first.test\r\nConnection: close\r\n\r\n'),
    }));
    assert.equal(nginx.result.http10?.body, 'default default.test default.test\n');
    assert.equal(nginx.result.http11?.status, 400);
    assertSameAsNginx({ nginx, jinx });
  });

  it('answers 400 to an invalid Host and logs it at info', async () => {
    const bad = ['a/b', '..', 'exa mple.test', 'a..b', '[::1', 'a\\b'];
    const { nginx, jinx } = await differential({ conf: ({ port, ports }) => httpConf(servers(port, ports[0]!)), extraPorts: 1 }, async (s) => {
      const out: Record<string, Snap | undefined> = {};
      for (const h of bad) out[h] = await s.raw(`GET / HTTP/1.1\r\nHost: ${h}\r\nConnection: close\r\n\r\n`);
      out['duplicate'] = await s.raw('GET / HTTP/1.1\r\nHost: exact.test\r\nHost: exact.test\r\nConnection: close\r\n\r\n');
      return out;
    });
    assert.equal(nginx.result['a/b']?.status, 400);
    assertSameAsNginx({ nginx, jinx });
  });
});
