/**
 * jinx builds its Chevrotain lexer and grammar without Chevrotain's
 * definition checks (they cost every start ~20 ms); these tests build both
 * with the checks on, so a change to a token or a rule that Chevrotain
 * would refuse fails here.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ConfigGrammar } from '../../src/parser/grammar.js';
import { makeConfigLexer } from '../../src/parser/tokens.js';

describe('the parser\'s Chevrotain definitions', () => {
  it('the token definitions pass the lexer\'s checks', () => {
    assert.deepEqual(makeConfigLexer(true).lexerDefinitionErrors, []);
  });

  it('the grammar passes its self-analysis', () => {
    assert.doesNotThrow(() => new ConfigGrammar(true));
  });
});
