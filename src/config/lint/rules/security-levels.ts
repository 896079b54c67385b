/**
 * What the security rules share: the checked levels in reading order, the
 * directives written at each level, how a level and a place are named in a
 * message, and which variables a client controls (nginx's variables in
 * `src/http/ngx_http_variables.c`, followed through `set`, `map` and regex
 * captures).
 */
import type { Directive } from '../../../parser/ast.js';
import type { SourceLoc } from '../../../source-loc.js';
import type { LevelNode } from '../../check.js';
import { compileRegex, type NginxRegex } from '../../regex.js';
import { splitValue, type VariableRef } from '../../variables.js';
import type { LintSubject } from '../rule.js';
import { captureGroupNewlines, namedGroupNumber } from './security-regex.js';

/** `FILE:LINE`, as nginx names a place in its messages. */
export function where(loc: SourceLoc): string {
  return `${loc.file}:${loc.line}`;
}

/** Every level of the tree, parents before children, in reading order. */
export function levelsOf(root: LevelNode | undefined): LevelNode[] {
  const out: LevelNode[] = [];
  if (!root) return out;
  const stack = [root];
  while (stack.length > 0) {
    const n = stack.pop()!;
    out.push(n);
    for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]!);
  }
  return out;
}

/** The levels of the http block, parents first (the stream module's levels have other variables and other rules). */
export function httpLevels(root: LevelNode | undefined): LevelNode[] {
  return levelsOf(root).filter((l) => l.context !== 'main' && l.context !== 'events' && !l.context.startsWith('stream'));
}

/** The directives written at a level itself (includes spliced in), not those of its nested blocks. */
export function ownDirectives(subject: LintSubject, level: LevelNode): Directive[] {
  const list = level.directive ? level.directive.block ?? [] : subject.nodes;
  return list.filter((n): n is Directive => n.kind === 'directive');
}

/** A level as a message names it: `location "/files" (FILE:LINE)`, `server (FILE:LINE)`, `if (…) (FILE:LINE)`. */
export function levelName(level: LevelNode): string {
  const d = level.directive;
  return d ? `${levelTitle(level)} (${where(d.loc)})` : levelTitle(level);
}

/** A level as `levelName` names it, without its place (for a finding placed at the level itself). */
export function levelTitle(level: LevelNode): string {
  const d = level.directive;
  if (!d) return 'the main context';
  return d.name === 'location' ? `location "${d.args.join(' ')}"` : d.name === 'if' ? `if ${d.args.join(' ')}` : d.name;
}

/** The enclosing level of `context`, this one included. */
export function enclosing(level: LevelNode, contexts: readonly string[]): LevelNode | undefined {
  for (let l: LevelNode | undefined = level; l; l = l.parent) if (contexts.includes(l.context)) return l;
  return undefined;
}

/** What a variable's value may hold: chosen by the client, and able to hold CR or LF. */
export interface Taint {
  /** Why the client chooses it (`the request header "Host"`), if it does. */
  readonly client: string | undefined;
  /** Why it can hold CR/LF (`$uri is decoded`), if it can. */
  readonly newline: string | undefined;
}

const CLEAN: Taint = { client: undefined, newline: undefined };

/**
 * The built-in variables whose value the client chooses
 * (`ngx_http_variables.c`): request headers, cookies and arguments as sent,
 * the request line and its URI, the body, and `$host` (the Host header,
 * lowercased, when the server did not name itself).
 */
function builtinTaint(name: string): Taint {
  const n = name.toLowerCase();
  // $uri is the decoded, normalized path (ngx_http_parse_complex_uri): %0D%0A become CR LF
  if (n === 'uri' || n === 'document_uri') return { client: 'the request URI', newline: `$${n} is URL-decoded (%0D%0A becomes CR LF)` };
  if (n === 'fastcgi_path_info' || n === 'fastcgi_script_name') return { client: 'the request URI', newline: `$${n} comes from the decoded $uri` };
  if (n === 'request_body') return { client: 'the request body', newline: '$request_body holds the body as sent' };
  if (n.startsWith('http_')) return { client: `the request header "${n.slice(5).replace(/_/g, '-')}"`, newline: undefined };
  if (n.startsWith('cookie_')) return { client: `the cookie "${n.slice(7)}"`, newline: undefined };
  if (n.startsWith('arg_')) return { client: `the query argument "${n.slice(4)}"`, newline: undefined };
  if (n === 'args' || n === 'query_string') return { client: 'the query string', newline: undefined };
  if (n === 'request_uri' || n === 'request') return { client: 'the request line', newline: undefined };
  if (n === 'host') return { client: 'the request header "Host"', newline: undefined };
  if (n === 'remote_user') return { client: 'the Authorization header', newline: undefined };
  if (n === 'content_type') return { client: 'the request header "Content-Type"', newline: undefined };
  return CLEAN;
}

