/**
 * Chevrotain tokens for nginx configuration files.
 *
 * The word rules follow nginx's tokenizer, `ngx_conf_read_token` in
 * `src/core/ngx_conf_file.c`:
 * - a token starts at the first character that is not blank; `#` there starts
 *   a comment up to the end of the line, `;` `{` `}` are tokens of their own;
 * - a quoted token (`"…"` or `'…'`) runs to the matching unescaped quote and
 *   must be followed by a blank, `;`, `{` or `)` (checked in `load.ts`);
 * - a bare word runs up to a blank, `;` or `{`. A `}` or `#` inside a word
 *   belongs to it, `\` escapes the next character, and `{` right after `$`
 *   (`${var}`) does not end the word.
 */
import { createToken, Lexer, type CustomPatternMatcherFunc, type TokenType } from './chevrotain.js';

const [SPACE, TAB, CR, LF, SEMICOLON, LCURLY, RCURLY, DQUOTE, SQUOTE, HASH, BACKSLASH, DOLLAR] =
  [' ', '\t', '\r', '\n', ';', '{', '}', '"', "'", '#', '\\', '$'].map((ch) => ch.charCodeAt(0));

/** Matches a bare word starting at `offset`, with nginx's rules (see the module doc); character codes, for speed. */
const matchWord: CustomPatternMatcherFunc = (text, offset) => {
  const first = text.charCodeAt(offset);
  if (Number.isNaN(first) || first === SPACE || first === TAB || first === CR || first === LF || first === SEMICOLON
    || first === LCURLY || first === RCURLY || first === DQUOTE || first === SQUOTE || first === HASH) {
    return null;
  }
  let i = offset;
  let variable = false;
  while (i < text.length) {
    const ch = text.charCodeAt(i);
    if (ch === LCURLY && variable) {
      i++;
      continue;
    }
    variable = false;
    if (ch === BACKSLASH) {
      i += 2;
      continue;
    }
    if (ch === DOLLAR) {
      variable = true;
      i++;
      continue;
    }
    if (ch === SPACE || ch === TAB || ch === CR || ch === LF || ch === SEMICOLON || ch === LCURLY) break;
    i++;
  }
  const end = Math.min(i, text.length);
  const match = [text.slice(offset, end)] as unknown as RegExpExecArray;
  return match;
};

/**
 * Matches a quoted string opened by `quote`; `terminated` selects whether the
 * closing quote must be present (a string left open at the end of the file is
 * matched by the `Unterminated` token so the loader can report nginx's error).
 */
function quotedMatcher(quote: string, terminated: boolean): CustomPatternMatcherFunc {
  return (text, offset) => {
    if (text[offset] !== quote) return null;
    let i = offset + 1;
    while (i < text.length) {
      const ch = text[i]!;
      if (ch === '\\') {
        i += 2;
        continue;
      }
      if (ch === quote) {
        return terminated ? ([text.slice(offset, i + 1)] as unknown as RegExpExecArray) : null;
      }
      i++;
    }
    return terminated ? null : ([text.slice(offset)] as unknown as RegExpExecArray);
  };
}

const unterminatedDouble = quotedMatcher('"', false);
const unterminatedSingle = quotedMatcher("'", false);

export const Blank = createToken({ name: 'Blank', pattern: /[ \t\r\n]+/, group: Lexer.SKIPPED, line_breaks: true });
export const Comment = createToken({ name: 'Comment', pattern: /#[^\n]*/, group: 'comments' });
/** The grammar's token categories: a directive's name or argument, and what ends a statement. */
export const Arg = createToken({ name: 'Arg', pattern: Lexer.NA });
export const StatementEnd = createToken({ name: 'StatementEnd', pattern: Lexer.NA });
export const LCurly = createToken({ name: 'LCurly', pattern: '{', label: '"{"', categories: [StatementEnd] });
export const RCurly = createToken({ name: 'RCurly', pattern: '}', label: '"}"' });
export const Semicolon = createToken({ name: 'Semicolon', pattern: ';', label: '";"', categories: [StatementEnd] });
export const DoubleQuoted = createToken({
  name: 'DoubleQuoted', pattern: { exec: quotedMatcher('"', true) }, line_breaks: true, start_chars_hint: ['"'], categories: [Arg],
});
export const SingleQuoted = createToken({
  name: 'SingleQuoted', pattern: { exec: quotedMatcher("'", true) }, line_breaks: true, start_chars_hint: ["'"], categories: [Arg],
});
/** A quoted string that reaches the end of the file without its closing quote. */
export const Unterminated = createToken({
  name: 'Unterminated', pattern: { exec: (text, offset, tokens, groups) =>
    unterminatedDouble(text, offset, tokens, groups) ?? unterminatedSingle(text, offset, tokens, groups) },
  line_breaks: true, start_chars_hint: ['"', "'"],
});
/**
 * The characters a bare word may start with, as Chevrotain's lexer indexes
 * them (`start_chars_hint`): every code below 256 but those `matchWord`
 * refuses, and one code of each of the lexer's buckets of 255 codes above
 * (a `-g` argument is not latin1). With a hint on every token the lexer
 * tries only the tokens that can start at a character, where without it
 * it tried each in turn (a third of the lexing of 1,000 server blocks).
 */
function wordStartChars(): number[] {
  const refused = new Set([' ', '\t', '\r', '\n', ';', '{', '}', '"', "'", '#'].map((ch) => ch.charCodeAt(0)));
  const codes: number[] = [];
  for (let code = 0; code < 256; code++) if (!refused.has(code)) codes.push(code);
  // chevrotain's charCodeToOptimizedIndex: code 256 and above go to bucket 255 + ⌊code / 255⌋
  for (let bucket = 1; bucket <= Math.floor(0xffff / 255); bucket++) codes.push(Math.max(256, bucket * 255));
  return codes;
}

export const Word = createToken({
  name: 'Word', pattern: { exec: matchWord }, line_breaks: true, start_chars_hint: wordStartChars(), categories: [Arg],
});

export const allTokens: TokenType[] = [
  Blank, Comment, LCurly, RCurly, Semicolon, DoubleQuoted, SingleQuoted, Unterminated, Word, Arg, StatementEnd,
];

/**
 * The lexer's options. `skipValidations`: Chevrotain's checks of the token
 * definitions cost every start ~15 ms; the definitions are fixed, and a test
 * builds the lexer with the checks on (`makeConfigLexer(true)`).
 */
export function makeConfigLexer(validate = false): InstanceType<typeof Lexer> {
  return new Lexer(allTokens, {
    // where a token starts, as an offset (its line from `LineIndex`); its end is its start and its length (`load.ts`)
    positionTracking: 'onlyOffset',
    ensureOptimizations: false,
    skipValidations: !validate,
    // nginx counts lines by LF only; a lone CR is an ordinary blank
    lineTerminatorsPattern: /\n/g,
    lineTerminatorCharacters: ['\n'],
  });
}

let lexer: InstanceType<typeof Lexer> | undefined;

/**
 * One lexer for every file (Chevrotain lexers are stateless between
 * `tokenize` calls), built on the first read, not when the module loads:
 * building it fills Chevrotain's 65,536-entry table in a loop, which V8's
 * optimizing compiler takes up if it runs then (jinx loads its modules with
 * it on, src/cli/tiering.ts, and reads configurations with it off).
 */
export function configLexer(): InstanceType<typeof Lexer> {
  lexer ??= makeConfigLexer();
  return lexer;
}
