/**
 * POSIX `glob(3)` as nginx's `include` uses it (`ngx_open_glob` in
 * `src/os/unix/ngx_files.c`): `*`, `?` and `[…]` per path component, no brace
 * expansion, names starting with `.` only matched by a pattern starting with
 * `.`, results sorted bytewise (the C locale), a pattern that matches nothing
 * giving no files rather than an error.
 */
import { readdirSync, statSync } from 'node:fs';

/** True when `pattern` contains glob magic, as nginx tests with `strpbrk(name, "*?[")`. */
export function hasGlobMagic(pattern: string): boolean {
  return /[*?[]/.test(pattern);
}

/** Translates one fnmatch component to an anchored RegExp. */
function componentRegExp(component: string): RegExp {
  let re = '^';
  for (let i = 0; i < component.length; i++) {
    const ch = component[i]!;
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else if (ch === '[') {
      const close = component.indexOf(']', i + 2);
      if (close === -1) {
        re += '\\[';
        continue;
      }
      let body = component.slice(i + 1, close);
      if (body.startsWith('!')) body = '^' + body.slice(1);
      re += '[' + body.replace(/\\/g, '\\\\') + ']';
      i = close;
    } else if (ch === '\\' && i + 1 < component.length) {
      re += escapeRegExp(component[++i]!);
    } else re += escapeRegExp(ch);
  }
  return new RegExp(re + '$', 's');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** File-system path of a byte string (configuration strings are latin1: one char per byte). */
const fsPath = (p: string): Buffer => Buffer.from(p, 'latin1');

function isDirectory(path: string): boolean {
  try {
    return statSync(fsPath(path)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Expands a glob pattern to the existing paths it matches, sorted bytewise.
 * Paths keep the pattern's text (`a/../b/*.conf` gives `a/../b/x.conf`), as
 * glob(3) returns them. Directories that cannot be read contribute nothing,
 * as with `glob(3)` without `GLOB_ERR`.
 */
export function expandGlob(pattern: string): string[] {
  const parts = pattern.split('/');
  let bases = [parts[0]!];
  for (let i = 1; i < parts.length; i++) {
    const part = parts[i]!;
    const last = i === parts.length - 1;
    const next: string[] = [];
    for (const base of bases) {
      const prefix = `${base}/`;
      if (!hasGlobMagic(part)) {
        const candidate = prefix + part.replace(/\\(.)/g, '$1');
        if (last || isDirectory(candidate)) next.push(candidate);
        continue;
      }
      const re = componentRegExp(part);
      let names: string[];
      try {
        names = readdirSync(fsPath(base === '' ? '/' : base), { encoding: 'latin1' });
      } catch {
        continue;
      }
      for (const name of names) {
        if (name.startsWith('.') && !part.startsWith('.')) continue;
        if (!re.test(name)) continue;
        const candidate = prefix + name;
        if (last || isDirectory(candidate)) next.push(candidate);
      }
    }
    bases = next;
  }
  const existing = bases.filter((p) => {
    try {
      statSync(fsPath(p));
      return true;
    } catch {
      return false;
    }
  });
  return existing.sort((a, b) => Buffer.compare(fsPath(a), fsPath(b)));
}
