/**
 * Translates a PCRE2 pattern, as nginx compiles it (`ngx_regex_compile`:
 * 8-bit, no UTF mode, default newline LF), into a JavaScript pattern with the
 * same meaning on the byte strings jinx matches (latin1 strings):
 *
 * - `.` is any byte but LF; `$` also matches before a final LF; `\A`, `\z`,
 *   `\Z`, `\G`; `\s` is ASCII white space, `\h`, `\v`, `\R`, `\N`;
 * - `\Q…\E` quoting, `\x{…}`, `\o{…}`, octal, `\c`, `\e`, `\a`;
 * - `(?P<name>…)` and `(?'name'…)` named groups, `(?P=name)`, `\k{name}`,
 *   `\g{N}`, `\g{-N}` back-references (renumbered);
 * - `\p{…}`, `\P{…}` properties (compiled with the `u` flag), POSIX classes
 *   `[[:alpha:]]`, `[[:^digit:]]`;
 * - option settings `(?i)`, `(?m)`, `(?s)`, `(?x)`, `(?n)`, `(?^)`, scoped
 *   `(?i:…)`, anywhere in the pattern (an inline `i` expands ASCII letters);
 * - atomic groups `(?>…)` and possessive quantifiers `*+`, `++`, `?+`,
 *   `{n,m}+`, as a lookahead that captures and a back-reference to it (the
 *   hidden groups are removed from match results);
 * - `(?#…)` comments; `{,N}` (PCRE2 10.43's `{0,N}`); a `{` that is no
 *   quantifier is a literal;
 * - branch reset groups `(?|…)`: each alternative numbers its groups from
 *   the same number; in JavaScript every alternative's groups are groups of
 *   their own, and a match result takes for each of the pattern's numbers
 *   the group that took part (`Translation.numbers`), a back-reference the
 *   concatenation of them (those that did not take part match nothing).
 *
 * What JavaScript cannot express (recursion, subroutine calls, conditionals,
 * a named group in a branch reset group, `\K`, backtracking verbs, `(?U)`,
 * `(?J)`) is refused with a
 * `RegexUnsupported` naming the construct; a construct PCRE2 itself refuses
 * is a `RegexSyntax` with PCRE2's message and offset.
 */

/** A construct of the pattern PCRE2 refuses: its message (`pcre2_get_error_message`) and error offset. */
export class RegexSyntax extends Error {
  constructor(message: string, readonly offset: number) {
    super(message);
  }
}

/** A construct nginx accepts that JavaScript cannot express. */
export class RegexUnsupported extends Error {}

/** What the translation made. */
export interface Translation {
  readonly pattern: string;
  readonly flags: string;
  /** Names of the named groups, in order. */
  readonly names: readonly string[];
  /** Number of the pattern's own capture groups (PCRE's numbering). */
  readonly groups: number;
  /**
   * For each of the pattern's group numbers (index 0 unused), the
   * JavaScript groups that stand for it: one, or one per alternative of a
   * branch reset group; the hidden groups of the atomic emulation are in
   * none. Undefined when every group is its own JavaScript group.
   */
  readonly numbers: readonly (readonly number[])[] | undefined;
}

interface Options {
  i: boolean;
  m: boolean;
  s: boolean;
  x: boolean;
  n: boolean;
}

interface Frame {
  readonly saved: Options;
  readonly close: string;
  /** Index in `out` where the group starts. */
  readonly start: number;
  /** The enclosing level's lengths, restored at the close. */
  readonly alt: number;
  readonly best: number;
  /** What the group adds to the enclosing length: its own ('group') or nothing (an assertion). */
  readonly kind: 'group' | 'assertion';
  /** For a lookbehind: the source offset of its `(?<=`/`(?<!`, where PCRE2 reports its length errors. */
  readonly lookbehind: number | undefined;
  /** A branch reset group: the group count at its start, and the highest count an alternative reached. */
  readonly branchReset?: { readonly base: number; max: number };
}

/** A piece of output: source text, or a back-reference to one of the pattern's groups (numbered at the end). */
type Piece = string | { readonly backref: number };

const HIDDEN = '_jinxAtomic';

