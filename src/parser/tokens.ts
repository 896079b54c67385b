/**
 * The tokens of nginx configuration files, cut by one loop over the text.
 *
 * The word rules follow nginx's tokenizer, `ngx_conf_read_token` in
 * `src/core/ngx_conf_file.c`:
 * - a token starts at the first character that is not blank; `#` there starts
 *   a comment up to the end of the line, `;` `{` `}` are tokens of their own;
 * - a quoted token (`"…"` or `'…'`) runs to the matching unescaped quote and
 *   must be followed by a blank, `;`, `{` or `)` (checked in `load.ts`); one
 *   left open at the end of the text is an `Unterminated` token;
 * - a bare word runs up to a blank, `;` or `{`. A `}` or `#` inside a word
 *   belongs to it, `\` escapes the next character, and `{` right after `$`
 *   (`${var}`) does not end the word.
 *
 * Lines are counted by LF only (a lone CR is an ordinary blank), from 1.
 * (Chevrotain's lexer did this before: loading it and building its tables
 * took about 20 ms of every start.)
 */

/** What a token is. */
export type TokenKind = 'LCurly' | 'RCurly' | 'Semicolon' | 'DoubleQuoted' | 'SingleQuoted' | 'Unterminated' | 'Word' | 'Comment';

/** One token: its text as written (quotes and escapes kept), offsets and lines. */
export interface Token {
  readonly kind: TokenKind;
  readonly image: string;
  /** Offset of its first character in the text. */
  readonly startOffset: number;
  /** Offset of its last character (inclusive). */
  readonly endOffset: number;
  /** Line of its first character. */
  readonly startLine: number;
  /** Line of its last character (an LF is on the line it ends). */
  readonly endLine: number;
}

/** The tokens of a text, in reading order, and its comments apart. */
export interface Tokenized {
  readonly tokens: Token[];
  readonly comments: Token[];
}

const LF = 10;
const isBlank = (c: number): boolean => c === 32 || c === 9 || c === 13 || c === LF;

/** The end (exclusive) of a bare word starting at `offset`, with nginx's rules (see the module doc). */
function wordEnd(text: string, offset: number): number {
  let i = offset;
  let variable = false;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ && variable) {
      i++;
      continue;
    }
    variable = false;
    if (c === 0x5c /* \ */) {
      i += 2;
      continue;
    }
    if (c === 0x24 /* $ */) {
      variable = true;
      i++;
      continue;
    }
    if (isBlank(c) || c === 0x3b /* ; */ || c === 0x7b) break;
    i++;
  }
  return Math.min(i, text.length);
}

/** The end (exclusive) of a string opened by the quote at `offset`, or -1 when the text ends before its closing quote. */
function quotedEnd(text: string, offset: number): number {
  const quote = text.charCodeAt(offset);
  let i = offset + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) {
      i += 2;
      continue;
    }
    if (c === quote) return i + 1;
    i++;
  }
  return -1;
}

/** Cuts a configuration text into tokens; every text has a cut (there is no lexical error at this stage). */
export function tokenize(text: string): Tokenized {
  const tokens: Token[] = [];
  const comments: Token[] = [];
  let line = 1;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (isBlank(c)) {
      if (c === LF) line++;
      i++;
      continue;
    }
    let kind: TokenKind;
    let end: number;
    if (c === 0x23 /* # */) {
      kind = 'Comment';
      end = text.indexOf('\n', i);
      if (end === -1) end = text.length;
    } else if (c === 0x7b) {
      [kind, end] = ['LCurly', i + 1];
    } else if (c === 0x7d /* } */) {
      [kind, end] = ['RCurly', i + 1];
    } else if (c === 0x3b) {
      [kind, end] = ['Semicolon', i + 1];
    } else if (c === 0x22 /* " */ || c === 0x27 /* ' */) {
      end = quotedEnd(text, i);
      if (end === -1) [kind, end] = ['Unterminated', text.length];
      else kind = c === 0x22 ? 'DoubleQuoted' : 'SingleQuoted';
    } else {
      [kind, end] = ['Word', wordEnd(text, i)];
    }
    const image = text.slice(i, end);
    const startLine = line;
    let lastLf = -1;
    for (let k = image.indexOf('\n'); k !== -1; k = image.indexOf('\n', k + 1)) {
      line++;
      lastLf = k;
    }
    const endLine = lastLf === image.length - 1 ? line - 1 : line;
    (kind === 'Comment' ? comments : tokens).push({ kind, image, startOffset: i, endOffset: end - 1, startLine, endLine });
    i = end;
  }
  return { tokens, comments };
}
