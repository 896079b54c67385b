/**
 * Temporary files for request bodies and upstream responses, named as nginx
 * names them (`ngx_create_temp_file`, `ngx_create_hashed_filename` in
 * `src/core/ngx_file.c`): a ten-digit number from one process-wide counter,
 * under level directories taken from the end of the number
 * (`proxy_temp_path /tmp/proxy 1 2` → `/tmp/proxy/1/00/0000000001`). The file
 * is unlinked as soon as it is open, as nginx does for non-persistent temp
 * files (`ngx_open_tempfile`), so nothing is left behind whatever happens to
 * the request; only `client_body_in_file_only` asks for a persistent one.
 */
import { mkdir, open, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

/** A temp path directive: base directory and level lengths (`PATH [l1 [l2 [l3]]]`). */
export interface TempPath {
  readonly dir: string;
  readonly levels: readonly number[];
}

/** An open, already unlinked temporary file. */
export interface TempFile {
  readonly path: string;
  readonly handle: FileHandle;
}

/**
 * The process-wide temp-file counter (nginx's `ngx_temp_number`), kept across
 * reloads. nginx's workers share one counter in shared memory
 * (`ngx_event_module_init`); each of jinx's workers counts in steps of
 * `worker_processes` from its own place (1, 3, 5 … and 2, 4, 6 … with two),
 * as `ConnectionNumbers` does, so that no two workers of a generation name
 * a temp file or a multipart boundary alike.
 */
export class TempFiles {
  private nextNumber: number;

  /** @param first the first number; @param step the distance between two numbers */
  constructor(first = 1, private readonly step = 1) {
    this.nextNumber = first;
  }

  /** The path for number `n` under `tp`. */
  static pathFor(tp: TempPath, n: number): string {
    const name = String(n).padStart(10, '0');
    let end = name.length;
    const dirs: string[] = [];
    for (const level of tp.levels) {
      dirs.push(name.slice(end - level, end));
      end -= level;
    }
    return [tp.dir, ...dirs, name].join('/');
  }

  /** Takes the next number (`ngx_next_temp_number`, also the boundary of a multipart response). */
  next(): number {
    const n = this.nextNumber;
    this.nextNumber += this.step;
    return n;
  }

  /** Takes the next number and returns its path under `tp` (to log it before the file exists). */
  reserve(tp: TempPath): string {
    return TempFiles.pathFor(tp, this.next());
  }

  /**
   * Creates a temp file at a reserved path (or, if that name is taken, at the
   * next free one), making level directories as needed; unless `persistent`,
   * its name is removed at once.
   * @throws the system error when the file cannot be created
   */
  async open(reserved: string, tp: TempPath, persistent = false): Promise<TempFile> {
    let path = reserved;
    for (;;) {
      let handle: FileHandle;
      try {
        handle = await open(path, 'wx+', 0o600);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') {
          path = this.reserve(tp);
          continue;
        }
        if (code !== 'ENOENT') throw err;
        await mkdir(dirname(path), { recursive: true, mode: 0o700 });
        handle = await open(path, 'wx+', 0o600);
      }
      if (!persistent) await unlink(path);
      return { path, handle };
    }
  }

  /** Reserves and creates the next temp file under `tp`. */
  create(tp: TempPath, persistent = false): Promise<TempFile> {
    return this.open(this.reserve(tp), tp, persistent);
  }
}
