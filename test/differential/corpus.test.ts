/**
 * `jinx -t` and the reference `nginx -t` agree on real-world configurations:
 * Nginx Proxy Manager's tree, Debian's stock /etc/nginx, the scenario's
 * tree, and each of crossplane's fixtures (valid and deliberately invalid):
 * same exit status, same warnings and errors with the same FILE:LINE.
 */
import { strict as assert } from 'node:assert';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compareConfigTest, copyTree, skipWithoutNginx, type TestOutcome } from '../helpers/config-test.js';
import { cleanup, SHARED } from '../helpers/harness.js';
import { prepareDebian, prepareProxyManager, prepareScenario } from '../helpers/corpus-trees.js';

const skip = skipWithoutNginx();

/** Asserts both sides agree, and returns nginx's outcome for further checks. */
function assertSame(dir: string, conf: string, flags: readonly string[] = []): TestOutcome {
  const { jinx, nginx } = compareConfigTest(dir, conf, { flags, hidePrefix: dir });
  assert.ok(nginx);
  assert.deepEqual(jinx, nginx, `jinx -t and nginx -t differ on ${conf}`);
  return nginx;
}

describe('real-world trees pass -t in jinx as in nginx', { skip }, () => {
  after(cleanup);

  it('accepts the Nginx Proxy Manager tree with nginx\'s output (syntax is ok, test is successful)', async () => {
    const t = await prepareProxyManager();
    const ng = assertSame(t.prefix, t.conf);
    assert.equal(ng.status, 0, `nginx rejected the prepared NPM tree:\n${ng.lines.join('\n')}`);
  });

  it('accepts the Nginx Proxy Manager tree with -q silently', async () => {
    const t = await prepareProxyManager();
    const ng = assertSame(t.prefix, t.conf, ['-q']);
    assert.equal(ng.status, 0);
  });

  it('accepts Debian\'s stock /etc/nginx with nginx\'s output', async () => {
    const t = await prepareDebian();
    const ng = assertSame(t.prefix, t.conf);
    assert.equal(ng.status, 0, `nginx rejected the prepared Debian tree:\n${ng.lines.join('\n')}`);
  });

  it('accepts Debian\'s default site with its SSL lines (snakeoil certificate) enabled', async () => {
    const t = await prepareDebian({ ssl: true });
    const ng = assertSame(t.prefix, t.conf);
    assert.equal(ng.status, 0, `nginx rejected the prepared Debian tree with SSL:\n${ng.lines.join('\n')}`);
  });

  it('accepts the scenario\'s rendered config tree with nginx\'s output', async () => {
    const t = await prepareScenario();
    const ng = assertSame(t.prefix, t.conf);
    assert.equal(ng.status, 0, `nginx rejected the rendered scenario tree:\n${ng.lines.join('\n')}`);
  });
});

describe('crossplane fixtures: jinx -t reports what nginx -t reports', { skip }, () => {
  after(cleanup);
  const base = join(SHARED, 'corpus/crossplane/configs');
  for (const fixture of readdirSync(base).sort()) {
    const entries = fixture === 'missing-semicolon' ? ['broken-above.conf', 'broken-below.conf'] : ['nginx.conf'];
    for (const entry of entries) {
      it(`${fixture}/${entry}: same status, messages and FILE:LINE`, () => {
        const dir = copyTree(join(base, fixture), 'jinx-crossplane-');
        assertSame(dir, join(dir, entry));
      });
    }
  }
});
