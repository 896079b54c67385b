/**
 * nginx's HTTP/1.x parsers (`src/http/ngx_http_parse.c`), byte for byte:
 * the request line (`ngx_http_parse_request_line`), header lines
 * (`ngx_http_parse_header_line`), the request URI's normalization
 * (`ngx_http_parse_complex_uri`) and chunked bodies
 * (`ngx_http_parse_chunked`). They accept exactly what nginx accepts (a bare
 * LF ends a line, as RFC 9112 section 2.2 allows) and refuse what it
 * refuses, with the same result codes, so that the caller answers with
 * nginx's status and log line.
 *
 * The parsers are resumable: each keeps its state between calls, and takes
 * the bytes `buf[pos, last)`; positions they record are offsets into `buf`,
 * moved with `rebase` when the caller copies an incomplete line to a
 * larger buffer (`ngx_http_alloc_large_header_buffer`).
 */

/** What a parse step ended with. */
export const enum ParseResult {
  /** A request line, a header line, or chunk data is ready. */
  Ok,
  /** More bytes are needed. */
  Again,
  /** The empty line after the headers (`NGX_HTTP_PARSE_HEADER_DONE`), or the end of a chunked body (`NGX_DONE`). */
  Done,
  /** `NGX_HTTP_PARSE_INVALID_METHOD`: "client sent invalid method", 400. */
  InvalidMethod,
  /** `NGX_HTTP_PARSE_INVALID_REQUEST`: "client sent invalid request", 400. */
  InvalidRequest,
  /** `NGX_HTTP_PARSE_INVALID_09_METHOD`: "client sent invalid method in HTTP/0.9 request", 400. */
  Invalid09Method,
  /** `NGX_HTTP_PARSE_INVALID_VERSION`: an HTTP major version above 1, 505. */
  InvalidVersion,
  /** `NGX_HTTP_PARSE_INVALID_HEADER`: "client sent invalid header line", 400. */
  InvalidHeader,
  /** An invalid chunked body (`NGX_ERROR` of `ngx_http_parse_chunked`). */
  Invalid,
}

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;

/**
 * nginx's `usual` table: the bytes that need no attention in a URI (not
 * `/ . % ? # +`, controls, space or DEL).
 */
const USUAL = new Uint32Array([
  0x00000000, 0x7fff37d6, 0xffffffff, 0x7fffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
]);
const usual = (ch: number): boolean => (USUAL[ch >> 5]! & (1 << (ch & 0x1f))) !== 0;

const isAlpha = (ch: number): boolean => {
  const c = ch | 0x20;
  return c >= 0x61 && c <= 0x7a;
};
const isDigit = (ch: number): boolean => ch >= 0x30 && ch <= 0x39;

/** Request-line parser states, in `ngx_http_parse_request_line`'s order. */
const enum Rl {
  Start, Method, SpacesBeforeUri, Schema, SchemaSlash, SchemaSlashSlash, SpacesBeforeHost, HostStart, Host, HostEnd,
  HostIpLiteral, Port, AfterSlashInUri, CheckUri, Uri, Http09, HttpH, HttpHT, HttpHTT, HttpHTTP, FirstMajorDigit,
  MajorDigit, FirstMinorDigit, MinorDigit, SpacesAfterDigit, AlmostDone,
}

/**
 * `ngx_http_parse_request_line`: the method, the request target (origin
 * form, absolute form with its host, CONNECT's authority form) and the
 * version. Offsets are -1 when unset.
 */
export class RequestLineParser {
  private state = Rl.Start;
  requestStart = -1;
  /** The last byte of the method. */
  methodEnd = -1;
  uriStart = -1;
  uriEnd = -1;
  argsStart = -1;
  schemaStart = -1;
  schemaEnd = -1;
  hostStart = -1;
  hostEnd = -1;
  uriExt = -1;
  protocolStart = -1;
  requestEnd = -1;
  httpMajor = 0;
  httpMinor = 0;
  /** The method is CONNECT (the target is `host:port`). */
  connect = false;
  /** The URI has `/.`, `//` or `#`: it needs `parseComplexUri`. */
  complexUri = false;
  /** The URI has `%`: it needs decoding. */
  quotedUri = false;
  plusInUri = false;
  /** An absolute target without a path (`http://host?x`): the URI is `/` and the arguments follow. */
  emptyPathInUri = false;

