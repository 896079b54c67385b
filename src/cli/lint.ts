/**
 * `jinx lint`: everything `-t` checks, plus a note for every directive jinx
 * reads but does not act on, each with its file and line. Text (one finding
 * per line, `FILE:LINE: [severity] message`) or JSON (an array of
 * `{severity, code, message, file, line}`).
 */
import { compileConfig } from '../config/compile.js';
import { ConfigError } from '../errors.js';
import type { ConfPaths } from './conf-paths.js';

/** One finding of `jinx lint`. */
export interface Finding {
  readonly severity: 'error' | 'warning' | 'note';
  readonly code: string;
  readonly message: string;
  readonly file: string | undefined;
  readonly line: number | undefined;
}

/** Collects the findings of a configuration. */
export async function lintFindings(paths: ConfPaths, globalDirectives?: string): Promise<Finding[]> {
  const findings: Finding[] = [];
  try {
    const compiled = await compileConfig({
      confFile: paths.confFile, prefix: paths.prefix, globalDirectives,
      onWarning: (w) => findings.push({ severity: 'warning', code: w.code, message: w.text, file: w.loc?.file, line: w.loc?.line }),
    });
    for (const n of compiled.noEffect) {
      findings.push({
        severity: 'note',
        code: 'no-effect',
        message: `"${n.directive.name}" has no effect in jinx${n.spec.note ? `: ${n.spec.note}` : ''}`,
        file: n.directive.loc.file,
        line: n.directive.loc.line,
      });
    }
    return findings;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return [...findings, { severity: 'error', code: err.code, message: err.text, file: err.loc?.file, line: err.loc?.line }];
  }
}

/** Prints the findings; 1 when the configuration has an error, else 0. */
export async function lint(paths: ConfPaths, format: 'text' | 'json', globalDirectives?: string): Promise<number> {
  const findings = await lintFindings(paths, globalDirectives);
  if (format === 'json') process.stdout.write(JSON.stringify(findings, null, 2) + '\n');
  else {
    for (const f of findings) {
      const place = f.file ? `${f.file}${f.line ? `:${f.line}` : ''}: ` : '';
      process.stdout.write(`${place}[${f.severity}] ${f.message}\n`);
    }
    if (findings.length === 0) process.stdout.write(`${paths.confFile}: no findings\n`);
  }
  return findings.some((f) => f.severity === 'error') ? 1 : 0;
}
