/**
 * nginx regular expressions (PCRE syntax) compiled to JavaScript RegExps.
 *
 * nginx compiles every regex at configuration time (`ngx_regex_compile` in
 * `src/core/ngx_regex.c`); so does jinx. PCRE's `(?P<name>…)` named groups,
 * `(?P=name)` back-references, `(?#…)` comments and a leading `(?i)` are
 * translated. A pattern V8 cannot compile is reported in PCRE2's words, as
 * nginx does: `pcre2_compile() failed: REASON in "REGEX"`, with `at "REST"`
 * when PCRE2 places the error before the end of the pattern.
 */
import { fail } from './spec.js';

/** A compiled regex with the names of its named captures. */
export interface NginxRegex {
  readonly source: string;
  readonly regex: RegExp;
  readonly captureNames: readonly string[];
  /** Number of capture groups (for `$1`…`$9`). */
  readonly captureCount: number;
}

/**
 * Compiles an nginx regex. @throws DirectiveFailure with nginx's wording when
 * the pattern is invalid.
 */
export function compileRegex(source: string, caseless: boolean): NginxRegex {
  let pattern = source;
  let flags = caseless ? 'i' : '';
  if (pattern.startsWith('(?i)')) {
    pattern = pattern.slice(4);
    if (!flags.includes('i')) flags += 'i';
  }
  pattern = translate(pattern);
  let regex: RegExp;
  try {
    regex = new RegExp(pattern, flags);
  } catch (err) {
    const reason = String((err as Error).message).replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
    const [text, offset] = pcre2Error(source, reason);
    fail(`pcre2_compile() failed: ${text} in "${source}"${offset === undefined || offset >= source.length ? '' : ` at "${source.slice(offset)}"`}`);
  }
  const captureNames = [...pattern.matchAll(/\(\?<([A-Za-z_][A-Za-z0-9_]*)>/g)].map((m) => m[1]!);
  const captureCount = new RegExp(`${pattern}|`, flags).exec('')!.length - 1;
  return { source, regex, captureNames, captureCount };
}

/**
 * Rewrites PCRE syntax that V8 reads differently or not at all:
 * `(?P<name>` and `(?P=name)`, `(?#comments)`, a `]` first in a class
 * (a literal in PCRE), and `{,N}` (`{0,N}` in PCRE2 10.43 and later).
 */
function translate(p: string): string {
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    const rest = p.slice(i);
    let m: RegExpExecArray | null;
    if (ch === '\\') {
      out += p.slice(i, i + 2);
      i++;
    } else if (ch === '[') {
      const end = classEnd(p, i);
      let body = p.slice(i + 1, end);
      const negated = body.startsWith('^') ? '^' : '';
      if (body.startsWith(`${negated}]`)) body = `${negated}\\]${body.slice(negated.length + 1)}`;
      out += `[${body}`;
      i = end - 1;
    } else if ((m = /^\(\?#[^)]*\)/.exec(rest))) i += m[0].length - 1;
    else if ((m = /^\(\?P=(\w+)\)/.exec(rest))) {
      out += `\\k<${m[1]}>`;
      i += m[0].length - 1;
    } else if (rest.startsWith('(?P<')) {
      out += '(?<';
      i += 3;
    } else if ((m = /^\{,(\d+)\}/.exec(rest))) {
      out += `{0,${m[1]}}`;
      i += m[0].length - 1;
    } else out += ch;
  }
  return out;
}

/** The position after a character class starting at `i` (`[`), or the pattern's length when it is not closed. */
function classEnd(p: string, i: number): number {
  let j = i + 1;
  if (p[j] === '^') j++;
  if (p[j] === ']') j++;
  for (; j < p.length; j++) {
    if (p[j] === '\\') j++;
    else if (p[j] === ']') return j + 1;
  }
  return p.length;
}

/**
 * Walks a pattern the way PCRE2 parses its structure (escapes, classes,
 * groups, quantifiers) and returns the offset PCRE2 reports for `kind`.
 */
function findOffset(p: string, kind: 'unmatched' | 'repeat' | 'order'): number | undefined {
  let depth = 0;
  /** What the last item was: nothing to repeat, an atom, a quantifier, or a quantifier with its `?`/`+` modifier. */
  let prev: 'start' | 'atom' | 'quant' | 'mod' = 'start';
  for (let i = 0; i < p.length; i++) {
    const ch = p[i]!;
    if (ch === '\\') {
      i++;
      prev = 'atom';
    } else if (ch === '[') {
      i = classEnd(p, i) - 1;
      prev = 'atom';
    } else if (ch === '(') {
      depth++;
      const prefix = /^\(\?(?:[:=!>|]|<[=!]|P?<\w+>|P?'\w+')/.exec(p.slice(i));
      if (prefix) i += prefix[0].length - 1;
      prev = 'start';
    } else if (ch === ')') {
      if (depth === 0) return kind === 'unmatched' ? i + 1 : undefined;
      depth--;
      prev = 'atom';
    } else if (ch === '|') prev = 'start';
    else if (ch === '*' || ch === '+' || ch === '?' || (ch === '{' && /^\{\d+(,\d*)?\}/.test(p.slice(i)))) {
      const end = ch === '{' ? p.indexOf('}', i) : i;
      if (ch === '{' && kind === 'order') {
        const [a, b] = p.slice(i + 1, end).split(',');
        if (b !== undefined && b !== '' && Number(a) > Number(b)) return end;
      }
      if (prev === 'quant' && (ch === '?' || ch === '+')) prev = 'mod';
      else if (prev === 'atom') prev = 'quant';
      else if (kind === 'repeat') return end + 1;
      i = end;
    } else prev = 'atom';
  }
  return undefined;
}

/** The offset after the second definition of a group name, or undefined. */
function duplicateNameOffset(p: string): number | undefined {
  const seen = new Set<string>();
  for (const m of p.matchAll(/\(\?P?<([A-Za-z_]\w*)>/g)) {
    if (seen.has(m[1]!)) return m.index! + m[0].length;
    seen.add(m[1]!);
  }
  return undefined;
}

/** The offset after a `(?X` with a character PCRE2 does not know there, or undefined. */
function unknownGroupOffset(p: string): number | undefined {
  const m = /\(\?(?![:=!>|#<'P]|[imnsxJU^-])/.exec(p);
  return m ? m.index + 3 : undefined;
}

/** The offset after the end of a range whose ends are out of order in a class, or undefined. */
function rangeOrderOffset(p: string): number | undefined {
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '[') {
      const end = classEnd(p, i);
      const body = p.slice(i + 1, end - 1);
      for (const m of body.matchAll(/([^\\])-([^\\\]])/g)) {
        if (m[1]!.charCodeAt(0) > m[2]!.charCodeAt(0)) return i + 1 + m.index! + 3;
      }
      i = end - 1;
    }
  }
  return undefined;
}

/**
 * PCRE2's message (`pcre2_get_error_message`) and error offset for the
 * common mistakes, from V8's message; other errors keep V8's words.
 */
function pcre2Error(source: string, v8: string): [string, number | undefined] {
  switch (v8) {
    case 'Unterminated group':
      return ['missing closing parenthesis', undefined];
    case "Unmatched ')'":
      return ['unmatched closing parenthesis', findOffset(source, 'unmatched')];
    case 'Unterminated character class':
      return ['missing terminating ] for character class', undefined];
    case 'Nothing to repeat':
      return ['quantifier does not follow a repeatable item', findOffset(source, 'repeat')];
    case '\\ at end of pattern':
      return ['\\ at end of pattern', undefined];
    case 'numbers out of order in {} quantifier':
      return ['numbers out of order in {} quantifier', findOffset(source, 'order')];
    case 'Range out of order in character class':
      return ['range out of order in character class', rangeOrderOffset(source)];
    case 'Duplicate capture group name':
      return ['two named subpatterns have the same name (PCRE2_DUPNAMES not set)', duplicateNameOffset(source)];
    case 'Invalid group':
      if (/\(\?#[^)]*$/.test(source)) return ['missing ) after (?# comment', undefined];
      return ['unrecognized character after (? or (?-', unknownGroupOffset(source)];
    default:
      return [v8.charAt(0).toLowerCase() + v8.slice(1), undefined];
  }
}
