/**
 * Reads configuration files into the AST, resolving `include` in place.
 *
 * Mirrors `ngx_conf_parse` and `ngx_conf_include` (`src/core/ngx_conf_file.c`):
 * each file is parsed on its own (braces must balance within it), a relative
 * include path resolves against the directory of the main configuration file,
 * a pattern with `*?[` expands to its sorted matches and may match nothing,
 * and a missing literal file is `open() "PATH" failed (2: No such file or
 * directory) in INCLUDING_FILE:LINE`. Reading stops at the first error, which
 * is left in the tree as a `SyntaxErrorNode` where it occurred (`recover`:
 * reading goes on after it). The statements of an included file carry the
 * include chain in `loc.includedFrom`.
 */
import { readFileSync } from 'node:fs';
import { EOF, type IToken } from './chevrotain.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import { cString } from '../c-string.js';
import { buildDirectives, type ConfigNode, type Directive, type SourceLoc } from './ast.js';
import { expandGlob, hasGlobMagic } from './glob.js';
import { checkTokens } from './grammar.js';
import { LineIndex } from './lines.js';
import { configLexer, Unterminated } from './tokens.js';

/** The name nginx gives the source of `-g` directives in its messages. */
export const COMMAND_LINE = 'command line';

/** A file read while loading, for `-T`. */
export interface LoadedFile {
  readonly path: string;
  readonly text: string;
}

/**
 * What a configuration was read from: the text of every file (by absolute
 * path) and the files each `include` pattern with wildcards matched. Loading
 * again from it reads exactly what was read the first time, as nginx's
 * workers serve the configuration their master read (a worker of jinx's
 * master gets it over the cluster channel).
 */
export interface ConfigSnapshot {
  readonly files: Readonly<Record<string, string>>;
  readonly globs: Readonly<Record<string, readonly string[]>>;
  /**
   * Files that directives read while the configuration was compiled (by
   * absolute path, latin1 text: `ssl_password_file`), so that a worker does
   * not read them again: nginx's workers inherit what their master read,
   * and a FIFO gives its text to one reader only.
   */
  readonly directiveFiles?: Readonly<Record<string, string>>;
}

/** The whole configuration as read from disk. */
export interface LoadedConfig {
  /** Directives of the main context: `-g` ones first, then the main file's, includes spliced in. */
  readonly nodes: readonly ConfigNode[];
  /** Every file read, once each, in reading order. */
  readonly files: readonly LoadedFile[];
  /** What was read, to load the same again. */
  readonly snapshot: ConfigSnapshot;
}

/** Where to read from. */
export interface LoadOptions {
  /** Absolute path of the main configuration file. */
  readonly confFile: string;
  /** Directory that relative include paths resolve against (nginx's conf_prefix). */
  readonly confPrefix: string;
  /** Directives given with `-g`, parsed before the main file. */
  readonly globalDirectives?: string;
  /** Read from this instead of the disk (files it lacks are read from disk). */
  readonly snapshot?: ConfigSnapshot;
  /**
   * `jinx lint`: read on after an error (a file that cannot be opened or
   * parsed is left out where it was included, and its error stays in the
   * tree), so that every error is found; nginx stops at the first.
   */
  readonly recover?: boolean;
}

const MAX_INCLUDE_DEPTH = 64;

const QUOTE_FOLLOWERS = new Set([' ', '\t', '\r', '\n', ';', '{', ')']);

/** nginx's read buffer (`NGX_CONF_BUFFER`). */
const CONF_BUFFER = 4096;

/** Where nginx's buffer overflows: the offset of the token start it holds, and the quote it is in, if any. */
interface BufferOverflow {
  readonly start: number;
  readonly quote: '"' | "'" | undefined;
}

const isBlank = (ch: string): boolean => ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';

/**
 * Where `ngx_conf_read_token` (`src/core/ngx_conf_file.c`) stops with `too
 * long parameter`: it reads the file into a 4096-byte buffer, and each time
 * the buffer is used up it keeps the bytes from the current token's start
 * (`start`) and reads on; when those kept bytes fill the whole buffer, it
 * stops. `start` moves as nginx moves it: to each blank and to the first
 * byte of a token (past the quote of a quoted one), not past the blank or
 * quote that ends a token until the next byte is read, to the next byte
 * after `;`, `{` or `}`, and not at all inside a comment. So a 4,095-byte
 * word followed by a blank at a buffer boundary is too long, and a longer
 * token is not when the file ends within that buffer. Returns undefined
 * when the buffer never overflows (or reading stops first, on a byte
 * nginx does not expect after a quoted token).
 */
