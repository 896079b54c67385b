/**
 * The nginx configuration grammar, flat:
 *
 *     file := ( stmt | "}" )*
 *     stmt := arg+ ( ";" | "{" )
 *     arg  := Word | DoubleQuoted | SingleQuoted
 *
 * This is the token order `ngx_conf_parse` (`src/core/ngx_conf_file.c`)
 * accepts; which `{` a `}` closes (and a `}` that closes nothing) is decided by
 * the AST builder (`ast.ts`) with an explicit stack, so that nesting depth
 * costs no call stack: nginx itself reads 5,000 nested blocks. What a
 * directive's arguments mean (a `map` entry, an `if` condition) is decided
 * later, by the directive table. The grammar is checked by one loop over the
 * tokens (a Chevrotain parser took a quarter of the load of 1,000 server
 * blocks, and 10 ms of every start for its self-analysis).
 */
import type { Token } from './tokens.js';

/**
 * Where a token vector stops following the grammar: the first token out of
 * place (a `;` or `{` with no argument before it, a `}` inside a statement's
 * arguments), `'end'` when the vector ends inside a statement's arguments,
 * or undefined when the tokens form a sequence of statements and `}`.
 */
export function checkTokens(tokens: readonly Token[]): Token | 'end' | undefined {
  let inStatement = false;
  for (const tok of tokens) {
    const type = tok.kind;
    if (type === 'Semicolon' || type === 'LCurly') {
      if (!inStatement) return tok;
      inStatement = false;
    } else if (type === 'RCurly') {
      if (inStatement) return tok;
    } else {
      inStatement = true;
    }
  }
  return inStatement ? 'end' : undefined;
}
