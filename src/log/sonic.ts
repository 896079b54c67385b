/**
 * sonic-boom, the fast file writer pino uses, re-exported with its class
 * usable from ESM (the package is CommonJS).
 */
import sonicBoom from 'sonic-boom';

export const SonicBoom = sonicBoom.SonicBoom;
export type SonicBoom = InstanceType<typeof sonicBoom.SonicBoom>;
