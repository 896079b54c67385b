/**
 * `jinx lint --format sarif` validates against the SARIF 2.1.0 JSON schema
 * (vendored in fixtures/sarif, see its SOURCE.md) with ajv; and the
 * engine in-process: a rule's findings carry the include chain and its
 * fix into SARIF (`relatedLocations`, `fixes`), a finding a rule reports
 * once per include of a file is kept once (the first chain), and a rule
 * that throws becomes an `internal-error` finding naming it.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { lintConfig } from '../../src/config/lint/engine.js';
import type { LintRule } from '../../src/config/lint/rule.js';
import { sarifLog } from '../../src/config/lint/sarif.js';
import { cleanup, ROOT, runJinx } from '../helpers/harness.js';
import { makePrefix } from '../helpers/cli.js';

/**
 * The schema is draft-04, which ajv 8 reads as draft-07 once its draft-04
 * `id` is `$id` and its `$schema` line is dropped: it uses no keyword whose
 * meaning changed between the two (no boolean `exclusiveMinimum`). Its
 * `language` pattern has a stray `]` (`…{2}]?$`), which is a syntax error
 * as a Unicode regular expression: patterns are compiled without the `u`
 * flag, as a draft-04 validator reads them.
 */
function sarifValidator(): ValidateFunction {
  const schema = JSON.parse(readFileSync(join(ROOT, 'fixtures/sarif/sarif-2.1.0-rtm.5.json'), 'utf8')) as Record<string, unknown>;
  const { $schema: _draft, id, ...rest } = schema;
  const ajv = new Ajv({ strict: false, allErrors: true, unicodeRegExp: false });
  const addFormats = addFormatsModule as unknown as (a: Ajv) => Ajv;
  addFormats(ajv);
  return ajv.compile({ ...rest, $id: id as string });
}

const results0 = (log: { runs: { results: Record<string, unknown>[] }[] }): Record<string, unknown> => log.runs[0]!.results[0]!;

function assertValid(validate: ValidateFunction, log: unknown): void {
  assert.ok(validate(log), JSON.stringify(validate.errors, null, 2));
}

/** One finding per `add_header` directive, with a fix; it is reported at every level the directive is read (a file included twice). */
const EVERY_ADD_HEADER: LintRule = {
  code: 'test-add-header', severity: 'warning', title: 'add_header seen', explanation: 'A test rule.', docUrl: 'https://nginx.org/r/add_header',
  check(subject, report) {
    const walk = (nodes: typeof subject.nodes): void => {
      for (const n of nodes) {
        if (n.kind !== 'directive') continue;
        if (n.name === 'add_header') report({ message: `add_header ${n.args[0]}`, loc: n.loc, fix: { description: 'always', loc: n.loc, text: `add_header ${n.args.join(' ')} always;` } });
        if (n.block) walk(n.block);
      }
    };
    walk(subject.nodes);
  },
};

const THROWS: LintRule = {
  code: 'test-throws', severity: 'error', title: 'throws', explanation: 'A rule that fails.', docUrl: 'README.md#jinx-lint',
  check() {
    throw new Error('boom');
  },
};

const TREE = {
  'nginx.conf': 'events {}\nhttp { server_tokens off;\n    server {\n        listen 127.0.0.1:1;\n        location /a { include snippets/h.conf; }\n        location /b { include snippets/h.conf; }\n    }\n}\n',
  'snippets/h.conf': 'add_header X-Frame-Options DENY;\n',
};

