/**
 * Where a directive was read: shared by the parser, which records it, and the
 * error classes of every stage, which append it to their messages.
 */

/**
 * A position in a configuration file; `line` counts from 1 (0 for `-g` directives).
 * `includedFrom` is the `include` directive that spliced the file in (itself
 * with the place it was included from, up to the main file); undefined in
 * the main file. nginx's messages name only `file:line`: the chain is for
 * `jinx lint`.
 */
export interface SourceLoc {
  readonly file: string;
  readonly line: number;
  readonly includedFrom?: SourceLoc;
}
