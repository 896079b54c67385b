/**
 * The one directive checker, after `ngx_conf_handler` (`src/core/ngx_conf_file.c`):
 * for each directive in reading order it looks the name up, tests the context,
 * the `;` or `{`, the number of arguments, then calls the directive's setter.
 * The first failure stops the check (`jinx lint` goes on: `recover`), worded and placed as nginx does:
 * `unknown directive "X"`, `"X" directive is not allowed here`,
 * `invalid number of arguments in "X" directive`, `"X" directive is duplicate` …
 */
import { cString } from '../c-string.js';
import type { ConfigNode, Directive } from '../parser/ast.js';
import { ConfigError, type ConfigWarning } from '../errors.js';
import { acceptsArgCount, type Context } from './flags.js';
import type { ConfigScope } from './scope.js';
import { DirectiveFailure, LevelConf, type DirectiveSpec, type SetContext } from './spec.js';

/** One configuration block as checked: its context, what was set in it, and its nested blocks. */
export interface LevelNode {
  readonly context: Context;
  /** The directive that opened the block; undefined for the main context. */
  readonly directive: Directive | undefined;
  readonly conf: LevelConf;
  readonly children: LevelNode[];
  readonly parent: LevelNode | undefined;
}

/** The directive table: every spec of every module, by name. Built once and passed in. */
export class DirectiveRegistry {
  private readonly byName = new Map<string, DirectiveSpec[]>();
  private readonly resolvingByName = new Map<string, DirectiveSpec[]>();

  constructor(specs: readonly DirectiveSpec[]) {
    for (const spec of specs) {
      for (const map of spec.resolves === undefined ? [this.byName] : [this.byName, this.resolvingByName]) {
        const list = map.get(spec.name);
        if (list) list.push(spec);
        else map.set(spec.name, [spec]);
      }
    }
  }

  /** The specs named `name` (several modules may share a name, e.g. `server`). */
  lookup(name: string): readonly DirectiveSpec[] | undefined {
    return this.byName.get(name);
  }

  /** The specs named `name` that name a host to resolve (`DirectiveSpec.resolves`); undefined when none does. */
  resolving(name: string): readonly DirectiveSpec[] | undefined {
    return this.resolvingByName.get(name);
  }

  /** Every spec, in declaration order. */
  all(): DirectiveSpec[] {
    return [...this.byName.values()].flat();
  }
}

/** A lint note: a directive that jinx accepts but does not act on. */
export interface NoEffectNote {
  readonly directive: Directive;
  readonly spec: DirectiveSpec;
}

/** Result of checking a whole configuration. */
export interface CheckResult {
  readonly root: LevelNode;
  readonly warnings: ConfigWarning[];
  readonly noEffect: NoEffectNote[];
}

/**
 * Checks the AST and fills the level tree. `scope` is passed to every setter
 * (the registries a module keeps: variables, upstreams, maps, log formats).
 * Warnings are also handed to `onWarning` as they are found, so that those
 * before an error are reported too, as nginx logs them.
 *
 * With `recover` (`jinx lint`), an error is handed to it instead and the
 * check goes on after the directive that failed (skipped with its block);
 * a block whose closing check fails keeps what was set in it.
 *
 * @throws ConfigError the first error, in nginx's reading order (without `recover`).
 */
