/**
 * A directive handler's failure and the call that throws one, below every
 * other configuration file so the registries (`scope.ts`, `variables.ts`) can
 * fail without importing the directive specs.
 */
import type { SourceLoc } from '../parser/ast.js';

/**
 * A directive handler's failure. `kind: 'suffix'` is nginx's returned string,
 * printed as `"NAME" directive TEXT`; `kind: 'full'` is a message of its own.
 */
export class DirectiveFailure extends Error {
  constructor(
    readonly text: string,
    readonly kind: 'suffix' | 'full' = 'suffix',
    /**
     * The place to report, when not the directive's own (an entry of a `map`
     * or `types` block); `null` for a message without a place (`ngx_log_error`).
     */
    readonly loc?: SourceLoc | null,
  ) {
    super(text);
  }
}

/**
 * Throws a complete message, as handlers do with `ngx_conf_log_error` +
 * `NGX_CONF_ERROR`; `loc` places it at a block entry rather than the
 * directive, `null` nowhere.
 */
export function fail(text: string, loc?: SourceLoc | null): never {
  throw new DirectiveFailure(text, 'full', loc);
}
