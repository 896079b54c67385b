/**
 * Variables and compiled values ("complex values" in nginx).
 *
 * A value such as `$scheme://$host$request_uri` is split once, when its
 * directive is read, into literal parts and variable references
 * (`ngx_http_script_compile` in `src/http/ngx_http_script.c`). After the whole
 * configuration is read, every referenced name is checked, in the order of
 * first use, against the known variables (`ngx_http_variables_init_vars`:
 * `unknown "NAME" variable`, without a place), and each value is bound to
 * getter functions. At request time a value is only evaluated: look up and
 * copy.
 */
import type { SourceLoc } from '../parser/ast.js';
import { ConfigError } from '../errors.js';
import { fail } from './failure.js';
import type { RequestView } from './request-view.js';

/**
 * What a value is evaluated for: an HTTP request (`RequestView`) or a
 * stream session (`StreamView`); both keep the indexed variables and the
 * last regex captures.
 */
export interface ScriptView {
  readonly vars: (string | undefined)[];
  captures: RegExpExecArray | null;
}

/** Reads a variable for a request; undefined means "not found" (nginx's `not_found`). */
export type VariableGetter<R extends ScriptView = RequestView> = (r: R) => string | undefined;

/** A variable defined by a module: a whole name, or a prefix such as `http_` taking the rest as argument. */
export interface VariableDef<R extends ScriptView = RequestView> {
  readonly name: string;
  /** For prefix variables: the getter receives the part after the prefix. */
  readonly prefix?: boolean;
  readonly get: (r: R, suffix: string) => string | undefined;
  /** May be assigned with `set` (nginx's `NGX_HTTP_VAR_CHANGEABLE`). */
  readonly changeable?: boolean;
  /**
   * What `set` does instead of storing the value (nginx's `set_handler`):
   * returns an error to log, if any.
   */
  readonly set?: (r: R, value: string) => string | undefined;
}

/** A reference to a variable inside a value: a name, or a regex capture `$1`…`$9`. */
export type VariableRef = { readonly name: string } | { readonly capture: number };

/** A value as read from the configuration, before binding. */
export interface ValueSource {
  readonly text: string;
  readonly parts: readonly (string | VariableRef)[];
  readonly loc: SourceLoc;
}

/** A bound value, evaluated per request. */
export interface CompiledValue<R extends ScriptView = RequestView> {
  readonly source: string;
  /** The value when it has no variables. */
  readonly constant: string | undefined;
  readonly evaluate: (r: R) => string;
}

/** How an indexed variable (`set`, `map`, `auth_request_set`) gets its value when read. */
export type IndexedKind<R extends ScriptView = RequestView> =
  /** Stored by a directive; `warnsUnset`: the rewrite module's `set`, whose reading before it is set is logged (`ngx_http_rewrite_var`). */
  | { readonly kind: 'set'; readonly warnsUnset?: boolean }
  | {
      readonly kind: 'lazy';
      readonly compute: (r: R) => string;
      /** Computed each time it is read, never cached (`map … { volatile; }`). */
      readonly volatile?: boolean;
    };

/**
 * Splits a value into literals and variable references, with nginx's
 * messages for malformed names.
 *
 * @throws DirectiveFailure `invalid variable name`,
 *   `the closing bracket in "NAME" variable is missing`
 */
export function splitValue(text: string): (string | VariableRef)[] {
  const parts: (string | VariableRef)[] = [];
  let i = 0;
  let literal = '';
  while (i < text.length) {
    const ch = text[i]!;
    if (ch !== '$') {
      literal += ch;
      i++;
      continue;
    }
    if (++i === text.length) fail('invalid variable name');
    if (literal) {
      parts.push(literal);
      literal = '';
    }
    const c = text[i]!;
    if (c >= '1' && c <= '9') {
      parts.push({ capture: c.charCodeAt(0) - 48 });
      i++;
      continue;
    }
    let bracket = false;
    if (c === '{') {
      bracket = true;
      if (++i === text.length) fail('invalid variable name');
    }
    const start = i;
    while (i < text.length) {
      const n = text[i]!;
      if (n === '}' && bracket) {
        bracket = false;
        break;
      }
      if (!/[A-Za-z0-9_]/.test(n)) break;
      i++;
    }
    const name = text.slice(start, i);
    if (bracket) fail(`the closing bracket in "${name}" variable is missing`);
    if (text[i] === '}' && c === '{') i++;
    if (name.length === 0) fail('invalid variable name');
    parts.push({ name });
  }
  if (literal) parts.push(literal);
  return parts;
}