  /** Whether parsing has begun (`r->state != 0`): a line is in progress. */
  get inProgress(): boolean {
    return this.state !== Rl.Start;
  }

  /** `r->http_version`: major * 1000 + minor (9 for HTTP/0.9). */
  get httpVersion(): number {
    return this.httpMajor * 1000 + this.httpMinor;
  }

  /** Moves every recorded offset by `delta` (the line was copied elsewhere). */
  rebase(delta: number): void {
    for (const k of ['requestStart', 'methodEnd', 'uriStart', 'uriEnd', 'argsStart', 'schemaStart', 'schemaEnd', 'hostStart', 'hostEnd',
      'uriExt', 'protocolStart', 'requestEnd'] as const) {
      if (this[k] >= 0) this[k] += delta;
    }
  }

  /**
   * Parses `buf[pos, last)`. Returns the result and the position after the
   * bytes taken (after the line's LF for `Ok`).
   */
  parse(buf: Buffer, pos: number, last: number): { result: ParseResult; pos: number } {
    let state = this.state;
    let p = pos;
    for (; p < last; p++) {
      const ch = buf[p]!;
      switch (state) {
        case Rl.Start:
          this.requestStart = p;
          if (ch === CR || ch === LF) break;
          if ((ch < 0x41 || ch > 0x5a) && ch !== 0x5f && ch !== 0x2d) return this.fail(ParseResult.InvalidMethod, p);
          state = Rl.Method;
          break;
        case Rl.Method:
          if (ch === SP) {
            this.methodEnd = p - 1;
            state = Rl.SpacesBeforeUri;
            if (p - this.requestStart === 7 && buf.toString('latin1', this.requestStart, p) === 'CONNECT') {
              this.connect = true;
              state = Rl.SpacesBeforeHost;
            }
            break;
          }
          if ((ch < 0x41 || ch > 0x5a) && ch !== 0x5f && ch !== 0x2d) return this.fail(ParseResult.InvalidMethod, p);
          break;
        case Rl.SpacesBeforeUri:
          if (ch === 0x2f) {
            this.uriStart = p;
            state = Rl.AfterSlashInUri;
            break;
          }
          if (isAlpha(ch)) {
            this.schemaStart = p;
            state = Rl.Schema;
            break;
          }
          if (ch !== SP) return this.fail(ParseResult.InvalidRequest, p);
          break;
        case Rl.Schema:
          if (isAlpha(ch) || isDigit(ch) || ch === 0x2b || ch === 0x2d || ch === 0x2e) break;
          if (ch !== 0x3a) return this.fail(ParseResult.InvalidRequest, p);
          this.schemaEnd = p;
          state = Rl.SchemaSlash;
          break;
        case Rl.SchemaSlash:
          if (ch !== 0x2f) return this.fail(ParseResult.InvalidRequest, p);
          state = Rl.SchemaSlashSlash;
          break;
        case Rl.SchemaSlashSlash:
          if (ch !== 0x2f) return this.fail(ParseResult.InvalidRequest, p);
          state = Rl.HostStart;
          break;
        case Rl.SpacesBeforeHost:
        case Rl.HostStart:
        case Rl.Host:
        case Rl.HostEnd: {
          if (state === Rl.SpacesBeforeHost && ch === SP) break;
          if (state === Rl.SpacesBeforeHost || state === Rl.HostStart) {
            this.hostStart = p;
            if (ch === 0x5b) {
              state = Rl.HostIpLiteral;
              break;
            }
            state = Rl.Host;
          }
          if (state === Rl.Host && (isAlpha(ch) || isDigit(ch) || ch === 0x2e || ch === 0x2d)) break;
          // sw_host_end
          if (ch === 0x3a) {
            state = Rl.Port;
            break;
          }
          this.hostEnd = p;
          if (this.connect) return this.fail(ParseResult.InvalidRequest, p);
          const next = this.afterHost(ch, p);
          if (next === undefined) return this.fail(ParseResult.InvalidRequest, p);
          state = next;
          break;
        }
        case Rl.HostIpLiteral:
          if (isDigit(ch) || isAlpha(ch)) break;
          switch (ch) {
            case 0x3a: // :
              break;
            case 0x5d: // ]
              state = Rl.HostEnd;
              break;
            case 0x2d: case 0x2e: case 0x5f: case 0x7e: // unreserved
            case 0x21: case 0x24: case 0x26: case 0x27: case 0x28: case 0x29: case 0x2a: case 0x2b: case 0x2c: case 0x3b: case 0x3d: // sub-delims
              break;
            default:
              return this.fail(ParseResult.InvalidRequest, p);
          }
          break;
        case Rl.Port: {
          if (isDigit(ch)) break;
          this.hostEnd = p;
          if (this.connect) {
            if (ch === SP) {
              state = Rl.Http09;
              break;
            }
            return this.fail(ParseResult.InvalidRequest, p);
          }
          const next = this.afterHost(ch, p);
          if (next === undefined) return this.fail(ParseResult.InvalidRequest, p);
          state = next;
          break;
        }
        case Rl.AfterSlashInUri:
          if (usual(ch)) {
            state = Rl.CheckUri;
            break;
          }
          switch (ch) {
            case SP:
              this.uriEnd = p;
              state = Rl.Http09;
              break;
            case CR:
              this.uriEnd = p;
              this.httpMinor = 9;
              state = Rl.AlmostDone;
              break;
            case LF:
              this.uriEnd = p;
              this.httpMinor = 9;
              return this.done(buf, p);
            case 0x2e: // .
            case 0x2f: // /
            case 0x23: // #
              this.complexUri = true;
              state = Rl.Uri;
              break;
            case 0x25: // %
              this.quotedUri = true;
              state = Rl.Uri;
              break;
            case 0x3f: // ?
              this.argsStart = p + 1;
              state = Rl.Uri;
              break;
            case 0x2b: // +
              this.plusInUri = true;
              break;
            default:
              if (ch < 0x20 || ch === 0x7f) return this.fail(ParseResult.InvalidRequest, p);
              state = Rl.CheckUri;
          }
          break;
        case Rl.CheckUri:
          if (usual(ch)) break;
          switch (ch) {
            case 0x2f:
              this.uriExt = -1;
              state = Rl.AfterSlashInUri;
              break;
            case 0x2e:
              this.uriExt = p + 1;
              break;
            case SP:
              this.uriEnd = p;
              state = Rl.Http09;
              break;
            case CR:
              this.uriEnd = p;
              this.httpMinor = 9;
              state = Rl.AlmostDone;
              break;
            case LF:
              this.uriEnd = p;
              this.httpMinor = 9;
              return this.done(buf, p);
            case 0x25:
              this.quotedUri = true;
              state = Rl.Uri;
              break;
            case 0x3f:
              this.argsStart = p + 1;
              state = Rl.Uri;
              break;
            case 0x23:
              this.complexUri = true;
              state = Rl.Uri;
              break;
            case 0x2b:
              this.plusInUri = true;
              break;
            default:
              if (ch < 0x20 || ch === 0x7f) return this.fail(ParseResult.InvalidRequest, p);
          }
          break;
        case Rl.Uri:
          if (usual(ch)) break;
          switch (ch) {
            case SP:
              this.uriEnd = p;
              state = Rl.Http09;
              break;
            case CR:
              this.uriEnd = p;
              this.httpMinor = 9;
              state = Rl.AlmostDone;
              break;
            case LF:
              this.uriEnd = p;
              this.httpMinor = 9;
              return this.done(buf, p);
            case 0x23:
              this.complexUri = true;
              break;
            default:
              if (ch < 0x20 || ch === 0x7f) return this.fail(ParseResult.InvalidRequest, p);
          }
          break;
        case Rl.Http09:
          switch (ch) {
            case SP:
              break;
            case CR:
              this.httpMinor = 9;
              state = Rl.AlmostDone;
              break;
            case LF:
              this.httpMinor = 9;
              return this.done(buf, p);
            case 0x48: // H
              this.protocolStart = p;
              state = Rl.HttpH;
              break;
            default:
              return this.fail(ParseResult.InvalidRequest, p);
          }
          break;
        case Rl.HttpH:
          if (ch !== 0x54) return this.fail(ParseResult.InvalidRequest, p);
          state = Rl.HttpHT;
          break;
        case Rl.HttpHT:
          if (ch !== 0x54) return this.fail(ParseResult.InvalidRequest, p);
          state = Rl.HttpHTT;
          break;
        case Rl.HttpHTT:
          if (ch !== 0x50) return this.fail(ParseResult.InvalidRequest, p);
          state = Rl.HttpHTTP;
          break;
        case Rl.HttpHTTP:
          if (ch !== 0x2f) return this.fail(ParseResult.InvalidRequest, p);
          if (this.connect) {
            // a "/" of the request line stands for the URI of a CONNECT request
            this.uriStart = p;
            this.uriEnd = p + 1;
          }
          state = Rl.FirstMajorDigit;
          break;
        case Rl.FirstMajorDigit:
          if (ch < 0x31 || ch > 0x39) return this.fail(ParseResult.InvalidRequest, p);
          this.httpMajor = ch - 0x30;
          if (this.httpMajor > 1) return this.fail(ParseResult.InvalidVersion, p);
          state = Rl.MajorDigit;
          break;
        case Rl.MajorDigit:
          if (ch === 0x2e) {
            state = Rl.FirstMinorDigit;
            break;
          }
          if (!isDigit(ch)) return this.fail(ParseResult.InvalidRequest, p);
          this.httpMajor = this.httpMajor * 10 + (ch - 0x30);
          if (this.httpMajor > 1) return this.fail(ParseResult.InvalidVersion, p);
          break;
        case Rl.FirstMinorDigit:
          if (!isDigit(ch)) return this.fail(ParseResult.InvalidRequest, p);
          this.httpMinor = ch - 0x30;
          state = Rl.MinorDigit;
          break;
        case Rl.MinorDigit:
          if (ch === CR) {
            state = Rl.AlmostDone;
            break;
          }
          if (ch === LF) return this.done(buf, p);
          if (ch === SP) {
            state = Rl.SpacesAfterDigit;
            break;
          }
          if (!isDigit(ch)) return this.fail(ParseResult.InvalidRequest, p);
          if (this.httpMinor > 99) return this.fail(ParseResult.InvalidRequest, p);
          this.httpMinor = this.httpMinor * 10 + (ch - 0x30);
          break;
        case Rl.SpacesAfterDigit:
          if (ch === SP) break;
          if (ch === CR) {
            state = Rl.AlmostDone;
            break;
          }
          if (ch === LF) return this.done(buf, p);
          return this.fail(ParseResult.InvalidRequest, p);
        case Rl.AlmostDone:
          this.requestEnd = p - 1;
          if (ch === LF) return this.done(buf, p);
          return this.fail(ParseResult.InvalidRequest, p);
      }
    }
    this.state = state;
    return { result: ParseResult.Again, pos: p };
  }

