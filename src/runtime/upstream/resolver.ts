/**
 * Run-time name resolution for `proxy_pass` and `fastcgi_pass` with
 * variables, through the name servers of a `resolver` directive: nginx's own
 * resolver (`src/core/ngx_resolver.c`), written again over node:dgram and
 * node:net.
 *
 * Each `resolver` directive is a resolver of its own, with its own cache
 * (a location that inherits the directive shares its parent's). A name is
 * asked for A and AAAA at once (`ipv4=off`, `ipv6=off` leave one out), with
 * random query ids, of one name server; the next name gets the next server.
 * Queries still unanswered are sent again every 5 seconds, each time to the
 * next server, until every request waiting on them has given up after
 * `resolver_timeout`. An answer must match its query's name and id; a
 * truncated UDP answer is asked again over TCP; a CNAME without addresses is
 * followed (at most 50 times). Addresses are kept for their lowest TTL
 * (CNAME included), or for `valid=` when it is set, and handed out rotated
 * at random; failures are not kept. Both families must have answered; an
 * error in either fails the name. Malformed answers are dropped with nginx's
 * `[error]` lines (`short DNS response`, `wrong ident N in DNS response for
 * NAME, expect M`, `DNS error (1: Format error), query id:N, name:"NAME"` …),
 * and the request's failure is nginx's `NAME could not be resolved (3: Host
 * not found)`.
 */
import { isIP } from 'node:net';
import type { ResolverDef } from '../../config/modules/http-core.js';
import {
  HEADER_BYTES, RCODE_FORMERR, RCODE_NXDOMAIN, RCODE_REFUSED, RESOLVE_TIMEDOUT, TYPE_A, TYPE_AAAA, TYPE_PTR, TYPE_SRV,
  nameQuery, readAddressAnswers, readHeader, readName, readQuestion, resolverStrerror,
  type ResponseHeader, type ResponseQuestion,
} from './dns-message.js';
import { NameServer, type ResolverLog } from './name-server.js';

export type { ResolverLog } from './name-server.js';

/** A failed lookup, worded as nginx's `ngx_http_upstream_resolve_handler`: `NAME could not be resolved (3: Host not found)`. */
export class ResolveError extends Error {
  constructor(
    readonly host: string,
    readonly rcode: number,
    readonly reason: string,
  ) {
    super(`${host} could not be resolved (${rcode}: ${reason})`);
  }
}

/** `r->resend_timeout`: unanswered queries are sent again after this long. */
const RESEND_TIMEOUT_SEC = 5;
/** `r->expire`: a cached name unused this long may be dropped. */
const EXPIRE_SEC = 30;
/** `NGX_RESOLVER_MAX_RECURSION`: CNAMEs followed at most. */
const MAX_RECURSION = 50;
/** nginx looks for the query of a FORMERR answer among this many recent names. */
const FORMERR_SEARCH = 100;
/** The TTL of a name before any record was read (`NGX_MAX_UINT32_VALUE`). */
const NO_TTL = 0xffffffff;

/** `ngx_time()`: seconds since the epoch. */
const nowSec = (): number => Math.floor(Date.now() / 1000);
const randomIdent = (): number => Math.floor(Math.random() * 0x10000);
const randomBelow = (n: number): number => Math.floor(Math.random() * n);

/** One request waiting on a name (`ngx_resolver_ctx_t`). */
interface Waiter {
  /** The name asked for, lowercase (nginx lowercases it in place), for the failure's message. */
  readonly name: string;
  /** CNAMEs followed so far. */
  recursion: number;
  readonly timeoutMs: number;
  timer: NodeJS.Timeout | undefined;
  node: NameNode | undefined;
  settled: boolean;
  /** Called once, with the addresses or nginx's resolver code. */
  readonly settle: (outcome: readonly string[] | number) => void;
}

/** A name being resolved or cached (`ngx_resolver_node_t`). */
interface NameNode {
  readonly name: string;
  /** The A query (undefined once answered, or with `ipv4=off`). */
  query: Buffer | undefined;
  /** The AAAA query. */
  query6: Buffer | undefined;
  /** IPv4 addresses; undefined while the A answer is awaited. */
  v4: readonly string[] | undefined;
  /** IPv6 addresses; undefined while the AAAA answer is awaited. */
  v6: readonly string[] | undefined;
  /** The A (`tcp`) or AAAA (`tcp6`) query goes over TCP (its UDP answer was truncated). */
  tcp: boolean;
  tcp6: boolean;
  /** The error code of the family that answered first, kept until the other answers. */
  code: number;
  cname: string | undefined;
  /** Cached until then (seconds since the epoch); 0 while unresolved. */
  validSec: number;
  /** When the query is sent again (resend queue) or the entry may be dropped (expire queue). */
  expireSec: number;
  /** The lowest TTL read (seconds). */
  ttlSec: number;
  /** The server the queries went to last (index). */
  lastConnection: number;
  waiting: Waiter[];
}