/** The prefixes whose `set` variables keep the prefix's getter when unset (`ngx_http_rewrite_set`). */
const SET_KEEPS_PREFIX = ['http_', 'sent_http_', 'upstream_http_', 'cookie_', 'upstream_cookie_', 'arg_'];

/**
 * The variables of a configuration: the modules' definitions, the names that
 * `set`/`map`/… declare, and every reference in order of first use.
 */
export class VariableRegistry<R extends ScriptView = RequestView> {
  private readonly defs = new Map<string, VariableDef<R>>();
  private readonly prefixes: VariableDef<R>[] = [];
  private readonly indexed = new Map<string, { index: number; kind: IndexedKind<R> }>();
  private readonly referenced = new Map<string, SourceLoc>();
  private readonly bound = new WeakMap<ValueSource, CompiledValue<R>>();
  private onUninitialized: ((r: R, name: string) => void) | undefined;

  constructor(defs: readonly VariableDef<R>[]) {
    for (const d of defs) {
      if (d.prefix) this.prefixes.push(d);
      else this.defs.set(d.name, d);
    }
  }

  /** Number of indexed variables: the size of a request's `vars` array. */
  get indexedCount(): number {
    return this.indexed.size;
  }

  /** Sets what reading an unset `set` variable does (nginx warns `using uninitialized "x" variable`). */
  setUninitializedHandler(handler: (r: R, name: string) => void): void {
    this.onUninitialized = handler;
  }

  /**
   * Parses a value and records its variable references.
   * @throws DirectiveFailure for malformed variable names
   */
  value(text: string, loc: SourceLoc): ValueSource {
    const parts = splitValue(text);
    for (const p of parts) if (typeof p !== 'string' && 'name' in p) this.reference(p.name, loc);
    return { text, parts, loc };
  }

  /** Records a use of `name` (for the unknown-variable check at the end). */
  reference(name: string, loc: SourceLoc): void {
    const key = name.toLowerCase();
    if (!this.referenced.has(key)) this.referenced.set(key, loc);
  }

  /**
   * Declares an indexed variable (`set $x`, `map … $x`, `auth_request_set $x`)
   * and returns its index. A later declaration of the same name shares it;
   * `lazy` replaces `set`.
   * @throws DirectiveFailure `invalid variable name "$"` for an empty name
   *   (`ngx_http_add_variable`), `the duplicate "NAME" variable` for a
   *   built-in that cannot be set
   */
  declare(name: string, kind: IndexedKind<R>): number {
    if (name.length === 0) fail('invalid variable name "$"');
    const key = name.toLowerCase();
    const builtin = this.defs.get(key);
    if (builtin && !builtin.changeable) fail(`the duplicate "${name}" variable`);
    const existing = this.indexed.get(key);
    if (existing) {
      if (kind.kind === 'lazy') existing.kind = kind;
      return existing.index;
    }
    const index = this.indexed.size;
    this.indexed.set(key, { index, kind });
    return index;
  }

  /** The `set_handler` of a built-in variable (`$limit_rate`), if it has one. */
  setHandler(name: string): VariableDef<R>['set'] {
    return this.defs.get(name.toLowerCase())?.set;
  }

  /** Index of an indexed variable, or undefined. */
  indexOf(name: string): number | undefined {
    return this.indexed.get(name.toLowerCase())?.index;
  }

  /**
   * Checks that every referenced variable exists, in order of first use;
   * with `recover` (`jinx lint`) each unknown one is handed to it, placed
   * where it was first used.
   * @throws ConfigError `unknown "NAME" variable` (no place, as nginx), without `recover`
   */
  checkReferences(recover?: (err: ConfigError) => void): void {
    for (const name of this.referenced.keys()) {
      if (this.getter(name)) continue;
      const text = `unknown "${name}" variable`;
      if (!recover) throw new ConfigError('unknown-variable', text);
      // lint names where it was first used
      recover(new ConfigError('unknown-variable', text, this.referenced.get(name)));
    }
  }

