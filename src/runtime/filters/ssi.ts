/**
 * The SSI filter (`ngx_http_ssi_filter_module.c`): a response of an
 * `ssi_types` type, with `ssi on`, is scanned for `<!--#command
 * param="value" -->` and each command is carried out in its place:
 * `include` (a subrequest, whose body takes the command's place, or is
 * kept in a variable with `set=`), `echo`, `set`, `config`,
 * `if`/`elif`/`else`/`endif` and `block`/`endblock`. Errors are logged as
 * nginx logs them, and the command's place gets the `errmsg` text (unless
 * `ssi_silent_errors`).
 *
 * Subrequests run while the page goes on being read, as nginx's do; their
 * bodies and the page's own text leave in the page's order (nginx's
 * postpone filter): what comes after a running subrequest waits for it.
 * `wait="yes"`, `set=` and `file=` hold the page until theirs is done.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { compileRegex } from '../../config/regex.js';
import type { SsiConf } from '../../config/route-table.js';
import { logRequest, type RuntimeContext } from '../context.js';
import type { ResponseTarget } from '../exchange.js';
import { HttpRequestState } from '../request.js';
import { escapeHtml, parseUnsafeUri } from '../uri.js';
import type { HeaderFilter, SubrequestRunner } from './types.js';
import { bodyChanged, contentLength, responseContentType, typeListed, type ContentType } from './headers.js';
import { SsiState, type Block } from './ssi-state.js';

/** nginx's limits (`ngx_http_ssi_filter_module.h`). */
const COMMAND_LEN = 32;
const PARAM_LEN = 32;
const MAX_PARAMS = 16;
/** `NGX_HTTP_MAX_SUBREQUESTS`: how deep subrequests may nest. */
const MAX_SUBREQUEST_DEPTH = 50;

/** One parsed command: its name and parameters, in order, as bytes (latin1). */
interface Command {
  readonly name: string;
  readonly params: readonly (readonly [string, string])[];
}

/** What the parser found: text to pass on, a command, a line to log, or the end of a command in error. */
type ParseEvent =
  | { readonly kind: 'text'; readonly data: Buffer }
  | { readonly kind: 'command'; readonly command: Command }
  | { readonly kind: 'log'; readonly message: string }
  | { readonly kind: 'error' };

type State =
  | 'start' | 'tag' | 'comment0' | 'comment1' | 'sharp' | 'precommand' | 'command' | 'preparam' | 'param' | 'preequal'
  | 'prevalue' | 'dquoted' | 'squoted' | 'quotedSymbol' | 'postparam' | 'commentEnd0' | 'commentEnd1' | 'error' | 'errorEnd0'
  | 'errorEnd1';

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0d || c === 0x0a || c === 0x09;
const chr = (c: number): string => String.fromCharCode(c);

/**
 * `ngx_http_ssi_parse`: the state machine, fed chunk by chunk. Bytes that
 * may begin a command (`<`, `<!`, `<!-`, `<!--`) are held until the next
 * byte tells; held bytes at the very end of the body are lost, as in nginx.
 */
class SsiParser {
  private state: State = 'start';
  private held = '';
  private command = '';
  private params: [string, string][] = [];
  private key = '';
  private value = '';
  private savedState: 'dquoted' | 'squoted' = 'dquoted';

  constructor(private readonly valueLength: number) {}

