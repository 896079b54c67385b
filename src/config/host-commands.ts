/**
 * Whether the system has a command jinx runs to carry out a process
 * directive node has no call for (util-linux's `prlimit` for
 * `worker_rlimit_*`, `taskset` for `worker_cpu_affinity`): looked up in
 * `PATH` as `execvp` would, once per process.
 */
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';

const known = new Map<string, boolean>();

/** Whether an executable `name` is found in a directory of `PATH`. */
export function hasCommand(name: string): boolean {
  let found = known.get(name);
  if (found === undefined) {
    found = (process.env.PATH ?? '/usr/bin:/bin').split(':').some((dir) => {
      try {
        accessSync(join(dir || '.', name), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
    known.set(name, found);
  }
  return found;
}