describe('jinx lint --format sarif', () => {
  after(cleanup);
  const validate = sarifValidator();

  it('the CLI\'s SARIF validates: errors with their places, the include chain as relatedLocations, exit as --fail-on says', () => {
    const p = makePrefix({
      'nginx.conf': 'events {}\nhttp { server_tokens off;\n    include conf.d/*.conf;\n}\nbogus;\n',
      'conf.d/a.conf': 'msie_refresh on;\nserver { listen 127.0.0.1:1; proxy_buffering maybe; }\n',
    });
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf', '--format', 'sarif'], { cwd: p });
    assert.equal(r.status, 1);
    const log = JSON.parse(r.stdout) as { version: string; runs: { tool: { driver: { rules: { id: string }[] } }; results: Record<string, unknown>[] }[] };
    assertValid(validate, log);
    // the validator does refuse: a driver needs a name, a result's level is one of SARIF's
    assert.equal(validate({ version: '2.1.0', runs: [{ tool: { driver: {} } }] }), false);
    assert.equal(validate({ ...log, runs: [{ ...log.runs[0]!, results: [{ ...results0(log), level: 'fatal' }] }] }), false);
    assert.equal(log.version, '2.1.0');
    const results = log.runs[0]!.results;
    assert.deepEqual(results.map((x) => [x['ruleId'], x['level']]), [
      ['invalid-value', 'error'], ['unknown-directive', 'error'], ['no-effect', 'note'],
    ]);
    const ids = log.runs[0]!.tool.driver.rules.map((d) => d.id);
    for (const x of results) assert.equal(ids[x['ruleIndex'] as number], x['ruleId']);
    assert.deepEqual(results[0]!['locations'], [{ physicalLocation: { artifactLocation: { uri: 'conf.d/a.conf', uriBaseId: '%SRCROOT%' }, region: { startLine: 2 } } }]);
    const g = JSON.parse(runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf', '--format', 'sarif', '-g', 'bogus_g x;'], { cwd: p }).stdout) as typeof log;
    assertValid(validate, g);
    assert.deepEqual(g.runs[0]!.results[0]!['locations'], [{ physicalLocation: { artifactLocation: { uri: 'nginx.conf', uriBaseId: '%SRCROOT%' } } }]);
    assert.deepEqual(results[0]!['relatedLocations'], [{
      id: 1, message: { text: 'included from here' },
      physicalLocation: { artifactLocation: { uri: 'nginx.conf', uriBaseId: '%SRCROOT%' }, region: { startLine: 3 } },
    }]);
  });

  it('a rule\'s findings: once for a file included twice (the first chain kept), with its fix; SARIF validates', async () => {
    const p = makePrefix(TREE);
    const findings = await lintConfig({ confFile: `${p}/nginx.conf`, prefix: `${p}/`, offline: true, only: [], skip: [], rules: [EVERY_ADD_HEADER] });
    assert.equal(findings.length, 1);
    assert.deepEqual(findings[0]!.loc, { file: `${p}/snippets/h.conf`, line: 1, includedFrom: { file: `${p}/nginx.conf`, line: 5 } });
    const log = sarifLog(findings, [EVERY_ADD_HEADER], { version: '0', cwd: '/', confFile: `${p}/nginx.conf` });
    assertValid(validate, log);
    const result = (log['runs'] as { results: Record<string, unknown>[] }[])[0]!.results[0]!;
    assert.deepEqual(result['fixes'], [{
      description: { text: 'always' },
      artifactChanges: [{
        artifactLocation: { uri: `${p.slice(1)}/snippets/h.conf`, uriBaseId: '%SRCROOT%' },
        replacements: [{ deletedRegion: { startLine: 1 }, insertedContent: { text: 'add_header X-Frame-Options DENY always;' } }],
      }],
    }]);
  });

  it('a rule that throws is an internal-error finding naming it; the other rules run; --skip leaves a rule out', async () => {
    const p = makePrefix(TREE);
    const req = { confFile: `${p}/nginx.conf`, prefix: `${p}/`, offline: true, only: [], skip: [], rules: [THROWS, EVERY_ADD_HEADER] };
    const findings = await lintConfig(req);
    assert.deepEqual(findings.map((f) => [f.severity, f.code, f.message]), [
      ['warning', 'internal-error', 'rule "test-throws" failed: boom'],
      ['warning', 'test-add-header', 'add_header X-Frame-Options'],
    ]);
    assert.deepEqual((await lintConfig({ ...req, skip: ['test-throws'] })).map((f) => f.code), ['test-add-header']);
    assertValid(validate, sarifLog(findings, [THROWS, EVERY_ADD_HEADER], { version: '0', cwd: p, confFile: `${p}/nginx.conf` }));
  });
});
