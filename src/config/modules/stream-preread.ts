/**
 * The preread phase of stream servers: `ssl_preread`
 * (`src/stream/ngx_stream_ssl_preread_module.c`), which reads a TLS
 * ClientHello without terminating TLS, and the core's `preread_buffer_size`
 * and `preread_timeout` (`ngx_stream_core_preread_phase`).
 */
import type { ConfChain, DirectiveSpec } from '../spec.js';
import { flagSetter, msecSetter, sizeSetter, slot } from '../spec.js';
import type { Context } from '../flags.js';

const STREAM_ANY: readonly Context[] = ['stream', 'stream_server'];

export const sslPreread = slot('ssl_preread', false);
/** `preread_buffer_size` (bytes; nginx's default 16k). */
export const prereadBufferSize = slot('preread_buffer_size', 16 * 1024);
/** `preread_timeout` (ms; nginx's default 30s). */
export const prereadTimeout = slot('preread_timeout', 30_000);

/** A server's preread phase: on with `ssl_preread on`. */
export interface StreamPrereadConf {
  readonly bufferBytes: number;
  readonly timeoutMs: number;
}

export const streamPrereadDirectives: readonly DirectiveSpec[] = [
  { name: 'ssl_preread', module: 'ngx_stream_ssl_preread_module', contexts: STREAM_ANY, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslPreread) },
  { name: 'preread_buffer_size', module: 'ngx_stream_core_module', contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(prereadBufferSize) },
  { name: 'preread_timeout', module: 'ngx_stream_core_module', contexts: STREAM_ANY, args: ['TAKE1'], effect: 'runtime', set: msecSetter(prereadTimeout) },
];

/** The preread settings of a server with `ssl_preread on`; undefined without. */
export function streamPrereadConf(c: ConfChain): StreamPrereadConf | undefined {
  if (!c.get(sslPreread)) return undefined;
  return { bufferBytes: c.get(prereadBufferSize), timeoutMs: c.get(prereadTimeout) };
}
