/**
 * `mirror` (`ngx_http_mirror_module.c`, `ngx_http_mirror_handler`): in the
 * precontent phase of the main request, one background subrequest per
 * mirror URI, with the request's arguments and method, whose responses are
 * dropped. With `mirror_request_body on` (the default) the client's body is
 * read whole first (`ngx_http_read_client_request_body`; a refusal such as
 * 413 answers the request) and each mirror gets it, as does the request's
 * own handler afterwards; with `off` the mirrors get no body.
 *
 * The client's response goes out without waiting for the mirrors, but the
 * request is over once they are (nginx's background subrequests hold
 * `r->main->count`): its access-log line, and on HTTP/1.x the connection's
 * next request, wait for them.
 */
import { Readable } from 'node:stream';
import type { Exchange, Subrequest } from '../exchange.js';
import { SubrequestTarget } from '../exchange.js';
import { readRequestBody, requestHasBody, type RequestBody } from '../request-body.js';

/** How a subrequest is run through the phases (phases.ts's `runSubrequest`). */
export type SubrequestRunner = (sub: Subrequest) => Promise<void>;

/** The body read for the mirrors, given again as a stream to each reader; `expectsData` as an HTTP/2 stream's request says it. */
function replay(body: RequestBody): Readable {
  const stream = body.kind === 'memory' || body.size === 0
    ? Readable.from(body.kind === 'memory' && body.data.length > 0 ? [body.data] : [])
    : body.file.handle.createReadStream({ start: 0, end: body.size - 1, autoClose: false });
  const size = body.kind === 'memory' ? body.data.length : body.size;
  return Object.assign(stream, { expectsData: size > 0 });
}

/**
 * Starts the mirrors of the main request `ex` (the location has `mirror`),
 * reading its body first with `mirror_request_body on`. Returns the
 * exchange the request goes on with (its body given again when it was
 * read), or the status to answer with when the body was refused (0: the
 * client went away).
 */
export async function startMirrors(ex: Exchange, run: SubrequestRunner): Promise<Exchange | number> {
  const { r, cx } = ex;
  const conf = r.loc.mirror!;
  let body: RequestBody | undefined;
  if (conf.requestBody && ex.body !== undefined && requestHasBody(r, ex.body)) {
    const read = await readRequestBody(ex);
    if ('status' in read) return read.status;
    body = read;
  }
  const runs: Promise<void>[] = [];
  for (const uri of conf.uris) {
    const sr = r.subrequest(uri, r.args, cx.table.variableCount);
    sr.method = r.method;
    sr.background = true;
    runs.push(run({ cx, r: sr, body: body && replay(body), out: new SubrequestTarget() }));
    (r.backgroundRuns ??= []).push(runs[runs.length - 1]!);
  }
  if (!body) return ex;
  if (body.kind === 'file') {
    // the file is read by the mirrors and the request's handler: closed once all of them are over
    const file = body.file;
    const ended = new Promise<void>((resolve) => r.atEnd(resolve));
    void Promise.all([ended, ...runs]).then(() => file.handle.close()).catch(() => undefined);
  }
  return { ...ex, body: replay(body) };
}