  /** `sw_host_end` and `sw_port` after the host: the state the target continues in, or undefined when invalid. */
  private afterHost(ch: number, p: number): Rl | undefined {
    switch (ch) {
      case 0x2f:
        this.uriStart = p;
        return Rl.AfterSlashInUri;
      case 0x3f:
        this.uriStart = p;
        this.argsStart = p + 1;
        this.emptyPathInUri = true;
        return Rl.Uri;
      case SP:
        // the "/" after the schema stands for the URI
        this.uriStart = this.schemaEnd + 1;
        this.uriEnd = this.schemaEnd + 2;
        return Rl.Http09;
      default:
        return undefined;
    }
  }

  private fail(result: ParseResult, p: number): { result: ParseResult; pos: number } {
    return { result, pos: p };
  }

  private done(buf: Buffer, p: number): { result: ParseResult; pos: number } {
    if (this.requestEnd < 0) this.requestEnd = p;
    this.state = Rl.Start;
    if (this.httpVersion === 9 && buf.toString('latin1', this.requestStart, this.methodEnd + 1) !== 'GET') {
      return { result: ParseResult.Invalid09Method, pos: p + 1 };
    }
    return { result: ParseResult.Ok, pos: p + 1 };
  }
}

/** Header-line parser states, in `ngx_http_parse_header_line`'s order. */
const enum Hl { Start, Name, SpaceBeforeValue, Value, SpaceAfterValue, AlmostDone, HeaderAlmostDone }

