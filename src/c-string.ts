/**
 * What C code sees of a configured string. nginx hands a path from the
 * configuration to `open()`, `mkdir()`, `dlopen()` or `fopen()` as a C
 * string, compares keywords (`on`, `off`, log levels) with `strcmp`, and
 * prints them with `%s`, so a NUL byte in them ends them there (`include
 * /a<NUL>b` opens `/a` and says `open() "/a" failed`; `off<NUL>x` is `off`);
 * node instead refuses a path with a NUL byte with its own error.
 */

/** The string up to its first NUL byte (the whole string when it has none). */
export function cString(text: string): string {
  const nul = text.indexOf('\0');
  return nul === -1 ? text : text.slice(0, nul);
}
