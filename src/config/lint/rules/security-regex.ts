/**
 * What the security rules read from a PCRE pattern: whether a capture group
 * can hold CR or LF, and which forged hosts a regex meant to accept one
 * site's Origin or Referer also accepts.
 */
import type { NginxRegex } from '../../regex.js';

/** One capture group of a pattern: its number (as PCRE numbers groups), its name, if any, and the text inside it. */
interface CaptureGroup {
  readonly number: number;
  /** Offset of the group's `(` in the pattern. */
  readonly start: number;
  readonly name: string | undefined;
  readonly text: string;
}

/**
 * The capture groups of a PCRE pattern, counted by their `(` as PCRE
 * numbers them (plain and named groups; not `(?:`, lookarounds or inline
 * flags), classes and escapes skipped.
 */
function captureGroups(source: string): CaptureGroup[] {
  const out: CaptureGroup[] = [];
  let count = 0;
  const open: { paren: number; start: number; number: number; name: string | undefined }[] = [];
  for (let i = 0; i < source.length; i++) {
    const ch = source[i]!;
    if (ch === '\\') {
      i++;
      continue;
    }
    if (ch === '[') {
      i = classEnd(source, i);
      continue;
    }
    if (ch === '(') {
      const named = /^\?P?(?:<([A-Za-z_]\w*)>|'([A-Za-z_]\w*)')/.exec(source.slice(i + 1));
      const capturing = source[i + 1] !== '?' || named !== null;
      if (capturing) count++;
      open.push({ paren: i, start: i + 1 + (named ? named[0].length : 0), number: capturing ? count : 0, name: named ? named[1] ?? named[2] : undefined });
    } else if (ch === ')') {
      const g = open.pop();
      if (g && g.number > 0) out.push({ number: g.number, start: g.paren, name: g.name, text: source.slice(g.start, i) });
    }
  }
  return out.sort((a, b) => a.number - b.number);
}

/**
 * Where capture group `n` of a pattern starts (the offset of its `(`) and
 * whether it can match a string that starts with `..` (a parent directory),
 * tried with the group alone compiled as nginx compiles it.
 */
export function groupClimbs(source: string, n: number, compile: (pattern: string) => RegExp | undefined): { start: number; climbs: boolean } | undefined {
  const g = captureGroups(source).find((x) => x.number === n);
  if (!g) return undefined;
  const re = compile(`^(?:${g.text})`);
  const climbs = re !== undefined && ['..', '../', '../x', '../../x/y'].some((s) => {
    re.lastIndex = 0;
    return re.exec(s)?.[0].startsWith('..') ?? false;
  });
  return { start: g.start, climbs };
}

/** The number of the named group `name` of a pattern, if it has one. */
export function namedGroupNumber(source: string, name: string): number | undefined {
  return captureGroups(source).find((g) => g.name === name)?.number;
}

/** The index of the `]` closing the class opened at `start`. */
function classEnd(source: string, start: number): number {
  let i = start + 1;
  if (source[i] === '^') i++;
  if (source[i] === ']') i++;
  for (; i < source.length; i++) {
    if (source[i] === '\\') i++;
    else if (source[i] === '[' && source[i + 1] === ':') i = source.indexOf(':]', i + 2) + 1 || source.length;
    else if (source[i] === ']') return i;
  }
  return source.length;
}

/** Escapes that match CR or LF: `\s`, `\v`, `\R`, negated classes, and the characters themselves. */
const NEWLINE_ESCAPES: Readonly<Record<string, { cr: boolean; lf: boolean }>> = {
  s: { cr: true, lf: true }, v: { cr: true, lf: true }, R: { cr: true, lf: true }, W: { cr: true, lf: true },
  D: { cr: true, lf: true }, H: { cr: true, lf: true }, N: { cr: true, lf: false }, r: { cr: true, lf: false }, n: { cr: false, lf: true },
};

/** Whether a character class (`[…]`, PCRE syntax) matches CR and LF, tested with JavaScript's engine. */
function classNewlines(text: string): { cr: boolean; lf: boolean } {
  try {
    const re = new RegExp(`^${text.replace(/\[:(\w+):\]/g, (_m, name: string) => POSIX[name] ?? '')}$`, 'u');
    return { cr: re.test('\r'), lf: re.test('\n') };
  } catch {
    return { cr: text.startsWith('[^'), lf: text.startsWith('[^') };
  }
}

