/**
 * The rewrite module (`src/http/modules/ngx_http_rewrite_module.c`, the
 * script codes in `src/http/ngx_http_script.c`): `set`, `if`, `return`,
 * `rewrite`, `break`. The directives of one level form a script, run in
 * configuration order at the server rewrite phase (server level) or the
 * rewrite phase (location level, and the `if` blocks inside it).
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { compileRegex, type NamedCapture, type NginxRegex } from '../regex.js';
import { fail, flagSetter, LevelConf, listSlot, slot, type DirectiveSpec, type SetContext } from '../spec.js';
import type { CompiledValue, ScriptView, ValueSource, VariableGetter, VariableRegistry } from '../variables.js';
import type { RequestView } from '../request-view.js';

const REWRITE = 'ngx_http_rewrite_module';

/** A condition of `if (…)`, as read. */
export type ConditionDef =
  | { readonly kind: 'var'; readonly name: string }
  | { readonly kind: 'equal'; readonly name: string; readonly negate: boolean; readonly value: ValueSource }
  | { readonly kind: 'regex'; readonly name: string; readonly negate: boolean; readonly regex: NginxRegex }
  | { readonly kind: 'file'; readonly test: 'f' | 'd' | 'e' | 'x'; readonly negate: boolean; readonly path: ValueSource };

/** A rewrite directive as read, before its values are bound. */
export type ScriptOpDef =
  | { readonly op: 'set'; readonly index: number; readonly value: ValueSource; readonly handler: SetHandler | undefined }
  | { readonly op: 'return'; readonly code: number; readonly text: ValueSource | undefined; readonly loc: SourceLoc }
  | {
      readonly op: 'rewrite';
      readonly regex: NginxRegex;
      readonly replacement: ValueSource;
      readonly flag: 'last' | 'break' | 'redirect' | 'permanent' | undefined;
      readonly redirectCode: 301 | 302 | undefined;
      /** The original arguments are appended (the replacement does not end with `?`). */
      readonly addArgs: boolean;
    }
  | { readonly op: 'break' }
  | { readonly op: 'if'; readonly condition: ConditionDef; readonly block: LevelConf; readonly inLocation: boolean };

/** A condition, bound. */
export type Condition =
  | { readonly kind: 'var'; readonly get: (r: RequestView) => string }
  | { readonly kind: 'equal'; readonly get: (r: RequestView) => string; readonly negate: boolean; readonly value: CompiledValue }
  | {
      readonly kind: 'regex'; readonly get: (r: RequestView) => string; readonly negate: boolean; readonly regex: RegExp;
      /** The regex as written, for `rewrite_log`'s lines. */
      readonly source: string;
      readonly namedCaptures: readonly NamedCapture[];
    }
  | { readonly kind: 'file'; readonly test: 'f' | 'd' | 'e' | 'x'; readonly negate: boolean; readonly path: CompiledValue };

/** The `set_handler` of a built-in variable: `set` calls it instead of storing the value; it returns an error to log. */
type SetHandler = (r: RequestView, value: string) => string | undefined;

/**
 * A rewrite directive, bound and ready to run; `Conf` is the merged settings
 * of an `if` block in a location (route-table's `LocationConf`, its `ScriptOp`).
 */
export type ScriptOpOf<Conf> =
  | { readonly op: 'set'; readonly index: number; readonly value: CompiledValue; readonly handler: SetHandler | undefined }
  | { readonly op: 'return'; readonly code: number; readonly text: CompiledValue | undefined }
  | {
      readonly op: 'rewrite';
      readonly regex: RegExp;
      /** The regex as written, for `rewrite_log`'s lines (nginx's `code->name`). */
      readonly source: string;
      readonly namedCaptures: readonly NamedCapture[];
      readonly replacement: Replacement;
      readonly flag: 'last' | 'break' | 'redirect' | 'permanent' | undefined;
      readonly redirectCode: 301 | 302 | undefined;
      readonly addArgs: boolean;
      /** The replacement has a literal `?` (nginx's `regex->args`): added arguments follow a `&`. */
      readonly hasArgs: boolean;
    }
  | { readonly op: 'break' }
  | {
      readonly op: 'if';
      readonly condition: Condition;
      readonly ops: readonly ScriptOpOf<Conf>[];
      /** For an `if` inside a location: the block's merged settings, in effect once it matched. */
      readonly conf: Conf | undefined;
    };

/** A piece of a bound rewrite replacement: literal text, a variable, or a regex capture (`$1`…`$9`). */
export type ReplacementPiece = string | VariableGetter | { readonly capture: number };

/**
 * A rewrite's replacement, bound as `ngx_http_script_compile` compiles it
 * with `compile_args` (internal rewrites only): the pieces of the new URI
 * and, when the replacement has a literal `?`, those of the arguments after
 * it (a `?` in a variable's value does not count).
 */
export interface Replacement {
  readonly uri: readonly ReplacementPiece[];
  readonly args: readonly ReplacementPiece[] | undefined;
}

