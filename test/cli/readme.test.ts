/**
 * README.md stays true: its directive table is what
 * `scripts/directive-table.mjs` generates from the directive table now, its
 * commands name files and scripts that exist, and it documents every flag.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { ROOT, runJinx } from '../helpers/harness.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

interface TableScript {
  directiveTable(): Promise<string>;
  withTable(readme: string, table: string): string;
  BEGIN: string;
  END: string;
}

describe('README.md', () => {
  it('the directive table is the one scripts/directive-table.mjs generates (else run `npm run docs`)', async () => {
    const script = (await import(pathToFileURL(join(ROOT, 'scripts/directive-table.mjs')).href)) as TableScript;
    assert.ok(README.includes(script.BEGIN) && README.includes(script.END), 'README has the table markers');
    const table = await script.directiveTable();
    assert.equal(README, script.withTable(README, table), 'README.md: the directive table is out of date; run `npm run docs`');
  });

  it('`node scripts/directive-table.mjs --check` exits 0 on this README', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/directive-table.mjs'), '--check'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  });

  it('the lint code table is the one scripts/lint-rule-table.mjs generates from the rule data (else run `npm run docs`)', async () => {
    const script = (await import(pathToFileURL(join(ROOT, 'scripts/lint-rule-table.mjs')).href)) as {
      lintRuleTable(): Promise<string>; withTable(readme: string, table: string): string; BEGIN: string; END: string;
    };
    assert.ok(README.includes(script.BEGIN) && README.includes(script.END), 'README has the lint table markers');
    assert.equal(README, script.withTable(README, await script.lintRuleTable()), 'README.md: the lint code table is out of date; run `npm run docs`');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.match(pkg.scripts['docs']!, /scripts\/lint-rule-table\.mjs --write/);
  });

  it('the table has one row per directive spec, with a status for each', async () => {
    const { allDirectives } = (await import(pathToFileURL(join(ROOT, 'dist/src/config/modules/index.js')).href)) as {
      allDirectives: readonly { name: string; effect: string }[];
    };
    const rows = README.split('\n').filter((l) => /^\| `[a-z0-9_]+` \| ngx_/.test(l));
    assert.equal(rows.length, allDirectives.length);
    for (const row of rows) assert.match(row, /\| (supported|no effect in jinx)(: [^|]+|[^|]*)\|$/, row);
    for (const d of allDirectives.filter((x) => x.effect === 'none')) {
      assert.ok(rows.some((r) => r.startsWith(`| \`${d.name}\` |`) && r.includes('no effect in jinx')), d.name);
    }
  });

  it('the run command uses scripts and files that exist: npm run build (tsc, then the bundle bin/jinx runs), bin/jinx, fixtures/default/nginx.conf, npm run -s record', () => {
    assert.ok(README.includes('npm ci && npm run build && bin/jinx -p fixtures/default/ -c nginx.conf'));
    assert.ok(README.includes('npm ci && npm test'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(pkg.scripts['build'], 'tsc -p tsconfig.json && node scripts/bundle.mjs');
    assert.match(pkg.scripts['test']!, /^sh test\/prepare\.sh && /);
    assert.match(pkg.scripts['docs']!, /scripts\/directive-table\.mjs --write/);
    assert.equal(pkg.scripts['record'], 'sh test/record.sh');
    assert.ok(README.includes('npm run -s record') && README.includes('JINX_NO_NGINX=1'));
    for (const f of ['bin/jinx', 'scripts/bundle.mjs', 'fixtures/default/nginx.conf', 'fixtures/default/html/index.html', 'test/prepare.sh', 'test/record.sh']) {
      assert.ok(existsSync(join(ROOT, f)), f);
    }
  });

  it('documents every flag `jinx -h` lists, and `jinx lint --format json`', () => {
    const help = runJinx(['-h']).stderr;
    const flags = [...help.matchAll(/^\s+(-[a-zA-Z?])\b/gm)].map((m) => m[1]!);
    assert.ok(flags.length >= 10, help);
    for (const f of flags) assert.ok(README.includes(`| \`${f}`) || README.includes(`\`${f}\``), `README documents ${f}`);
    assert.ok(README.includes('jinx lint') && README.includes('--format json'));
    const lintHelp = help.slice(help.indexOf('jinx lint'));
    for (const [, opt] of lintHelp.matchAll(/\[(--[a-z-]+)/g)) assert.ok(README.includes(`\`${opt}`), `README documents lint's ${opt}`);
  });

  it('has a "Performance" section that says its figures come from bench/', () => {
    const m = /^## Performance\n([\s\S]*?)(?=^## |$(?![\s\S]))/m.exec(README);
    assert.ok(m, 'a "## Performance" section');
    assert.match(m[1]!, /bench\//);
  });
});