/**
 * `ngx_http_parse_header_line` for a client's request headers: one header
 * line per `Ok` (name and value offsets, `invalid` for a name with
 * characters nginx ignores unless `ignore_invalid_headers off`), `Done` at
 * the empty line, `InvalidHeader` for a control character, space or colon
 * where a name starts, a NUL in the value, or a CR not followed by LF.
 */
export class HeaderLineParser {
  private state = Hl.Start;
  nameStart = -1;
  nameEnd = -1;
  valueStart = -1;
  valueEnd = -1;
  /** The name has characters other than letters, digits and `-` (and `_` with `underscores_in_headers on`). */
  invalid = false;

  /** Whether a header line is in progress (`r->state != 0`). */
  get inProgress(): boolean {
    return this.state !== Hl.Start;
  }

  /** Moves every recorded offset by `delta` (the line was copied elsewhere). */
  rebase(delta: number): void {
    for (const k of ['nameStart', 'nameEnd', 'valueStart', 'valueEnd'] as const) if (this[k] >= 0) this[k] += delta;
  }

  /** Parses `buf[pos, last)`; `allowUnderscores` is `underscores_in_headers`. */
  parse(buf: Buffer, pos: number, last: number, allowUnderscores: boolean): { result: ParseResult; pos: number } {
    let state = this.state;
    let p = pos;
    for (; p < last; p++) {
      const ch = buf[p]!;
      switch (state) {
        case Hl.Start:
          this.nameStart = p;
          this.invalid = false;
          if (ch === CR) {
            this.valueEnd = p;
            state = Hl.HeaderAlmostDone;
            break;
          }
          if (ch === LF) {
            this.valueEnd = p;
            return this.headerDone(p);
          }
          state = Hl.Name;
          if (isAlpha(ch) || isDigit(ch) || ch === 0x2d) break;
          if (ch === 0x5f) {
            if (!allowUnderscores) this.invalid = true;
            break;
          }
          if (ch <= 0x20 || ch === 0x7f || ch === 0x3a) {
            this.valueEnd = p;
            return { result: ParseResult.InvalidHeader, pos: p };
          }
          this.invalid = true;
          break;
        case Hl.Name:
          if (isAlpha(ch) || isDigit(ch) || ch === 0x2d) break;
          if (ch === 0x5f) {
            if (!allowUnderscores) this.invalid = true;
            break;
          }
          if (ch === 0x3a) {
            this.nameEnd = p;
            state = Hl.SpaceBeforeValue;
            break;
          }
          if (ch === CR) {
            this.nameEnd = this.valueStart = this.valueEnd = p;
            state = Hl.AlmostDone;
            break;
          }
          if (ch === LF) {
            this.nameEnd = this.valueStart = this.valueEnd = p;
            return this.lineDone(p);
          }
          if (ch <= 0x20 || ch === 0x7f) {
            this.valueEnd = p;
            return { result: ParseResult.InvalidHeader, pos: p };
          }
          this.invalid = true;
          break;
        case Hl.SpaceBeforeValue:
          // nginx 1.30 skips spaces only: a tab is part of the value
          switch (ch) {
            case SP:
              break;
            case CR:
              this.valueStart = this.valueEnd = p;
              state = Hl.AlmostDone;
              break;
            case LF:
              this.valueStart = this.valueEnd = p;
              return this.lineDone(p);
            case 0:
              this.valueEnd = p;
              return { result: ParseResult.InvalidHeader, pos: p };
            default:
              this.valueStart = p;
              state = Hl.Value;
          }
          break;
        case Hl.Value:
          switch (ch) {
            case SP:
              this.valueEnd = p;
              state = Hl.SpaceAfterValue;
              break;
            case CR:
              this.valueEnd = p;
              state = Hl.AlmostDone;
              break;
            case LF:
              this.valueEnd = p;
              return this.lineDone(p);
            case 0:
              this.valueEnd = p;
              return { result: ParseResult.InvalidHeader, pos: p };
          }
          break;
        case Hl.SpaceAfterValue:
          switch (ch) {
            case SP:
              break;
            case CR:
              state = Hl.AlmostDone;
              break;
            case LF:
              return this.lineDone(p);
            case 0:
              this.valueEnd = p;
              return { result: ParseResult.InvalidHeader, pos: p };
            default:
              state = Hl.Value;
          }
          break;
        case Hl.AlmostDone:
          // the line is reported up to its CR (`header_end` stays there)
          if (ch === LF) return this.lineDone(p);
          if (ch === CR) break;
          return { result: ParseResult.InvalidHeader, pos: p };
        case Hl.HeaderAlmostDone:
          if (ch === LF) return this.headerDone(p);
          return { result: ParseResult.InvalidHeader, pos: p };
      }
    }
    this.state = state;
    return { result: ParseResult.Again, pos: p };
  }

