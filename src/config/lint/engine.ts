/**
 * The lint engine: reads a configuration the way `-t` does, but goes on
 * after an error (every error of reading and checking is listed; the checks
 * nginx makes after reading stop at their first), then runs the rules of
 * `rules/index.ts` over what was read, and hands back each finding once,
 * with its include chain, less warnings and notes silenced by
 * `# jinx-lint: ignore CODE` comments or left out by `--rule`/`--skip`
 * (errors are always listed: lint and `-t` agree on what fails).
 *
 * Severities: errors are what makes `nginx -t` fail (also the checks of
 * `ngx_init_cycle`, run by the caller's `initCheck`); warnings are nginx's
 * `[warn]` lines and warning rules; notes are what jinx does differently
 * (a directive of a module jinx lacks or a value jinx refuses as "not
 * supported by jinx", a directive jinx reads and does not
 * act on when its value asks for something jinx does not do) and note rules.
 */
import { readFileSync } from 'node:fs';
import type { ConfigNode } from '../../parser/ast.js';
import { LineIndex } from '../../parser/lines.js';
import { configLexer } from '../../parser/tokens.js';
import { ConfigError } from '../../errors.js';
import { systemErrorText } from '../../os-errors.js';
import type { SourceLoc } from '../../source-loc.js';
import type { CheckResult } from '../check.js';
import { compileConfig, type CompiledConfig } from '../compile.js';
import type { RouteTable } from '../route-table.js';
import { NGINX_DIRECTIVES } from './nginx-directives.js';
import { noEffectDiffers } from './no-effect.js';
import type { LintFix, LintRule, LintSeverity, LintSubject } from './rule.js';
import { allRules } from './rules/index.js';

/** One finding as the engine reports it. */
export interface LintFinding {
  readonly severity: LintSeverity;
  /** A rule's code, a configuration error's code (`ConfigErrorCode`), a warning's code, `no-effect`, `not-implemented` or `internal-error`. */
  readonly code: string;
  readonly message: string;
  /** Where; `includedFrom` holds the include chain. Undefined when nginx gives no place. */
  readonly loc: SourceLoc | undefined;
  readonly fix?: LintFix;
}

/** What to lint and how. */
export interface LintRequest {
  /** Absolute path of the main configuration file. */
  readonly confFile: string;
  /** nginx's prefix, absolute, ending with `/`. */
  readonly prefix: string;
  readonly globalDirectives?: string;
  /** Files read from here rather than the disk (the wrapper of `--context`). */
  readonly files?: Readonly<Record<string, string>>;
  /** `--offline`: no DNS, no certificate, key or password file read (rules are told too). */
  readonly offline: boolean;
  /** `--rule`: only these codes among warnings and notes (errors are always listed). Empty: all. */
  readonly only: readonly string[];
  /** `--skip`: not these codes among warnings and notes. */
  readonly skip: readonly string[];
  /** The checks of `ngx_init_cycle` once the configuration compiled (pid, log files, listen sockets), by the caller. */
  readonly initCheck?: (table: RouteTable) => Promise<void>;
  /** The rules to run; `allRules` by default. */
  readonly rules?: readonly LintRule[];
}

/** The severities from the most serious; `--fail-on X` fails for X and those before it. */
export const SEVERITIES: readonly LintSeverity[] = ['error', 'warning', 'note'];

/** The codes the engine itself reports, with what they mean (`--explain`, SARIF rules). */
export const BUILTIN_CODES: Readonly<Record<string, { readonly title: string; readonly explanation: string }>> = {
  'no-effect': {
    title: 'A directive jinx reads but does not act on',
    explanation: 'jinx checks this directive as nginx does but does not do what its value asks (the note says why). '
      + 'Tuning knobs that change how nginx does the work but not what clients and logs see are not reported, nor a value '
      + 'that asks for what jinx does anyway (`proxy_store off;`). Fix: nothing when the difference does not matter to you; '
      + 'otherwise run that part on nginx. Silence it with `# jinx-lint: ignore no-effect`.',
  },
  'not-implemented': {
    title: 'A directive of an nginx module jinx does not have',
    explanation: 'nginx knows this directive (it belongs to a module of nginx\'s documentation) but jinx does not implement that '
      + 'module, so `jinx -t` refuses the configuration with `unknown directive`; nginx built with the module accepts it. '
      + 'The directive and its block are skipped by the lint. Fix: remove it, or serve this configuration with nginx.',
  },
  'internal-error': {
    title: 'jinx failed on this configuration',
    explanation: 'A lint rule threw on this configuration (a warning naming the rule; the other rules ran), or jinx\'s compile step '
      + 'failed with something that is not a configuration error (an error). It is a fault in jinx, not in the configuration: '
      + 'please report it with the configuration.',
  },
};

