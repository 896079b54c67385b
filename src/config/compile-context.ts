/**
 * What a module's create/merge functions get from the compile step (nginx
 * hands `ngx_conf_t` and the parent/child confs to `merge_loc_conf`): the
 * merged chain of a level, the configuration's scope and paths, warnings,
 * and a place for the state a module keeps while one configuration is
 * compiled (caches, files read earlier), plus the level-tree walks they share.
 */
import type { ConfigWarning } from '../errors.js';
import type { LevelNode } from './check.js';
import type { ConfigScope } from './scope.js';
import type { ConfChain } from './spec.js';
import type { ValueSource } from './variables.js';

/** The compile step as a module's merge sees it; one per compiled configuration. */
export interface CompileContext {
  readonly scope: ConfigScope;
  /** The merge chain of a level (built once per level). */
  chain(node: LevelNode): ConfChain;
  /** Reports a warning (nginx's `[warn]`), kept for `CompiledConfig.warnings`. */
  warn(w: ConfigWarning): void;
  /** The state a module keeps under `key` for this compile, made by `make` on first use. */
  memo<T>(key: symbol, make: () => T): T;
  /** Every temp-file directory of the configuration, default or set: nginx creates them all. */
  readonly tempDirs: Set<string>;
}

/**
 * The levels under `roots`, each before the levels nested in it, in
 * configuration order (nginx's merge order), without recursion: any nesting
 * depth. `upstream` blocks and what they hold are left out.
 */
export function levelsInOrder(roots: readonly LevelNode[]): LevelNode[] {
  const out: LevelNode[] = [];
  const stack = [...roots].reverse();
  while (stack.length > 0) {
    const node = stack.pop()!;
    out.push(node);
    for (let i = node.children.length - 1; i >= 0; i--) {
      const child = node.children[i]!;
      if (child.context !== 'upstream') stack.push(child);
    }
  }
  return out;
}

/**
 * A setting an `if` block takes from its location when it has none of its
 * own (nginx's merge for "noname" locations, e.g. `proxy_pass`).
 */
export function inheritedIntoIf<T>(node: LevelNode, own: (n: LevelNode) => T | undefined): T | undefined {
  for (let n: LevelNode | undefined = node; n; n = n.parent) {
    const v = own(n);
    if (v !== undefined) return v;
    if (n.context !== 'lif' && n.context !== 'limit_except') return undefined;
  }
  return undefined;
}

/** Whether a value has variables (nginx's `ccv.complex_value->lengths`). */
export const hasVariables = (v: ValueSource): boolean => v.parts.some((p) => typeof p !== 'string');

/** The upstream group key of a static address: its upstream block's name, or `host:port`. */
export function groupKey(host: string, port: number | undefined): string {
  return port === undefined ? host.toLowerCase() : `${host.toLowerCase()}:${port}`;
}
