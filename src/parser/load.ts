/**
 * Reads configuration files into the AST, resolving `include` in place.
 *
 * Mirrors `ngx_conf_parse` and `ngx_conf_include` (`src/core/ngx_conf_file.c`):
 * each file is parsed on its own (braces must balance within it), a relative
 * include path resolves against the directory of the main configuration file,
 * a pattern with `*?[` expands to its sorted matches and may match nothing,
 * and a missing literal file is `open() "PATH" failed (2: No such file or
 * directory) in INCLUDING_FILE:LINE`. Reading stops at the first error, which
 * is left in the tree as a `SyntaxErrorNode` where it occurred.
 */
import { readFileSync } from 'node:fs';
import { createTokenInstance, EOF, type IToken } from 'chevrotain';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import { cstToDirectives, type ConfigNode, type Directive, type SourceLoc } from './ast.js';
import { expandGlob, hasGlobMagic } from './glob.js';
import { parseTokens } from './grammar.js';
import { configLexer, RCurly, Unterminated } from './tokens.js';

/** The name nginx gives the source of `-g` directives in its messages. */
export const COMMAND_LINE = 'command line';

/** A file read while loading, for `-T`. */
export interface LoadedFile {
  readonly path: string;
  readonly text: string;
}

/** The whole configuration as read from disk. */
export interface LoadedConfig {
  /** Directives of the main context: `-g` ones first, then the main file's, includes spliced in. */
  readonly nodes: readonly ConfigNode[];
  /** Every file read, once each, in reading order. */
  readonly files: readonly LoadedFile[];
}

/** Where to read from. */
export interface LoadOptions {
  /** Absolute path of the main configuration file. */
  readonly confFile: string;
  /** Directory that relative include paths resolve against (nginx's conf_prefix). */
  readonly confPrefix: string;
  /** Directives given with `-g`, parsed before the main file. */
  readonly globalDirectives?: string;
}

const MAX_INCLUDE_DEPTH = 64;

const QUOTE_FOLLOWERS = new Set([' ', '\t', '\r', '\n', ';', '{', ')']);

/** nginx's read buffer (`NGX_CONF_BUFFER`): a token this long that does not end stops the parse. */
const CONF_BUFFER = 4096;

/** A place where reading stops before the grammar sees it: the token index and the error. */
interface LexicalStop {
  readonly index: number;
  readonly error: ConfigError;
}

/**
 * The first lexical error of a text, in reading order: a token or comment
 * that fills nginx's 4096-byte buffer (`too long parameter …`), an
 * unterminated quote, a quoted token not followed by a blank, `;`, `{` or `)`,
 * a `{` in `-g` directives.
 */
function lexicalStop(text: string, tokens: IToken[], comments: IToken[], commandLine: boolean, locOf: (line: number) => SourceLoc,
  eofMessage: (inArgs: boolean) => string): LexicalStop | undefined {
  const all = [...tokens.map((t, i) => ({ t, i })), ...comments.map((t) => ({ t, i: -1 }))].sort((a, b) => a.t.startOffset - b.t.startOffset);
  let nextIndex = 0;
  for (const { t, i } of all) {
    const index = i >= 0 ? i : nextIndex;
    if (i >= 0) nextIndex = i + 1;
    const span = t.endOffset! - t.startOffset + 1;
    const quoted = t.tokenType.name === 'DoubleQuoted' || t.tokenType.name === 'SingleQuoted' || t.tokenType === Unterminated;
    if (span >= CONF_BUFFER && text.length > t.startOffset + CONF_BUFFER) {
      const message = quoted
        ? `too long parameter, probably missing terminating "${t.image[0]}" character`
        : `too long parameter "${t.image.slice(0, 10)}..." started`;
      return { index, error: new ConfigError('syntax', message, locOf(t.startLine ?? 0)) };
    }
    if (t.tokenType === Unterminated) return { index, error: new ConfigError('syntax', eofMessage(true), locOf(countLines(text))) };
    if (quoted) {
      const next = text[t.endOffset! + 1];
      if (next !== undefined && !QUOTE_FOLLOWERS.has(next)) {
        return { index: index + 1, error: new ConfigError('syntax', `unexpected "${next}"`, locOf(t.endLine ?? 0)) };
      }
    }
    if (commandLine && t.tokenType.name === 'LCurly') {
      return { index, error: new ConfigError('syntax', 'block directives are not supported in -g option', locOf(0)) };
    }
  }
  return undefined;
}

/**
 * Parses one configuration text. Never throws for bad input: the first error
 * becomes a `SyntaxErrorNode` at the place reading stopped.
 */
