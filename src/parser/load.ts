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
import { isAbsolute, resolve } from 'node:path';
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

/**
 * Parses one configuration text. Never throws for bad input: the first error
 * becomes a `SyntaxErrorNode` at the place reading stopped.
 */
export function parseConfigText(file: string, text: string): ConfigNode[] {
  const commandLine = file === COMMAND_LINE;
  const { tokens } = configLexer.tokenize(text);
  const eofLine = countLines(text);
  const locOf = (line: number): SourceLoc => ({ file, line: commandLine ? 0 : line });
  const eofMessage = (inArgs: boolean): string => {
    if (commandLine) return 'unexpected end of parameter, expecting ";"';
    return inArgs ? 'unexpected end of file, expecting ";" or "}"' : 'unexpected end of file, expecting "}"';
  };

  let stopAt = tokens.length;
  let stopError: ConfigError | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const tok = tokens[i]!;
    if (tok.tokenType === Unterminated) {
      stopAt = i;
      stopError = new ConfigError('syntax', eofMessage(true), locOf(eofLine));
      break;
    }
    if (tok.tokenType.name === 'DoubleQuoted' || tok.tokenType.name === 'SingleQuoted') {
      const next = text[tok.endOffset! + 1];
      if (next !== undefined && !QUOTE_FOLLOWERS.has(next)) {
        stopAt = i + 1;
        stopError = new ConfigError('syntax', `unexpected "${next}"`, locOf(tok.endLine ?? 0));
        break;
      }
    }
  }

  const head = tokens.slice(0, stopAt);
  const parsed = parseTokens(head);
  if (parsed.error) {
    const tok = parsed.error.token;
    if (tok.tokenType === EOF) {
      if (!stopError) {
        const stack = parsed.error.context.ruleStack;
        const inArgs = stack[stack.length - 1] !== 'block';
        stopError = new ConfigError('syntax', eofMessage(inArgs), locOf(eofLine));
      }
    } else {
      stopAt = head.indexOf(tok);
      stopError = new ConfigError('syntax', `unexpected "${tok.image[0]}"`, locOf(tok.startLine ?? 0));
    }
  }
  if (!stopError) return cstToDirectives(file, parsed.cst);
  return partialTree(file, tokens.slice(0, stopAt), stopError);
}

/**
 * Builds the tree of what was read completely before a syntax error: the
 * statement being read is dropped, open blocks are closed, and the error is
 * placed at the end of the innermost open block.
 */
function partialTree(file: string, before: IToken[], error: ConfigError): ConfigNode[] {
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
  const nodes: ConfigNode[] = cstToDirectives(file, cst);
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
      text = readFileSync(path, 'utf8');
    } catch (err) {
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
    const pattern = isAbsolute(arg) ? arg : resolve(opts.confPrefix, arg);
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