/**
 * One `resolver` directive (`ngx_resolver_t`): its name servers, its cache of
 * names, and the queue of queries to send again.
 */
class Resolver {
  private readonly nodes = new Map<string, NameNode>();
  /** Names being resolved, oldest first (`name_resend_queue`). */
  private readonly resendQueue = new Map<string, NameNode>();
  /** Names resolved, least recently used first (`name_expire_queue`). */
  private readonly expireQueue = new Map<string, NameNode>();
  private readonly servers: readonly NameServer[];
  private lastConnection = 0;
  private resendTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly def: ResolverDef,
    private readonly log: ResolverLog,
  ) {
    this.servers = def.servers.map((s) => {
      const { host, port } = serverAddress(s);
      return new NameServer(host, port, (msg, tcp) => this.processResponse(msg, tcp), log);
    });
  }

  /** `ngx_resolve_name`: the addresses of `name`, or its failure as nginx's resolver code. */
  resolve(name: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<readonly string[]> {
    const lower = (name.endsWith('.') ? name.slice(0, -1) : name).toLowerCase();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        name: lower, recursion: 0, timeoutMs, timer: undefined, node: undefined, settled: false,
        settle: (outcome) => (typeof outcome === 'number' ? reject(new ResolveError(lower, outcome, resolverStrerror(outcome))) : resolve(outcome)),
      };
      if (signal) {
        signal.addEventListener('abort', () => {
          if (w.settled) return;
          this.done(w);
          reject(signal.reason);
        }, { once: true });
      }
      this.resolveNodes([w], lower);
    });
  }

  /** `ngx_resolve_name_locked`: answers `ws` from the cache, joins them to a query in flight, or sends a new one. */
  private resolveNodes(ws: Waiter[], name: string): void {
    const now = nowSec();
    let rn = this.nodes.get(name);
    if (rn) {
      if (rn.validSec >= now) {
        rn.expireSec = now + EXPIRE_SEC;
        this.enqueue(rn, this.expireQueue);
        const all = [...ws, ...rn.waiting];
        if ((rn.v4?.length ?? 0) + (rn.v6?.length ?? 0) > 0) {
          rn.waiting = [];
          const addrs = exportAddrs(rn, true);
          for (const w of all) this.finish(w, addrs);
          return;
        }
        if (ws[0]!.recursion++ < MAX_RECURSION && rn.cname !== undefined) {
          this.resolveNodes(ws, rn.cname);
          return;
        }
        rn.waiting = [];
        for (const w of all) this.finish(w, RCODE_NXDOMAIN);
        return;
      }
      if (rn.waiting.length > 0) {
        for (const w of ws) this.armTimeout(w, rn);
        rn.waiting = [...ws, ...rn.waiting];
        return;
      }
      this.dequeue(rn);
    } else {
      rn = {
        name, query: undefined, query6: undefined, v4: undefined, v6: undefined, tcp: false, tcp6: false, code: 0, cname: undefined,
        validSec: 0, expireSec: 0, ttlSec: NO_TTL, lastConnection: 0, waiting: [],
      };
      this.nodes.set(name, rn);
    }
    const query = this.def.ipv4 ? nameQuery(name, TYPE_A, randomIdent()) : undefined;
    const query6 = this.def.ipv6 ? nameQuery(name, TYPE_AAAA, randomIdent()) : undefined;
    if (!query && !query6) {
      // a name nginx cannot ask for (an empty label …) is not found
      this.nodes.delete(name);
      for (const w of ws) this.finish(w, RCODE_NXDOMAIN);
      return;
    }
    rn.query = query;
    rn.query6 = query6;
    rn.lastConnection = this.lastConnection++;
    if (this.lastConnection === this.servers.length) this.lastConnection = 0;
    rn.v4 = this.def.ipv4 ? undefined : [];
    rn.v6 = this.def.ipv6 ? undefined : [];
    rn.tcp = false;
    rn.tcp6 = false;
    this.sendFirst(rn);
    for (const w of ws) this.armTimeout(w, rn);
    if (this.resendQueue.size === 0) this.armResend(RESEND_TIMEOUT_SEC * 1000);
    rn.expireSec = now + RESEND_TIMEOUT_SEC;
    this.enqueue(rn, this.resendQueue);
    rn.code = 0;
    rn.cname = undefined;
    rn.validSec = 0;
    rn.ttlSec = NO_TTL;
    rn.waiting = ws;
  }

  /**
   * `ngx_resolver_send_query`: the queries still unanswered, to the node's
   * current server. `failed` is called (once) if one could not be sent.
   */
  private sendQuery(rn: NameNode, failed?: () => void): void {
    const server = this.servers[rn.lastConnection]!;
    let reported = false;
    const once = failed && ((): void => {
      if (reported) return;
      reported = true;
      failed();
    });
    if (rn.query && rn.v4 === undefined) {
      if (rn.tcp) server.sendTcp(rn.query);
      else server.sendUdp(rn.query, once);
    }
    if (rn.query6 && rn.v6 === undefined) {
      if (rn.tcp6) server.sendTcp(rn.query6);
      else server.sendUdp(rn.query6, once);
    }
  }

  /**
   * The first sending of a name's queries: when it fails (a name server
   * refusing on its port), they go at once to the next server, once
   * (nginx's "immediately retry once on failure").
   */
  private sendFirst(rn: NameNode): void {
    const { query, query6 } = rn;
    this.sendQuery(rn, () => {
      if (this.nodes.get(rn.name) !== rn || rn.query !== query || rn.query6 !== query6 || rn.waiting.length === 0) return;
      if (++rn.lastConnection === this.servers.length) rn.lastConnection = 0;
      this.sendQuery(rn);
    });
  }

  /** `ngx_resolver_set_timeout`: the waiter gives up after `resolver_timeout` (0: never). */
  private armTimeout(w: Waiter, rn: NameNode): void {
    w.node = rn;
    if (w.timer || w.timeoutMs === 0) return;
    w.timer = setTimeout(() => this.finish(w, RESOLVE_TIMEDOUT), w.timeoutMs);
  }

  /** Hands `outcome` to a waiter, then forgets it (`ngx_resolve_name_done`). */
  private finish(w: Waiter, outcome: readonly string[] | number): void {
    if (w.settled) return;
    this.done(w);
    w.settle(outcome);
  }

  /** `ngx_resolve_name_done`: the waiter leaves its name's queue; a little of the cache expires. */
  private done(w: Waiter): void {
    w.settled = true;
    clearTimeout(w.timer);
    w.timer = undefined;
    const rn = w.node;
    w.node = undefined;
    if (rn) rn.waiting = rn.waiting.filter((x) => x !== w);
    this.expire();
    if (this.resendQueue.size === 0 && this.resendTimer) {
      clearTimeout(this.resendTimer);
      this.resendTimer = undefined;
    }
  }

  /** `ngx_resolver_expire`: drops at most two cached names unused for 30 seconds. */
  private expire(): void {
    const now = nowSec();
    for (let i = 0; i < 2; i++) {
      const rn = this.expireQueue.values().next().value;
      if (!rn || now <= rn.expireSec) return;
      this.expireQueue.delete(rn.name);
      this.nodes.delete(rn.name);
    }
  }

  private enqueue(rn: NameNode, queue: Map<string, NameNode>): void {
    this.dequeue(rn);
    queue.set(rn.name, rn);
  }

  private dequeue(rn: NameNode): void {
    if (this.resendQueue.get(rn.name) === rn) this.resendQueue.delete(rn.name);
    if (this.expireQueue.get(rn.name) === rn) this.expireQueue.delete(rn.name);
  }

  private armResend(ms: number): void {
    clearTimeout(this.resendTimer);
    this.resendTimer = setTimeout(() => this.resend(), ms);
    this.resendTimer.unref();
  }

  /**
   * `ngx_resolver_resend_handler`: names whose queries are due and still
   * awaited are sent again to the next server; due names nobody waits for
   * any more are forgotten.
   */
  private resend(): void {
    this.resendTimer = undefined;
    const now = nowSec();
    const due = this.resendQueue.size;
    for (let i = 0; i <= due; i++) {
      const rn = this.resendQueue.values().next().value;
      if (!rn) return;
      if (now < rn.expireSec) {
        this.armResend((rn.expireSec - now) * 1000);
        return;
      }
      this.resendQueue.delete(rn.name);
      if (rn.waiting.length > 0) {
        if (++rn.lastConnection === this.servers.length) rn.lastConnection = 0;
        this.sendQuery(rn);
        rn.expireSec = now + RESEND_TIMEOUT_SEC;
        this.resendQueue.set(rn.name, rn);
        continue;
      }
      this.nodes.delete(rn.name);
    }
  }

  /** `ngx_resolver_process_response`: the checks every answer goes through before its question's type is looked at. */
  private processResponse(buf: Buffer, tcp: boolean): void {
    const header = readHeader(buf, tcp);
    if (!header.ok) return this.log('error', header.error);
    const h = header.value;
    if (h.code === RCODE_FORMERR) {
      const recent = [...this.resendQueue.values()].reverse().slice(0, FORMERR_SEARCH);
      const rn = recent.find((n) => identOf(n.query) === h.ident || identOf(n.query6) === h.ident);
      const name = rn ? `, name:"${rn.name}"` : '';
      return this.log('error', `DNS error (${h.code}: ${resolverStrerror(h.code)}), query id:${h.ident}${name}`);
    }
    if (h.code > RCODE_REFUSED) return this.log('error', `DNS error (${h.code}: ${resolverStrerror(h.code)}), query id:${h.ident}`);
    const question = readQuestion(buf, h);
    if (!question.ok) return this.log('error', question.error);
    const q = question.value;
    if (q.qclass !== 1) return this.log('error', `unknown query class ${q.qclass} in DNS response`);
    if (q.qtype === TYPE_A || q.qtype === TYPE_AAAA) return this.processAddresses(buf, h, q);
    if (q.qtype === TYPE_SRV || q.qtype === TYPE_PTR) return this.processUnasked(buf, q.qtype);
    return this.log('error', `unknown query type ${q.qtype} in DNS response`);
  }

  /**
   * An SRV or PTR answer (`ngx_resolver_process_srv`, `…_ptr`): this
   * resolver never asks those, so no name waits for it.
   */
  private processUnasked(buf: Buffer, qtype: number): void {
    const name = readName(buf, HEADER_BYTES);
    if (!name.ok) return this.log('error', name.error);
    if (qtype === TYPE_PTR && !ARPA_NAME.test(name.value)) return this.log('error', 'invalid in-addr.arpa or ip6.arpa name in DNS response');
    return this.log('error', `unexpected DNS response for ${name.value}`);
  }

  /** `ngx_resolver_process_a`: an answer to an A or AAAA query. */
  private processAddresses(buf: Buffer, h: ResponseHeader, q: ResponseQuestion): void {
    const nameRead = readName(buf, HEADER_BYTES);
    if (!nameRead.ok) return this.log('error', nameRead.error);
    const name = nameRead.value;
    const six = q.qtype === TYPE_AAAA;
    const rn = this.nodes.get(name);
    const query = six ? rn?.query6 : rn?.query;
    if (!rn || !query || (six ? rn.v6 : rn.v4) !== undefined) return this.log('error', `unexpected DNS response for ${name}`);
    if (h.trunc && (six ? rn.tcp6 : rn.tcp)) return;
    const qident = query.readUInt16BE(0);
    if (h.ident !== qident) return this.log('error', `wrong ident ${h.ident} in DNS response for ${name}, expect ${qident}`);
    if (h.trunc) {
      // asked again over TCP, of the same server
      this.dequeue(rn);
      if (rn.waiting.length === 0) {
        this.nodes.delete(name);
        return;
      }
      if (six) rn.tcp6 = true;
      else rn.tcp = true;
      this.servers[rn.lastConnection]!.sendTcp(query);
      rn.expireSec = nowSec() + RESEND_TIMEOUT_SEC;
      this.enqueue(rn, this.resendQueue);
      return;
    }
    const setFamily = (addrs: readonly string[]): void => {
      if (six) rn.v6 = addrs;
      else rn.v4 = addrs;
    };
    const other = (): readonly string[] | undefined => (six ? rn.v4 : rn.v6);
    let code = h.code;
    if (code === 0 && rn.code) code = rn.code;
    if (code === 0 && h.nan === 0) {
      setFamily([]);
      const o = other();
      if (o === undefined) return;
      if (o.length > 0) return this.answered(rn);
      code = RCODE_NXDOMAIN;
    }
    if (code) {
      setFamily([]);
      if (other() === undefined) {
        rn.code = code;
        return;
      }
      const ws = rn.waiting;
      rn.waiting = [];
      this.dequeue(rn);
      this.nodes.delete(name);
      for (const w of ws) this.finish(w, code);
      return;
    }
    const read = readAddressAnswers(buf, q, h.nan, rn.ttlSec, (line) => this.log('error', line));
    rn.ttlSec = read.minTtlSec;
    if (!read.result.ok) return this.log('error', read.result.error);
    const { addrs, cnameAt } = read.result.value;
    setFamily(addrs);
    if (rn.v4 === undefined || rn.v6 === undefined) return;
    if (rn.v4.length + rn.v6.length > 0) return this.answered(rn);
    if (cnameAt === undefined) return this.log('error', 'no A or CNAME types in DNS response');
    const cname = readName(buf, cnameAt);
    if (!cname.ok) return this.log('error', cname.error);
    const now = nowSec();
    rn.cname = cname.value;
    rn.validSec = now + (this.def.validSec || rn.ttlSec);
    rn.expireSec = now + EXPIRE_SEC;
    this.enqueue(rn, this.expireQueue);
    rn.query = undefined;
    rn.query6 = undefined;
    const ws = rn.waiting;
    rn.waiting = [];
    if (ws.length === 0) return;
    if (ws[0]!.recursion++ >= MAX_RECURSION) {
      for (const w of ws) this.finish(w, RCODE_NXDOMAIN);
      return;
    }
    for (const w of ws) w.node = undefined;
    this.resolveNodes(ws, cname.value);
  }

  /** Both families answered with at least one address: the name is cached and its waiters get the addresses in the answer's order. */
  private answered(rn: NameNode): void {
    const addrs = exportAddrs(rn, false);
    const now = nowSec();
    rn.validSec = now + (this.def.validSec || rn.ttlSec);
    rn.expireSec = now + EXPIRE_SEC;
    this.enqueue(rn, this.expireQueue);
    const ws = rn.waiting;
    rn.waiting = [];
    for (const w of ws) this.finish(w, addrs);
    rn.query = undefined;
    rn.query6 = undefined;
  }

  /** Closes the sockets and stops the resend timer. */
  close(): void {
    clearTimeout(this.resendTimer);
    this.resendTimer = undefined;
    for (const s of this.servers) s.close();
  }
}

