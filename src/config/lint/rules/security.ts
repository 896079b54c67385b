/** Lint rules for the classes of mistakes gixy checks, with jinx's knowledge of nginx's inheritance and variables. */
import type { LintRule } from '../rule.js';

/** The security rules. */
export const securityRules: readonly LintRule[] = [];
