/**
 * chevrotain, loaded from the single-file ES module its package ships
 * (`lib/chevrotain.mjs`, the same version and API) rather than from its
 * `lib/src` tree, whose imports pull in lodash-es one module at a time:
 * about 400 ms of loading on every start of jinx (the master, each worker,
 * each `jinx -t`) against about 30 ms.
 */
type Chevrotain = typeof import('chevrotain');

// `chevrotain` resolves to …/chevrotain/lib/src/api.js; the bundle sits beside that tree
const chevrotain = await import(new URL('../chevrotain.mjs', import.meta.resolve('chevrotain')).href) as Chevrotain;

export const { createToken, EmbeddedActionsParser, EOF, Lexer } = chevrotain;
export type { CustomPatternMatcherFunc, IRecognitionException, IToken, TokenType } from 'chevrotain';
