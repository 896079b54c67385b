/**
 * The configuration AST and the builder that reads it from a token vector.
 *
 * A `Directive` is one statement as nginx's `ngx_conf_parse` hands it to a
 * directive handler: a name, unescaped arguments (with whether each was
 * quoted), an optional block, and the place nginx names in its messages. A
 * `SyntaxErrorNode` stands where reading stopped, so that errors are reported
 * in the order nginx finds them: statements before it first, then it.
 */
import type { IToken } from './chevrotain.js';
import { LCurly, RCurly, Semicolon, Word } from './tokens.js';
import { ConfigError } from '../errors.js';
import type { SourceLoc } from '../source-loc.js';

export type { SourceLoc };

/** One nginx directive with its arguments and block. */
export interface Directive {
  readonly kind: 'directive';
  readonly name: string;
  /** Arguments after the name, quotes removed and `\"`, `\'`, `\\`, `\t`, `\r`, `\n` unescaped. */
  readonly args: readonly string[];
  /** For each argument, whether it was written in quotes. */
  readonly quoted: readonly boolean[];
  /**
   * Where nginx reports this directive: the file and the line of the `;` or
   * `{` that ends it (nginx reads to that token before it calls the handler).
   */
  readonly loc: SourceLoc;
  /** Line of the directive name (differs from `loc.line` when the directive spans lines). */
  readonly nameLine: number;
  /** The statements of `{ … }`, or null for a directive ended by `;`. */
  readonly block: readonly ConfigNode[] | null;
  /** Line of the closing `}` of the block (nginx's place for errors found at the end of a block). */
  readonly closeLine: number | undefined;
}

/** Marks where reading the configuration stopped with a syntax or include error. */
export interface SyntaxErrorNode {
  readonly kind: 'error';
  readonly error: ConfigError;
}

export type ConfigNode = Directive | SyntaxErrorNode;

/**
 * Removes the quotes of a quoted token and resolves nginx's escapes, as the
 * copy loop at the end of `ngx_conf_read_token` does.
 */
export function unescapeToken(image: string, quoted: boolean): string {
  const raw = quoted ? image.slice(1, -1) : image;
  if (!raw.includes('\\')) return raw;
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === '\\' && i + 1 < raw.length) {
      const next = raw[i + 1]!;
      if (next === '"' || next === "'" || next === '\\') {
        out += next;
        i++;
        continue;
      }
      if (next === 't' || next === 'r' || next === 'n') {
        out += next === 't' ? '\t' : next === 'r' ? '\r' : '\n';
        i++;
        continue;
      }
    }
    out += ch;
  }
  return out;
}

/** What `buildDirectives` read from a token vector. */
export interface BuiltTree {
  /** The top-level statements, blocks nested in them. */
  readonly nodes: ConfigNode[];
  /** The statement list of the innermost block still open where reading stopped (`nodes` when none is). */
  readonly innermost: ConfigNode[];
  /** How many blocks were still open where reading stopped. */
  readonly openBlocks: number;
  /** Index of a `}` that closes no block (nginx's `unexpected "}"`); reading stopped before it. */
  readonly strayClose: number | undefined;
}

/** A block being read: the directive that opened it and its statements so far. */
interface OpenBlock {
  readonly start: IToken[];
  readonly lcurly: IToken;
  readonly list: ConfigNode[];
  readonly parentList: ConfigNode[];
}

/**
 * Builds directives carrying `file` and their lines from a token vector that
 * the grammar accepted (statements and `}`), with an explicit stack of open
 * blocks, so that any nesting depth reads without recursion. A statement not
 * ended by `;` or `{` at the end of the vector is dropped (reading stopped in
 * it); reading stops before a `}` that closes nothing. `lineAt` gives the
 * line of a token's offset; `-g` directives (`lineAt` undefined) have line
 * 0: nginx names their place `command line`.
 */
export function buildDirectives(file: string, tokens: readonly IToken[], lineAt: ((offset: number) => number) | undefined): BuiltTree {
  const line = (tok: IToken): number => (lineAt ? lineAt(tok.startOffset) : 0);
  const nodes: ConfigNode[] = [];
  const open: OpenBlock[] = [];
  let list = nodes;
  let args: IToken[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i]!;
    const type = tok.tokenType;
    if (type === Semicolon) {
      list.push(directive(file, args, line(tok), line(args[0]!), null, undefined));
      args = [];
    } else if (type === LCurly) {
      const block: ConfigNode[] = [];
      open.push({ start: args, lcurly: tok, list: block, parentList: list });
      list = block;
      args = [];
    } else if (type === RCurly) {
      const top = open.pop();
      if (!top) return { nodes, innermost: list, openBlocks: 0, strayClose: i };
      top.parentList.push(directive(file, top.start, line(top.lcurly), line(top.start[0]!), top.list, line(tok)));
      list = top.parentList;
    } else {
      args.push(tok);
    }
  }
  // blocks left open where reading stopped keep what was read in them
  for (let k = open.length - 1; k >= 0; k--) {
    const top = open[k]!;
    top.parentList.push(directive(file, top.start, line(top.lcurly), line(top.start[0]!), top.list, undefined));
  }
  return { nodes, innermost: list, openBlocks: open.length, strayClose: undefined };
}

function directive(file: string, tokens: readonly IToken[], endLine: number, nameLine: number, block: ConfigNode[] | null,
  closeLine: number | undefined): Directive {
  const args: string[] = [];
  const quoted: boolean[] = [];
  for (let i = 1; i < tokens.length; i++) {
    const q = tokens[i]!.tokenType !== Word;
    args.push(unescapeToken(tokens[i]!.image, q));
    quoted.push(q);
  }
  return {
    kind: 'directive',
    name: unescapeToken(tokens[0]!.image, tokens[0]!.tokenType !== Word),
    args,
    quoted,
    loc: { file, line: endLine },
    nameLine,
    block,
    closeLine,
  };
}