const IGNORE = /jinx-lint:\s*ignore\b([^#]*)/;

/**
 * The `# jinx-lint: ignore CODE…` comments of a file, by line: the codes,
 * or `*` for a comment without codes (silences every finding). A comment
 * silences findings on its own line and on the next line. Read with the
 * configuration lexer, so `#` in a quoted string is not a comment.
 */
function ignoreComments(text: string): Map<number, Set<string>> {
  const byLine = new Map<number, Set<string>>();
  if (!text.includes('jinx-lint')) return byLine;
  const lines = new LineIndex(text);
  for (const c of configLexer().tokenize(text).groups['comments'] ?? []) {
    const m = IGNORE.exec(c.image);
    if (!m) continue;
    const codes = m[1]!.split(/[\s,]+/).filter((s) => s !== '');
    const line = lines.lineAt(c.startOffset);
    for (const l of [line, line + 1]) {
      const set = byLine.get(l) ?? new Set<string>();
      for (const code of codes.length > 0 ? codes : ['*']) set.add(code);
      byLine.set(l, set);
    }
  }
  return byLine;
}

/**
 * One code per condition: a directive's setter fails as `invalid-value`
 * whatever the condition; those with a code of their own get it.
 */
const SETTER_CODES: readonly (readonly [RegExp, string])[] = [
  [/ directive is duplicate$/, 'duplicate'],
  [/^duplicate location "/, 'duplicate-location'],
  [/^host not found in /, 'host-not-found'],
  [/^unknown "[^"]*" variable$/, 'unknown-variable'],
  [/^invalid number of arguments /, 'invalid-args'],
];

/** jinx's own refusal of a value nginx takes (`syslog is not supported by jinx`). */
const NOT_SUPPORTED = / is not supported by jinx$/;

/** The directive name of nginx's `unknown directive "X"`. */
const UNKNOWN = /^unknown directive "(.*)"$/;

/** A configuration as lint reads it: every error recovered from, as far as reading and compiling got. */
interface LintRead {
  readonly nodes: readonly ConfigNode[];
  readonly checked: CheckResult | undefined;
  readonly compiled: CompiledConfig | undefined;
  /** What stopped the compile step after the directives were checked, if anything. */
  readonly error: unknown;
}

/** Reads, checks (recovering from each error, handed to `recover`) and compiles, as far as it gets. */
async function readForLint(
  req: Pick<LintRequest, 'confFile' | 'prefix' | 'globalDirectives' | 'files' | 'offline'>,
  onWarning: (f: LintFinding) => void, recover: (err: ConfigError) => void,
): Promise<LintRead> {
  let nodes: readonly ConfigNode[] = [];
  let checked: CheckResult | undefined;
  try {
    const compiled = await compileConfig({
      confFile: req.confFile, prefix: req.prefix, globalDirectives: req.globalDirectives, offline: req.offline,
      snapshot: req.files ? { files: req.files, globs: {} } : undefined,
      onWarning: (w) => onWarning({ severity: 'warning', code: w.code, message: w.text, loc: w.loc }),
      recover,
      onChecked: (n, c) => {
        nodes = n;
        checked = c;
      },
    });
    return { nodes, checked, compiled, error: undefined };
  } catch (error) {
    return { nodes, checked, compiled: undefined, error };
  }
}

/** What the rules see of what was read; undefined when reading stopped before the directives were checked. */
function subjectOf(read: LintRead, req: Pick<LintRequest, 'offline'>): LintSubject | undefined {
  return read.checked && { nodes: read.nodes, root: read.checked.root, table: read.compiled?.table, offline: req.offline };
}

/**
 * The subject lint's rules would see for a configuration (for a rule's own
 * tests); errors and warnings are left out.
 */
export async function lintSubjectOf(req: Pick<LintRequest, 'confFile' | 'prefix' | 'offline'>): Promise<LintSubject | undefined> {
  return subjectOf(await readForLint(req, () => undefined, () => undefined), req);
}

/**
 * Lints a configuration. Never throws for a configuration: a file that
 * cannot be read is an error finding, a fault of the compile step an
 * `internal-error` error, a rule that throws an `internal-error` warning
 * naming the rule.
 */
export async function lintConfig(req: LintRequest): Promise<LintFinding[]> {
  const found: LintFinding[] = [];
  const add = (f: LintFinding): void => void found.push(f);
  // directives jinx skipped (modules it lacks) were read: an unknown variable may be one of theirs
  const skipped = (): boolean => found.some((f) => f.code === 'not-implemented');
  const configError = (err: ConfigError): void => {
    const name = err.code === 'unknown-directive' ? UNKNOWN.exec(err.text)?.[1] : undefined;
    const module = name === undefined ? undefined : NGINX_DIRECTIVES.get(name);
    if (err.code === 'unknown-variable' && skipped()) {
      // `perl_set $x …`, `js_set $x …`: the variable of a directive jinx skipped
      add({ severity: 'note', code: 'not-implemented', message: `${err.text}: it may be defined by a directive jinx does not implement`, loc: err.loc });
    } else if (module !== undefined) {
      add({ severity: 'note', code: 'not-implemented', message: `"${name}" is not implemented by jinx (${module})`, loc: err.loc });
    } else if (NOT_SUPPORTED.test(err.text)) {
      // a value nginx takes and jinx does not (syslog targets, some PCRE syntax): the same kind of note
      add({ severity: 'note', code: 'not-implemented', message: err.text, loc: err.loc });
    } else {
      const code = err.code === 'invalid-value' ? SETTER_CODES.find(([re]) => re.test(err.text))?.[1] ?? err.code : err.code;
      add({ severity: 'error', code, message: err.text, loc: err.loc });
    }
  };
  const read = await readForLint(req, add, configError);
  const { checked, compiled } = read;
  if (read.error !== undefined) {
    const err = read.error;
    // after errors were recovered from, the compile step may trip on what was skipped: the errors say enough
    if (err instanceof ConfigError) {
      configError(err);
    } else if (!skipped() && !found.some((f) => f.severity === 'error')) {
      add(uncaught(err));
    }
  }
  for (const n of checked?.noEffect ?? []) {
    if (!noEffectDiffers(n.directive)) continue;
    add({
      severity: 'note', code: 'no-effect',
      message: `"${n.directive.name}" has no effect in jinx${n.spec.note ? `: ${n.spec.note}` : ''}`, loc: n.directive.loc,
    });
  }
  if (compiled && req.initCheck && !found.some((f) => f.severity === 'error')) {
    try {
      await req.initCheck(compiled.table);
    } catch (err) {
      if (err instanceof ConfigError) configError(err);
      else add(uncaught(err));
    }
  }
  const subject = subjectOf(read, req);
  if (subject) {
    for (const rule of req.rules ?? allRules) {
      if (!selected(rule.code, req)) continue;
      try {
        rule.check(subject, (f) => add({ severity: rule.severity, code: rule.code, message: f.message, loc: f.loc, fix: f.fix }));
      } catch (err) {
        add({ severity: 'warning', code: 'internal-error', message: `rule "${rule.code}" failed: ${(err as Error)?.message ?? String(err)}`, loc: undefined });
      }
    }
  }
  return finish(found, req);
}

/**
 * A failure of jinx's compile step that is not a configuration error, as
 * `-t` reports it (`main.ts`): a file the system refused is nginx's
 * `open() "PATH" failed (…)`, anything else an `internal-error` error.
 */
function uncaught(err: unknown): LintFinding {
  const e = err as NodeJS.ErrnoException | undefined;
  if (e?.code && e.path) return { severity: 'error', code: 'file', message: `open() "${e.path}" failed (${systemErrorText(err)})`, loc: undefined };
  return { severity: 'error', code: 'internal-error', message: `jinx could not compile the configuration: ${e?.message ?? String(err)}`, loc: undefined };
}

/** Whether `--rule`/`--skip` keep a code (errors are always kept by the caller). */
function selected(code: string, req: Pick<LintRequest, 'only' | 'skip'>): boolean {
  if (req.skip.includes(code)) return false;
  return req.only.length === 0 || req.only.includes(code);
}

/** Drops repeats (same code, file, line and message: the first, with its include chain, stays), filtered and silenced findings. */
function finish(found: readonly LintFinding[], req: LintRequest): LintFinding[] {
  const seen = new Set<string>();
  const comments = new Map<string, Map<number, Set<string>>>();
  const ignoredAt = (loc: SourceLoc): Set<string> | undefined => {
    let byLine = comments.get(loc.file);
    if (!byLine) {
      let text = req.files?.[loc.file];
      if (text === undefined) {
        try {
          text = readFileSync(Buffer.from(loc.file, 'latin1'), 'latin1');
        } catch {
          text = '';
        }
      }
      comments.set(loc.file, (byLine = ignoreComments(text)));
    }
    return byLine.get(loc.line);
  };
  const out: LintFinding[] = [];
  for (const f of found) {
    const key = `${f.code}\0${f.loc?.file ?? ''}\0${f.loc?.line ?? ''}\0${f.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    // errors are what makes `-t` fail: never left out, so that lint and -t agree
    if (f.severity !== 'error' && f.code !== 'internal-error' && !selected(f.code, req)) continue;
    const ignored = f.severity !== 'error' && f.loc && f.loc.line > 0 ? ignoredAt(f.loc) : undefined;
    if (ignored && (ignored.has(f.code) || ignored.has('*'))) continue;
    out.push(f);
  }
  return out;
}

/** The include chain of a place, innermost first: the `include` directives that brought its file in. */
export function includeChain(loc: SourceLoc | undefined): SourceLoc[] {
  const chain: SourceLoc[] = [];
  for (let l = loc?.includedFrom; l; l = l.includedFrom) chain.push(l);
  return chain;
}