export function checkConfig(
  nodes: readonly ConfigNode[],
  registry: DirectiveRegistry,
  scope: ConfigScope,
  onWarning: (w: ConfigWarning) => void = () => undefined,
  recover?: (err: ConfigError) => void,
): CheckResult {
  const warnings: ConfigWarning[] = [];
  const warn = (w: ConfigWarning): void => {
    warnings.push(w);
    onWarning(w);
  };
  const noEffect: NoEffectNote[] = [];
  const root: LevelNode = { context: 'main', directive: undefined, conf: new LevelConf(), children: [], parent: undefined };

  /**
   * Checks statements in reading order with an explicit stack of open blocks
   * (any nesting depth, no recursion); a block's `close` check runs once its
   * statements have been checked, as nginx's block handlers do after
   * `ngx_conf_parse` returns.
   */
  interface Frame {
    readonly list: readonly ConfigNode[];
    i: number;
    readonly level: LevelNode;
    readonly close: (() => void) | undefined;
  }
  /** A ConfigError goes to `recover` (the step it stopped is skipped); anything else goes up. */
  const recovered = (err: unknown): void => {
    if (!recover || !(err instanceof ConfigError)) throw err;
    recover(err);
  };
  const walk = (top: readonly ConfigNode[], topLevel: LevelNode): void => {
    const stack: Frame[] = [{ list: top, i: 0, level: topLevel, close: undefined }];
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      if (frame.i >= frame.list.length) {
        stack.pop();
        try {
          frame.close?.();
        } catch (err) {
          recovered(err);
        }
        continue;
      }
      try {
        checkNode(frame.list[frame.i++]!, frame.level, stack);
      } catch (err) {
        recovered(err);
      }
    }
  };

  /** Checks one statement; a block directive's statements are pushed on `stack`. */
  const checkNode = (node: ConfigNode, level: LevelNode, stack: Frame[]): void => {
    if (node.kind === 'error') throw node.error;
    const spec = pick(node, level.context);
    const cx: SetContext = {
      level: level.conf,
      context: level.context,
      parentDirective: level.directive,
      scope,
      enclosing: (context) => {
        for (let l: LevelNode | undefined = level; l; l = l.parent) if (l.context === context) return l.conf;
        return undefined;
      },
      warn: (text, code, loc) => warn({ level: 'warn', code, text, loc: loc === null ? undefined : loc ?? node.loc }),
    };
    const child = report(node, () => spec.set(node, cx));
    if (spec.effect === 'none') noEffect.push({ directive: node, spec });
    if (spec.block === 'context' && child) {
      const childNode: LevelNode = {
        context: child.context, directive: node, conf: child.level, children: [], parent: level,
      };
      level.children.push(childNode);
      const close = spec.close ? (): void => report(node, () => spec.close!(node, cx, child)) : undefined;
      stack.push({ list: node.block ?? [], i: 0, level: childNode, close });
    }
  };

  /** Runs a handler, turning its failure into nginx's message for the directive. */
  const report = <T>(node: Directive, handler: () => T): T => {
    try {
      return handler();
    } catch (err) {
      if (err instanceof DirectiveFailure) {
        const text = err.kind === 'suffix' ? `"${node.name}" directive ${err.text}` : err.text;
        throw new ConfigError('invalid-value', text, err.loc === null ? undefined : err.loc ?? node.loc);
      }
      throw err;
    }
  };

  const pick = (node: Directive, context: Context): DirectiveSpec => {
    // the first spec of a loaded module for the context; a name no loaded module has is unknown
    let known = false;
    let spec: DirectiveSpec | undefined;
    for (const s of registry.lookup(node.name) ?? []) {
      if (s.dynamicModule && !scope.loadedModules.has(s.dynamicModule)) continue;
      known = true;
      if (s.contexts.includes(context)) {
        spec = s;
        break;
      }
    }
    if (!known) {
      // printed with %s: a name with a NUL byte (never a directive's) shows up to it
      throw new ConfigError('unknown-directive', `unknown directive "${cString(node.name)}"`, node.loc);
    }
    if (!spec) throw new ConfigError('not-allowed', `"${node.name}" directive is not allowed here`, node.loc);
    const isBlock = spec.block !== undefined;
    if (!isBlock && node.block !== null) {
      throw new ConfigError('not-terminated', `directive "${node.name}" is not terminated by ";"`, node.loc);
    }
    if (isBlock && node.block === null) {
      throw new ConfigError('no-block', `directive "${node.name}" has no opening "{"`, node.loc);
    }
    if (!acceptsArgCount(spec.args, node.args.length)) {
      throw new ConfigError('invalid-args', `invalid number of arguments in "${node.name}" directive`, node.loc);
    }
    return spec;
  };

  walk(nodes, root);
  return { root, warnings, noEffect };
}