export function parseConfigText(file: string, text: string): ConfigNode[] {
  const commandLine = file === COMMAND_LINE;
  const lexed = configLexer.tokenize(text);
  const tokens = lexed.tokens;
  const locOf = (line: number): SourceLoc => ({ file, line: commandLine ? 0 : line });
  const eofMessage = (inArgs: boolean): string => {
    if (commandLine) return 'unexpected end of parameter, expecting ";"';
    return inArgs ? 'unexpected end of file, expecting ";" or "}"' : 'unexpected end of file, expecting "}"';
  };
  const lexical = lexicalStop(text, tokens, lexed.groups['comments'] ?? [], commandLine, locOf, eofMessage);
  let stopAt = lexical?.index ?? tokens.length;
  let stopError = lexical?.error;
  const head = tokens.slice(0, stopAt);
  const parsed = parseTokens(head);
  if (parsed.error) {
    const tok = parsed.error.token;
    if (tok.tokenType === EOF) {
      if (!stopError) {
        const stack = parsed.error.context.ruleStack;
        const inArgs = stack[stack.length - 1] !== 'block';
        stopError = new ConfigError('syntax', eofMessage(inArgs), locOf(countLines(text)));
      }
    } else {
      stopAt = head.indexOf(tok);
      stopError = new ConfigError('syntax', `unexpected "${tok.image[0]}"`, locOf(tok.startLine ?? 0));
    }
  }
  if (!stopError) return cstToDirectives(file, parsed.cst, !commandLine);
  return partialTree(file, tokens.slice(0, stopAt), stopError, !commandLine);
}

/**
 * Builds the tree of what was read completely before a syntax error: the
 * statement being read is dropped, open blocks are closed, and the error is
 * placed at the end of the innermost open block.
 */
function partialTree(file: string, before: IToken[], error: ConfigError, lines: boolean): ConfigNode[] {
  let depth = 0;
  let argStart = -1;
  before.forEach((tok, i) => {
    const name = tok.tokenType.name;
    if (name === 'Word' || name === 'DoubleQuoted' || name === 'SingleQuoted') {
      if (argStart < 0) argStart = i;
    } else if (name === 'Semicolon') argStart = -1;
    else if (name === 'LCurly') {
      depth++;
      argStart = -1;
    } else if (name === 'RCurly') {
      depth--;
      argStart = -1;
    }
  });
  const kept = before.slice(0, argStart >= 0 ? argStart : before.length);
  for (let i = 0; i < depth; i++) kept.push(createTokenInstance(RCurly, '}', NaN, NaN, NaN, NaN, NaN, NaN));
  const { cst } = parseTokens(kept);
  const nodes: ConfigNode[] = cstToDirectives(file, cst, lines);
  let list = nodes;
  for (let i = 0; i < depth; i++) {
    const last = list[list.length - 1] as Directive;
    list = last.block as ConfigNode[];
  }
  list.push({ kind: 'error', error });
  return nodes;
}

function countLines(text: string): number {
  let n = 1;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/**
 * Loads the main file and everything it includes.
 *
 * @throws ConfigError when the main file cannot be read (nginx's
 *   `open() "PATH" failed (2: No such file or directory)`, without a place).
 */
export function loadConfig(opts: LoadOptions): LoadedConfig {
  const files: LoadedFile[] = [];
  const seen = new Set<string>();
  const read = (path: string, includedFrom: SourceLoc | undefined): string => {
    let text: string;
    try {
      text = readFileSync(Buffer.from(path, 'latin1'), 'latin1');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EISDIR') {
        throw new ConfigError('include', `pread() "${path}" failed (${systemErrorText(err)})`, undefined, { level: 'crit' });
      }
      throw new ConfigError('include', `open() "${path}" failed (${systemErrorText(err)})`, includedFrom);
    }
    if (!seen.has(path)) {
      seen.add(path);
      files.push({ path, text });
    }
    return text;
  };

  const expand = (nodes: ConfigNode[], depth: number): ConfigNode[] => {
    const out: ConfigNode[] = [];
    for (const node of nodes) {
      if (node.kind === 'error') {
        out.push(node);
        continue;
      }
      if (node.name === 'include' && node.args.length === 1 && node.block === null) {
        out.push(...includeFiles(node, depth));
        continue;
      }
      out.push(node.block ? { ...node, block: expand(node.block as ConfigNode[], depth) } : node);
    }
    return out;
  };

  const includeFiles = (node: Directive, depth: number): ConfigNode[] => {
    const arg = node.args[0]!;
    const pattern = arg.startsWith('/') ? arg : opts.confPrefix + arg;
    if (depth >= MAX_INCLUDE_DEPTH) {
      return [{ kind: 'error', error: new ConfigError('include', `include nesting deeper than ${MAX_INCLUDE_DEPTH} files ("${pattern}")`, node.loc) }];
    }
    const paths = hasGlobMagic(pattern) ? expandGlob(pattern) : [pattern];
    const out: ConfigNode[] = [];
    for (const path of paths) {
      let text: string;
      try {
        text = read(path, node.loc);
      } catch (err) {
        out.push({ kind: 'error', error: err as ConfigError });
        break;
      }
      out.push(...expand(parseConfigText(path, text), depth + 1));
    }
    return out;
  };

  const nodes: ConfigNode[] = [];
  if (opts.globalDirectives) nodes.push(...expand(parseConfigText(COMMAND_LINE, opts.globalDirectives), 0));
  const mainText = read(opts.confFile, undefined);
  nodes.push(...expand(parseConfigText(opts.confFile, mainText), 0));
  return { nodes, files };
}
