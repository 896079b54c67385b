/**
 * `jinx lint`: every error `-t` would find (not only the first), nginx's
 * warnings, the findings of the lint rules, and notes where jinx does not do
 * what a directive asks, each once with its file, line and include chain.
 * Loaded by `main.ts` only for `lint` (the rules are not read for `-t`).
 *
 * Formats (`--format`):
 * - `text`: one finding a line, `FILE:LINE[, included from FILE:LINE…]:
 *   [severity] message (code)`, paths under the prefix relative to it
 *   (`relativeToPrefix`), others as nginx prints them; `FILE: no findings`
 *   when there is none;
 * - `json`: an array of `{severity, code, message, file, line,
 *   includedFrom: [{file, line}…], fix}` (`file`/`line`/`fix` null when
 *   unknown or none);
 * - `sarif`: SARIF 2.1.0 (`config/lint/sarif.ts`).
 *
 * Exit status: 1 when a finding is at least as serious as `--fail-on`
 * (`error` by default), else 0. `--explain CODE` prints a code's
 * explanation (exit 1 for an unknown code).
 */
import { basename, dirname } from 'node:path';
import { BUILTIN_CODES, includeChain, lintConfig, SEVERITIES, type LintFinding } from '../config/lint/engine.js';
import type { LintSeverity } from '../config/lint/rule.js';
import { allRules } from '../config/lint/rules/index.js';
import { sarifLog } from '../config/lint/sarif.js';
import type { SourceLoc } from '../source-loc.js';
import { JINX_VERSION } from '../version.js';
import type { ConfPaths } from './conf-paths.js';
import { initChecks } from './init-checks.js';

/** The options of `jinx lint` (commander's names). */
export interface LintOptions {
  readonly format: 'text' | 'json' | 'sarif';
  readonly failOn: LintSeverity;
  readonly context?: 'http' | 'server' | 'location';
  readonly offline?: boolean;
  readonly rule: readonly string[];
  readonly skip: readonly string[];
  readonly explain?: string;
  /** `-g` directives. */
  readonly globalDirectives?: string;
}

/** The name of the main file `--context` makes around a snippet, in the snippet's directory. */
const WRAPPER = '(jinx lint --context)';

/**
 * The main file that `--context` lints a snippet in: the snippet included
 * in an `http` block, a `server` block or a `location /` of one. The
 * wrapper lies in the snippet's directory: `snippet` is its file name.
 */
function wrapperText(snippet: string, context: 'http' | 'server' | 'location'): string {
  const include = `include "${snippet.replace(/["\\]/g, '\\$&')}";`;
  const inner = context === 'location' ? `location / { ${include} }` : include;
  return `events {}\nhttp {\n${context === 'http' ? inner : `server {\n${inner}\n}`}\n}\n`;
}

/** A place without the wrapper of `--context`: its chain ends at the snippet; a place in the wrapper itself is none. */
function unwrapped(loc: SourceLoc | undefined, wrapper: string): SourceLoc | undefined {
  if (!loc || loc.file === wrapper) return undefined;
  const rest = unwrapped(loc.includedFrom, wrapper);
  return { file: loc.file, line: loc.line, ...(rest ? { includedFrom: rest } : {}) };
}

/** `FILE:LINE`, or `FILE` for a `-g` directive. */
const place = (l: SourceLoc): string => (l.line > 0 ? `${l.file}:${l.line}` : l.file);

/**
 * `text` with each path under `prefix` (ending with `/`) written relative to
 * it, as a reader of a tree names its files (`conf.d/include/assets.conf:1,
 * included from proxy_host/1.conf:39`); other paths stay as they are. Only
 * for lint's text format: json and sarif, and `-t`'s messages, keep nginx's
 * paths.
 */
export function relativeToPrefix(text: string, prefix: string): string {
  if (prefix === '/') return text;
  const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return text.replace(new RegExp(`(?<![\\w./-])${escaped}(?=[^\\s/])`, 'g'), '');
}

/** The text format of one finding, paths under `prefix` relative to it. */
export function findingLine(f: LintFinding, prefix: string): string {
  const where = f.loc ? [f.loc, ...includeChain(f.loc)].map(place).join(', included from ') + ': ' : '';
  return relativeToPrefix(`${where}[${f.severity}] ${f.message} (${f.code})`, prefix);
}

/** The JSON format of one finding: `file` and `line` always there, null when unknown. */
function findingJson(f: LintFinding): Record<string, unknown> {
  return {
    severity: f.severity,
    code: f.code,
    message: f.message,
    file: f.loc?.file ?? null,
    line: f.loc ? f.loc.line : null,
    includedFrom: includeChain(f.loc).map((l) => ({ file: l.file, line: l.line })),
    fix: f.fix ? { description: f.fix.description, file: f.fix.loc.file, line: f.fix.loc.line, text: f.fix.text } : null,
  };
}

/** `--explain CODE`: a rule's title, severity, explanation and documentation; the engine's own codes too. */
function explain(code: string): number {
  const rule = allRules.find((r) => r.code === code);
  if (rule) {
    process.stdout.write(`${rule.code} (${rule.severity}): ${rule.title}\n\n${rule.explanation}\n\nSee ${rule.docUrl}\n`);
    return 0;
  }
  const builtin = BUILTIN_CODES[code];
  if (builtin) {
    process.stdout.write(`${code}: ${builtin.title}\n\n${builtin.explanation}\n`);
    return 0;
  }
  process.stderr.write(`jinx: no lint rule "${code}"; the codes are: ${[...allRules.map((r) => r.code), ...Object.keys(BUILTIN_CODES)].join(', ')}\n`);
  return 1;
}

/** Runs `jinx lint`; resolves to the exit status. */
export async function lint(paths: ConfPaths, opts: LintOptions): Promise<number> {
  if (opts.explain !== undefined) return explain(opts.explain);
  const offline = opts.offline === true;
  let confFile = paths.confFile;
  let files: Record<string, string> | undefined;
  if (opts.context) {
    confFile = `${dirname(paths.confFile)}/${WRAPPER}`;
    files = { [confFile]: wrapperText(basename(paths.confFile), opts.context) };
  }
  let findings = await lintConfig({
    confFile, prefix: paths.prefix, globalDirectives: opts.globalDirectives, files, offline,
    only: opts.rule, skip: opts.skip,
    // a snippet on its own has no pid file, logs or listen addresses of its own to check
    initCheck: opts.context ? undefined : (table) => initChecks(table, offline),
  });
  // a finding placed in the wrapper is about the wrapper (its http block), not the snippet
  if (opts.context) findings = findings.filter((f) => f.severity === 'error' || f.loc?.file !== confFile).map((f) => ({ ...f, loc: unwrapped(f.loc, confFile) }));
  // a reader that stops early (`| head`) is not an error
  process.stdout.on('error', () => undefined);
  if (opts.format === 'json') {
    process.stdout.write(JSON.stringify(findings.map(findingJson), null, 2) + '\n');
  } else if (opts.format === 'sarif') {
    process.stdout.write(JSON.stringify(sarifLog(findings, allRules, { version: JINX_VERSION, cwd: process.cwd(), confFile: paths.confFile }), null, 2) + '\n');
  } else {
    for (const f of findings) process.stdout.write(findingLine(f, paths.prefix) + '\n');
    if (findings.length === 0) process.stdout.write(`${relativeToPrefix(paths.confFile, paths.prefix)}: no findings\n`);
  }
  const worst = SEVERITIES.indexOf(opts.failOn);
  return findings.some((f) => SEVERITIES.indexOf(f.severity) <= worst) ? 1 : 0;
}