/** Variables whose value always starts with `/` (they end the host part of a URL). */
export const PATH_VARIABLES: ReadonlySet<string> = new Set(['uri', 'document_uri', 'request_uri']);

/** A regex and the variable it is matched against, which makes what its captures hold. */
export interface CaptureSource {
  readonly regex: NginxRegex;
  /** The variable matched (`uri` for locations and `rewrite`). */
  readonly subject: string;
  readonly loc: SourceLoc;
}

/** The regex of an `if (…)` condition, when it has one: its variable and pattern. */
export function ifRegex(d: Directive): { name: string; negate: boolean; source: string; caseless: boolean } | undefined {
  const words = [...d.args];
  if (words.length === 0) return undefined;
  if (words[0] === '(') words.shift();
  else words[0] = words[0]!.replace(/^\(/, '');
  if (words[words.length - 1] === ')') words.pop();
  else words[words.length - 1] = words[words.length - 1]!.replace(/\)$/, '');
  if (words.length !== 3 || !words[0]!.startsWith('$')) return undefined;
  const op = words[1]!;
  if (!['~', '~*', '!~', '!~*'].includes(op)) return undefined;
  return { name: words[0]!.slice(1).replace(/^\{(.*)\}$/, '$1').toLowerCase(), negate: op.startsWith('!'), source: words[2]!, caseless: op.endsWith('*') };
}

/** Compiles a regex of the configuration (it compiled when the configuration was checked). */
function regexOf(source: string, caseless: boolean): NginxRegex | undefined {
  try {
    return compileRegex(source, caseless);
  } catch {
    return undefined;
  }
}

/** The regex a location was written with, if any. */
function locationRegex(level: LevelNode): CaptureSource | undefined {
  const d = level.directive;
  if (!d || d.name !== 'location' || d.args.length !== 2 || (d.args[0] !== '~' && d.args[0] !== '~*')) return undefined;
  const regex = regexOf(d.args[1]!, d.args[0] === '~*');
  return regex && { regex, subject: 'uri', loc: d.loc };
}

/** The regex a script directive (`rewrite`, `if`) matches, if any. */
function scriptRegex(d: Directive): CaptureSource | undefined {
  if (d.name === 'rewrite' && d.args.length >= 2) {
    const regex = regexOf(d.args[0]!, false);
    return regex && { regex, subject: 'uri', loc: d.loc };
  }
  if (d.name === 'if') {
    const c = ifRegex(d);
    const regex = c && !c.negate ? regexOf(c.source, c.caseless) : undefined;
    return regex && c && { regex, subject: c.name, loc: d.loc };
  }
  return undefined;
}

/**
 * The regexes whose captures `$1`…`$9` may hold when `d` (at `level`) is
 * evaluated: the last `rewrite` or `if` regex before it at its level (any
 * of the level's for a directive evaluated after the rewrite phase), else
 * the `if` block's own condition, else the enclosing location's regex.
 */
export function captureSources(subject: LintSubject, level: LevelNode, d: Directive): CaptureSource[] {
  const own = ownDirectives(subject, level);
  const scriptDirective = ['rewrite', 'return', 'set', 'if'].includes(d.name);
  const before = scriptDirective ? own.slice(0, Math.max(0, own.indexOf(d))) : own;
  const found = before.map(scriptRegex).filter((s): s is CaptureSource => s !== undefined);
  if (found.length > 0) return scriptDirective ? [found[found.length - 1]!] : found;
  for (let l: LevelNode | undefined = level; l; l = l.parent) {
    if (l.context === 'lif' || l.context === 'sif') {
      const s = l.directive && scriptRegex(l.directive);
      if (s) return [s];
    }
    if (l.context === 'location') {
      const s = locationRegex(l);
      return s ? [s] : [];
    }
  }
  return [];
}

/**
 * What the client controls among the variables of a configuration: the
 * built-in ones, then those `set` or `map` fill from them, and named
 * captures of regexes over them, to a fixed point.
 */
export class TaintTable {
  private readonly derived = new Map<string, Taint>();