const POSIX: Readonly<Record<string, readonly (readonly [number, number])[]>> = {
  alpha: [[0x41, 0x5a], [0x61, 0x7a]],
  digit: [[0x30, 0x39]],
  alnum: [[0x30, 0x39], [0x41, 0x5a], [0x61, 0x7a]],
  upper: [[0x41, 0x5a]],
  lower: [[0x61, 0x7a]],
  space: [[0x09, 0x0d], [0x20, 0x20]],
  blank: [[0x09, 0x09], [0x20, 0x20]],
  punct: [[0x21, 0x2f], [0x3a, 0x40], [0x5b, 0x60], [0x7b, 0x7e]],
  print: [[0x20, 0x7e]],
  graph: [[0x21, 0x7e]],
  cntrl: [[0x00, 0x1f], [0x7f, 0x7f]],
  xdigit: [[0x30, 0x39], [0x41, 0x46], [0x61, 0x66]],
  word: [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]],
  ascii: [[0x00, 0x7f]],
};

/** PCRE's escape sets as byte ranges (non-UTF mode, C locale). */
const SETS: Readonly<Record<string, readonly (readonly [number, number])[]>> = {
  s: [[0x09, 0x0d], [0x20, 0x20]],
  h: [[0x09, 0x09], [0x20, 0x20], [0xa0, 0xa0]],
  v: [[0x0a, 0x0d], [0x85, 0x85]],
};

/** Unicode general categories PCRE2 and JavaScript both know, by their loose PCRE2 spelling. */
const CATEGORIES = new Map(
  ['C', 'Cc', 'Cf', 'Cn', 'Co', 'Cs', 'L', 'Ll', 'Lm', 'Lo', 'Lt', 'Lu', 'M', 'Mc', 'Me', 'Mn', 'N', 'Nd', 'Nl', 'No', 'P', 'Pc',
    'Pd', 'Pe', 'Pf', 'Pi', 'Po', 'Ps', 'S', 'Sc', 'Sk', 'Sm', 'So', 'Z', 'Zl', 'Zp', 'Zs'].map((c) => [c.toLowerCase(), c]),
);

const hex2 = (c: number): string => c.toString(16).padStart(2, '0');

/** A code point as JavaScript pattern source outside a class, valid with and without the `u` flag. */
function literal(c: number): string {
  if (c > 0xffff) return `\\u{${c.toString(16)}}`;
  if (c > 0xff) return `\\u${c.toString(16).padStart(4, '0')}`;
  if (c < 0x20 || c >= 0x7f) return `\\x${hex2(c)}`;
  const ch = String.fromCharCode(c);
  return '\\^$.|?*+()[]{}/'.includes(ch) ? `\\${ch}` : ch;
}

/** A code point as JavaScript source inside a class. */
function classLiteral(c: number): string {
  if (c > 0xff || c < 0x20 || c >= 0x7f) return c > 0xffff ? `\\u{${c.toString(16)}}` : c > 0xff ? `\\u${c.toString(16).padStart(4, '0')}` : `\\x${hex2(c)}`;
  const ch = String.fromCharCode(c);
  return '\\]^-['.includes(ch) ? `\\${ch}` : ch;
}

/** Ranges as class source. */
const rangesSource = (ranges: readonly (readonly [number, number])[]): string =>
  ranges.map(([a, b]) => (a === b ? classLiteral(a) : `${classLiteral(a)}-${classLiteral(b)}`)).join('');

/** The complement of sorted, disjoint ranges within 0–0xFFFF. */
function complement(ranges: readonly (readonly [number, number])[]): [number, number][] {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of [...ranges].sort((x, y) => x[0] - y[0])) {
    if (a > next) out.push([next, a - 1]);
    next = Math.max(next, b + 1);
  }
  if (next <= 0xffff) out.push([next, 0xffff]);
  return out;
}

/** The other-case ASCII ranges of a range (for an inline `(?i)`). */
function otherCase(a: number, b: number): [number, number][] {
  const out: [number, number][] = [];
  const lo = Math.max(a, 0x41);
  const hi = Math.min(b, 0x5a);
  if (lo <= hi) out.push([lo + 32, hi + 32]);
  const lo2 = Math.max(a, 0x61);
  const hi2 = Math.min(b, 0x7a);
  if (lo2 <= hi2) out.push([lo2 - 32, hi2 - 32]);
  return out;
}

const isHex = (ch: string | undefined): boolean => ch !== undefined && /^[0-9a-fA-F]$/.test(ch);
const isWordChar = (ch: string | undefined): boolean => ch !== undefined && /^\w$/.test(ch);

/** Whether the pattern sets `i` (or resets options) inline beyond a leading `(?i)`: case is then expanded by hand. */
function hasInlineCaseOption(p: string): boolean {
  const rest = p.startsWith('(?i)') ? p.slice(4) : p;
  for (const m of rest.matchAll(/\(\?(\^?)([a-zA-Z]*)(?:-([a-zA-Z]*))?[):]/g)) {
    if (m[1] || m[2]!.includes('i') || (m[3] ?? '').includes('i')) return true;
  }
  return false;
}

