/**
 * The zones nginx keeps in shared memory for all its workers, kept by
 * jinx's master: node has no memory shared between processes, so a worker
 * asks the master by message and the master's one state answers, in the
 * order the questions arrive (nginx's zone lock). A `limit_req` check is
 * one round trip over the cluster channel (bench/README.md has its cost).
 */
import type { Worker } from 'node:cluster';
import { LimitReqZones, type LimitCheck, type LimitOutcome, type LimitReqStore } from '../runtime/limit-req-zones.js';
import { isLimitReqAnswer, type LimitReqAnswer, type LimitReqQuery } from './worker-protocol.js';

/** The master's side: the zones' one state. */
export class MasterZones {
  private readonly limitReq: LimitReqZones;

  /** @param alert where `could not allocate node in limit_req zone "NAME"` goes */
  constructor(alert: (message: string) => void) {
    this.limitReq = new LimitReqZones(alert);
  }

  /** Answers a worker's query. */
  answer(worker: Worker, query: LimitReqQuery): void {
    const answer: LimitReqAnswer = { type: 'limit_req', id: query.id, outcome: this.limitReq.apply(query.checks) };
    if (worker.isConnected()) worker.send(answer);
  }
}

/**
 * A worker's `limit_req` zones: the master's. Once the channel to the
 * master is gone (it died), the worker counts in zones of its own.
 */
export class WorkerLimitReq implements LimitReqStore {
  private nextId = 0;
  private readonly waiting = new Map<number, (outcome: LimitOutcome) => void>();
  private local: LimitReqZones | undefined;

  /** @param alert where the worker's own zones report a full zone */
  constructor(private readonly alert: (message: string) => void) {
    process.on('message', (m: unknown) => {
      if (!isLimitReqAnswer(m)) return;
      this.waiting.get(m.id)?.(m.outcome);
      this.waiting.delete(m.id);
    });
    process.once('disconnect', () => {
      for (const resolve of this.waiting.values()) resolve({ kind: 'pass' });
      this.waiting.clear();
    });
  }

  apply(checks: readonly LimitCheck[]): LimitOutcome | Promise<LimitOutcome> {
    if (!process.connected || !process.send) {
      this.local ??= new LimitReqZones(this.alert);
      return this.local.apply(checks);
    }
    const id = ++this.nextId;
    // the zone's key is a compiled value: only what the state depends on goes
    const query: LimitReqQuery = {
      type: 'limit_req', id,
      checks: checks.map((c) => ({ zone: { name: c.zone.name, rateMilli: c.zone.rateMilli, sizeBytes: c.zone.sizeBytes }, key: c.key, burstMilli: c.burstMilli, delayMilli: c.delayMilli })),
    };
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      process.send!(query);
    });
  }
}