  constructor(private readonly subject: LintSubject) {
    const sources: { name: string; taint: () => Taint }[] = [];
    for (const level of httpLevels(subject.root)) {
      for (const d of ownDirectives(subject, level)) {
        if (d.name === 'set' && d.args.length === 2 && d.args[0]!.startsWith('$')) {
          sources.push({ name: d.args[0]!.slice(1).toLowerCase(), taint: () => this.valueTaint(d.args[1]!, subject, level, d) });
        } else if (d.name === 'map' && level.context === 'http' && d.args.length === 2 && d.args[1]!.startsWith('$')) {
          sources.push({ name: d.args[1]!.slice(1).toLowerCase(), taint: () => this.mapTaint(d) });
        }
        const regex = scriptRegex(d);
        if (regex) this.addNamedCaptures(regex, sources);
      }
      const loc = locationRegex(level);
      if (loc) this.addNamedCaptures(loc, sources);
    }
    for (let round = 0; round <= sources.length; round++) {
      let changed = false;
      for (const s of sources) {
        const before = this.derived.get(s.name) ?? CLEAN;
        const t = s.taint();
        const merged = { client: before.client ?? t.client, newline: before.newline ?? t.newline };
        if (merged.client !== before.client || merged.newline !== before.newline) {
          this.derived.set(s.name, merged);
          changed = true;
        }
      }
      if (!changed) break;
    }
  }

  private addNamedCaptures(s: CaptureSource, sources: { name: string; taint: () => Taint }[]): void {
    for (const name of s.regex.captureNames) {
      const n = namedGroupNumber(s.regex.source, name);
      if (n !== undefined) sources.push({ name: name.toLowerCase(), taint: () => this.captureTaint(s, n) });
    }
  }

  /** What capture `n` of a regex may hold. */
  captureTaint(s: CaptureSource, n: number): Taint {
    const subjectTaint = this.variable(s.subject);
    if (!subjectTaint.client) return CLEAN;
    const nl = subjectTaint.newline ? captureGroupNewlines(s.regex.source, n) : undefined;
    return {
      client: `${subjectTaint.client} (capture $${n} of "${s.regex.source}" at ${where(s.loc)})`,
      newline: nl && `capture $${n} of "${s.regex.source}" (${where(s.loc)}) can hold ${nl}, and ${subjectTaint.newline}`,
    };
  }

  private mapTaint(d: Directive): Taint {
    const src = this.valueTaint(d.args[0]!, this.subject, undefined, d);
    let client: string | undefined;
    let newline: string | undefined;
    for (const e of d.block ?? []) {
      if (e.kind !== 'directive' || e.args.length !== 1) continue;
      let t = this.partsTaint(safeSplit(e.args[0]!), []);
      if (e.name.startsWith('~') && /\$\d/.test(e.args[0]!) && src.client) t = { client: src.client, newline: t.newline ?? src.newline };
      client ??= t.client;
      newline ??= t.newline;
    }
    return { client, newline };
  }

  /** What a variable may hold, by name. */
  variable(name: string): Taint {
    const n = name.toLowerCase();
    return this.derived.get(n) ?? builtinTaint(n);
  }

  /** What a value written at `d` (at `level`, for its captures) may hold. */
  valueTaint(text: string, subject: LintSubject, level: LevelNode | undefined, d: Directive): Taint {
    const captures = level ? captureSources(subject, level, d) : [];
    return this.partsTaint(safeSplit(text), captures);
  }

  /** The taint of each part of a split value. */
  partTaints(parts: readonly (string | VariableRef)[], captures: readonly CaptureSource[]): Taint[] {
    return parts.map((p) => {
      if (typeof p === 'string') return CLEAN;
      if ('name' in p) return this.variable(p.name);
      for (const s of captures) {
        const t = this.captureTaint(s, p.capture);
        if (t.client || t.newline) return t;
      }
      return CLEAN;
    });
  }

  private partsTaint(parts: readonly (string | VariableRef)[], captures: readonly CaptureSource[]): Taint {
    const all = this.partTaints(parts, captures);
    return { client: all.find((t) => t.client)?.client, newline: all.find((t) => t.newline)?.newline };
  }
}

/** A value split into literals and variables; a value that does not split (it was refused at check) is one literal. */
export function safeSplit(text: string): (string | VariableRef)[] {
  try {
    return splitValue(text);
  } catch {
    return [text];
  }
}