/**
 * Translates `source`; `caseless` is nginx's `NGX_REGEX_CASELESS` (`~*`).
 * @throws RegexSyntax for what PCRE2 refuses, RegexUnsupported for what
 *   JavaScript cannot express
 */
export function translatePcre(source: string, caseless: boolean): Translation {
  return new Translator(source, caseless).run();
}

class Translator {
  private readonly out: Piece[] = [];
  private i = 0;
  private opts: Options;
  private readonly stack: Frame[] = [];
  private groups = 0;
  /** The pattern's number of each capturing group not hidden, in order (they keep their order in the output). */
  private readonly numbering: number[] = [];
  private readonly names: string[] = [];
  private hiddenCount = 0;
  /** Numbered back-references and the offset after each, checked at the end as PCRE2 does. */
  private readonly references: { backref: number; offset: number }[] = [];
  private readonly namedReferences: { name: string; offset: number }[] = [];
  private unicode = false;
  /** Where the last repeatable item starts in `out`, or -1. */
  private atom = -1;
  /**
   * The longest match of the current alternative and of the level's finished
   * alternatives, and of the last item, in bytes (for PCRE2's lookbehind
   * limit of 255).
   */
  private alt = 0;
  private best = 0;
  private lastLength = 0;
  /** Case is expanded by hand (an inline `i`); otherwise the `i` flag does it. */
  private readonly manualCase: boolean;
  private readonly flagCase: boolean;

  constructor(private readonly p: string, caseless: boolean) {
    this.manualCase = hasInlineCaseOption(p);
    let ignoreCase = caseless;
    if (!this.manualCase && p.startsWith('(?i)')) {
      this.i = 4;
      ignoreCase = true;
    }
    this.flagCase = ignoreCase && !this.manualCase;
    this.opts = { i: ignoreCase, m: false, s: false, x: false, n: false };
  }

  run(): Translation {
    const p = this.p;
    while (this.i < p.length) this.item();
    if (this.stack.length > 0) this.syntax('missing closing parenthesis', p.length);
    for (const { backref, offset } of this.references) {
      if (backref > this.groups || backref < 1) this.syntax('reference to non-existent subpattern', offset);
    }
    for (const { name, offset } of this.namedReferences) {
      if (!this.names.includes(name)) this.syntax('reference to non-existent subpattern', offset);
    }
    const joined = this.out.map((piece) => (typeof piece === 'string' ? piece : `\u0000${piece.backref}\u0000`)).join('');
    const numbers = this.groupMap(joined);
    const pattern = joined.replace(/\u0000(\d+)\u0000/g, (_, n: string) => `(?:${numbers[Number(n)]!.map((j) => `\\${j}`).join('')})`);
    const identity = [...this.openings(joined)].length === this.groups && numbers.every((js, n) => n === 0 || (js.length === 1 && js[0] === n));
    return {
      pattern,
      flags: (this.flagCase ? 'i' : '') + (this.unicode ? 'u' : ''),
      names: this.names,
      groups: this.groups,
      numbers: identity ? undefined : numbers,
    };
  }

  /** For each of the pattern's group numbers, the JavaScript groups that stand for it (hidden groups interleave). */
  private groupMap(js: string): number[][] {
    const map: number[][] = Array.from({ length: this.groups + 1 }, () => []);
    let n = 0;
    let k = 0;
    for (const hidden of this.openings(js)) {
      n++;
      if (!hidden) map[this.numbering[k++]!]!.push(n);
    }
    return map;
  }

  /** The capturing groups of translated source in order: true for a hidden one. */
  private *openings(js: string): Generator<boolean> {
    for (let k = 0; k < js.length; k++) {
      const ch = js[k];
      if (ch === '\\') k++;
      else if (ch === '[') {
        for (k++; k < js.length && js[k] !== ']'; k++) if (js[k] === '\\') k++;
      } else if (ch === '(') {
        if (js[k + 1] !== '?') yield false;
        else if (js[k + 2] === '<' && js[k + 3] !== '=' && js[k + 3] !== '!') yield js.startsWith(HIDDEN, k + 3);
      }
    }
  }

  /** Adds source for an item; a repeatable one matches up to `length` bytes, an assertion none. */
  private emit(s: string, repeatable: boolean, length = 1): void {
    if (repeatable) this.atom = this.out.length;
    else this.atom = -1;
    this.lastLength = repeatable ? length : 0;
    this.alt += this.lastLength;
    this.out.push(s);
  }

