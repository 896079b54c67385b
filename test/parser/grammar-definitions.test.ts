/**
 * jinx builds its Chevrotain lexer and grammar without Chevrotain's
 * definition checks (they cost every start ~20 ms); these tests build both
 * with the checks on, so a change to a token or a rule that Chevrotain
 * would refuse fails here. The lexer indexes tokens by their first
 * character (`start_chars_hint`): a word may start with any character but
 * nginx's separators, also one above latin1 (a `-g` argument).
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ConfigGrammar } from '../../src/parser/grammar.js';
import { COMMAND_LINE, parseConfigText } from '../../src/parser/load.js';
import { configLexer, makeConfigLexer } from '../../src/parser/tokens.js';

describe('the parser\'s Chevrotain definitions', () => {
  it('the token definitions pass the lexer\'s checks', () => {
    assert.deepEqual(makeConfigLexer(true).lexerDefinitionErrors, []);
  });

  it('the grammar passes its self-analysis', () => {
    assert.doesNotThrow(() => new ConfigGrammar(true));
  });

  it('a word starts with any character but a blank, ";", "{", "}", a quote or "#", latin1 or not', () => {
    const starts = ['\0', '\x01', '$', '\\', '~', '\x7f', '\xa0', '\xff', '\u0100', '\u01ff', '\u20ac', '\ud83d\ude00', '\uffff'];
    for (const ch of starts) {
      const lexed = configLexer().tokenize(`${ch}x y;`);
      assert.deepEqual(lexed.errors, [], `a word starting with U+${ch.charCodeAt(0).toString(16)}`);
      assert.deepEqual(lexed.tokens.map((t) => [t.tokenType.name, t.image]), [['Word', `${ch}x`], ['Word', 'y'], ['Semicolon', ';']]);
    }
  });

  it('-g directives with characters above latin1 are read as words', () => {
    const nodes = parseConfigText(COMMAND_LINE, 'env A=\u20ac; env \u0100B;');
    assert.deepEqual(nodes.map((n) => (n.kind === 'directive' ? [n.name, ...n.args] : n.error.message)), [['env', 'A=\u20ac'], ['env', '\u0100B']]);
  });
});
