/**
 * What the C library sees of a configured path. nginx hands a path from the
 * configuration to `open()`, `mkdir()`, `dlopen()` or `fopen()` as a C
 * string, and prints it with `%s` in its messages, so a NUL byte in it ends
 * the path there (`include /a<NUL>b` opens `/a`, and says `open() "/a"
 * failed`); node instead refuses such a path with its own error.
 */

/** The path up to its first NUL byte (the whole path when it has none). */
export function cPath(path: string): string {
  const nul = path.indexOf('\0');
  return nul === -1 ? path : path.slice(0, nul);
}
