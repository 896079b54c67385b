/**
 * Every lint rule, in the order their findings are listed: the classes gixy
 * checks (`security.ts`), then what needs nginx's routing and inheritance
 * (`semantic.ts`).
 */
import type { LintRule } from '../rule.js';
import { securityRules } from './security.js';
import { semanticRules } from './semantic.js';

/** All rules, codes unique. */
export const allRules: readonly LintRule[] = [...securityRules, ...semanticRules];