/** A PTR question nginx recognizes: an IPv4 in-addr.arpa or nibble ip6.arpa name. */
const ARPA_NAME = /^(?:(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){4}in-addr|(?:[0-9a-f]\.){32}ip6)\.arpa$/;

/** The id of a query (its first two bytes). */
const identOf = (query: Buffer | undefined): number | undefined => query?.readUInt16BE(0);

/**
 * `ngx_resolver_export`: IPv4 addresses, then IPv6 ones. From the cache
 * (`rotate`) the list starts at a random place and each family at a random
 * address of its own, so successive requests spread over the addresses.
 */
function exportAddrs(rn: NameNode, rotate: boolean): string[] {
  const v4 = rn.v4 ?? [];
  const v6 = rn.v6 ?? [];
  const n = v4.length + v6.length;
  const out = new Array<string>(n);
  let d = rotate ? randomBelow(n) : 0;
  let i = 0;
  for (const family of [v4, v6]) {
    if (family.length === 0) continue;
    let j = rotate ? randomBelow(family.length) : 0;
    const end = i + family.length;
    do {
      out[d++] = family[j++]!;
      if (d === n) d = 0;
      if (j === family.length) j = 0;
    } while (++i < end);
  }
  return out;
}

/** The host and port of a name server as `resolver` gives it (`127.0.0.1`, `127.0.0.1:5353`, `[::1]:53`, `::1`); port 53 by default. */
function serverAddress(s: string): { host: string; port: number } {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (v6) return { host: v6[1]!, port: v6[2] ? Number(v6[2]) : 53 };
  if (isIP(s)) return { host: s, port: 53 };
  const colon = s.lastIndexOf(':');
  return { host: s.slice(0, colon), port: Number(s.slice(colon + 1)) };
}

