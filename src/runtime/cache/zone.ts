/**
 * A cache zone (`proxy_cache_path`/`fastcgi_cache_path`): its entries on disk
 * with nginx's layout and an in-memory index of them, as
 * `src/http/ngx_http_file_cache.c` keeps them in its keys zone. An entry's
 * file is `DIR/<levels>/<md5 of the key>` (`levels=1:2` →
 * `c/29/b7f54b2df7773722d382f4809d65029c`, the levels taken from the end of
 * the hash). It is written to a temporary file and renamed into place, so
 * that a reader never sees half an entry. The index is rebuilt from the
 * directory when the zone is first used (nginx's cache loader); until then,
 * and for any key it has not seen, a lookup opens the file itself. A manager
 * removes entries unused for `inactive` and, least recently used first,
 * those over `max_size` (nginx's cache manager).
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import type { CacheZoneConf } from '../../config/modules/cache.js';
import { EntryFile, readEntryHead, updateEntryValidity, type EntryValidity, type KnownHead } from './entry-file.js';

/** What the index knows of one key (`ngx_http_file_cache_node_t`). */
export interface IndexEntry {
  readonly hash: string;
  /** Whether a complete file is in place. */
  exists: boolean;
  /** Until when (ms since the epoch) the entry is fresh. */
  validUntilMs: number;
  /** The file's size, counted against `max_size`. */
  fileBytes: number;
  /** Requests for the key (`proxy_cache_min_uses`). */
  uses: number;
  lastUsedMs: number;
  /** An intercepted error status the key answers with until `validUntilMs` (`fcn->error`, kept in memory only). */
  error: number | undefined;
  /** A request is fetching the key from the upstream (`updating`), since this time (ms). */
  updatingSinceMs: number | undefined;
  /** Called once the update ends (stored or given up): requests waiting on `proxy_cache_lock`. */
  readonly waiters: (() => void)[];
}

/**
 * How many entries' parsed headers a zone keeps, so that a HIT on a popular
 * entry does not parse its JSON again (a few hundred bytes to a few KiB each).
 */
const KNOWN_HEADS = 1024;

/** How often the manager looks at the zone. */
const MANAGER_INTERVAL_MS = 10_000;

/** An entry file's name: the MD5 of its key in hex. */
const ENTRY_NAME = /^[0-9a-f]{32}$/;

