/**
 * One worker of the config fuzzer (`config-fuzz.ts`): owns one copy of the
 * seed trees, and for each case writes the mutated file in place, runs the
 * command line's `-t` check in-process (`checkConfiguration`, what `jinx -t`
 * runs), optionally the reference `nginx -t` on the same tree, then puts the
 * original file back. Paths under its tree are reported as `@ROOT@`, so that
 * both workers' results read alike.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { checkConfiguration } from '../../src/cli/main.js';

/** A case as the driver sends it; texts are latin1 strings with `@ROOT@` for the tree's root. */
export interface WorkerCase {
  readonly id: number;
  /** The file to replace, the main file and the prefix, each with `@ROOT@`. */
  readonly file: string;
  readonly conf: string;
  readonly prefix: string;
  readonly text: string;
  readonly original: string;
  /** Also run the reference nginx on the case. */
  readonly oracle: boolean;
}

/** What one side said: exit status (null: killed by a signal) and its lines. */
export interface SideResult {
  readonly status: number | null;
  readonly signal: string | null;
  readonly lines: readonly string[];
}

/** A worker's answer for one case. */
export interface WorkerResult {
  readonly id: number;
  readonly jinx: SideResult;
  /** Stack of an error that was not a configuration error (a fault in jinx). */
  readonly internal: string | undefined;
  readonly nginx: SideResult | undefined;
  readonly ms: number;
}

// when node's test runner runs this file on its own (it runs every file under dist/test/), there is nothing to do
const { root, nginx } = (workerData ?? { root: '', nginx: undefined }) as { root: string; nginx: string | undefined };
const at = (text: string): string => text.split('@ROOT@').join(root);
const hide = (text: string): string => text.split(root).join('@ROOT@');

/** nginx's log line `2026/01/02 03:04:05 [emerg] 1#1: TEXT` as `[emerg] TEXT`. */
function normalize(text: string): string[] {
  return text.split('\n').filter((l) => l.length > 0)
    .map((l) => hide(l.replace(/^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d (\[\w+\]) \d+#\d+: /, '$1 ')));
}

async function run(c: WorkerCase): Promise<WorkerResult> {
  const started = Date.now();
  const file = at(c.file);
  writeFileSync(file, Buffer.from(at(c.text), 'latin1'));
  const lines: string[] = [];
  let internal: string | undefined;
  let result: Awaited<ReturnType<typeof checkConfiguration>>;
  try {
    result = await checkConfiguration({ prefix: at(c.prefix), confFile: at(c.conf) }, { q: true }, {
      log: { write: (level, message) => lines.push(hide(`[${level}] ${message}`)) },
      note: (line) => lines.push(hide(line)),
      internalError: (err) => {
        internal ??= hide(String((err as Error)?.stack ?? err));
      },
    });
  } catch (err) {
    // an exception out of the check itself: `jinx -t` would end with node's stack trace
    internal ??= hide(String((err as Error)?.stack ?? err));
    result = { status: 1, compiled: undefined };
  }
  let nginxSide: SideResult | undefined;
  if (c.oracle && nginx) {
    const r = spawnSync(nginx, ['-t', '-q', '-e', 'stderr', '-p', at(c.prefix), '-c', at(c.conf)], {
      encoding: 'latin1', timeout: 10_000, killSignal: 'SIGKILL',
    });
    nginxSide = { status: r.status, signal: r.signal, lines: [...normalize(r.stderr ?? ''), ...normalize(r.stdout ?? '')] };
  }
  writeFileSync(file, Buffer.from(at(c.original), 'latin1'));
  return { id: c.id, jinx: { status: result.status, signal: null, lines }, internal, nginx: nginxSide, ms: Date.now() - started };
}

parentPort?.on('message', (c: WorkerCase) => {
  void run(c).then((r) => parentPort!.postMessage(r));
});