const POSIX: Readonly<Record<string, string>> = {
  alnum: 'a-zA-Z0-9', alpha: 'a-zA-Z', digit: '0-9', lower: 'a-z', upper: 'A-Z', xdigit: '0-9a-fA-F', space: '\\s', word: '\\w',
  punct: '!-\\/:-@\\[-`{-~', print: ' -~', graph: '!-~', cntrl: '\\x00-\\x1f\\x7f', blank: ' \\t',
};

/**
 * Whether capture group `n` of a PCRE pattern can hold CR or LF: `.`
 * matches CR (PCRE's default newline is LF only; `(?s)` lets it match LF
 * too), a negated class matches both unless it lists them, `\s` and the
 * other wide escapes match both. Returns `CR and LF`, `CR`, `LF`, or
 * undefined when the group cannot hold either (or there is no such group).
 */
export function captureGroupNewlines(source: string, n: number): string | undefined {
  const text = captureGroups(source).find((g) => g.number === n)?.text;
  if (text === undefined) return undefined;
  let cr = false;
  let lf = false;
  const dotAll = /\(\?[a-z]*s[a-z]*\)/.test(source);
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '\\') {
      const e = text[i + 1] ?? '';
      const hit = NEWLINE_ESCAPES[e] ?? (e === 'x' ? hexNewline(text.slice(i + 2, i + 6)) : undefined);
      if (hit) [cr, lf] = [cr || hit.cr, lf || hit.lf];
      i++;
    } else if (ch === '[') {
      const end = classEnd(text, i);
      const hit = classNewlines(text.slice(i, end + 1));
      [cr, lf] = [cr || hit.cr, lf || hit.lf];
      i = end;
    } else if (ch === '.') {
      cr = true;
      lf ||= dotAll;
    }
  }
  if (cr && lf) return 'CR and LF';
  return cr ? 'CR' : lf ? 'LF' : undefined;
}

/** `\x0d`, `\x0a`, `\x{d}` … */
function hexNewline(rest: string): { cr: boolean; lf: boolean } | undefined {
  const m = /^(?:\{0*([0-9a-fA-F]+)\}|([0-9a-fA-F]{1,2}))/.exec(rest);
  const code = m ? parseInt(m[1] ?? m[2]!, 16) : -1;
  return code === 13 ? { cr: true, lf: false } : code === 10 ? { cr: false, lf: true } : undefined;
}

/** The site name a pattern is written for: the longest `label.label…` run in it, escapes removed. */
function siteName(source: string): string | undefined {
  const names = source.match(/(?:[A-Za-z0-9-]+(?:\\\.|\.))+[A-Za-z]{2,}/g) ?? [];
  const best = names.sort((a, b) => b.length - a.length)[0];
  return best?.replace(/\\\./g, '.').toLowerCase();
}

/**
 * A forged value the regex accepts although it names another site, when
 * there is one: the site's name followed by another domain
 * (`example.com.evil.invalid`), glued after another name
 * (`evilexample.com`), in the path of another site (Referer only), or with
 * an unescaped `.` of the name replaced (`wwwxexample.com`). `scheme` is
 * what the matched value starts with (`https://` for an Origin header; empty
 * for `valid_referers`, which matches after it); `tail` what a Referer adds
 * after the host (`/`). Undefined when the regex accepts none of them, or
 * when it does not accept the site itself (its intent is not known).
 */
export function forgedMatch(regex: NginxRegex, scheme: string, tail: string, withPath: boolean): { site: string; forged: string } | undefined {
  const site = siteName(regex.source);
  if (!site) return undefined;
  const test = (s: string): boolean => {
    regex.regex.lastIndex = 0;
    return regex.regex.exec(s) !== null;
  };
  const legit = [`${scheme}${site}${tail}`, `${scheme}www.${site}${tail}`];
  if (!legit.some(test)) return undefined;
  const probes = [`${scheme}${site}.evil.invalid${tail}`, `${scheme}www.${site}.evil.invalid${tail}`, `${scheme}evil${site}${tail}`];
  if (withPath) probes.push(`${scheme}evil.invalid/${site}`, `${scheme}evil.invalid/www.${site}`);
  const labels = site.split('.');
  for (let k = 0; k < labels.length - 2; k++) {
    probes.push(`${scheme}${labels.slice(0, k + 1).join('.')}x${labels.slice(k + 1).join('.')}${tail}`);
  }
  const forged = probes.find(test);
  return forged === undefined ? undefined : { site, forged };
}
