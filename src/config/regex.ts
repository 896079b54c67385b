/**
 * nginx regular expressions (PCRE syntax) compiled to JavaScript RegExps.
 *
 * nginx compiles every regex at configuration time (`ngx_regex_compile` in
 * `src/core/ngx_regex.c`); so does jinx. PCRE's `(?P<name>…)` named groups and
 * a leading `(?i)` are translated; anything V8 cannot compile is reported
 * like nginx's `pcre2_compile() failed: REASON in "REGEX"`.
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
  pattern = pattern.replace(/\(\?P</g, '(?<').replace(/\(\?P=(\w+)\)/g, '\\k<$1>');
  let regex: RegExp;
  try {
    regex = new RegExp(pattern, flags);
  } catch (err) {
    const reason = String((err as Error).message).replace(/^Invalid regular expression: \/.*\/[a-z]*: /, '');
    fail(`pcre2_compile() failed: ${reason.charAt(0).toLowerCase()}${reason.slice(1)} in "${source}"`);
  }
  const captureNames = [...pattern.matchAll(/\(\?<([A-Za-z_][A-Za-z0-9_]*)>/g)].map((m) => m[1]!);
  const captureCount = new RegExp(`${pattern}|`, flags).exec('')!.length - 1;
  return { source, regex, captureNames, captureCount };
}