  feed(chunk: Buffer): ParseEvent[] {
    const events: ParseEvent[] = [];
    let copyFrom = this.state === 'start' ? 0 : -1;
    const text = (end: number): void => {
      if (this.held) {
        events.push({ kind: 'text', data: Buffer.from(this.held, 'latin1') });
        this.held = '';
      }
      if (copyFrom !== -1 && end > copyFrom) events.push({ kind: 'text', data: chunk.subarray(copyFrom, end) });
      copyFrom = -1;
    };
    const log = (message: string): void => {
      events.push({ kind: 'log', message });
    };
    for (let p = 0; p < chunk.length; p++) {
      const c = chunk[p]!;
      switch (this.state) {
        case 'start':
          if (c === 0x3c) {
            text(p);
            this.held = '<';
            this.state = 'tag';
          } else if (copyFrom === -1) copyFrom = p;
          break;
        case 'tag':
        case 'comment0':
        case 'comment1':
        case 'sharp': {
          const want = this.state === 'tag' ? 0x21 : this.state === 'sharp' ? 0x23 : 0x2d;
          if (c === want) {
            if (this.state === 'sharp') {
              this.held = '';
              this.state = 'precommand';
            } else {
              this.held += chr(c);
              this.state = this.state === 'tag' ? 'comment0' : this.state === 'comment0' ? 'comment1' : 'sharp';
            }
          } else if (c === 0x3c) {
            text(p);
            this.held = '<';
            this.state = 'tag';
          } else {
            text(p);
            copyFrom = p;
            this.state = 'start';
          }
          break;
        }
        case 'precommand':
          if (!isSpace(c)) {
            this.command = chr(c);
            this.params = [];
            this.state = 'command';
          }
          break;
        case 'command':
          if (isSpace(c)) this.state = 'preparam';
          else if (c === 0x2d) this.state = 'commentEnd0';
          else if (this.command.length === COMMAND_LEN) {
            log(`the "${this.command}${chr(c)}..." SSI command is too long`);
            this.state = 'error';
          } else this.command += chr(c);
          break;
        case 'preparam':
          if (isSpace(c)) break;
          if (c === 0x2d) {
            this.state = 'commentEnd0';
            break;
          }
          this.key = chr(c);
          this.value = '';
          this.state = 'param';
          break;
        case 'param':
          if (isSpace(c)) this.state = 'preequal';
          else if (c === 0x3d) this.state = 'prevalue';
          else if (c === 0x2d) {
            this.state = 'errorEnd0';
            log(`unexpected "-" symbol after "${this.key}" parameter in "${this.command}" SSI command`);
          } else if (this.key.length === PARAM_LEN) {
            this.state = 'error';
            log(`too long "${this.key}${chr(c)}..." parameter in "${this.command}" SSI command`);
          } else this.key += chr(c);
          break;
        case 'preequal':
          if (isSpace(c)) break;
          if (c === 0x3d) {
            this.state = 'prevalue';
            break;
          }
          this.state = c === 0x2d ? 'errorEnd0' : 'error';
          log(`unexpected "${chr(c)}" symbol after "${this.key}" parameter in "${this.command}" SSI command`);
          break;
        case 'prevalue':
          if (isSpace(c)) break;
          if (c === 0x22) this.state = 'dquoted';
          else if (c === 0x27) this.state = 'squoted';
          else {
            this.state = c === 0x2d ? 'errorEnd0' : 'error';
            log(`unexpected "${chr(c)}" symbol before value of "${this.key}" parameter in "${this.command}" SSI command`);
          }
          break;
        case 'dquoted':
        case 'squoted':
          if (c === (this.state === 'dquoted' ? 0x22 : 0x27)) {
            this.params.push([this.key, this.value]);
            this.state = 'postparam';
            break;
          }
          if (c === 0x5c) {
            this.savedState = this.state;
            this.state = 'quotedSymbol';
          }
          this.addValue(c, log);
          break;
        case 'quotedSymbol':
          this.state = this.savedState;
          this.addValue(c, log);
          break;
        case 'postparam':
          if (isSpace(c)) this.state = 'preparam';
          else if (c === 0x2d) this.state = 'commentEnd0';
          else {
            log(`unexpected "${chr(c)}" symbol after "${this.value}" value of "${this.key}" parameter in "${this.command}" SSI command`);
            this.state = 'error';
          }
          break;
        case 'commentEnd0':
          if (c === 0x2d) this.state = 'commentEnd1';
          else {
            log(`unexpected "${chr(c)}" symbol in "${this.command}" SSI command`);
            this.state = 'error';
          }
          break;
        case 'commentEnd1':
          if (c === 0x3e) {
            events.push({ kind: 'command', command: { name: this.command, params: this.params } });
            this.state = 'start';
            copyFrom = p + 1;
          } else {
            log(`unexpected "${chr(c)}" symbol in "${this.command}" SSI command`);
            this.state = 'error';
          }
          break;
        case 'error':
          if (c === 0x2d) this.state = 'errorEnd0';
          break;
        case 'errorEnd0':
          this.state = c === 0x2d ? 'errorEnd1' : 'error';
          break;
        case 'errorEnd1':
          if (c === 0x3e) {
            events.push({ kind: 'error' });
            this.state = 'start';
            copyFrom = p + 1;
          } else this.state = 'error';
          break;
      }
    }
    if (this.state === 'start') text(chunk.length);
    return events;
  }

