/**
 * The shape of a `jinx lint` rule: a stable code, a severity, an explanation
 * with the fix, and a check over a configuration as jinx read it (the AST
 * with every include spliced in, the checked level tree, and the compiled
 * route table when the configuration compiled).
 *
 * A rule reports each finding once, at the directive it is about; the lint
 * engine adds the include chain, drops repeats (a snippet included from many
 * places), applies `# jinx-lint: ignore CODE` comments, `--rule`/`--skip`,
 * and formats text, JSON and SARIF.
 */
import type { ConfigNode } from '../../parser/ast.js';
import type { SourceLoc } from '../../source-loc.js';
import type { LevelNode } from '../check.js';
import type { RouteTable } from '../route-table.js';

/** How serious a finding is; `--fail-on` compares against it. */
export type LintSeverity = 'error' | 'warning' | 'note';

/** A text replacement that fixes a finding (SARIF `fixes`): replace the whole line `loc.line` of `loc.file` by `text`. */
export interface LintFix {
  readonly description: string;
  readonly loc: SourceLoc;
  readonly text: string;
}

/** One finding of a rule, before the engine adds the rule's code, severity and the include chain. */
export interface RuleFinding {
  /** One sentence naming what is wrong and where the parts were set (file:line). */
  readonly message: string;
  /** The directive the finding is about; undefined when it is about the configuration as a whole. */
  readonly loc: SourceLoc | undefined;
  readonly fix?: LintFix;
}

/** What a rule sees of a configuration. */
export interface LintSubject {
  /** The main context's statements, `include`s spliced in, in reading order. */
  readonly nodes: readonly ConfigNode[];
  /** The checked level tree (main → http/stream → server → location …); undefined when checking failed. */
  readonly root: LevelNode | undefined;
  /** The compiled route table; undefined when the configuration did not compile. */
  readonly table: RouteTable | undefined;
  /** `--offline`: the rule must not resolve names, read certificates or test files. */
  readonly offline: boolean;
}

/** Where a rule is documented: its section of README's "Lint rules" (`<a id="lint-CODE">`). */
export function ruleDocUrl(code: string): string {
  return `https://github.com/jinx/jinx#lint-${code}`;
}

/** One lint rule. Rules are data: listed in `rules/index.ts`, documented in README from these fields. */
export interface LintRule {
  /** Stable code, kebab-case (`add-header-inheritance`); used by `--rule`, `--skip` and ignore comments. */
  readonly code: string;
  readonly severity: LintSeverity;
  /** A short title (SARIF `shortDescription`). */
  readonly title: string;
  /** One paragraph: why it matters and the fix (SARIF `fullDescription`, `jinx lint --explain CODE`). */
  readonly explanation: string;
  /** Where the rule is documented (README anchor or nginx's documentation). */
  readonly docUrl: string;
  /** Reports each finding once through `report`. Must not throw for any configuration that checked. */
  check(subject: LintSubject, report: (finding: RuleFinding) => void): void;
}