/** One zone: its index, loader and manager. */
/** Whether process `pid` is running (a signal 0 reaches it, or it is another user's). */
function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class CacheZone {
  private readonly index = new Map<string, IndexEntry>();
  /** Headers of the entries read last, by hash, in the order they were read (`knowHead`). */
  private readonly knownHeads = new Map<string, KnownHead>();
  private totalBytes = 0;
  private readonly manager: NodeJS.Timeout;
  /** Settles when the loader has read the directory. */
  readonly loaded: Promise<void>;

  constructor(
    readonly conf: CacheZoneConf,
    private readonly log: (level: 'crit' | 'alert' | 'error' | 'notice', message: string) => void,
  ) {
    this.loaded = this.load().catch((err: Error) => this.log('crit', `cache loader of "${conf.dir}" failed: ${err.message}`));
    this.manager = setInterval(() => void this.manage(), MANAGER_INTERVAL_MS);
    this.manager.unref();
  }

  /** The MD5 of a key in hex (`ngx_http_file_cache_create_key`). */
  static hashOf(key: string): string {
    return createHash('md5').update(Buffer.from(key, 'latin1')).digest('hex');
  }

  /** The entry file of a hash, with the zone's levels (`ngx_create_hashed_filename`). */
  pathOf(hash: string): string {
    let end = hash.length;
    const dirs: string[] = [];
    for (const len of this.conf.levels) {
      dirs.push(hash.slice(end - len, end));
      end -= len;
    }
    return [this.conf.dir, ...dirs, hash].join('/');
  }

  /**
   * A temporary file name in the zone's directory, which the loader removes
   * if it is left over; `tempNumber` from the process's temp-file counter,
   * which nginx's cache temp files take too (`ngx_create_temp_file`; it
   * numbers multipart boundaries as well).
   */
  tempPath(hash: string, tempNumber: number): string {
    return `${this.conf.dir}/${hash}.${process.pid}.${tempNumber}.tmp`;
  }

  /** The index entry of a hash, made (with no file) when there is none. */
  entry(hash: string): IndexEntry {
    let e = this.index.get(hash);
    if (!e) {
      e = { hash, exists: false, validUntilMs: 0, fileBytes: 0, uses: 0, lastUsedMs: Date.now(), error: undefined, updatingSinceMs: undefined, waiters: [] };
      this.index.set(hash, e);
    }
    return e;
  }

  /**
   * Opens an entry's file and reads its header: undefined when there is
   * none (or it is not a complete entry of this key). A file the index did
   * not know (the loader has not reached it yet, or another worker wrote it)
   * is added to it. The caller closes the file; the body read through it is
   * this entry's even if a newer one replaces the file meanwhile.
   */
  openEntry(e: IndexEntry, key: string): EntryFile | undefined {
    const path = this.pathOf(e.hash);
    let file: EntryFile | undefined;
    try {
      file = EntryFile.open(path, this.knownHeads.get(e.hash));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log('crit', `open() "${path}" failed (${(err as Error).message})`);
    }
    if (!file || file.head.key !== key) {
      file?.close();
      if (e.exists) this.forget(e);
      return undefined;
    }
    const { head } = file;
    this.knowHead(e.hash, file.known);
    if (!e.exists) {
      e.exists = true;
      e.fileBytes = head.fileBytes;
      this.totalBytes += head.fileBytes;
    }
    e.validUntilMs = head.validSec * 1000;
    return file;
  }

  /** Keeps the header of a key's file among the `KNOWN_HEADS` last read, the oldest forgotten. */
  private knowHead(hash: string, known: KnownHead): void {
    this.knownHeads.delete(hash);
    this.knownHeads.set(hash, known);
    if (this.knownHeads.size > KNOWN_HEADS) this.knownHeads.delete(this.knownHeads.keys().next().value!);
  }

  /** Puts a written temporary file in place as the entry of `e` (`ngx_http_file_cache_update`). */
  async install(e: IndexEntry, tempPath: string, validUntilMs: number, fileBytes: number): Promise<void> {
    const path = this.pathOf(e.hash);
    await mkdir(path.slice(0, path.lastIndexOf('/')), { recursive: true });
    await rename(tempPath, path);
    if (e.exists) this.totalBytes -= e.fileBytes;
    e.exists = true;
    e.error = undefined;
    e.fileBytes = fileBytes;
    e.validUntilMs = validUntilMs;
    e.lastUsedMs = Date.now();
    this.totalBytes += fileBytes;
    if (this.conf.maxSizeBytes !== undefined && this.totalBytes > this.conf.maxSizeBytes) await this.evict();
  }

  /** Gives the entry of `e` a new validity (a revalidation); false when its file is gone or another key's. */
  async renew(e: IndexEntry, key: string, validity: EntryValidity): Promise<boolean> {
    const path = this.pathOf(e.hash);
    const fh = await open(path, 'r+').catch(() => undefined);
    if (!fh) return false;
    try {
      const head = await readEntryHead(fh);
      if (!head || head.key !== key) return false;
      await updateEntryValidity(fh, head, validity);
      e.validUntilMs = validity.validSec * 1000;
      e.lastUsedMs = Date.now();
      return true;
    } catch (err) {
      this.log('crit', `write() to "${path}" failed (${(err as Error).message})`);
      return false;
    } finally {
      await fh.close();
    }
  }

  /** Ends the update of `e` and wakes the requests waiting on it. */
  endUpdate(e: IndexEntry): void {
    e.updatingSinceMs = undefined;
    for (const wake of e.waiters.splice(0)) wake();
  }

  /** Drops an entry from the index (its file is gone or is not this key's). */
  private forget(e: IndexEntry): void {
    if (e.exists) this.totalBytes -= e.fileBytes;
    e.exists = false;
    e.fileBytes = 0;
  }

  /** Removes an entry and its file (`ngx_http_file_cache_delete`). */
  private async remove(e: IndexEntry): Promise<void> {
    this.forget(e);
    if (e.updatingSinceMs === undefined && e.error === undefined) this.index.delete(e.hash);
    await unlink(this.pathOf(e.hash)).catch(() => undefined);
  }

  /** `max_size`: removes the least recently used entries until the files fit (`ngx_http_file_cache_forced_expire`). */
  private async evict(): Promise<void> {
    const max = this.conf.maxSizeBytes;
    if (max === undefined) return;
    const byUse = [...this.index.values()].filter((e) => e.exists && e.updatingSinceMs === undefined).sort((a, b) => a.lastUsedMs - b.lastUsedMs);
    for (const e of byUse) {
      if (this.totalBytes <= max) break;
      await this.remove(e);
    }
  }

  /** The manager's round: entries unused for `inactive` go, then those over `max_size`. */
  private async manage(): Promise<void> {
    const before = Date.now() - this.conf.inactiveMs;
    for (const e of [...this.index.values()]) {
      if (e.lastUsedMs < before && e.updatingSinceMs === undefined) await this.remove(e);
    }
    await this.evict();
  }

  /**
   * The cache loader (`ngx_http_file_cache_loader`): walks the directory,
   * indexes every entry file, removes the temporary files of processes that
   * have ended (`HASH.PID.N.tmp`; a worker loads as it starts, while the
   * others may be writing theirs).
   */
  private async load(): Promise<void> {
    await mkdir(this.conf.dir, { recursive: true });
    const walk = async (dir: string, depth: number): Promise<void> => {
      let names: string[];
      try {
        names = await readdir(dir);
      } catch {
        return;
      }
      for (const name of names) {
        const path = `${dir}/${name}`;
        if (name.endsWith('.tmp')) {
          // left over by a process that has ended; those of live ones (this one, the other workers, an old
          // generation's) are being written
          if (!processAlive(Number(name.split('.')[1]))) await rm(path, { force: true });
          continue;
        }
        if (depth < this.conf.levels.length) {
          if ((await stat(path).catch(() => undefined))?.isDirectory()) await walk(path, depth + 1);
          continue;
        }
        if (!ENTRY_NAME.test(name) || this.index.get(name)?.exists) continue;
        const fh = await open(path, 'r').catch(() => undefined);
        const head = fh && await readEntryHead(fh).catch(() => undefined);
        await fh?.close();
        if (!head) continue;
        const e = this.entry(name);
        if (e.exists) continue;
        e.exists = true;
        e.fileBytes = head.fileBytes;
        e.validUntilMs = head.validSec * 1000;
        this.totalBytes += head.fileBytes;
      }
    };
    await walk(this.conf.dir, 0);
    await this.evict();
  }

  /** Stops the manager (the zone is no longer in any configuration). */
  close(): void {
    clearInterval(this.manager);
  }
}