  /** Adds a byte to the value being read, or logs that it is too long (`ssi_value_length`). */
  private addValue(c: number, log: (message: string) => void): void {
    if (this.value.length === this.valueLength) {
      log(`too long "${this.value}${chr(c)}..." value of "${this.key}" parameter in "${this.command}" SSI command`);
      this.state = 'error';
      return;
    }
    this.value += chr(c);
  }
}

/** A command's parameters by nginx's table: names, and which must be given. */
interface CommandSpec {
  readonly params: readonly string[];
  readonly mandatory: readonly string[];
  /** `NGX_HTTP_SSI_COND_IF` (1) or `…_ELSE` (2): where the command may appear; 0 anywhere. */
  readonly conditional: 0 | 1 | 2;
  /** Carried out even while output is off (`endblock`). */
  readonly block: boolean;
}

const COMMANDS: ReadonlyMap<string, CommandSpec> = new Map([
  ['include', { params: ['virtual', 'file', 'wait', 'set', 'stub'], mandatory: [], conditional: 0, block: false }],
  ['echo', { params: ['var', 'default', 'encoding'], mandatory: ['var'], conditional: 0, block: false }],
  ['config', { params: ['errmsg', 'timefmt'], mandatory: [], conditional: 0, block: false }],
  ['set', { params: ['var', 'value'], mandatory: ['var', 'value'], conditional: 0, block: false }],
  ['if', { params: ['expr'], mandatory: ['expr'], conditional: 0, block: false }],
  ['elif', { params: ['expr'], mandatory: ['expr'], conditional: 1, block: false }],
  ['else', { params: [], mandatory: [], conditional: 1, block: false }],
  ['endif', { params: [], mandatory: [], conditional: 2, block: false }],
  ['block', { params: ['name'], mandatory: ['name'], conditional: 0, block: false }],
  ['endblock', { params: [], mandatory: [], conditional: 0, block: true }],
] satisfies [string, CommandSpec][]);

/** Thrown by a command that failed (nginx's `NGX_HTTP_SSI_ERROR`), after logging. */
class CommandError extends Error {}

/**
 * The page's output in order (nginx's postpone filter): text, and the
 * bodies of subrequests still running, each passed on once everything
 * before it has gone.
 */