/** The rewrite script of a level (not inherited). */
export const script = listSlot<ScriptOpDef>('rewrite-script', false);
export const uninitializedVariableWarn = slot('uninitialized_variable_warn', true);
export const rewriteLog = slot('rewrite_log', false);

function setSet(d: Directive, cx: SetContext): void {
  const name = d.args[0]!;
  if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
  const vars = cx.scope.variables;
  const index = vars.declare(name.slice(1), { kind: 'set', warnsUnset: true });
  cx.level.append(script, { op: 'set', index, value: vars.value(d.args[1]!, d.loc), handler: vars.setHandler(name.slice(1)) }, d.loc);
}

const isRedirectUrl = (s: string): boolean => s.startsWith('http://') || s.startsWith('https://') || s.startsWith('$scheme');

function setReturn(d: Directive, cx: SetContext): void {
  const first = d.args[0]!;
  let code: number;
  let text: string | undefined;
  if (/^\d+$/.test(first)) {
    code = Number(first);
    if (code > 999) fail(`invalid return code "${first}"`);
    text = d.args[1];
  } else if (d.args.length === 1 && isRedirectUrl(first)) {
    code = 302;
    text = first;
  } else fail(`invalid return code "${first}"`);
  const value = text === undefined ? undefined : cx.scope.variables.value(text, d.loc);
  cx.level.append(script, { op: 'return', code, text: value, loc: d.loc }, d.loc);
}

function setRewrite(d: Directive, cx: SetContext): void {
  let replacement = d.args[1]!;
  if (replacement.length === 0) fail('empty replacement');
  const regex = compileRegex(d.args[0]!, false);
  for (const n of regex.captureNames) cx.scope.variables.declare(n, { kind: 'set' });
  let addArgs = true;
  if (replacement.endsWith('?')) {
    replacement = replacement.slice(0, -1);
    addArgs = false;
  }
  let redirectCode: 301 | 302 | undefined = isRedirectUrl(replacement) ? 302 : undefined;
  let flag: 'last' | 'break' | 'redirect' | 'permanent' | undefined;
  const f = d.args[2];
  if (f === undefined) flag = undefined;
  else if (f === 'last' || f === 'break') flag = f;
  else if (f === 'redirect') [flag, redirectCode] = [f, 302];
  else if (f === 'permanent') [flag, redirectCode] = [f, 301];
  else fail(`invalid parameter "${f}"`);
  const value = cx.scope.variables.value(replacement, d.loc);
  cx.level.append(script, { op: 'rewrite', regex, replacement: value, flag, redirectCode, addArgs }, d.loc);
}

/** Parses the words of `if (…)` (`ngx_http_rewrite_if_condition`). */
function parseCondition(d: Directive, cx: SetContext): ConditionDef {
  const v = [...d.args];
  let cur = 0;
  let last = v.length - 1;
  if (!v[0]!.startsWith('(')) fail(`invalid condition "${v[0]}"`);
  if (v[0] === '(') cur = 1;
  else v[0] = v[0]!.slice(1);
  if (!v[last]!.endsWith(')')) fail(`invalid condition "${v[last]}"`);
  if (v[last] === ')') last--;
  else v[last] = v[last]!.slice(0, -1);
  if (cur > last) fail(`invalid condition "${d.args[0]}"`);
  const word = v[cur]!;
  if (word.length > 1 && word.startsWith('$')) {
    if (cur !== last && cur + 2 !== last) fail(`invalid condition "${word}"`);
    const name = word.slice(1);
    cx.scope.variables.reference(name, d.loc);
    if (cur === last) return { kind: 'var', name };
    const op = v[cur + 1]!;
    const operand = v[last]!;
    if (op === '=' || op === '!=') {
      return { kind: 'equal', name, negate: op === '!=', value: cx.scope.variables.value(operand, d.loc) };
    }
    if (op === '~' || op === '~*' || op === '!~' || op === '!~*') {
      const regex = compileRegex(operand, op.endsWith('*'));
      for (const n of regex.captureNames) cx.scope.variables.declare(n, { kind: 'set' });
      return { kind: 'regex', name, negate: op.startsWith('!'), regex };
    }
    fail(`unexpected "${op}" in condition`);
  }
  if ((word.length === 2 && word[0] === '-') || (word.length === 3 && word.startsWith('!-'))) {
    if (cur + 1 !== last) fail(`invalid condition "${word}"`);
    const path = cx.scope.variables.value(v[last]!, d.loc);
    const negate = word.startsWith('!');
    const test = word[negate ? 2 : 1]!;
    if (test !== 'f' && test !== 'd' && test !== 'e' && test !== 'x') fail(`invalid condition "${word}"`);
    return { kind: 'file', test, negate, path };
  }
  fail(`invalid condition "${word}"`);
}

function setIf(d: Directive, cx: SetContext): { context: 'sif' | 'lif'; level: LevelConf } {
  const condition = parseCondition(d, cx);
  const inLocation = cx.context === 'location' || cx.context === 'lif';
  const block = new LevelConf();
  cx.level.append(script, { op: 'if', condition, block, inLocation }, d.loc);
  return { context: inLocation ? 'lif' : 'sif', level: block };
}

