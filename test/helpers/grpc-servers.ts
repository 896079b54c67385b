/**
 * Upstreams for `grpc_pass` tests: a real gRPC server (`@grpc/grpc-js`, the
 * pure-JavaScript gRPC of Node.js) with a service of raw-byte messages, and
 * an HTTP/2 server whose answers a test scripts (node's `node:http2`), to
 * send what gRPC servers rarely do (a reset stream, a dropped connection,
 * no answer) and to count connections and see request headers.
 */
import * as grpc from '@grpc/grpc-js';
import http2 from 'node:http2';
import { onCleanup } from './harness.js';

const raw = (b: Buffer): Buffer => b;

/** A method of the test service, its messages passed as bytes. */
function method(path: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return { path, requestStream, responseStream, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw };
}

/**
 * The test service `test.Echo`: `Say` answers `echo:` and the message,
 * with the request's custom metadata (`x-*`) sent back as `seen-x-*`;
 * `Fail` answers NOT_FOUND with a message (gRPC's trailers-only response);
 * `Chat` echoes each message of a stream, then ends.
 */
export const ECHO_SERVICE = {
  say: method('/test.Echo/Say', false, false),
  fail: method('/test.Echo/Fail', false, false),
  chat: method('/test.Echo/Chat', true, true),
} satisfies grpc.ServiceDefinition;

/** Starts the gRPC server of `ECHO_SERVICE` on 127.0.0.1 (TLS with `tls`); closed at cleanup. */
export async function startGrpcServer(tls?: { readonly cert: Buffer; readonly key: Buffer }): Promise<{ readonly port: number }> {
  const server = new grpc.Server();
  server.addService(ECHO_SERVICE, {
    say: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      const seen = new grpc.Metadata();
      for (const [name, value] of Object.entries(call.metadata.getMap())) if (name.startsWith('x-')) seen.set(`seen-${name}`, String(value));
      call.sendMetadata(seen);
      done(null, Buffer.concat([Buffer.from('echo:'), call.request]));
    },
    fail: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) => {
      done({ code: grpc.status.NOT_FOUND, details: 'no such thing' });
    },
    chat: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', (m: Buffer) => call.write(Buffer.concat([Buffer.from('re:'), m])));
      call.on('end', () => call.end());
    },
  });
  const credentials = tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false)
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', credentials, (err, bound) => (err ? reject(err) : resolve(bound)));
  });
  onCleanup(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
  return { port };
}

/** A gRPC client of `ECHO_SERVICE` on `port` (cleartext HTTP/2, as to a `listen … http2` without ssl); closed at cleanup. */
export function echoClient(port: number): grpc.Client & Record<'say' | 'fail' | 'chat', grpc.MethodDefinition<Buffer, Buffer>> {
  const Client = grpc.makeGenericClientConstructor(ECHO_SERVICE, 'Echo');
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  onCleanup(() => client.close());
  return client as never;
}

/** What a unary call ended with: the message or the status, and the response's metadata. */
export interface UnaryResult {
  readonly message: string | undefined;
  readonly code: number;
  readonly details: string;
  readonly metadata: Record<string, string>;
}

/** Calls `Say` or `Fail` with `message` and `metadata`; resolves whatever the call ended with. */
export function callUnary(port: number, name: 'say' | 'fail', message: string, metadata: Record<string, string> = {}): Promise<UnaryResult> {
  const client = echoClient(port) as unknown as Record<string, (req: Buffer, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res?: Buffer) => void) => grpc.ClientUnaryCall>;
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    let headers: Record<string, string> = {};
    const call = client[name]!(Buffer.from(message), md, (err, res) => {
      resolve({ message: res?.toString(), code: err ? err.code : 0, details: err ? err.details : '', metadata: headers });
    });
    call.on('metadata', (m: grpc.Metadata) => {
      headers = Object.fromEntries(Object.entries(m.getMap()).filter(([k]) => k.startsWith('seen-')).map(([k, v]) => [k, String(v)]));
    });
  });
}

/** Sends `messages` on a `Chat` stream; resolves the answers and the status the stream ended with. */
export function callChat(port: number, messages: readonly string[]): Promise<{ readonly answers: string[]; readonly code: number }> {
  const client = echoClient(port) as unknown as Record<string, () => grpc.ClientDuplexStream<Buffer, Buffer>>;
  const call = client.chat!();
  const answers: string[] = [];
  return new Promise((resolve) => {
    call.on('data', (m: Buffer) => answers.push(m.toString()));
    call.on('status', (s: grpc.StatusObject) => resolve({ answers, code: s.code }));
    call.on('error', () => undefined);
    for (const m of messages) call.write(Buffer.from(m));
    call.end();
  });
}

/** Opens a `Chat` stream, sends `message`, and cancels the call once its answer came; resolves the status the client saw. */
export function cancelChat(port: number, message: string): Promise<{ readonly answers: string[]; readonly code: number }> {
  const client = echoClient(port) as unknown as Record<string, () => grpc.ClientDuplexStream<Buffer, Buffer>>;
  const call = client.chat!();
  const answers: string[] = [];
  return new Promise((resolve) => {
    call.on('data', (m: Buffer) => {
      answers.push(m.toString());
      call.cancel();
    });
    call.on('status', (s: grpc.StatusObject) => resolve({ answers, code: s.code }));
    call.on('error', () => undefined);
    call.write(Buffer.from(message));
  });
}

/** A scripted HTTP/2 server: the request headers it saw, and how many connections it accepted. */
export interface ScriptedH2Server {
  readonly port: number;
  readonly requests: http2.IncomingHttpHeaders[];
  connections: number;
}

/** Starts a cleartext HTTP/2 server on 127.0.0.1 answering each stream with `answer`; closed at cleanup. */
export async function startH2Server(answer: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void): Promise<ScriptedH2Server> {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  const seen: ScriptedH2Server = { port: 0, requests: [], connections: 0 };
  server.on('session', (session) => {
    seen.connections++;
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    session.on('error', () => undefined);
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    seen.requests.push(headers);
    answer(stream, headers);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  onCleanup(() => new Promise<void>((resolve) => {
    for (const s of sessions) s.destroy();
    server.close(() => resolve());
  }));
  return Object.assign(seen, { port: (server.address() as { port: number }).port });
}
