/** Lint rules that need nginx's routing: shadowed locations, loops, inheritance surprises. */
import type { LintRule } from '../rule.js';

/** The semantic rules. */
export const semanticRules: readonly LintRule[] = [];
