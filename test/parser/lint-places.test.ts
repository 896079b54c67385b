/**
 * `jinx lint` names the same file and line as `-t` (nginx's place for the
 * message): in an included file, after CR bytes, at a `types` entry. The
 * places are nginx 1.30's; `test/parser/*.test.ts` check them against nginx.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { makePrefix, type PrefixFiles } from '../helpers/conf-test.js';
import { cleanup, JINX } from '../helpers/harness.js';
import type { LintJsonFinding } from '../helpers/cli.js';

interface LintResult {
  readonly status: number | null;
  readonly findings: Omit<LintJsonFinding, 'includedFrom' | 'fix'>[];
  readonly text: string[];
}

/** Runs `jinx lint` (JSON and text) on PREFIX/nginx.conf, with the prefix written `PREFIX` (text names the files relative to it). */
function lint(files: PrefixFiles): LintResult {
  const prefix = makePrefix(files);
  const run = (format: string) => spawnSync(JINX, ['lint', '--format', format, '-p', `${prefix}/`, '-c', `${prefix}/nginx.conf`], {
    encoding: 'utf8', timeout: 30_000,
  });
  const json = run('json');
  const text = run('text');
  assert.equal(text.status, json.status, 'text and JSON runs exit alike');
  return {
    status: json.status,
    findings: (JSON.parse(json.stdout.split(prefix).join('PREFIX')) as LintJsonFinding[])
      .map(({ includedFrom: _chain, fix: _fix, ...f }) => f),
    text: text.stdout.split(prefix).join('PREFIX').split('\n').filter(Boolean),
  };
}

describe('jinx lint places findings where nginx does', () => {
  after(cleanup);

  it('a syntax error in an included file: error at PREFIX/a.conf:2, exit 1', () => {
    const r = lint({ 'nginx.conf': 'events {}\ninclude a.conf;\n', 'a.conf': '\nfoo "x"y;\n' });
    assert.equal(r.status, 1);
    assert.deepEqual(r.findings, [{ severity: 'error', code: 'syntax', message: 'unexpected "y"', file: 'PREFIX/a.conf', line: 2 }]);
    assert.deepEqual(r.text, ['a.conf:2, included from nginx.conf:2: [error] unexpected "y" (syntax)']);
  });

  it('CR bytes are not line ends: unknown directive at line 2 of a CR CR LF file', () => {
    const r = lint({ 'nginx.conf': 'events {}\r\r\nfoo;\r\r\n' });
    assert.equal(r.status, 1);
    assert.deepEqual(r.text, ['nginx.conf:2: [error] unknown directive "foo" (unknown-directive)']);
  });

  it('a duplicate extension in types: warning at the entry\'s line, exit 0', () => {
    const r = lint({ 'nginx.conf': 'events {}\nhttp {\n types {\n  text/html html;\n  text/plain html;\n }\n}\n' });
    assert.equal(r.status, 0);
    assert.deepEqual(r.text.filter((l) => l.includes('[warning]')), [
      'nginx.conf:5: [warning] duplicate extension "html", content type: "text/plain", previous content type: "text/html" (duplicate-extension)',
    ]);
  });
});