/**
 * The cache zones of the process, by name and directory: a reload keeps a
 * zone whose declaration is the same (nginx keeps the shared memory and the
 * files), and a new declaration makes a new zone.
 */
export class CacheZones {
  private readonly zones = new Map<string, CacheZone>();

  constructor(private readonly log: (level: 'crit' | 'alert' | 'error' | 'notice', message: string) => void) {}

  /** The zone of each declaration seen, without building its id again on every request. */
  private readonly byConf = new WeakMap<CacheZoneConf, CacheZone>();

  /** The zone of a declaration, made (and its loader started) on first use. */
  zone(conf: CacheZoneConf): CacheZone {
    const seen = this.byConf.get(conf);
    if (seen) return seen;
    const z = this.zoneOf(conf);
    this.byConf.set(conf, z);
    return z;
  }

  private zoneOf(conf: CacheZoneConf): CacheZone {
    const id = `${conf.name}\0${conf.dir}\0${conf.levels.join(':')}`;
    let z = this.zones.get(id);
    if (!z || z.conf.maxSizeBytes !== conf.maxSizeBytes || z.conf.inactiveMs !== conf.inactiveMs) {
      z?.close();
      z = new CacheZone(conf, this.log);
      this.zones.set(id, z);
    }
    return z;
  }

  /** Starts the loaders of the zones a configuration declares, as nginx starts its cache loader at start. */
  start(zones: Iterable<CacheZoneConf>): void {
    for (const conf of zones) this.zone(conf);
  }
}