/**
 * The resolvers of a running configuration, one per `resolver` directive,
 * each made at its first use. Lines about the name servers' answers go to
 * `log` (the main error log, as nginx's resolver writes to `cycle->new_log`).
 */
export class NameResolver {
  private readonly resolvers = new Map<ResolverDef, Resolver>();

  constructor(private readonly log: ResolverLog) {}

  /**
   * The addresses of `name`: IPv4 first, then IPv6 (unless `ipv4=off` or
   * `ipv6=off`), as nginx's resolver hands them to the upstream. Gives up
   * after `timeoutMs` (`resolver_timeout`; 0: never). When `signal` aborts,
   * the request stops waiting and the promise rejects with the signal's reason.
   * @throws ResolveError with nginx's code and text (`3: Host not found`, `110: Operation timed out` …)
   */
  resolve(name: string, def: ResolverDef, timeoutMs: number, signal?: AbortSignal): Promise<readonly string[]> {
    let r = this.resolvers.get(def);
    if (!r) {
      r = new Resolver(def, this.log);
      this.resolvers.set(def, r);
    }
    return r.resolve(name, timeoutMs, signal);
  }

  /** Closes every resolver's sockets (the configuration is retired). */
  close(): void {
    for (const r of this.resolvers.values()) r.close();
    this.resolvers.clear();
  }
}