function bufferOverflow(text: string): BufferOverflow | undefined {
  // plain assignments throughout: this runs once per byte, on baseline code under `-t`
  let bufferStart = 0;
  let start = 0;
  let pos = 0;
  let lastSpace = true;
  let comment = false;
  let escaped = false;
  let needSpace = false;
  let variable = false;
  let quote: '"' | "'" | undefined;
  for (;;) {
    if (pos >= bufferStart + CONF_BUFFER && pos < text.length) {
      if (pos - start === CONF_BUFFER) return { start, quote };
      bufferStart = start;
    }
    if (pos >= text.length) return undefined;
    const ch = text[pos++]!;
    if (ch === '\n') comment = false;
    if (comment) continue;
    if (escaped) {
      escaped = false;
      continue;
    }
    if (needSpace) {
      if (isBlank(ch)) {
        lastSpace = true;
        needSpace = false;
        continue;
      }
      if (ch === ';' || ch === '{') {
        // the directive is read: the next call starts at the next byte
        start = pos;
        lastSpace = true;
        needSpace = false;
        continue;
      }
      if (ch !== ')') return undefined;
      lastSpace = true;
      needSpace = false;
    }
    if (lastSpace) {
      start = pos - 1;
      if (isBlank(ch)) continue;
      if (ch === ';' || ch === '{' || ch === '}') {
        start = pos;
        continue;
      }
      if (ch === '#') {
        comment = true;
        continue;
      }
      lastSpace = false;
      if (ch === '\\') escaped = true;
      else if (ch === '"' || ch === "'") {
        start++;
        quote = ch;
      } else if (ch === '$') variable = true;
      continue;
    }
    if (ch === '{' && variable) continue;
    variable = false;
    if (ch === '\\') {
      escaped = true;
      continue;
    }
    if (ch === '$') {
      variable = true;
      continue;
    }
    if (quote !== undefined) {
      if (ch === quote) {
        quote = undefined;
        needSpace = true;
      }
    } else if (isBlank(ch)) {
      lastSpace = true;
    } else if (ch === ';' || ch === '{') {
      start = pos;
      lastSpace = true;
    }
  }
}

/**
 * Whether nginx's buffer can overflow on a text (`bufferOverflow`), from its
 * tokens and comments: `start` moves to the first byte of each token and
 * comment that follows a blank (the lexer skips only blanks: every other
 * byte is in a token or a comment), so it never stays behind for more than
 * the length of a run of tokens and comments with no blank between them,
 * and one blank. Runs shorter than the buffer cannot fill it, and the walk
 * of every byte is skipped.
 */
