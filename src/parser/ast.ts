/**
 * The configuration AST and the CST visitor that builds it.
 *
 * A `Directive` is one statement as nginx's `ngx_conf_parse` hands it to a
 * directive handler: a name, unescaped arguments (with whether each was
 * quoted), an optional block, and the place nginx names in its messages. A
 * `SyntaxErrorNode` stands where reading stopped, so that errors are reported
 * in the order nginx finds them: statements before it first, then it.
 */
import type { CstNode, IToken } from 'chevrotain';
import { ConfigError } from '../errors.js';

/** A position in a configuration file; `line` counts from 1. */
export interface SourceLoc {
  readonly file: string;
  readonly line: number;
}

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

interface StmtChildren {
  arg: CstNode[];
  Semicolon?: IToken[];
  block?: CstNode[];
}

/**
 * Turns the CST of one file into directives carrying `file` and their lines.
 * `-g` directives (`lines: false`) have line 0: nginx names their place
 * `command line`.
 */
export function cstToDirectives(file: string, cst: CstNode, lines = true): Directive[] {
  const stmts = (cst.children['stmt'] as CstNode[] | undefined) ?? [];
  return stmts.map((s) => stmtToDirective(file, s, lines));
}

function stmtToDirective(file: string, stmt: CstNode, lines: boolean): Directive {
  const ch = stmt.children as unknown as StmtChildren;
  const tokens = ch.arg.map((a) => {
    const [tok] = Object.values(a.children).flat() as IToken[];
    return tok!;
  });
  const values = tokens.map((t) => {
    const quoted = t.tokenType.name !== 'Word';
    return { value: unescapeToken(t.image, quoted), quoted };
  });
  let block: Directive[] | null = null;
  let endLine: number;
  let closeLine: number | undefined;
  if (ch.block) {
    const b = ch.block[0]!;
    const lcurly = (b.children['LCurly'] as IToken[])[0]!;
    endLine = lcurly.startLine ?? 0;
    closeLine = (b.children['RCurly'] as IToken[] | undefined)?.[0]?.startLine;
    block = ((b.children['stmt'] as CstNode[] | undefined) ?? []).map((s) => stmtToDirective(file, s, lines));
  } else {
    endLine = ch.Semicolon![0]!.startLine ?? 0;
  }
  return {
    kind: 'directive',
    name: values[0]!.value,
    args: values.slice(1).map((v) => v.value),
    quoted: values.slice(1).map((v) => v.quoted),
    loc: { file, line: lines ? endLine : 0 },
    nameLine: lines ? tokens[0]!.startLine ?? 0 : 0,
    block,
    closeLine: lines ? closeLine : 0,
  };
}
