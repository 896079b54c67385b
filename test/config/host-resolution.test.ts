/**
 * Which names jinx resolves while it reads a configuration: the hosts that
 * `proxy_pass`, `fastcgi_pass`, upstream `server` and `set_real_ip_from`
 * name, never the name of an `upstream` block they refer to (nginx's
 * `ngx_http_upstream_add` / `ngx_stream_upstream_add` find the block by
 * name). Resolving a block's name cost a DNS round trip per name at every
 * start, and five seconds when the resolver did not answer.
 */
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { hostsToResolve } from '../../src/config/compile.js';
import { loadConfig } from '../../src/parser/load.js';

const dir = mkdtempSync(join(tmpdir(), 'jinx-hosts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The names jinx would resolve for `text` as nginx.conf. */
function namesOf(text: string): string[] {
  const confFile = join(dir, 'nginx.conf');
  writeFileSync(confFile, text);
  return [...hostsToResolve(loadConfig({ confFile, confPrefix: `${dir}/` }).nodes)].sort();
}

describe('names resolved at start', () => {
  it('an http upstream block named by proxy_pass and fastcgi_pass is not resolved, its servers are', () => {
    assert.deepEqual(namesOf(`events {}
http {
  upstream Backend { server app.example:8080; }
  upstream php { server unix:/run/php.sock; }
  server { location / { proxy_pass http://backend; } location /x { proxy_pass https://other.example/; } location ~ \\.php$ { fastcgi_pass php; } }
}
`), ['app.example', 'other.example']);
  });

  it('a stream upstream block named by proxy_pass is not resolved, a host is', () => {
    assert.deepEqual(namesOf(`events {}
stream {
  upstream u { server db.example:5432; }
  server { listen 9000; proxy_pass u; }
  server { listen 9001; proxy_pass cache.example:6379; }
}
`), ['cache.example', 'db.example']);
  });

  it('an http upstream does not stand for a stream proxy_pass of the same name', () => {
    assert.deepEqual(namesOf(`events {}
http { upstream u { server 127.0.0.1:8080; } }
stream { server { listen 9000; proxy_pass u:5432; } }
`), ['u']);
  });
});
