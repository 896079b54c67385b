/**
 * The nginx configuration grammar as one Chevrotain `EmbeddedActionsParser`
 * without actions, flat:
 *
 *     file := ( arg+ end | "}" )*
 *     arg  := Word | DoubleQuoted | SingleQuoted      (the token category `Arg`)
 *     end  := ";" | "{"                               (the token category `StatementEnd`)
 *
 * This is the token order `ngx_conf_parse` (`src/core/ngx_conf_file.c`)
 * accepts; which `{` a `}` closes (and a `}` that closes nothing) is decided by
 * the AST builder (`ast.ts`) with an explicit stack, so that nesting depth
 * costs no call stack: nginx itself reads 5,000 nested blocks. What a
 * directive's arguments mean (a `map` entry, an `if` condition) is decided
 * later, by the directive table. One parser instance is reused for every file.
 *
 * The grammar only checks the token order (the AST is built by `ast.ts`), so
 * it builds no concrete syntax tree, and it is one rule whose alternatives
 * are token categories: a `CstParser` with a rule per statement and per
 * argument (each an `OR`) spent about three times as long on 1,000 server
 * blocks, a rule call and a tree node for every token.
 */
import { EmbeddedActionsParser, type IRecognitionException, type IToken } from './chevrotain.js';
import { allTokens, Arg, RCurly, StatementEnd } from './tokens.js';

/**
 * The grammar. `validate`: Chevrotain's self-checks of the grammar cost every
 * start ~5 ms and are skipped; a test builds it with them on.
 */
export class ConfigGrammar extends EmbeddedActionsParser {
  constructor(validate = false) {
    super(allTokens, { recoveryEnabled: false, maxLookahead: 1, skipValidations: !validate });
    this.performSelfAnalysis();
  }

  public file = this.RULE('file', () => {
    this.MANY(() => {
      this.OR([
        {
          ALT: () => {
            this.AT_LEAST_ONE(() => this.CONSUME(Arg));
            this.CONSUME(StatementEnd);
          },
        },
        { ALT: () => this.CONSUME(RCurly) },
      ]);
    });
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
  const error = grammar.errors[0];
  // the shared instance would keep the file's tokens until the next file
  grammar.input = [];
  return error;
}
