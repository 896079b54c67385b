/**
 * sonic-boom, the fast file writer pino uses, re-exported with its class
 * usable from ESM (the package is CommonJS). Log lines are byte strings
 * (configuration and request text is kept as latin1, one char per byte), so
 * streams are opened in `contentMode: 'buffer'` and written with `writeBytes`.
 */
import sonicBoom from 'sonic-boom';

export const SonicBoom = sonicBoom.SonicBoom;
export type SonicBoom = InstanceType<typeof sonicBoom.SonicBoom>;

/** Writes a byte string as its bytes to a stream opened with `contentMode: 'buffer'`. */
export function writeBytes(stream: SonicBoom, text: string): boolean {
  // sonic-boom's types only declare string writes; buffer mode takes Buffers
  return stream.write(Buffer.from(text, 'latin1') as unknown as string);
}
