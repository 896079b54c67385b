/**
 * A lint subject (`LintSubject`) for tests of the semantic rules, built
 * without the CLI: the configuration read with its includes, and its route
 * table when it compiles; and the findings of one rule on it.
 */
import { join } from 'node:path';
import { compileConfig } from '../../src/config/compile.js';
import type { LintRule, LintSubject, RuleFinding } from '../../src/config/lint/rule.js';
import { loadConfig } from '../../src/parser/load.js';
import { tempDir, writeFiles } from './harness.js';

/** The subject of the configuration `conf` under `prefix` (ending with `/`); `table` is undefined when it does not compile. */
export async function semanticSubjectOf(prefix: string, conf: string, offline = false): Promise<LintSubject> {
  const confFile = conf.startsWith('/') ? conf : join(prefix, conf);
  const confPrefix = confFile.slice(0, confFile.lastIndexOf('/') + 1);
  const loaded = loadConfig({ confFile, confPrefix });
  let table: LintSubject['table'];
  try {
    table = (await compileConfig({ confFile, prefix })).table;
  } catch {
    table = undefined;
  }
  return { nodes: loaded.nodes, root: undefined, table, offline };
}

/** Writes `files` (the main file is `nginx.conf`) into a new prefix and returns its subject. */
export async function semanticSubject(files: Readonly<Record<string, string>>, offline = false): Promise<{ prefix: string; subject: LintSubject }> {
  const prefix = tempDir('jinx-lint-sem-') + '/';
  writeFiles(prefix, files);
  return { prefix, subject: await semanticSubjectOf(prefix, 'nginx.conf', offline) };
}

/** What `rule` reports on `subject`. */
export function findingsOf(rule: LintRule, subject: LintSubject): RuleFinding[] {
  const out: RuleFinding[] = [];
  rule.check(subject, (f) => out.push(f));
  return out;
}
