/**
 * nginx regular expressions (PCRE2 syntax) compiled to JavaScript RegExps.
 *
 * nginx compiles every regex at configuration time (`ngx_regex_compile` in
 * `src/core/ngx_regex.c`); so does jinx, translating PCRE2's syntax and
 * semantics once (`pcre-translate.ts`). A pattern PCRE2 refuses is reported
 * in PCRE2's words, as nginx does: `pcre2_compile() failed: REASON in
 * "REGEX"`, with `at "REST"` when PCRE2 places the error before the end of
 * the pattern. A construct nginx accepts but JavaScript cannot express is
 * refused by name.
 */
import { fail } from './failure.js';
import { RegexSyntax, RegexUnsupported, translatePcre } from './pcre-translate.js';

/** A compiled regex with the names of its named captures. */
export interface NginxRegex {
  readonly source: string;
  readonly regex: RegExp;
  readonly captureNames: readonly string[];
  /** Number of capture groups (for `$1`…`$9`). */
  readonly captureCount: number;
}

/**
 * A RegExp whose match results number groups as PCRE does where the
 * translation's groups differ (`Translation.numbers`): the groups the
 * atomic emulation added (atomic groups and possessive quantifiers capture
 * what they matched once) are left out, and a branch reset group's number
 * takes the group of the alternative that matched. `$N` and `m[N]` are then
 * PCRE's.
 */
class RenumberedGroups extends RegExp {
  constructor(pattern: string, flags: string, private readonly numbers: readonly (readonly number[])[]) {
    super(pattern, flags);
  }

  override exec(s: string): RegExpExecArray | null {
    const m = super.exec(s);
    if (!m) return m;
    const values = this.numbers.slice(1).map((js) => {
      for (const j of js) if (m[j] !== undefined) return m[j];
      return undefined;
    });
    m.length = 1;
    m.push(...(values as string[]));
    if (m.groups) for (const name of Object.keys(m.groups)) if (name.startsWith('_jinxAtomic')) delete m.groups[name];
    return m;
  }
}

/**
 * Compiles an nginx regex; `caseless` is `~*` (nginx's `NGX_REGEX_CASELESS`).
 * @throws DirectiveFailure `pcre2_compile() failed: …` when PCRE2 refuses
 *   the pattern, or `… in regex "…" is not supported by jinx`
 */
export function compileRegex(source: string, caseless: boolean): NginxRegex {
  let t;
  try {
    t = translatePcre(source, caseless);
  } catch (err) {
    if (err instanceof RegexSyntax) {
      fail(`pcre2_compile() failed: ${err.message} in "${source}"${err.offset >= source.length ? '' : ` at "${source.slice(err.offset)}"`}`);
    }
    if (err instanceof RegexUnsupported) fail(`${err.message} in regex "${source}" is not supported by jinx`);
    throw err;
  }
  let regex: RegExp;
  try {
    regex = t.numbers ? new RenumberedGroups(t.pattern, t.flags, t.numbers) : new RegExp(t.pattern, t.flags);
  } catch (err) {
    const reason = String((err as Error).message).replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
    fail(`pcre2_compile() failed: ${reason.charAt(0).toLowerCase()}${reason.slice(1)} in "${source}"`);
  }
  return { source, regex, captureNames: t.names, captureCount: t.groups };
}

/** A named regex capture bound to an indexed variable. */
export interface NamedCapture {
  readonly name: string;
  readonly index: number;
}
