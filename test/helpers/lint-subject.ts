/**
 * Lint subjects for rule tests: a configuration read as `jinx lint` reads it
 * (`lintSubjectOf` of the lint engine, offline: no name is looked up), and one rule's findings
 * on it, with the temp directory replaced by `DIR` in messages and places.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lintSubjectOf as engineSubjectOf } from '../../src/config/lint/engine.js';
import type { LintRule, LintSubject } from '../../src/config/lint/rule.js';
import { tempDir } from './harness.js';

/** Reads the configuration at `conf` (prefix: its directory) as lint does, offline. */
export async function lintSubjectOf(conf: string, prefix = conf.slice(0, conf.lastIndexOf('/') + 1)): Promise<LintSubject> {
  const subject = await engineSubjectOf({ confFile: conf, prefix, offline: true });
  if (!subject) throw new Error(`${conf}: not read far enough to lint`);
  return subject;
}

/** Writes `text` as `nginx.conf` (and `files` beside it) in a fresh directory and reads it as lint does. */
export async function lintSubject(text: string, files: Readonly<Record<string, string>> = {}): Promise<{ subject: LintSubject; dir: string }> {
  const dir = tempDir('jinx-lint-');
  writeFileSync(join(dir, 'nginx.conf'), text);
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
  return { subject: await lintSubjectOf(join(dir, 'nginx.conf'), `${dir}/`), dir };
}

/** One finding as a test compares it: `FILE:LINE MESSAGE`, `dir` replaced by `DIR`. */
export function findingsOf(rule: LintRule, subject: LintSubject, dir: string): string[] {
  const out: string[] = [];
  rule.check(subject, (f) => out.push(`${f.loc ? `${f.loc.file}:${f.loc.line}` : '-'} ${f.message}`.split(dir).join('DIR')));
  return out;
}