  /** Where a variable was first used, for lint. */
  firstUse(name: string): SourceLoc | undefined {
    return this.referenced.get(name.toLowerCase());
  }

  /** The getter of a variable by name, or undefined when no such variable exists. */
  getter(name: string): VariableGetter<R> | undefined {
    const key = name.toLowerCase();
    const idx = this.indexed.get(key);
    if (idx) return this.indexedGetter(key, idx.index, idx.kind);
    const def = this.defs.get(key);
    if (def) return (r) => def.get(r, '');
    // ngx_http_get_variable: the longest prefix the name starts with; the rest may be empty (`$arg_`)
    let best: VariableDef<R> | undefined;
    for (const p of this.prefixes) if (key.startsWith(p.name) && (!best || p.name.length > best.name.length)) best = p;
    if (!best) return undefined;
    const prefix = best;
    const suffix = key.slice(prefix.name.length);
    return (r) => prefix.get(r, suffix);
  }

  private indexedGetter(name: string, index: number, kind: IndexedKind<R>): VariableGetter<R> {
    if (kind.kind === 'lazy') {
      const compute = kind.compute;
      if (kind.volatile) return (r) => compute(r);
      return (r) => {
        const v = r.vars[index];
        if (v !== undefined) return v;
        const computed = compute(r);
        r.vars[index] = computed;
        return computed;
      };
    }
    const builtin = this.defs.get(name);
    const fallback = builtin ? (r: R) => builtin.get(r, '') : this.prefixFallback(name);
    const warns = kind.warnsUnset === true;
    return (r) => {
      const v = r.vars[index];
      if (v !== undefined) return v;
      if (fallback) return fallback(r);
      if (warns) {
        // once per request, as nginx keeps the empty value it gives (ngx_http_variable_null_value)
        this.onUninitialized?.(r, name);
        r.vars[index] = '';
      }
      return '';
    };
  }

  /**
   * What an unset `set` variable named with a header, cookie or argument
   * prefix reads (`ngx_http_rewrite_set` leaves such a variable the
   * prefix's getter): `set $http_foo` in one location, `$http_foo` elsewhere
   * is the request's `Foo` header.
   */
  private prefixFallback(name: string): VariableGetter<R> | undefined {
    if (!SET_KEEPS_PREFIX.some((p) => name.startsWith(p))) return undefined;
    let best: VariableDef<R> | undefined;
    for (const p of this.prefixes) if (name.startsWith(p.name) && (!best || p.name.length > best.name.length)) best = p;
    if (!best) return undefined;
    const prefix = best;
    const suffix = name.slice(prefix.name.length);
    return (r) => prefix.get(r, suffix);
  }

  /**
   * Binds a parsed value to getters. Call after `checkReferences`. A value
   * bound again (one set at a level, read by every level below it) is the
   * same bound value.
   */
  bind(src: ValueSource): CompiledValue<R> {
    let bound = this.bound.get(src);
    if (!bound) {
      bound = this.bindParts(src);
      this.bound.set(src, bound);
    }
    return bound;
  }

  private bindParts(src: ValueSource): CompiledValue<R> {
    const parts = src.parts.map((p): string | VariableGetter<R> => {
      if (typeof p === 'string') return p;
      if ('capture' in p) {
        const n = p.capture;
        return (r) => r.captures?.[n] ?? '';
      }
      return this.getter(p.name) ?? (() => '');
    });
    if (parts.length === 0) return { source: src.text, constant: '', evaluate: () => '' };
    if (parts.every((p) => typeof p === 'string')) {
      const constant = (parts as string[]).join('');
      return { source: src.text, constant, evaluate: () => constant };
    }
    if (parts.length === 1) {
      const g = parts[0] as VariableGetter<R>;
      return { source: src.text, constant: undefined, evaluate: (r) => g(r) ?? '' };
    }
    return {
      source: src.text,
      constant: undefined,
      evaluate: (r) => {
        let out = '';
        for (const p of parts) out += typeof p === 'string' ? p : (p(r) ?? '');
        return out;
      },
    };
  }
}