  private lineDone(p: number): { result: ParseResult; pos: number } {
    this.state = Hl.Start;
    return { result: ParseResult.Ok, pos: p + 1 };
  }

  private headerDone(p: number): { result: ParseResult; pos: number } {
    this.state = Hl.Start;
    return { result: ParseResult.Done, pos: p + 1 };
  }
}

/** Complex-URI states of `ngx_http_parse_complex_uri`. */
const enum Cu { Usual, Slash, Dot, DotDot, Quoted, QuotedSecond }

/**
 * `ngx_http_parse_complex_uri`: decodes `%XX`, resolves `.` and `..`
 * segments, merges slashes (`merge_slashes`), drops a `#` fragment, and
 * finds the arguments after the first literal `?`. `raw` is the request
 * target's path and query as bytes in a latin1 string; `emptyPath` puts the
 * `/` of an absolute target without a path in front. Returns the URI (a
 * latin1 string of bytes) and the arguments (undefined without `?`), or
 * undefined for an invalid URI (a bad escape, an escaped NUL, `..` above
 * the root): nginx's 400 "client sent invalid request".
 */
export function parseComplexUri(raw: string, mergeSlashes: boolean, emptyPath = false): { uri: string; args: string | undefined } | undefined {
  const out: number[] = [];
  if (emptyPath) out.push(0x2f);
  let state = Cu.Usual;
  let quotedState = Cu.Usual;
  let decoded = 0;
  let argsStart = -1;
  const end = raw.length;
  // nginx loads one byte past the URI (a space or LF of the request line) without taking it
  const at = (i: number): number => (i < end ? raw.charCodeAt(i) & 0xff : 0x0a);
  let p = 0;
  let ch = at(p++);
  /** Goes back over the last segment for `..` (`u -= 4` then to the previous `/`); false above the root. */
  const upOneSegment = (): boolean => {
    let u = out.length - 4;
    for (;;) {
      if (u < 0) return false;
      if (out[u] === 0x2f) {
        out.length = u + 1;
        return true;
      }
      u--;
    }
  };
  const finishArgs = (): { uri: string; args: string | undefined } => {
    let argsEnd = end;
    const hash = raw.indexOf('#', argsStart);
    if (hash !== -1) argsEnd = hash;
    return { uri: bytesToString(out), args: raw.slice(argsStart, argsEnd) };
  };
  const done = (): { uri: string; args: string | undefined } => ({ uri: bytesToString(out), args: undefined });
  while (p <= end) {
    switch (state) {
      case Cu.Usual:
        if (usual(ch)) {
          out.push(ch);
          ch = at(p++);
          break;
        }
        switch (ch) {
          case 0x2f:
            state = Cu.Slash;
            out.push(ch);
            break;
          case 0x25:
            quotedState = state;
            state = Cu.Quoted;
            break;
          case 0x3f:
            argsStart = p;
            return finishArgs();
          case 0x23:
            return done();
          default:
            out.push(ch);
        }
        ch = at(p++);
        break;
      case Cu.Slash:
        if (usual(ch)) {
          state = Cu.Usual;
          out.push(ch);
          ch = at(p++);
          break;
        }
        switch (ch) {
          case 0x2f:
            if (!mergeSlashes) out.push(ch);
            break;
          case 0x2e:
            state = Cu.Dot;
            out.push(ch);
            break;
          case 0x25:
            quotedState = state;
            state = Cu.Quoted;
            break;
          case 0x3f:
            argsStart = p;
            return finishArgs();
          case 0x23:
            return done();
          default:
            state = Cu.Usual;
            out.push(ch);
        }
        ch = at(p++);
        break;
      case Cu.Dot:
        if (usual(ch)) {
          state = Cu.Usual;
          out.push(ch);
          ch = at(p++);
          break;
        }
        switch (ch) {
          case 0x2f:
            state = Cu.Slash;
            out.length--;
            break;
          case 0x2e:
            state = Cu.DotDot;
            out.push(ch);
            break;
          case 0x25:
            quotedState = state;
            state = Cu.Quoted;
            break;
          case 0x3f:
            out.length--;
            argsStart = p;
            return finishArgs();
          case 0x23:
            out.length--;
            return done();
          default:
            state = Cu.Usual;
            out.push(ch);
        }
        ch = at(p++);
        break;
      case Cu.DotDot:
        if (usual(ch)) {
          state = Cu.Usual;
          out.push(ch);
          ch = at(p++);
          break;
        }
        switch (ch) {
          case 0x2f:
          case 0x3f:
          case 0x23:
            if (!upOneSegment()) return undefined;
            if (ch === 0x3f) {
              argsStart = p;
              return finishArgs();
            }
            if (ch === 0x23) return done();
            state = Cu.Slash;
            break;
          case 0x25:
            quotedState = state;
            state = Cu.Quoted;
            break;
          default:
            state = Cu.Usual;
            out.push(ch);
        }
        ch = at(p++);
        break;
      case Cu.Quoted:
        if (isDigit(ch)) {
          decoded = ch - 0x30;
          state = Cu.QuotedSecond;
          ch = at(p++);
          break;
        }
        if ((ch | 0x20) >= 0x61 && (ch | 0x20) <= 0x66) {
          decoded = (ch | 0x20) - 0x61 + 10;
          state = Cu.QuotedSecond;
          ch = at(p++);
          break;
        }
        return undefined;
      case Cu.QuotedSecond:
        if (isDigit(ch)) {
          ch = (decoded << 4) + (ch - 0x30);
          if (ch === 0x25 || ch === 0x23) {
            state = Cu.Usual;
            out.push(ch);
            ch = at(p++);
            break;
          }
          if (ch === 0) return undefined;
          state = quotedState;
          break;
        }
        if ((ch | 0x20) >= 0x61 && (ch | 0x20) <= 0x66) {
          ch = (decoded << 4) + ((ch | 0x20) - 0x61) + 10;
          if (ch === 0x3f) {
            state = Cu.Usual;
            out.push(ch);
            ch = at(p++);
            break;
          }
          state = quotedState;
          break;
        }
        return undefined;
    }
  }
  if (state === Cu.Quoted || state === Cu.QuotedSecond) return undefined;
  if (state === Cu.Dot) out.length--;
  else if (state === Cu.DotDot && !upOneSegment()) return undefined;
  return done();
}

