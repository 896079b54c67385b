/**
 * `random_index`, differential against nginx: a directory URI goes to one of
 * its files at random (with the arguments), hidden names, directories and
 * broken links left out, a link followed, the index module's answer for a
 * directory without a file, `opendir()` failures, and methods.
 */
import { strict as assert } from 'node:assert';
import { lstatSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const FILES = {
  'html/two/a.txt': 'a\n',
  'html/two/b.txt': 'b\n',
  'html/one/only.txt': 'only\n',
  'html/hidden/.h': 'hidden\n',
  'html/target.txt': 'target\n',
  'html/dironly/sub/x.txt': 'x\n',
  'html/indexed/index.html': 'index\n',
};

/** Makes the links `writeFiles` cannot (once for each side's prefix). */
function links(prefix: string): void {
  mkdirSync(join(prefix, 'html/link'), { recursive: true });
  mkdirSync(join(prefix, 'html/broken'), { recursive: true });
  for (const [path, target] of [['html/link/l.txt', '../target.txt'], ['html/broken/b.txt', 'nowhere']] as const) {
    const at = join(prefix, path);
    try {
      lstatSync(at);
    } catch {
      symlinkSync(target, at);
    }
  }
}

describe('random_index (differential)', () => {
  after(cleanup);

  it('sends a directory URI to a file of it at random, leaving out hidden names, directories and broken links, as nginx', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => {
        links(prefix);
        return httpConf(`  server { listen 127.0.0.1:${port}; server_name localhost; root html;
    location / { random_index on; }
    location /indexed/ { }
  }`);
      },
      files: FILES,
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const p of ['/one/', '/one/?q=1', '/hidden/', '/link/', '/broken/', '/dironly/', '/missing/', '/indexed/']) out[p] = await s.get(p);
      out['POST /one/'] = await s.get('/one/', { method: 'POST', body: 'x' });
      out['DELETE /one/'] = await s.get('/one/', { method: 'DELETE' });
      // both files come up (the chance that 40 picks miss one is 2^-39)
      const seen = new Set<string>();
      for (let i = 0; i < 40; i++) seen.add((await s.get('/two/')).body);
      return { out, seen: [...seen].sort() };
    });
    assert.equal(run.jinx.result.out['/one/?q=1']!.body, 'only\n');
    assert.equal(run.jinx.result.out['/hidden/']!.status, 403);
    assert.deepEqual(run.jinx.result.seen, ['a\n', 'b\n']);
    assertSameAsNginx(run);
  });
});
