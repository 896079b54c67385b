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

/** Whether capture group `n` of a pattern can hold a `.` (so name a host of its choosing), tried with the group alone. */
export function groupHoldsDot(source: string, n: number, compile: (pattern: string) => RegExp | undefined): boolean {
  const g = captureGroups(source).find((x) => x.number === n);
  const re = g && compile(`^(?:${g.text})$`);
  return re !== undefined && ['.', 'a.b', 'evil.invalid', '169.254.169.254'].some((s) => {
    re.lastIndex = 0;
    return re.exec(s) !== null;
  });
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

/** What a checked value is: an Origin header, a Referer header, or what `valid_referers` matches (the Referer after its scheme). */
export type ForgeryKind = 'origin' | 'referer' | 'referer-host';

/**
 * A forged value the regex accepts although it names another site, when
 * there is one. First fixed probes, when the regex accepts the site itself:
 * the site's name followed by another domain (`example.com.evil.invalid`),
 * glued after another name (`evilexample.com`), in the path of another site
 * (Referer only), or with an unescaped `.` of the name replaced
 * (`wwwxexample.com`); then values generated from the pattern
 * (`generatedForgery`). The site is the longest domain name written in the
 * pattern; without one, nothing is reported.
 */
export function forgedMatch(regex: NginxRegex, kind: ForgeryKind, caseless: boolean): { site: string; forged: string } | undefined {
  const site = siteName(regex.source);
  if (!site) return undefined;
  const scheme = kind === 'referer-host' ? '' : 'https://';
  const tail = kind === 'origin' ? '' : '/';
  const test = (s: string): boolean => {
    regex.regex.lastIndex = 0;
    return regex.regex.exec(s) !== null;
  };
  if ([`${scheme}${site}${tail}`, `${scheme}www.${site}${tail}`].some(test)) {
    const probes = [`${scheme}${site}.evil.invalid${tail}`, `${scheme}www.${site}.evil.invalid${tail}`, `${scheme}evil${site}${tail}`];
    if (kind !== 'origin') probes.push(`${scheme}evil.invalid/${site}`, `${scheme}evil.invalid/www.${site}`);
    const labels = site.split('.');
    for (let k = 0; k < labels.length - 2; k++) {
      probes.push(`${scheme}${labels.slice(0, k + 1).join('.')}x${labels.slice(k + 1).join('.')}${tail}`);
    }
    const forged = probes.find(test);
    if (forged !== undefined) return { site, forged: kind === 'referer-host' ? `https://${forged}` : forged };
  }
  const generated = generatedForgery(regex, site, kind, caseless);
  return generated === undefined ? undefined : { site, forged: generated };
}

/** One element of a pattern for the value generator: a character test or a group of alternatives, with its repeat bounds. */
type GenNode =
  | { readonly kind: 'char'; readonly test: (c: string) => boolean; readonly sample: string; readonly min: number; readonly max: number }
  | { readonly kind: 'group'; readonly alts: GenNode[][]; readonly min: number; readonly max: number };

const SAMPLE_CHARS = ['a', '0', '.', '-', '/', '_', ' ', ':'];

/** A test for one character-matching element at `i` (`.`, a class, an escape, a literal), the literal it is (if it is one), and the index after it. */
function charTest(source: string, i: number, caseless: boolean): { test: (c: string) => boolean; literal?: string; next: number } {
  const ch = source[i]!;
  const flags = caseless ? 'iu' : 'u';
  if (ch === '.') return { test: (c) => c !== '\n', next: i + 1 };
  if (ch === '[') {
    const end = classEnd(source, i);
    const text = source.slice(i, end + 1).replace(/\[:(\w+):\]/g, (_m, name: string) => POSIX[name] ?? '');
    let re: RegExp | undefined;
    try {
      re = new RegExp(`^${text}$`, flags);
    } catch {
      re = undefined;
    }
    return { test: (c) => re?.test(c) ?? false, next: end + 1 };
  }
  if (ch === '\\') {
    const e = source[i + 1] ?? '';
    let re: RegExp | undefined;
    try {
      re = /[dDwWsS]/.test(e) ? new RegExp(`^\\${e}$`, flags) : undefined;
    } catch {
      re = undefined;
    }
    if (re) return { test: (c) => re!.test(c), next: i + 2 };
    return { test: (c) => (caseless ? c.toLowerCase() === e.toLowerCase() : c === e), literal: e, next: i + 2 };
  }
  return { test: (c) => (caseless ? c.toLowerCase() === ch.toLowerCase() : c === ch), literal: ch, next: i + 1 };
}

/**
 * Reads a pattern into generator nodes; undefined for constructs it does
 * not follow (back-references, lookarounds, inline options), so that no
 * finding rests on a guess.
 */
function parseGen(source: string, caseless: boolean): GenNode[] | undefined {
  let i = 0;
  const seq = (): GenNode[][] | undefined => {
    const alts: GenNode[][] = [[]];
    while (i < source.length && source[i] !== ')') {
      const ch = source[i]!;
      if (ch === '|') {
        alts.push([]);
        i++;
        continue;
      }
      if (ch === '^' || ch === '$') {
        i++;
        continue;
      }
      let node: GenNode;
      if (ch === '(') {
        const rest = source.slice(i + 1);
        const named = /^\?P?(?:<[A-Za-z_]\w*>|'[A-Za-z_]\w*')/.exec(rest);
        if (rest.startsWith('?') && !named && !rest.startsWith('?:')) return undefined;
        i += 1 + (named ? named[0].length : rest.startsWith('?:') ? 2 : 0);
        const inner = seq();
        if (!inner || source[i] !== ')') return undefined;
        i++;
        node = { kind: 'group', alts: inner, min: 1, max: 1 };
      } else {
        if (ch === '\\' && /[1-9bBAzZGkgpPQE]/.test(source[i + 1] ?? '')) return undefined;
        const t = charTest(source, i, caseless);
        i = t.next;
        node = { kind: 'char', test: t.test, sample: t.literal ?? SAMPLE_CHARS.find(t.test) ?? '', min: 1, max: 1 };
      }
      const q = /^(?:([?*+])|\{(\d+)(,(\d*))?\})[?+]?/.exec(source.slice(i));
      if (q) {
        i += q[0].length;
        const [min, max] = q[1] === '?' ? [0, 1] : q[1] === '*' ? [0, Infinity] : q[1] === '+' ? [1, Infinity]
          : [Number(q[2]), q[3] === undefined ? Number(q[2]) : q[4] ? Number(q[4]) : Infinity];
        node = { ...node, min, max };
      }
      alts[alts.length - 1]!.push(node);
    }
    return alts;
  };
  const top = seq();
  return top && i === source.length ? [{ kind: 'group', alts: top, min: 1, max: 1 }] : undefined;
}

/**
 * Values a pattern may match, built from its elements: the shortest one,
 * then, one element at a time, each other alternative of a group and each
 * filler (`evil.invalid`, `evil.invalid/` …) that a repeated wildcard
 * element can match. A few dozen values, not every one.
 */
function generate(nodes: readonly GenNode[], fillers: readonly string[]): string[] {
  const options = nodes.map((n): string[] => {
    if (n.kind === 'char') {
      const minimal = n.sample.repeat(n.min);
      const fits = fillers.filter((f) => f.length >= n.min && f.length <= n.max && [...f].every(n.test));
      return [minimal, ...fits];
    }
    const inner = n.alts.flatMap((alt) => generate(alt, fillers));
    if (n.min === 0) return ['', ...inner];
    return inner.map((s) => s.repeat(n.min));
  });
  const base = options.map((o) => o[0] ?? '');
  const out = [base.join('')];
  options.forEach((o, k) => {
    for (const alt of o.slice(1)) {
      const v = [...base];
      v[k] = alt;
      out.push(v.join(''));
      if (out.length > 200) return;
    }
  });
  return out;
}

/**
 * A value the regex accepts whose host is not the site's nor one of its
 * subdomains, found among generated values: for `origin` values are
 * `scheme://host[:port]` (what a browser sends), for a Referer any URL
 * (a value the regex matches without a scheme is put after
 * `https://evil.invalid/`, as it may appear in a path). `site` is the name
 * the pattern is written for.
 */
export function generatedForgery(regex: NginxRegex, site: string, kind: 'origin' | 'referer' | 'referer-host', caseless: boolean): string | undefined {
  const nodes = parseGen(regex.source, caseless);
  if (!nodes) return undefined;
  const fillers = kind === 'origin'
    ? ['evil.invalid', '.evil.invalid', 'evil.invalid.', 'evil-']
    : ['evil.invalid/', '.evil.invalid/', 'evil.invalid', '.evil.invalid', 'evil.invalid?', 'evil.invalid#', '@evil.invalid/'];
  const forged: string[] = [];
  for (const raw of generate(nodes, fillers)) {
    let value = raw;
    if (kind === 'referer-host') value = `https://${raw}`;
    else if (!/^https?:\/\//i.test(value)) value = kind === 'origin' ? `https://${value}` : `https://evil.invalid/${value}`;
    const m = /^https?:\/\/(?:[^/?#@]*@)?([^/?#:]*)/i.exec(value);
    if (!m) continue;
    if (kind === 'origin' && !/^https?:\/\/[a-z0-9.-]+(:\d+)?$/i.test(value)) continue;
    const host = m[1]!.toLowerCase();
    if (host === site || host.endsWith(`.${site}`)) continue;
    regex.regex.lastIndex = 0;
    if (regex.regex.exec(kind === 'referer-host' ? raw : value) !== null) forged.push(value);
  }
  // a value with a filler shows the flaw plainest (`metrikaevil.invalid/yandex.ru/` over `metrikayandex.ru/`)
  return forged.find((v) => v.includes('evil')) ?? forged[0];
}
