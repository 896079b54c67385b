/**
 * Where a directive was read: shared by the parser, which records it, and the
 * error classes of every stage, which append it to their messages.
 */

/** A position in a configuration file; `line` counts from 1 (0 for `-g` directives). */
export interface SourceLoc {
  readonly file: string;
  readonly line: number;
}