function mayOverflow(tokens: readonly IToken[], comments: readonly IToken[]): boolean {
  let [ti, ci] = [0, 0];
  let runStart = 0;
  let runEnd = -1;
  while (ti < tokens.length || ci < comments.length) {
    const t = ti >= tokens.length || (ci < comments.length && comments[ci]!.startOffset < tokens[ti]!.startOffset) ? comments[ci++]! : tokens[ti++]!;
    if (t.startOffset > runEnd) runStart = t.startOffset;
    runEnd = t.startOffset + t.image.length;
    if (runEnd - runStart + 1 >= CONF_BUFFER) return true;
  }
  return false;
}

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
function lexicalStop(text: string, tokens: IToken[], comments: IToken[], commandLine: boolean, lines: LineIndex, locOf: (line: number) => SourceLoc,
  eofMessage: (inArgs: boolean) => string): LexicalStop | undefined {
  const overflow = commandLine || !mayOverflow(tokens, comments) ? undefined : bufferOverflow(text);
  // tokens and comments are each in reading order: walk both at once
  let [ti, ci] = [0, 0];
  while (ti < tokens.length || ci < comments.length) {
    const isComment = ti >= tokens.length || (ci < comments.length && comments[ci]!.startOffset < tokens[ti]!.startOffset);
    const t = isComment ? comments[ci++]! : tokens[ti++]!;
    // a comment stops reading before the next token
    const index = isComment ? ti : ti - 1;
    const quoted = t.tokenType.name === 'DoubleQuoted' || t.tokenType.name === 'SingleQuoted' || t.tokenType === Unterminated;
    // the lexer tracks where tokens start only: the end of one is its start and its length
    const endOffset = t.startOffset + t.image.length - 1;
    if (overflow && endOffset >= overflow.start) {
      // reading stops at the token (or the blanks before it) that overflowed the buffer
      const message = overflow.quote
        ? `too long parameter, probably missing terminating "${overflow.quote}" character`
        : `too long parameter "${text.slice(overflow.start, overflow.start + 10)}..." started`;
      // nginx names the line `start` was set on (a blank LF counts for the next line)
      return { index, error: new ConfigError('syntax', message, locOf(lines.lineAt(overflow.start + 1))) };
    }
    if (t.tokenType === Unterminated) return { index, error: new ConfigError('syntax', eofMessage(true), locOf(lines.lineAt(text.length))) };
    if (quoted) {
      const next = text[endOffset + 1];
      if (next !== undefined && !QUOTE_FOLLOWERS.has(next)) {
        const endLine = lines.lineAt(endOffset);
        return { index: index + 1, error: new ConfigError('syntax', `unexpected "${next}"`, locOf(endLine)) };
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
 * becomes a `SyntaxErrorNode` at the end of the innermost block open where
 * reading stopped, after what was read completely before it (the statement
 * being read is dropped), so that errors come in the order nginx finds them.
 */
export function parseConfigText(file: string, text: string): ConfigNode[] {
  const commandLine = file === COMMAND_LINE;
  const lexed = configLexer().tokenize(text);
  const tokens = lexed.tokens;
  const lines = new LineIndex(text);
  const locOf = (line: number): SourceLoc => ({ file, line: commandLine ? 0 : line });
  const eofMessage = (inArgs: boolean): string => {
    if (commandLine) return 'unexpected end of parameter, expecting ";"';
    return inArgs ? 'unexpected end of file, expecting ";" or "}"' : 'unexpected end of file, expecting "}"';
  };
  const lexical = lexicalStop(text, tokens, lexed.groups['comments'] ?? [], commandLine, lines, locOf, eofMessage);
  let stopAt = lexical?.index ?? tokens.length;
  let stopError = lexical?.error;
  const head = tokens.slice(0, stopAt);
  const grammarError = checkTokens(head);
  if (grammarError) {
    const tok = grammarError.token;
    if (tok.tokenType === EOF) {
      // the grammar only fails at the end inside a statement's arguments
      stopError ??= new ConfigError('syntax', eofMessage(true), locOf(lines.lineAt(text.length)));
    } else {
      stopAt = head.indexOf(tok);
      stopError = new ConfigError('syntax', `unexpected "${tok.image[0]}"`, locOf(lines.lineAt(tok.startOffset)));
    }
  }
  const built = buildDirectives(file, tokens.slice(0, stopAt), commandLine ? undefined : (offset) => lines.lineAt(offset));
  if (built.strayClose !== undefined) {
    const tok = tokens[built.strayClose]!;
    stopError = new ConfigError('syntax', 'unexpected "}"', locOf(lines.lineAt(tok.startOffset)));
  } else if (!stopError && built.openBlocks > 0) {
    stopError = new ConfigError('syntax', eofMessage(false), locOf(lines.lineAt(text.length)));
  }
  if (stopError) built.innermost.push({ kind: 'error', error: stopError });
  return built.nodes;
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
  const globs: Record<string, readonly string[]> = {};
  const read = (path: string, includedFrom: SourceLoc | undefined): string => {
    let text: string;
    try {
      text = opts.snapshot?.files[path] ?? readFileSync(Buffer.from(path, 'latin1'), 'latin1');
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

  // a file included again (a file that includes itself, up to the nesting limit) is parsed once
  const parsed = new Map<string, { readonly text: string; readonly nodes: ConfigNode[] }>();
  const parse = (path: string, text: string): ConfigNode[] => {
    const known = parsed.get(path);
    if (known?.text === text) return known.nodes;
    const nodes = parseConfigText(path, text);
    parsed.set(path, { text, nodes });
    return nodes;
  };

  /**
   * Splices included files into `nodes`, at any block depth, with an explicit
   * stack: a frame either copies a statement list (a block's statements go
   * into a new list, filled when its frame runs) or reads the files of one
   * `include` in turn, each file's statements going where the `include` was.
   * Reading stops at the first error, as nginx's does: nothing after it is
   * read (a file that includes itself twice is not read 2^64 times).
   */
  type Frame =
    | {
      readonly kind: 'list'; readonly nodes: readonly ConfigNode[]; i: number; readonly out: ConfigNode[]; readonly depth: number;
      /** The `include` that spliced these statements in (its place with its own chain); undefined in the main file. */
      readonly from: SourceLoc | undefined;
    }
    | { readonly kind: 'include'; readonly node: Directive; readonly paths: readonly string[]; k: number; readonly out: ConfigNode[]; readonly depth: number };
  /** A statement of an included file with the include chain in its place (a copy: a file included twice is parsed once). */
  const placed = (node: ConfigNode, from: SourceLoc | undefined): ConfigNode => {
    if (!from) return node;
    if (node.kind === 'error') {
      const e = node.error;
      return e.loc ? { kind: 'error', error: new ConfigError(e.code, e.text, { ...e.loc, includedFrom: from }, { level: e.level, phase: e.phase }) } : node;
    }
    return { ...node, loc: { ...node.loc, includedFrom: from } };
  };
  const expand = (top: readonly ConfigNode[], depth: number): ConfigNode[] => {
    const result: ConfigNode[] = [];
    const stack: Frame[] = [{ kind: 'list', nodes: top, i: 0, out: result, depth, from: undefined }];
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      if (frame.kind === 'include') {
        if (frame.k >= frame.paths.length) {
          stack.pop();
          continue;
        }
        const path = frame.paths[frame.k++]!;
        let text: string;
        try {
          text = read(path, frame.node.loc);
        } catch (err) {
          frame.out.push({ kind: 'error', error: err as ConfigError });
          if (opts.recover && err instanceof ConfigError) continue;
          return result;
        }
        stack.push({ kind: 'list', nodes: parse(path, text), i: 0, out: frame.out, depth: frame.depth + 1, from: frame.node.loc });
        continue;
      }
      if (frame.i >= frame.nodes.length) {
        stack.pop();
        continue;
      }
      const node = placed(frame.nodes[frame.i++]!, frame.from);
      if (node.kind === 'error') {
        frame.out.push(node);
        if (opts.recover) continue;
        return result;
      } else if (node.name === 'include' && node.args.length === 1 && node.block === null) {
        const arg = node.args[0]!;
        // the path nginx opens (and names) ends at a NUL byte
        const pattern = cString(arg.startsWith('/') ? arg : opts.confPrefix + arg);
        if (frame.depth >= MAX_INCLUDE_DEPTH) {
          const text = `include nesting deeper than ${MAX_INCLUDE_DEPTH} files ("${pattern}")`;
          // even when recovering: a file that includes itself twice would be read 2^64 times
          frame.out.push({ kind: 'error', error: new ConfigError('include', text, node.loc) });
          return result;
        }
        const paths = hasGlobMagic(pattern) ? (globs[pattern] = opts.snapshot?.globs[pattern] ?? expandGlob(pattern)) : [pattern];
        stack.push({ kind: 'include', node, paths, k: 0, out: frame.out, depth: frame.depth });
      } else if (node.block) {
        const block: ConfigNode[] = [];
        frame.out.push({ ...node, block });
        stack.push({ kind: 'list', nodes: node.block, i: 0, out: block, depth: frame.depth, from: frame.from });
      } else {
        frame.out.push(node);
      }
    }
    return result;
  };

  const nodes: ConfigNode[] = [];
  if (opts.globalDirectives) nodes.push(...expand(parseConfigText(COMMAND_LINE, opts.globalDirectives), 0));
  const mainText = read(opts.confFile, undefined);
  nodes.push(...expand(parse(opts.confFile, mainText), 0));
  return { nodes, files, snapshot: { files: Object.fromEntries(files.map((f) => [f.path, f.text])), globs } };
}