function bytesToString(bytes: readonly number[]): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 8192) s += String.fromCharCode(...bytes.slice(i, i + 8192));
  return s;
}

/** Chunked-body states of `ngx_http_parse_chunked`. */
const enum Ch {
  ChunkStart, ChunkSize, ChunkExtension, ChunkExtensionAlmostDone, ChunkData, AfterData, AfterDataAlmostDone,
  LastChunkExtension, LastChunkExtensionAlmostDone, Trailer, TrailerAlmostDone, TrailerHeader, TrailerHeaderAlmostDone,
}

/** `NGX_MAX_OFF_T_VALUE`, the largest chunk size nginx takes (as a double: sizes past 2^53 are never reached). */
const MAX_OFF_T = 9_223_372_036_854_775_807;

/**
 * `ngx_http_parse_chunked`: chunk sizes (hexadecimal, extensions after `;`,
 * space or tab ignored), CRLF after the size and the data (a bare LF is
 * invalid here), the last chunk and trailer lines (skipped). `parse` stops
 * with `Ok` where data begins: `size` bytes of it follow, which the caller
 * takes (`take`) before parsing on.
 */
export class ChunkedParser {
  private state = Ch.ChunkStart;
  /** Data bytes of the current chunk not taken yet. */
  size = 0;

  /** Whether the body is complete. */
  get done(): boolean {
    return this.finished;
  }

