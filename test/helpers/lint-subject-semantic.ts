/**
 * A lint subject (`LintSubject`) for tests of the semantic rules, as the lint
 * engine reads it (`lintSubjectOf`); and the findings of one rule on it.
 */
import { join } from 'node:path';
import { lintSubjectOf } from '../../src/config/lint/engine.js';
import type { LintRule, LintSubject, RuleFinding } from '../../src/config/lint/rule.js';
import { tempDir, writeFiles } from './harness.js';

/** The subject of the configuration `conf` under `prefix` (ending with `/`); `table` is undefined when it does not compile. */
export async function semanticSubjectOf(prefix: string, conf: string, offline = false): Promise<LintSubject> {
  const confFile = conf.startsWith('/') ? conf : join(prefix, conf);
  const subject = await lintSubjectOf({ confFile, prefix, offline });
  if (!subject) throw new Error(`${confFile}: not read far enough to lint`);
  return subject;
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