export const rewriteDirectives: readonly DirectiveSpec[] = [
  { name: 'set', module: REWRITE, contexts: ['server', 'sif', 'location', 'lif'], args: ['TAKE2'], effect: 'runtime', set: setSet },
  { name: 'return', module: REWRITE, contexts: ['server', 'sif', 'location', 'lif'], args: ['TAKE1', 'TAKE2'], effect: 'runtime', set: setReturn },
  { name: 'rewrite', module: REWRITE, contexts: ['server', 'sif', 'location', 'lif'], args: ['TAKE2', 'TAKE3'], effect: 'runtime', set: setRewrite },
  {
    name: 'break', module: REWRITE, contexts: ['server', 'sif', 'location', 'lif'], args: ['NOARGS'], effect: 'runtime',
    set: (d, cx) => cx.level.append(script, { op: 'break' }, d.loc),
  },
  { name: 'if', module: REWRITE, contexts: ['server', 'location'], args: ['1MORE'], block: 'context', effect: 'runtime', set: setIf },
  {
    name: 'uninitialized_variable_warn', module: REWRITE, contexts: ['http', 'server', 'sif', 'location', 'lif'], args: ['FLAG'],
    effect: 'runtime', set: flagSetter(uninitializedVariableWarn),
  },
  {
    name: 'rewrite_log', module: REWRITE, contexts: ['http', 'server', 'sif', 'location', 'lif'], args: ['FLAG'],
    effect: 'runtime', set: flagSetter(rewriteLog),
  },
];

/** Named captures of a regex bound to their variables' indexes. */
export function namedCaptures<R extends ScriptView>(regex: NginxRegex, vars: VariableRegistry<R>): NamedCapture[] {
  return regex.captureNames.map((name) => ({ name, index: vars.indexOf(name)! }));
}

/**
 * The script of a level (server, location or `if` block): its `set`,
 * `return`, `rewrite`, `break` and `if` directives in order, their values
 * bound to the variables; an `if` block inside a location carries its
 * merged settings from `ifConf` (ngx_http_rewrite_if's location conf).
 * Nothing is inherited: a level runs only its own script
 * (ngx_http_rewrite_merge_loc_conf).
 */
export function levelScript<Conf>(level: LevelConf, vars: VariableRegistry, ifConf: (block: LevelConf) => Conf): ScriptOpOf<Conf>[] {
  const defs = level.ownList(script)?.map((e) => e.value) ?? [];
  return defs.map((d): ScriptOpOf<Conf> => {
    switch (d.op) {
      case 'set':
        return { op: 'set', index: d.index, value: vars.bind(d.value), handler: d.handler };
      case 'return':
        return { op: 'return', code: d.code, text: d.text && vars.bind(d.text) };
      case 'rewrite':
        return {
          op: 'rewrite', regex: d.regex.regex, source: d.regex.source, namedCaptures: namedCaptures(d.regex, vars),
          replacement: bindReplacement(d.replacement, vars, d.redirectCode !== undefined),
          flag: d.flag, redirectCode: d.redirectCode, addArgs: d.addArgs,
          hasArgs: d.replacement.parts.some((p) => typeof p === 'string' && p.includes('?')),
        };
      case 'break':
        return d;
      case 'if':
        return {
          op: 'if',
          condition: bindCondition(d.condition, vars),
          ops: levelScript(d.block, vars, ifConf),
          conf: d.inLocation ? ifConf(d.block) : undefined,
        };
    }
  });
}

function bindCondition(c: ConditionDef, vars: VariableRegistry): Condition {
  if (c.kind === 'file') return { kind: 'file', test: c.test, negate: c.negate, path: vars.bind(c.path) };
  const getter = vars.getter(c.name)!;
  const get = (r: RequestView): string => getter(r) ?? '';
  if (c.kind === 'var') return { kind: 'var', get };
  if (c.kind === 'equal') return { kind: 'equal', get, negate: c.negate, value: vars.bind(c.value) };
  return { kind: 'regex', get, negate: c.negate, regex: c.regex.regex, source: c.regex.source, namedCaptures: namedCaptures(c.regex, vars) };
}

/** Binds a rewrite's replacement; a redirect's has no arguments part (`compile_args` is off for it). */
function bindReplacement(src: ValueSource, vars: VariableRegistry, redirect: boolean): Replacement {
  const uri: ReplacementPiece[] = [];
  let args: ReplacementPiece[] | undefined;
  for (const p of src.parts) {
    const into = args ?? uri;
    if (typeof p !== 'string') {
      into.push('capture' in p ? p : (vars.getter(p.name) ?? (() => '')));
      continue;
    }
    const q = redirect || args ? -1 : p.indexOf('?');
    if (q === -1) {
      into.push(p);
      continue;
    }
    uri.push(p.slice(0, q));
    args = [p.slice(q + 1)];
  }
  return { uri, args };
}