class OutputQueue {
  private readonly entries: (Buffer | Slot)[] = [];
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly push: (data: Buffer) => void) {}

  text(data: Buffer): void {
    if (data.length === 0) return;
    if (this.entries.length === 0) this.push(data);
    else this.entries.push(data);
  }

  /** A place for a subrequest's body. */
  slot(): Slot {
    const slot = new Slot(() => this.pump());
    this.entries.push(slot);
    return slot;
  }

  private pump(): void {
    while (this.entries.length > 0) {
      const head = this.entries[0]!;
      if (Buffer.isBuffer(head)) {
        this.push(head);
        this.entries.shift();
        continue;
      }
      for (const data of head.take()) this.push(data);
      if (!head.done) return;
      this.entries.shift();
    }
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** Resolves once every subrequest's body has been passed on. */
  idle(): Promise<void> {
    if (this.entries.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

/** A subrequest's body in the page's output. */
class Slot {
  private chunks: Buffer[] = [];
  done = false;
  private doneWaiters: (() => void)[] = [];

  constructor(private readonly changed: () => void) {}

  write(data: Buffer): void {
    if (this.done || data.length === 0) return;
    this.chunks.push(data);
    this.changed();
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.changed();
    for (const resolve of this.doneWaiters.splice(0)) resolve();
  }

  take(): Buffer[] {
    const out = this.chunks;
    this.chunks = [];
    return out;
  }

  finished(): Promise<void> {
    if (this.done) return Promise.resolve();
    return new Promise((resolve) => this.doneWaiters.push(resolve));
  }
}

/**
 * Where an included subrequest's response goes: the status kept, the body
 * into the page (or, without a slot, kept whole for `set=`); with a stub,
 * an empty response or nginx's page for an error is replaced by the block.
 */
class IncludeTarget implements ResponseTarget {
  started = false;
  readonly headOnly = false;
  readonly bufferedBytes = 0;
  readonly gone = false;
  readonly highWaterMark = 16 * 1024;
  /** The body, for `set=`. */
  readonly body: Buffer[] = [];
  private stubbed = false;
  /** Some body was written (nginx's `r->request_output`). */
  private wrote = false;
  private r: HttpRequestState | undefined;
  private ended = false;
  private endWaiters: (() => void)[] = [];

  /** Bytes a response kept in memory may have (`subrequest_output_buffer_size` of its location). */
  private limitBytes = 0;
  private keptBytes = 0;
  /** The response kept in memory was too big (`ngx_http_postpone_filter_in_memory`); logged through `overflow`. */
  tooBig = false;

  constructor(
    private readonly slot: Slot | undefined,
    private readonly stub: ((sr: HttpRequestState) => Promise<void>) | undefined,
    private readonly overflow?: (sr: HttpRequestState, message: string) => void,
  ) {}

  head(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
    this.started = true;
    this.r = r;
    r.status = status;
    if (this.stub && r.specialResponse) this.stubbed = true;
    if (this.slot) return;
    this.limitBytes = r.loc.subrequestOutputBufferSizeBytes;
    const length = contentLength(headers);
    if (length > this.limitBytes) this.tooBigNow(`too big subrequest response: ${length}`);
  }

  private tooBigNow(message: string): void {
    if (this.tooBig) return;
    this.tooBig = true;
    this.overflow?.(this.r!, message);
  }

  flushHead(): void {
    // nothing is sent before the body
  }

  earlyHints(): void {
    // an included subrequest's early hints are not sent
  }

  write(chunk: Buffer | string): boolean {
    if (this.stubbed || this.ended || chunk.length === 0) return true;
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
    this.wrote = true;
    if (this.slot) this.slot.write(data);
    else if (!this.tooBig) {
      this.keptBytes += data.length;
      if (this.keptBytes > this.limitBytes) this.tooBigNow('too big subrequest response');
      else this.body.push(data);
    }
    return true;
  }

  onDrain(cb: () => void): void {
    queueMicrotask(cb);
  }

  /**
   * Ends the response; with a stub, a response that sent nothing, or
   * nginx's page for an error, gives its place to the block
   * (`ngx_http_ssi_stub_output` runs unless the subrequest had output).
   */
  end(chunk?: Buffer | string): void {
    if (chunk !== undefined) this.write(chunk);
    const r = this.r;
    if (this.stub && r && (this.stubbed || !this.wrote) && !this.ended) {
      this.stubbed = true;
      void this.stub(r).then(() => this.finish(), () => this.finish());
      return;
    }
    this.finish();
  }

  abort(): void {
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.slot?.end();
    for (const resolve of this.endWaiters.splice(0)) resolve();
  }

  /** Resolves when the response has ended. */
  finished(): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  onAbort(): void {
    // a subrequest has no client of its own
  }

  readonly tunnelable = false;

  tunnel(): undefined {
    return undefined;
  }
}

/** `ngx_escape_uri` with `NGX_ESCAPE_HTML`: controls, space, `"`, `#`, `%`, `'`, `<`, `>` and non-ASCII bytes as `%XX`. */
function escapeUrl(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    out += c <= 0x20 || c >= 0x7f || '"#%\'<>'.includes(s[i]!) ? `%${c.toString(16).toUpperCase().padStart(2, '0')}` : s[i];
  }
  return out;
}

const ADD_PREFIX = 1;

/**
 * The SSI body filter of one response: parses what comes and carries out
 * the commands, in order, for request `r`.
 */
class SsiFilter extends Transform {
  private readonly parser: SsiParser;
  private readonly queue: OutputQueue;
  private readonly state: SsiState;
  private readonly main: SsiState;
  /** `ctx->output`: text is passed on (false in a branch not taken, or in a block). */
  private output = true;
  private outputChosen = false;
  /** 0 outside `if`, 1 after `if`/`elif`, 2 after `else`. */
  private conditional: 0 | 1 | 2 = 0;
  /** Inside `block`: text and commands go to the last block. */
  private inBlock = false;
  private encoding: 'entity' | 'url' | 'none' = 'entity';

  constructor(
    private readonly cx: RuntimeContext,
    private readonly subrequest: SubrequestRunner,
    private readonly r: HttpRequestState,
    private readonly conf: SsiConf,
    private readonly contentType: ContentType | undefined,
  ) {
    super();
    this.parser = new SsiParser(conf.valueLengthBytes);
    this.queue = new OutputQueue((data) => this.push(data));
    this.state = r.ssi!;
    this.main = r.main.ssi ?? this.state;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.run(this.parser.feed(chunk)).then(() => done(), done);
  }

  override _flush(done: TransformCallback): void {
    this.queue.idle().then(() => done(), done);
  }

  private async run(events: ParseEvent[]): Promise<void> {
    for (const e of events) {
      if (e.kind === 'text') this.text(e.data);
      else if (e.kind === 'log') this.log(e.message);
      else if (e.kind === 'error') this.failed();
      else {
        try {
          await this.command(e.command);
        } catch (err) {
          if (!(err instanceof CommandError)) throw err;
          this.failed();
        }
      }
    }
  }

  /** Logs at level error, with the action nginx's connection has while the body passes the filters. */
  private log(message: string): void {
    this.logFor(this.r, message);
  }

  /** Logs for `r` (this page's request or a subrequest of it) as `log` does. */
  private logFor(r: HttpRequestState, message: string): void {
    const action = r.action;
    if (r.upstream) r.action = 'sending to client';
    logRequest(this.cx, r, 'error', message);
    r.action = action;
  }

  private fail(message: string): never {
    this.log(message);
    throw new CommandError(message);
  }

  private text(data: Buffer): void {
    if (this.output) this.queue.text(data);
    else if (this.inBlock) this.main.blocks[this.main.blocks.length - 1]?.parts.push(Buffer.from(data));
  }

  /** The `errmsg` text in the command's place, unless `ssi_silent_errors`. */
  private failed(): void {
    if (!this.conf.silentErrors) this.queue.text(Buffer.from(this.state.errmsg, 'latin1'));
  }

  private async command(c: Command): Promise<void> {
    const spec = COMMANDS.get(c.name);
    if (!spec) {
      if (this.output) this.fail(`invalid SSI command: "${c.name}"`);
      return;
    }
    if (!this.output && !spec.block) {
      if (this.inBlock) {
        const params = c.params.map(([k, v]) => ` ${k}="${v}"`).join('');
        this.main.blocks[this.main.blocks.length - 1]?.parts.push(Buffer.from(`<!--#${c.name}${params} -->`, 'latin1'));
        return;
      }
      if (spec.conditional === 0) return;
    }
    if (spec.conditional && (this.conditional === 0 || this.conditional > spec.conditional)) {
      this.fail(`invalid context of SSI command: "${c.name}"`);
    }
    if (c.params.length > MAX_PARAMS) this.fail(`too many SSI command parameters: "${c.name}"`);
    const params = new Map<string, string>();
    for (const [key, value] of c.params) {
      if (!spec.params.includes(key)) this.fail(`invalid parameter name: "${key}" in "${c.name}" SSI command`);
      if (params.has(key)) this.fail(`duplicate "${key}" parameter in "${c.name}" SSI command`);
      params.set(key, value);
    }
    for (const name of spec.mandatory) {
      if (!params.has(name)) this.fail(`mandatory "${name}" parameter is absent in "${c.name}" SSI command`);
    }
    switch (c.name) {
      case 'include': return this.include(params);
      case 'echo': return this.echo(params);
      case 'config':
        if (params.has('timefmt')) this.state.timefmt = params.get('timefmt')!;
        if (params.has('errmsg')) this.state.errmsg = params.get('errmsg')!;
        return;
      case 'set': {
        const value = this.evaluate(params.get('value')!, 0);
        this.main.variables.set(params.get('var')!.toLowerCase(), value);
        return;
      }
      case 'if':
      case 'elif': return this.condition(c.name, params.get('expr')!);
      case 'else':
        this.output = !this.outputChosen;
        this.conditional = 2;
        return;
      case 'endif':
        this.output = true;
        this.outputChosen = false;
        this.conditional = 0;
        return;
      case 'block':
        this.main.blocks.push({ name: params.get('name')!, parts: [] });
        this.output = false;
        this.inBlock = true;
        return;
      default:
        this.output = true;
        this.inBlock = false;
    }
  }

  /** A variable for SSI (`ngx_http_ssi_get_variable`, then `ngx_http_get_variable`); undefined when not found. */
  private variable(name: string): string | undefined {
    const lower = name.toLowerCase();
    if (lower.length === 1 && lower >= '0' && lower <= '9') {
      const n = lower.charCodeAt(0) - 48;
      if (n < this.main.captures.length) return this.main.captures[n];
    }
    const own = this.main.variables.get(lower);
    if (own !== undefined) return own;
    return this.cx.table.variable(lower)?.(this.r);
  }

  /**
   * `ngx_http_ssi_evaluate_string`: variables replaced (`$name`,
   * `${name}`), backslashes dropped before `\`, `'`, `"` and `$`; with
   * `ADD_PREFIX`, a value not starting with `/` gets the directory of the
   * request's URI in front.
   */
  private evaluate(text: string, flags: number): string {
    const prefix = (first: string): string => {
      if (!(flags & ADD_PREFIX) || first.startsWith('/')) return '';
      const slash = this.r.uri.lastIndexOf('/');
      return slash === -1 ? '' : this.r.uri.slice(0, slash + 1);
    };
    const unescape = (s: string, stopAtDollar: boolean): { out: string; end: number } => {
      let out = '';
      let quoted = false;
      let i = 0;
      for (; i < s.length; i++) {
        const ch = s[i]!;
        if (!quoted) {
          if (ch === '\\') {
            quoted = true;
            continue;
          }
          if (ch === '$' && stopAtDollar) break;
        } else {
          quoted = false;
          if (ch !== '\\' && ch !== "'" && ch !== '"' && ch !== '$') out += '\\';
        }
        out += ch;
      }
      return { out, end: i };
    };
    if (!text.includes('$')) return prefix(text) + unescape(text, false).out;
    const parts: string[] = [];
    let i = 0;
    while (i < text.length) {
      if (text[i] !== '$') {
        const { out, end } = unescape(text.slice(i), true);
        parts.push(out);
        i += end;
        continue;
      }
      if (++i === text.length) this.fail(`invalid variable name in "${text}"`);
      let bracket = false;
      if (text[i] === '{') {
        bracket = true;
        if (++i === text.length) this.fail(`invalid variable name in "${text}"`);
      }
      const start = i;
      let end = i;
      for (; i < text.length; i++, end++) {
        const ch = text[i]!;
        if (ch === '}' && bracket) {
          i++;
          bracket = false;
          break;
        }
        if (!/[A-Za-z0-9_]/.test(ch)) break;
      }
      const name = text.slice(start, end);
      if (bracket) this.fail(`the closing bracket in "${name}" variable is missing`);
      if (name === '') this.fail(`invalid variable name in "${text}"`);
      const value = this.variable(name);
      if (value !== undefined) parts.push(value);
    }
    const first = parts.find((p) => p.length > 0);
    return (first === undefined ? '' : prefix(first)) + parts.join('');
  }

  private echo(params: ReadonlyMap<string, string>): void {
    let value = this.variable(params.get('var')!);
    if (value === undefined) value = params.get('default') ?? '(none)';
    if (value === '') return;
    const enc = params.get('encoding');
    if (enc !== undefined) {
      if (enc === 'none' || enc === 'url' || enc === 'entity') this.encoding = enc;
      else this.log(`unknown encoding "${enc}" in the "echo" command`);
    }
    const out = this.encoding === 'url' ? escapeUrl(value) : this.encoding === 'entity' ? escapeHtml(value) : value;
    this.queue.text(Buffer.from(out, 'latin1'));
  }

  /** `ngx_http_ssi_if`, for `if` and `elif`. */
  private condition(name: string, expr: string): void {
    if (name === 'if' && this.conditional) this.fail('the "if" command inside the "if" command');
    if (this.outputChosen) {
      this.output = false;
      return;
    }
    let p = 0;
    let left = '';
    for (; p < expr.length; p++) {
      const ch = expr[p]!;
      if (ch >= 'A' && ch <= 'Z') {
        left += ch.toLowerCase();
        continue;
      }
      if (!/[a-z0-9${}_"']/.test(ch)) break;
      left += ch;
    }
    // nginx lowercases the left operand in place: its messages show it so
    const shown = left + expr.slice(p);
    while (expr[p] === ' ') p++;
    const leftValue = this.evaluate(left, 0);
    let matched: boolean;
    if (p === expr.length) matched = leftValue.length > 0;
    else {
      let negative: boolean;
      if (expr[p] === '=') {
        negative = false;
        p++;
      } else if (expr[p] === '!' && expr[p + 1] === '=') {
        negative = true;
        p += 2;
      } else return this.fail(`invalid expression in "${shown}"`);
      while (expr[p] === ' ') p++;
      let last = expr.length;
      let regex = false;
      if (p < last - 1 && expr[p] === '/') {
        if (expr[last - 1] !== '/') this.fail(`invalid expression in "${shown}"`);
        regex = true;
        last--;
        p++;
      } else if (p < last - 1 && expr[p] === '\\' && expr[p + 1] === '/') p++;
      const right = this.evaluate(expr.slice(p, last), 0);
      const equal = regex ? this.match(right, leftValue) : leftValue === right;
      matched = equal !== negative;
    }
    if (matched) {
      this.output = true;
      this.outputChosen = true;
    } else this.output = false;
    this.conditional = 1;
  }

  /** `ngx_http_ssi_regex_match`: captures and named captures become SSI variables. */
  private match(pattern: string, subject: string): boolean {
    let compiled;
    try {
      compiled = compileRegex(pattern, false);
    } catch (err) {
      return this.fail((err as Error).message);
    }
    const m = compiled.regex.exec(subject);
    if (!m) return false;
    this.main.captures = Array.from(m, (v) => v ?? '');
    for (const [name, value] of Object.entries(m.groups ?? {})) this.main.variables.set(name.toLowerCase(), value ?? '');
    return true;
  }

  /** `ngx_http_ssi_include`. */
  private async include(params: ReadonlyMap<string, string>): Promise<void> {
    let uri = params.get('virtual');
    const file = params.get('file');
    const wait = params.get('wait');
    const set = params.get('set');
    const stub = params.get('stub');
    if (uri !== undefined && file !== undefined) this.fail(`inlcusion may be either virtual="${uri}" or file="${file}"`);
    if (uri === undefined && file === undefined) this.fail('no parameter in "include" SSI command');
    if (set !== undefined && stub !== undefined) this.fail('"set" and "stub" cannot be used together in "include" SSI command');
    let waited = false;
    if (wait !== undefined) {
      if (uri === undefined) this.fail(`"wait" cannot be used with file="${file}"`);
      if (wait.toLowerCase() === 'yes') waited = true;
      else if (wait.toLowerCase() !== 'no') this.fail(`invalid value "${wait}" in the "wait" parameter`);
    }
    if (uri === undefined) {
      uri = file!;
      waited = true;
    }
    const target = parseUnsafeUri(this.evaluate(uri, ADD_PREFIX));
    if ('unsafe' in target) this.fail(`unsafe URI "${target.unsafe}" was detected`);
    let block: Block | undefined;
    if (stub !== undefined) {
      block = this.main.blocks.find((b) => b.name === stub);
      if (!block) this.fail(`"stub"="${stub}" for "include" not found`);
    }
    if (this.depth() >= MAX_SUBREQUEST_DEPTH) this.fail(`subrequests cycle while processing "${target.uri}"`);
    if (set !== undefined) {
      const memory = new IncludeTarget(undefined, undefined, (sr, message) => this.logFor(sr, message));
      const sr = this.r.subrequest(target.uri, target.args, this.cx.table.variableCount);
      await this.subrequest(this.cx, sr, memory, false);
      await memory.finished();
      // nginx gives up the whole response
      if (memory.tooBig) throw Object.assign(new Error('too big subrequest response'), { logged: true });
      // nginx's page for an error is not kept in memory: the variable is then empty
      const value = sr.specialResponse ? '' : Buffer.concat(memory.body).toString('latin1');
      this.main.variables.set(set.toLowerCase(), value);
      return;
    }
    const slot = this.queue.slot();
    const stubOutput = block ? (sr: HttpRequestState) => this.stubOutput(sr, Buffer.concat(block!.parts), slot) : undefined;
    const out = new IncludeTarget(slot, stubOutput);
    const sr = this.r.subrequest(target.uri, target.args, this.cx.table.variableCount);
    const running = this.subrequest(this.cx, sr, out, true);
    if (waited) {
      await running;
      await slot.finished();
    }
  }

  /** How deep this request is among subrequests. */
  private depth(): number {
    let n = 0;
    for (let r = this.r.parent; r; r = r.parent) n++;
    return n;
  }

  /**
   * `ngx_http_ssi_stub_output`: the block in place of the subrequest's
   * response. In place of nginx's page for an error, the block is sent with
   * the page's type, through the SSI filter of the subrequest's location;
   * after an empty response, it passes the SSI filter only if that response
   * did (one of a known zero length did not).
   */
  private async stubOutput(sr: HttpRequestState, stub: Buffer, slot: Slot): Promise<void> {
    const conf = sr.loc.ssi;
    const parsed = sr.specialResponse ? conf.enable && typeListed(conf.types, this.contentType) : sr.ssi !== undefined;
    if (!parsed) {
      slot.write(stub);
      return;
    }
    sr.ssi = new SsiState();
    const filter = new SsiFilter(this.cx, this.subrequest, sr, conf, this.contentType);
    await new Promise<void>((resolve) => {
      filter.on('data', (data: Buffer) => slot.write(data));
      filter.on('end', resolve);
      filter.on('error', resolve);
      filter.end(stub);
    });
  }
}

/**
 * The SSI header filter (`ngx_http_ssi_header_filter`): with `ssi on`, a
 * response of an `ssi_types` type that is not known to be empty is
 * filtered; the client's response loses `Content-Length` and
 * `Accept-Ranges`, and `Last-Modified` and `ETag` unless
 * `ssi_last_modified` (then the ETag is weak).
 */
export const ssiHeaderFilter: HeaderFilter = (f, _status, headers) => {
  const { r, cx } = f;
  const conf = r.loc.ssi;
  if (!conf.enable || contentLength(headers) === 0) return undefined;
  const contentType = f.contentType ?? responseContentType(r, headers);
  if (!typeListed(conf.types, contentType)) return undefined;
  r.ssi = new SsiState();
  if (!r.parent) bodyChanged(headers, conf.lastModified ? 'weak' : 'clear');
  return () => [new SsiFilter(cx, f.subrequest, r, conf, contentType)];
};
