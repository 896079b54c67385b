/**
 * Line numbers of a text's offsets, counted as nginx counts them
 * (`cf->conf_file->line` in `ngx_conf_read_token`: one more after each LF,
 * from 1). The lexer tracks where tokens start as offsets only (Chevrotain's
 * `positionTracking: 'onlyOffset'`, which spares it a look for line breaks
 * in every token and blank); lines are looked up here for the few tokens
 * that need one (where a directive ends and its name starts, where a block
 * closes, where an error stops reading).
 */
export class LineIndex {
  /** The offset each line after the first starts at, ascending. */
  private readonly starts: number[] = [];
  /** Line starts at or before the last offset looked up: lookups come mostly in reading order. */
  private before = 0;

  constructor(text: string) {
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) this.starts.push(i + 1);
  }

  /** The line (from 1) of the character at `offset` (0-based; past the end: the last line). */
  lineAt(offset: number): number {
    const starts = this.starts;
    let n = this.before;
    // a few lines from the last lookup: step there; farther (a block closing far below its `{`): binary search
    for (let steps = 0; steps < 8; steps++) {
      if (n < starts.length && starts[n]! <= offset) n++;
      else if (n > 0 && starts[n - 1]! > offset) n--;
      else return this.found(n);
    }
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid]! <= offset) lo = mid + 1;
      else hi = mid;
    }
    return this.found(lo);
  }

  /** `n` line starts at or before the offset: line n + 1, remembered for the next lookup. */
  private found(n: number): number {
    this.before = n;
    return n + 1;
  }
}