  private lit(c: number): void {
    if (this.opts.i && this.manualCase && ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a))) {
      this.emit(`[${String.fromCharCode(c)}${String.fromCharCode(c ^ 0x20)}]`, true);
    } else this.emit(literal(c), true);
  }

  private syntax(message: string, offset: number): never {
    throw new RegexSyntax(message, offset);
  }

  private unsupported(what: string): never {
    throw new RegexUnsupported(what);
  }

  private item(): void {
    const p = this.p;
    const ch = p[this.i]!;
    if (this.opts.x) {
      if (' \t\n\r\f\v'.includes(ch)) {
        this.i++;
        return;
      }
      if (ch === '#') {
        const nl = p.indexOf('\n', this.i);
        this.i = nl === -1 ? p.length : nl + 1;
        return;
      }
    }
    switch (ch) {
      case '\\':
        return this.escape();
      case '[':
        return this.charClass();
      case '(':
        return this.group();
      case ')':
        return this.closeGroup();
      case '|': {
        this.i++;
        this.best = Math.max(this.best, this.alt);
        this.alt = 0;
        // a branch reset group's next alternative numbers its groups from the group's start again
        const reset = this.stack[this.stack.length - 1]?.branchReset;
        if (reset) {
          reset.max = Math.max(reset.max, this.groups);
          this.groups = reset.base;
        }
        return this.emit('|', false);
      }
      case '.':
        this.i++;
        return this.emit(this.opts.s ? '[\\s\\S]' : '[^\\n]', true);
      case '^':
        this.i++;
        return this.emit(this.opts.m ? '(?:^|(?<=\\n))' : '^', false);
      case '$':
        this.i++;
        return this.emit(this.opts.m ? '(?=\\n|(?![\\s\\S]))' : '(?=\\n?(?![\\s\\S]))', false);
      case '*':
      case '+':
      case '?':
        return this.quantifier(ch, 1);
      case '{': {
        const m = /^\{(\d*)(?:(,)(\d*))?\}/.exec(p.slice(this.i));
        if (m && (m[1] !== '' || (m[2] && m[3] !== ''))) {
          const end = this.i + m[0].length - 1;
          if (Number(m[1]) > 65_535 || Number(m[3] ?? 0) > 65_535) this.syntax('number too big in {} quantifier', end);
          if (m[3] && Number(m[1]) > Number(m[3])) this.syntax('numbers out of order in {} quantifier', end);
          return this.quantifier(`{${m[1] || '0'}${m[2] ?? ''}${m[3] ?? ''}}`, m[0].length);
        }
        this.i++;
        return this.lit(0x7b);
      }
      default: {
        const c = p.codePointAt(this.i)!;
        this.i += c > 0xffff ? 2 : 1;
        return this.lit(c);
      }
    }
  }

  /** A quantifier `q` (`length` characters of the source), with its lazy `?` or possessive `+`. */
  private quantifier(q: string, length: number): void {
    this.i += length;
    const atom = this.atom;
    if (atom === -1) this.syntax('quantifier does not follow a repeatable item', this.i);
    const max = q === '?' ? 1 : q === '*' || q === '+' || q.endsWith(',}') ? Infinity : Number(/(\d+)\}$/.exec(q)![1]);
    if (this.lastLength > 0) this.alt += this.lastLength * (max - 1);
    const next = this.p[this.i];
    if (next === '+') {
      this.i++;
      const name = `${HIDDEN}${this.hiddenCount++}`;
      this.out.splice(atom, 0, `(?=(?<${name}>`);
      this.out.push(`${q}))\\k<${name}>`);
      this.atom = -1;
      return;
    }
    if (next === '?') {
      this.i++;
      q += '?';
    }
    this.out.push(q);
    this.atom = -1;
  }

  /** Reads a `\` escape outside a class. */
  private escape(): void {
    const p = this.p;
    const start = this.i;
    const e = p[this.i + 1];
    this.i += 2;
    if (e === undefined) this.syntax('\\ at end of pattern', p.length);
    switch (e) {
      case 'Q': {
        const end = p.indexOf('\\E', this.i);
        const stop = end === -1 ? p.length : end;
        for (let k = this.i; k < stop; k++) this.lit(p.charCodeAt(k));
        this.i = end === -1 ? p.length : end + 2;
        return;
      }
      case 'E':
        return;
      case 'A':
      case 'G':
        return this.emit('(?<![\\s\\S])', false);
      case 'z':
        return this.emit('(?![\\s\\S])', false);
      case 'Z':
        return this.emit('(?=\\n?(?![\\s\\S]))', false);
      case 'b':
      case 'B':
        return this.emit(`\\${e}`, false);
      case 'd':
      case 'D':
      case 'w':
      case 'W':
        return this.emit(`\\${e}`, true);
      case 's':
      case 'h':
      case 'v':
        return this.emit(`[${rangesSource(SETS[e]!)}]`, true);
      case 'S':
      case 'H':
      case 'V':
        return this.emit(`[^${rangesSource(SETS[e.toLowerCase()]!)}]`, true);
      case 'R':
        return this.emit('(?:\\r\\n|[\\n\\v\\f\\r\\x85])', true, 2);
      case 'N':
        if (p[this.i] === '{') this.syntax('\\N{U+dddd} is supported only in Unicode (UTF) mode', p.indexOf('}', this.i) + 1 || p.length);
        return this.emit('[^\\n]', true);
      case 'C':
        return this.emit('[\\s\\S]', true);
      case 'X':
        return this.unsupported('"\\X" (an extended grapheme cluster)');
      case 'K':
        return this.unsupported('"\\K" (reset of the match start)');
      case 'p':
      case 'P':
        return this.emit(this.property(e === 'P', false), true);
      case 'g':
        return this.gReference(start);
      case 'k': {
        const m = /^(?:<(\w+)>|'(\w+)'|\{(\w+)\})/.exec(p.slice(this.i));
        if (!m) this.syntax('\\k is not followed by a braced, angle-bracketed, or quoted name', this.i);
        const at = this.i + 1;
        this.i += m[0].length;
        return this.namedBackref(m[1] ?? m[2] ?? m[3]!, at);
      }
      default:
        break;
    }
    if (e >= '1' && e <= '9') {
      const digits = /^\d*/.exec(p.slice(this.i))![0];
      const n = Number(e + digits);
      if (n < 10 || e === '8' || e === '9' || n <= this.groups) {
        this.i += digits.length;
        this.backref(n);
        return;
      }
      this.i--;
      return this.lit(this.octal(3));
    }
    const c = this.escapedCharacter(e, start);
    return this.lit(c);
  }

  /** Reads up to `max` octal digits at the position. */
  private octal(max: number): number {
    let v = 0;
    let k = 0;
    while (k < max && /^[0-7]$/.test(this.p[this.i] ?? '')) {
      v = v * 8 + Number(this.p[this.i]);
      this.i++;
      k++;
    }
    return v;
  }

  /**
   * The character of an escape that stands for one (`\n`, `\x41`, `\x{41}`,
   * `\o{101}`, `\0`, `\cA`, `\.` …), `e` read and the position after it.
   */
  private escapedCharacter(e: string, start: number): number {
    const p = this.p;
    switch (e) {
      case 'a':
        return 0x07;
      case 'e':
        return 0x1b;
      case 'f':
        return 0x0c;
      case 'n':
        return 0x0a;
      case 'r':
        return 0x0d;
      case 't':
        return 0x09;
      case '0':
        return this.octal(2);
      case 'o': {
        const m = /^\{([0-7]+)\}/.exec(p.slice(this.i));
        if (!m) this.syntax('missing opening brace after \\o', this.i);
        this.i += m[0].length;
        return this.checkCode(parseInt(m[1]!, 8), this.i - 1);
      }
      case 'x': {
        if (p[this.i] === '{') {
          const m = /^\{([0-9a-fA-F]+)\}/.exec(p.slice(this.i));
          if (m) {
            this.i += m[0].length;
            return this.checkCode(parseInt(m[1]!, 16), this.i - 1);
          }
        }
        let v = 0;
        for (let k = 0; k < 2 && isHex(p[this.i]); k++) v = v * 16 + parseInt(p[this.i++]!, 16);
        return v;
      }
      case 'c': {
        const c = p[this.i];
        if (c === undefined) this.syntax('\\c at end of pattern', p.length);
        if (c.charCodeAt(0) > 0x7e || c.charCodeAt(0) < 0x20) this.syntax('\\c must be followed by a printable ASCII character', this.i);
        this.i++;
        return c.toUpperCase().charCodeAt(0) ^ 0x40;
      }
      default:
        break;
    }
    if ('LlUu'.includes(e)) this.syntax('PCRE2 does not support \\F, \\L, \\l, \\N{name}, \\U, or \\u', this.i);
    if (isWordChar(e)) this.syntax('unrecognized character follows \\', start + 2);
    return e.codePointAt(0)!;
  }

  /** A code point given by `\x{…}` or `\o{…}` (its `}` at `brace`): above 0xFF needs UTF mode. */
  private checkCode(v: number, brace: number): number {
    if (v > 0xff) this.syntax('character code point value in \\x{} or \\o{} is too large', brace);
    return v;
  }

  /** `\g` references: `\g{N}`, `\gN`, `\g{-N}`, `\g-N`, `\g{name}`; `\g<…>` subroutine calls are not supported. */
  private gReference(start: number): void {
    const rest = this.p.slice(this.i);
    if (rest.startsWith('<') || rest.startsWith("'")) this.unsupported(`the subroutine call "${this.p.slice(start, this.i + 1)}"`);
    const m = /^(?:\{(-?\d+|\w+)\}|(-?\d+))/.exec(rest);
    if (!m) this.syntax('\\g is not followed by a braced, angle-bracketed, or quoted name/number or by a plain number', this.i);
    const at = this.i;
    this.i += m[0].length;
    const ref = m[1] ?? m[2]!;
    if (!/^-?\d+$/.test(ref)) return this.namedBackref(ref, at + 1);
    const n = Number(ref);
    if (n === 0) this.syntax('reference to non-existent subpattern', this.i);
    const target = n < 0 ? this.groups + 1 + n : n;
    if (target < 1) this.syntax('reference to non-existent subpattern', at);
    this.backref(target);
  }

  private backref(n: number): void {
    this.references.push({ backref: n, offset: this.i });
    this.atom = this.out.length;
    this.lastLength = Infinity;
    this.alt = Infinity;
    this.out.push({ backref: n });
  }

  /** A back-reference by name; `offset` is where the name starts (PCRE2's error offset). */
  private namedBackref(name: string, offset: number): void {
    this.namedReferences.push({ name, offset });
    this.emit(`\\k<${name}>`, true, Infinity);
  }

  /**
   * `\p{…}`/`\P{…}` (or `\pL`), the position after `p`: as JavaScript
   * source for outside a class (`inClass` false) or inside one. Needs the
   * `u` flag.
   */
  private property(negated: boolean, inClass: boolean): string {
    const p = this.p;
    let name: string;
    if (p[this.i] === '{') {
      const end = p.indexOf('}', this.i);
      if (end === -1) this.syntax('malformed \\P or \\p sequence', p.length);
      name = p.slice(this.i + 1, end);
      this.i = end + 1;
    } else {
      name = p[this.i] ?? '';
      this.i++;
    }
    if (name.startsWith('^')) {
      negated = !negated;
      name = name.slice(1);
    }
    const body = this.propertyBody(name);
    this.unicode = true;
    if (inClass) {
      if (!negated) return body;
      if (/^\\p\{[^}]+\}$/.test(body)) return body.replace('\\p', '\\P');
      this.unsupported(`the negated property "\\P{${name}}" inside a character class`);
    }
    return `[${negated ? '^' : ''}${body}]`;
  }

  /** The class body for a PCRE property name (loose matching as PCRE2: case, spaces, `_` and `-` ignored). */
  private propertyBody(name: string): string {
    const loose = name.replace(/[\s_-]/g, '').toLowerCase();
    const gc = CATEGORIES.get(loose.replace(/^(?:gc|generalcategory)[:=]/, ''));
    if (gc) return `\\p{${gc}}`;
    if (loose === 'any') return '\\s\\S';
    if (loose === 'l&' || loose === 'lc') return '\\p{Lu}\\p{Ll}\\p{Lt}';
    if (loose === 'xan') return '\\p{L}\\p{N}';
    if (loose === 'xwd') return '\\p{L}\\p{N}_';
    if (loose === 'xsp' || loose === 'xps') return '\\p{Z}\\t\\n\\v\\f\\r';
    const script = name.replace(/^(?:sc|script|scx|scriptextensions)[:=]/i, '');
    for (const candidate of [script, script.charAt(0).toUpperCase() + script.slice(1).toLowerCase()]) {
      try {
        new RegExp(`\\p{Script=${candidate}}`, 'u');
        return `\\p{Script=${candidate}}`;
      } catch {
        // not a script name JavaScript knows in this spelling
      }
    }
    this.syntax('unknown property after \\P or \\p', this.i);
  }

  /** A character class `[…]`. */
  private charClass(): void {
    const p = this.p;
    this.i++;
    let negated = false;
    if (p[this.i] === '^') {
      negated = true;
      this.i++;
    }
    const parts: string[] = [];
    const ranges: [number, number][] = [];
    let first = true;
    for (;;) {
      if (this.i >= p.length) this.syntax('missing terminating ] for character class', p.length);
      const ch = p[this.i]!;
      if (ch === ']' && !first) {
        this.i++;
        break;
      }
      first = false;
      if (ch === '[' && /^\[:\^?\w+:\]/.test(p.slice(this.i))) {
        const m = /^\[:(\^?)(\w+):\]/.exec(p.slice(this.i))!;
        const set = POSIX[m[2]!];
        if (!set) this.syntax('unknown POSIX class name', this.i + m[0].length);
        this.i += m[0].length;
        parts.push(rangesSource(m[1] ? complement(set) : set));
        continue;
      }
      const had = parts.length;
      const lo = this.classAtom(parts);
      if (lo === undefined) {
        // a set (`\d`) cannot start a range
        if (parts.length > had && p[this.i] === '-' && p[this.i + 1] !== ']' && p[this.i + 1] !== undefined) {
          this.syntax('invalid range in character class', this.i + 1);
        }
        continue;
      }
      if (p[this.i] === '-' && p[this.i + 1] !== ']' && p[this.i + 1] !== undefined && !(p[this.i + 1] === '[' && /^\[:\^?\w+:\]/.test(p.slice(this.i + 1)))) {
        this.i++;
        const before = parts.length;
        const hi = this.classAtom(parts);
        if (hi === undefined) {
          if (parts.length > before) this.syntax('invalid range in character class', this.i);
          // `a-\E]`: the hyphen is literal
          ranges.push([lo, lo], [0x2d, 0x2d]);
          continue;
        }
        if (hi < lo) this.syntax('range out of order in character class', this.i);
        ranges.push([lo, hi]);
        continue;
      }
      ranges.push([lo, lo]);
    }
    if (this.opts.i && this.manualCase) for (const [a, b] of [...ranges]) ranges.push(...otherCase(a, b));
    const body = rangesSource(ranges) + parts.join('');
    // only `[\E]` and the like are empty: nothing, or anything when negated
    if (body === '') this.emit(negated ? '[\\s\\S]' : '(?!)', true);
    else this.emit(`[${negated ? '^' : ''}${body}]`, true);
  }

  /**
   * One item inside a class: a character (returned, for ranges) or a set
   * added to `parts` (undefined returned).
   */
  private classAtom(parts: string[]): number | undefined {
    const p = this.p;
    const ch = p[this.i]!;
    if (ch !== '\\') {
      const c = p.codePointAt(this.i)!;
      this.i += c > 0xffff ? 2 : 1;
      return c;
    }
    const start = this.i;
    const e = p[this.i + 1];
    this.i += 2;
    if (e === undefined) this.syntax('\\ at end of pattern', p.length);
    switch (e) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
        parts.push(`\\${e}`);
        return undefined;
      case 's':
      case 'h':
      case 'v':
        parts.push(rangesSource(SETS[e]!));
        return undefined;
      case 'S':
      case 'H':
      case 'V':
        parts.push(rangesSource(complement(SETS[e.toLowerCase()]!)));
        return undefined;
      case 'p':
      case 'P':
        parts.push(this.property(e === 'P', true));
        return undefined;
      case 'b':
        return 0x08;
      case 'Q': {
        const end = p.indexOf('\\E', this.i);
        const stop = end === -1 ? p.length : end;
        const text = p.slice(this.i, stop);
        this.i = end === -1 ? p.length : end + 2;
        if (text === '') return undefined;
        for (const c of text.slice(0, -1)) parts.push(classLiteral(c.charCodeAt(0)));
        return text.charCodeAt(text.length - 1);
      }
      case 'E':
        return undefined;
      case 'N':
      case 'R':
      case 'X':
      case 'B':
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
      case 'K':
      case 'g':
      case 'k':
        this.syntax('escape sequence is invalid in character class', this.i);
        break;
      default:
        break;
    }
    if (e >= '1' && e <= '7') {
      this.i--;
      return this.octal(3);
    }
    if (e === '8' || e === '9') return e.charCodeAt(0);
    return this.escapedCharacter(e, start);
  }

  /** An opening parenthesis. */
  private group(): void {
    const p = this.p;
    const rest = p.slice(this.i);
    let m: RegExpExecArray | null;
    if (rest.startsWith('(*')) this.unsupported(`the backtracking verb or option "${/^\(\*[^)]*\)?/.exec(rest)![0]}"`);
    if (!rest.startsWith('(?')) {
      this.i++;
      if (this.opts.n) return this.open('(?:', ')', 'group');
      this.groups++;
      this.numbering.push(this.groups);
      return this.open('(', ')', 'group');
    }
    if ((m = /^\(\?#[^)]*\)/.exec(rest))) {
      this.i += m[0].length;
      return;
    }
    if (/^\(\?#/.test(rest)) this.syntax('missing ) after (?# comment', p.length);
    if ((m = /^\(\?(?:P?<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)')/.exec(rest))) {
      if (this.stack.some((f) => f.branchReset)) this.unsupported('a named group in the branch reset group "(?|"');
      this.i += m[0].length;
      this.groups++;
      this.numbering.push(this.groups);
      const name = m[1] ?? m[2]!;
      if (this.names.includes(name)) this.syntax('two named subpatterns have the same name (PCRE2_DUPNAMES not set)', this.i);
      this.names.push(name);
      return this.open(`(?<${name}>`, ')', 'group');
    }
    if ((m = /^\(\?P?[<'](\d)/.exec(rest)) && !rest.startsWith('(?<=') && !rest.startsWith('(?<!')) {
      this.syntax('subpattern name must start with a non-digit', this.i + m[0].length);
    }
    if ((m = /^\(\?P=(\w+)\)/.exec(rest))) {
      const at = this.i + 4;
      this.i += m[0].length;
      return this.namedBackref(m[1]!, at);
    }
    if ((m = /^\(\?(?::|=|!|<=|<!)/.exec(rest))) {
      const at = this.i;
      this.i += m[0].length;
      return this.open(m[0], ')', m[0] === '(?:' ? 'group' : 'assertion', m[0].startsWith('(?<') ? at : undefined);
    }
    if (rest.startsWith('(?>')) {
      this.i += 3;
      const name = `${HIDDEN}${this.hiddenCount++}`;
      return this.open(`(?=(?<${name}>`, `))\\k<${name}>`, 'group');
    }
    if (rest.startsWith('(?|')) {
      this.i += 3;
      return this.open('(?:', ')', 'group', undefined, { base: this.groups, max: this.groups });
    }
    if ((m = /^\(\?(?:R|[+-]?\d+|&\w+|P>\w+)\)/.exec(rest))) this.unsupported(`the recursion or subroutine call "${m[0]}"`);
    if (rest.startsWith('(?(')) this.unsupported('the conditional group "(?("');
    if (rest.startsWith('(?C')) this.unsupported('the callout "(?C"');
    if ((m = /^\(\?(\^?)([a-zA-Z]*)(?:-([a-zA-Z]*))?([):])/.exec(rest))) {
      const next: Options = m[1] ? { i: false, m: false, s: false, x: false, n: false } : { ...this.opts };
      for (const [letters, on] of [[m[2]!, true], [m[3] ?? '', false]] as const) {
        for (const o of letters) {
          if (o === 'i' || o === 'm' || o === 's' || o === 'x' || o === 'n') next[o] = on;
          else if (o === 'J' || o === 'U') this.unsupported(`the option "(?${o})"`);
          else this.syntax('unrecognized character after (? or (?-', this.i + m[0].indexOf(o) + 1);
        }
      }
      this.i += m[0].length;
      if (m[4] === ')') {
        this.opts = next;
        return;
      }
      this.open('(?:', ')', 'group');
      this.opts = next;
      return;
    }
    this.syntax('unrecognized character after (? or (?-', this.i + 3);
  }

  private open(text: string, close: string, kind: Frame['kind'], lookbehind?: number, branchReset?: Frame['branchReset']): void {
    this.stack.push({ saved: this.opts, close, start: this.out.length, alt: this.alt, best: this.best, kind, lookbehind, branchReset });
    this.out.push(text);
    this.atom = -1;
    this.alt = 0;
    this.best = 0;
  }

  private closeGroup(): void {
    this.i++;
    const frame = this.stack.pop();
    if (!frame) this.syntax('unmatched closing parenthesis', this.i);
    // after a branch reset group, numbering goes on from the highest number an alternative reached
    if (frame.branchReset) this.groups = Math.max(frame.branchReset.max, this.groups);
    this.opts = frame.saved;
    this.out.push(frame.close);
    this.atom = frame.start;
    const length = Math.max(this.best, this.alt);
    if (frame.lookbehind !== undefined) {
      if (length === Infinity) this.syntax('length of lookbehind assertion is not limited', frame.lookbehind);
      if (length > 255) this.syntax('branch too long in variable-length lookbehind assertion', frame.lookbehind);
    }
    this.lastLength = frame.kind === 'group' ? length : 0;
    this.alt = frame.alt + this.lastLength;
    this.best = frame.best;
  }
}
