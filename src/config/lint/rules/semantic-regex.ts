/**
 * What can be proved of a location regex without running it: the literal
 * text every match must contain (or start with), and whether the regex
 * matches every URI that contains (or starts with) a literal. Only simple
 * shapes are read (`^/static/`, `\.php$`, `/\.ht`, `^/api/.*`); anything
 * else — alternation at the top, inline flags — proves nothing.
 */

/** A literal that a regex requires or accepts. */
export interface RegexLiteral {
  /** Written after `^`: the literal starts the subject. */
  readonly anchored: boolean;
  /** The literal text (escapes resolved). */
  readonly literal: string;
  /**
   * The pattern is only the literal (and an optional `.*` or `(.*)`): it
   * matches every subject that contains the literal (starts with it when
   * anchored).
   */
  readonly acceptsAll: boolean;
}

const META = new Set(['\\', '^', '$', '.', '|', '?', '*', '+', '(', ')', '[', ']', '{', '}']);
const QUANTIFIERS = new Set(['?', '*', '{']);

/** Whether `|` appears outside brackets and groups, or the pattern uses `(?` (inline flags, lookarounds). */
function opaque(src: string): boolean {
  let depth = 0;
  let inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === '\\') {
      i++;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(') {
      if (src[i + 1] === '?') return true;
      depth++;
    } else if (c === ')') depth--;
    else if (c === '|' && depth === 0) return true;
  }
  return false;
}

/**
 * The literal run at the start of a PCRE pattern (after `^`): plain
 * characters and escaped punctuation, stopping at the first metacharacter;
 * a character followed by `?`, `*` or `{` is optional and ends the run
 * without being part of it. Undefined for a pattern that proves nothing.
 */
export function regexLiteral(src: string): RegexLiteral | undefined {
  if (opaque(src)) return undefined;
  const anchored = src.startsWith('^');
  let i = anchored ? 1 : 0;
  let literal = '';
  while (i < src.length) {
    const c = src[i]!;
    let ch: string;
    let width: number;
    if (c === '\\') {
      const next = src[i + 1];
      if (next === undefined || /[A-Za-z0-9]/.test(next)) break;
      ch = next;
      width = 2;
    } else if (META.has(c)) break;
    else {
      ch = c;
      width = 1;
    }
    if (QUANTIFIERS.has(src[i + width] ?? '')) break;
    literal += ch;
    i += width;
  }
  const rest = src.slice(i);
  return { anchored, literal, acceptsAll: rest === '' || rest === '.*' || rest === '(.*)' };
}

/**
 * Whether regex `first` matches every subject that regex `second` matches,
 * as far as their literals prove it. `caseless` flags are `~*`'s. A
 * case-sensitive `first` never covers a caseless `second`.
 */
export function regexCovers(first: string, firstCaseless: boolean, second: string, secondCaseless: boolean): boolean {
  if (first === second && firstCaseless === secondCaseless) return true;
  if (secondCaseless && !firstCaseless) return false;
  const a = regexLiteral(first);
  const b = regexLiteral(second);
  if (!a?.acceptsAll || !b) return false;
  const fold = (s: string): string => (firstCaseless ? s.toLowerCase() : s);
  if (a.anchored) return b.anchored && fold(b.literal).startsWith(fold(a.literal));
  return fold(b.literal).includes(fold(a.literal));
}

/** Whether a regex matches every URI that starts with `prefix` (a plain prefix location's name). */
export function regexCoversPrefix(src: string, caseless: boolean, prefix: string): boolean {
  const a = regexLiteral(src);
  if (!a?.acceptsAll) return false;
  const fold = (s: string): string => (caseless ? s.toLowerCase() : s);
  return a.anchored ? fold(prefix).startsWith(fold(a.literal)) : fold(prefix).includes(fold(a.literal));
}
