/**
 * The nginx configuration grammar as one Chevrotain `CstParser`:
 *
 *     file  := stmt*
 *     stmt  := arg+ ( ";" | block )
 *     block := "{" stmt* "}"
 *     arg   := Word | DoubleQuoted | SingleQuoted
 *
 * This is the shape `ngx_conf_parse` (`src/core/ngx_conf_file.c`) reads; what a
 * directive's arguments mean (a `map` entry, an `if` condition) is decided
 * later, by the directive table. One parser instance is reused for every file.
 */
import { CstParser, type CstNode, type IRecognitionException } from 'chevrotain';
import { allTokens, DoubleQuoted, LCurly, RCurly, Semicolon, SingleQuoted, Word } from './tokens.js';

class ConfigGrammar extends CstParser {
  constructor() {
    super(allTokens, { recoveryEnabled: false, maxLookahead: 1 });
    this.performSelfAnalysis();
  }

  public file = this.RULE('file', () => {
    this.MANY(() => this.SUBRULE(this.stmt));
  });

  public stmt = this.RULE('stmt', () => {
    this.AT_LEAST_ONE(() => this.SUBRULE(this.arg));
    this.OR([
      { ALT: () => this.CONSUME(Semicolon) },
      { ALT: () => this.SUBRULE(this.block) },
    ]);
  });

  public block = this.RULE('block', () => {
    this.CONSUME(LCurly);
    this.MANY(() => this.SUBRULE(this.stmt));
    this.CONSUME(RCurly);
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

/** Result of parsing one file's tokens: the CST, and the first syntax error if any. */
export interface GrammarResult {
  cst: CstNode;
  /** Chevrotain's exception for the first error; the CST holds what was read before it. */
  error: IRecognitionException | undefined;
}

/** Parses a token vector with the shared grammar instance. */
export function parseTokens(tokens: import('chevrotain').IToken[]): GrammarResult {
  grammar.input = tokens;
  const cst = grammar.file();
  return { cst, error: grammar.errors[0] };
}
