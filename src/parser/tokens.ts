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

const BLANKS = new Set([' ', '\t', '\r', '\n']);

/** Matches a bare word starting at `offset`, with nginx's rules (see the module doc). */
const matchWord: CustomPatternMatcherFunc = (text, offset) => {
  const first = text[offset];
  if (first === undefined || BLANKS.has(first) || first === ';' || first === '{' || first === '}'
    || first === '"' || first === "'" || first === '#') {
    return null;
  }
  let i = offset;
  let variable = false;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '{' && variable) {
      i++;
      continue;
    }
    variable = false;
    if (ch === '\\') {
      i += 2;
      continue;
    }
    if (ch === '$') {
      variable = true;
      i++;
      continue;
    }
    if (BLANKS.has(ch) || ch === ';' || ch === '{') break;
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
export const LCurly = createToken({ name: 'LCurly', pattern: '{', label: '"{"' });
export const RCurly = createToken({ name: 'RCurly', pattern: '}', label: '"}"' });
export const Semicolon = createToken({ name: 'Semicolon', pattern: ';', label: '";"' });
export const DoubleQuoted = createToken({
  name: 'DoubleQuoted', pattern: { exec: quotedMatcher('"', true) }, line_breaks: true, start_chars_hint: ['"'],
});
export const SingleQuoted = createToken({
  name: 'SingleQuoted', pattern: { exec: quotedMatcher("'", true) }, line_breaks: true, start_chars_hint: ["'"],
});
/** A quoted string that reaches the end of the file without its closing quote. */
export const Unterminated = createToken({
  name: 'Unterminated', pattern: { exec: (text, offset, tokens, groups) =>
    unterminatedDouble(text, offset, tokens, groups) ?? unterminatedSingle(text, offset, tokens, groups) },
  line_breaks: true, start_chars_hint: ['"', "'"],
});
export const Word = createToken({ name: 'Word', pattern: { exec: matchWord }, line_breaks: true });

export const allTokens: TokenType[] = [
  Blank, Comment, LCurly, RCurly, Semicolon, DoubleQuoted, SingleQuoted, Unterminated, Word,
];

/**
 * The lexer's options. `skipValidations`: Chevrotain's checks of the token
 * definitions cost every start ~15 ms; the definitions are fixed, and a test
 * builds the lexer with the checks on (`makeConfigLexer(true)`).
 */
export function makeConfigLexer(validate = false): InstanceType<typeof Lexer> {
  return new Lexer(allTokens, {
    positionTracking: 'full',
    ensureOptimizations: false,
    skipValidations: !validate,
    // nginx counts lines by LF only; a lone CR is an ordinary blank
    lineTerminatorsPattern: /\n/g,
    lineTerminatorCharacters: ['\n'],
  });
}

/** One lexer for every file; Chevrotain lexers are stateless between `tokenize` calls. */
export const configLexer = makeConfigLexer();
