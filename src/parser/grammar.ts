/**
 * The nginx configuration grammar as one Chevrotain `CstParser`, flat:
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
 * later, by the directive table. One parser instance is reused for every file.
 */
import { CstParser, type IRecognitionException, type IToken } from './chevrotain.js';
import { allTokens, DoubleQuoted, LCurly, RCurly, Semicolon, SingleQuoted, Word } from './tokens.js';

/**
 * The grammar. `validate`: Chevrotain's self-checks of the grammar cost every
 * start ~5 ms and are skipped; a test builds it with them on.
 */
export class ConfigGrammar extends CstParser {
  constructor(validate = false) {
    super(allTokens, { recoveryEnabled: false, maxLookahead: 1, skipValidations: !validate });
    this.performSelfAnalysis();
  }

  public file = this.RULE('file', () => {
    this.MANY(() => {
      this.OR([
        { ALT: () => this.SUBRULE(this.stmt) },
        { ALT: () => this.CONSUME(RCurly) },
      ]);
    });
  });

  public stmt = this.RULE('stmt', () => {
    this.AT_LEAST_ONE(() => this.SUBRULE(this.arg));
    this.OR([
      { ALT: () => this.CONSUME(Semicolon) },
      { ALT: () => this.CONSUME(LCurly) },
    ]);
  });

  public arg = this.RULE('arg', () => {
    this.OR([
      { ALT: () => this.CONSUME(Word) },
      { ALT: () => this.CONSUME(DoubleQuoted) },
      { ALT: () => this.CONSUME(SingleQuoted) },
    ]);
  });
}

const grammar = new ConfigGrammar();

/**
 * Checks a token vector against the grammar with the shared instance.
 * Returns Chevrotain's exception for the first error (its `token` is where
 * reading stops; an `EOF` token means the file ended inside a statement), or
 * undefined when the tokens form a sequence of statements and `}`.
 */
export function checkTokens(tokens: IToken[]): IRecognitionException | undefined {
  grammar.input = tokens;
  grammar.file();
  return grammar.errors[0];
}
