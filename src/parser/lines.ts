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

  constructor(text: string) {
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) this.starts.push(i + 1);
  }

  /** The line (from 1) of the character at `offset` (0-based; past the end: the last line). */
  lineAt(offset: number): number {
    let lo = 0;
    let hi = this.starts.length;
    // the number of line starts at or before `offset`
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.starts[mid]! <= offset) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  }
}