  private finished = false;

  /** Takes `n` bytes of chunk data (at most `size`). */
  take(n: number): void {
    this.size -= n;
  }

  /**
   * Parses `buf[pos, last)` up to the next chunk data (`Ok`, with `size`
   * bytes of data at the returned position), the end of the body (`Done`),
   * the end of the bytes (`Again`), or an error (`Invalid`).
   */
  parse(buf: Buffer, pos: number, last: number): { result: ParseResult; pos: number } {
    let state = this.state;
    if (state === Ch.ChunkData && this.size === 0) state = Ch.AfterData;
    let p = pos;
    for (; p < last; p++) {
      const ch = buf[p]!;
      switch (state) {
        case Ch.ChunkStart:
          if (isDigit(ch)) {
            state = Ch.ChunkSize;
            this.size = ch - 0x30;
            break;
          }
          if ((ch | 0x20) >= 0x61 && (ch | 0x20) <= 0x66) {
            state = Ch.ChunkSize;
            this.size = (ch | 0x20) - 0x61 + 10;
            break;
          }
          return { result: ParseResult.Invalid, pos: p };
        case Ch.ChunkSize:
          if (this.size > MAX_OFF_T / 16) return { result: ParseResult.Invalid, pos: p };
          if (isDigit(ch)) {
            this.size = this.size * 16 + (ch - 0x30);
            break;
          }
          if ((ch | 0x20) >= 0x61 && (ch | 0x20) <= 0x66) {
            this.size = this.size * 16 + ((ch | 0x20) - 0x61 + 10);
            break;
          }
          if (ch === CR) state = this.size === 0 ? Ch.LastChunkExtensionAlmostDone : Ch.ChunkExtensionAlmostDone;
          else if (ch === 0x3b || ch === SP || ch === 0x09) state = this.size === 0 ? Ch.LastChunkExtension : Ch.ChunkExtension;
          else return { result: ParseResult.Invalid, pos: p };
          break;
        case Ch.ChunkExtension:
          if (ch === CR) state = Ch.ChunkExtensionAlmostDone;
          else if (ch === LF) return { result: ParseResult.Invalid, pos: p };
          break;
        case Ch.ChunkExtensionAlmostDone:
          if (ch !== LF) return { result: ParseResult.Invalid, pos: p };
          state = Ch.ChunkData;
          break;
        case Ch.ChunkData:
          this.state = state;
          return { result: ParseResult.Ok, pos: p };
        case Ch.AfterData:
          if (ch !== CR) return { result: ParseResult.Invalid, pos: p };
          state = Ch.AfterDataAlmostDone;
          break;
        case Ch.AfterDataAlmostDone:
          if (ch !== LF) return { result: ParseResult.Invalid, pos: p };
          state = Ch.ChunkStart;
          break;
        case Ch.LastChunkExtension:
          if (ch === CR) state = Ch.LastChunkExtensionAlmostDone;
          else if (ch === LF) return { result: ParseResult.Invalid, pos: p };
          break;
        case Ch.LastChunkExtensionAlmostDone:
          if (ch !== LF) return { result: ParseResult.Invalid, pos: p };
          state = Ch.Trailer;
          break;
        case Ch.Trailer:
          if (ch === CR) state = Ch.TrailerAlmostDone;
          else if (ch === LF) return { result: ParseResult.Invalid, pos: p };
          else state = Ch.TrailerHeader;
          break;
        case Ch.TrailerAlmostDone:
          if (ch !== LF) return { result: ParseResult.Invalid, pos: p };
          this.state = Ch.ChunkStart;
          this.finished = true;
          return { result: ParseResult.Done, pos: p + 1 };
        case Ch.TrailerHeader:
          if (ch === CR) state = Ch.TrailerHeaderAlmostDone;
          else if (ch === LF) return { result: ParseResult.Invalid, pos: p };
          break;
        case Ch.TrailerHeaderAlmostDone:
          if (ch !== LF) return { result: ParseResult.Invalid, pos: p };
          state = Ch.Trailer;
          break;
      }
    }
    this.state = state;
    return { result: ParseResult.Again, pos: p };
  }
}
