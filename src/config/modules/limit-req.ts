/**
 * The limit_req module's directives (`src/http/modules/ngx_http_limit_req_module.c`):
 * `limit_req_zone KEY zone=NAME:SIZE [rate=N r/s|r/m]`, `limit_req
 * zone=NAME [burst=N] [nodelay | delay=N]`, `limit_req_status`,
 * `limit_req_log_level`, `limit_req_dry_run`. Rates, bursts and delays are
 * kept as nginx keeps them, in thousandths of a request. The phase handler
 * is `src/runtime/handlers/limit-req.ts`.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC, TAKE123 } from '../flags.js';
import { scopeRegistry } from '../scope.js';
import {
  DirectiveFailure, enumSetter, fail, flagSetter, listSlot, numBounds, numSetter, parseNumber, parseSize, slot, type ConfChain, type DirectiveSpec,
  type SetContext,
} from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import type { CompileContext } from '../compile-context.js';

export const LIMIT_REQ = 'ngx_http_limit_req_module';

/** A `limit_req_zone`: its key, its rate in thousandths of a request per second, and its size. */
export interface LimitReqZoneDecl {
  readonly name: string;
  readonly key: ValueSource;
  readonly rateMilli: number;
  readonly sizeBytes: number;
}

/** The `limit_req_zone` zones of a configuration by name: their key and rate (the size is in `sharedZones`). */
const limitReqZones = scopeRegistry(() => new Map<string, LimitReqZoneDecl>());

/** A `limit_req` of a level: the zone's name, `burst` and the excess served without delay, in thousandths. */
export interface LimitReqDef {
  readonly zone: string;
  readonly burstMilli: number;
  readonly delayMilli: number;
}

/** nginx's `NGX_MAX_INT_T_VALUE / 1000`: the `delay` of `nodelay`. */
const NODELAY = Math.floor(Number.MAX_SAFE_INTEGER / 1000);

export const limitReqs = listSlot<LimitReqDef>('limit_req');
/** `limit_req_log_level`'s levels. */
export type LimitReqLogLevel = 'info' | 'notice' | 'warn' | 'error';
export const limitReqLogLevel = slot<LimitReqLogLevel>('limit_req_log_level', 'error');
export const limitReqStatus = slot('limit_req_status', 503);
export const limitReqDryRun = slot('limit_req_dry_run', false);

/** `ngx_atoi` on the rest of a word: a positive decimal number, or undefined. */
const positive = (text: string): number | undefined => {
  const n = parseNumber(text);
  return n !== undefined && n > 0 ? n : undefined;
};

/** `ngx_http_limit_req_zone`. */
function setZone(d: Directive, cx: SetContext): void {
  const key = cx.scope.variables.value(d.args[0]!, d.loc);
  let name = '';
  let sizeBytes = 0;
  let rate = 1;
  let scale = 1;
  for (const p of d.args.slice(1)) {
    if (p.startsWith('zone=')) {
      const colon = p.indexOf(':');
      if (colon === -1) fail(`invalid zone size "${p}"`);
      name = p.slice(5, colon);
      const size = parseSize(p.slice(colon + 1));
      if (size === undefined) fail(`invalid zone size "${p}"`);
      if (size < 8 * 4096) fail(`zone "${p}" is too small`);
      sizeBytes = size;
    } else if (p.startsWith('rate=')) {
      let text = p.slice(5);
      if (p.length >= 3 && p.endsWith('r/s')) [text, scale] = [text.slice(0, -3), 1];
      else if (p.length >= 3 && p.endsWith('r/m')) [text, scale] = [text.slice(0, -3), 60];
      const n = positive(text);
      if (n === undefined) fail(`invalid rate "${p}"`);
      rate = n;
    } else fail(`invalid parameter "${p}"`);
  }
  if (name === '') fail(`"${d.name}" must have "zone" parameter`);
  cx.scope.sharedZone(name, sizeBytes, LIMIT_REQ);
  const bound = cx.scope.registry(limitReqZones).get(name);
  if (bound) fail(`${d.name} "${name}" is already bound to key "${bound.key.text}"`);
  cx.scope.registry(limitReqZones).set(name, { name, key, rateMilli: Math.floor((rate * 1000) / scale), sizeBytes });
}

/** `ngx_http_limit_req`: one zone per `limit_req` of a level. */
function setLimit(d: Directive, cx: SetContext): void {
  let zone: string | undefined;
  let burst = 0;
  let delay = 0;
  for (const p of d.args) {
    if (p.startsWith('zone=')) {
      zone = p.slice(5);
      cx.scope.sharedZone(zone, 0, LIMIT_REQ);
    } else if (p.startsWith('burst=')) {
      const n = positive(p.slice(6));
      if (n === undefined) fail(`invalid burst value "${p}"`);
      burst = n;
    } else if (p.startsWith('delay=')) {
      const n = positive(p.slice(6));
      if (n === undefined) fail(`invalid delay value "${p}"`);
      delay = n;
    } else if (p === 'nodelay') delay = NODELAY;
    else fail(`invalid parameter "${p}"`);
  }
  if (zone === undefined) fail(`"${d.name}" must have "zone" parameter`);
  if (cx.level.ownList(limitReqs)?.some((e) => e.value.zone === zone)) throw new DirectiveFailure('is duplicate');
  cx.level.append(limitReqs, { zone, burstMilli: burst * 1000, delayMilli: delay * 1000 }, d.loc);
}

export const limitReqDirectives: readonly DirectiveSpec[] = [
  { name: 'limit_req_zone', module: LIMIT_REQ, contexts: ['http'], args: ['TAKE3'], effect: 'runtime', set: setZone },
  { name: 'limit_req', module: LIMIT_REQ, contexts: HTTP_SRV_LOC, args: TAKE123, effect: 'runtime', set: setLimit },
  {
    name: 'limit_req_log_level', module: LIMIT_REQ, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(limitReqLogLevel, ['info', 'notice', 'warn', 'error']),
  },
  {
    name: 'limit_req_status', module: LIMIT_REQ, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      numSetter(limitReqStatus)(d, cx);
      numBounds(400, 599)(cx.level.own(limitReqStatus)!.value, d, cx);
    },
  },
  { name: 'limit_req_dry_run', module: LIMIT_REQ, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(limitReqDryRun) },
];

/** A `limit_req_zone`, bound: its key, its rate in thousandths of a request per second, and its size. */
export interface LimitReqZone {
  readonly name: string;
  readonly key: CompiledValue;
  readonly rateMilli: number;
  readonly sizeBytes: number;
}

/** The limit_req settings of a location (`ngx_http_limit_req_conf_t`). */
export interface LimitReqConf {
  /** Its `limit_req`s in order, `burst` and `delay` in thousandths of a request. */
  readonly limits: readonly { readonly zone: LimitReqZone; readonly burstMilli: number; readonly delayMilli: number }[];
  /** `limit_req_log_level` for refused requests; delayed ones are logged one level lower (info stays info). */
  readonly logLevel: LimitReqLogLevel;
  readonly delayLogLevel: 'info' | 'notice' | 'warn';
  readonly status: number;
  readonly dryRun: boolean;
}

/** The zones bound so far in one compile, by name. */
const BOUND_ZONES = Symbol('limit_req zones');

/** The limit_req settings of a level (`ngx_http_limit_req_merge_conf`), zones bound once per compile. */
export function limitReqConf(cx: CompileContext, c: ConfChain): LimitReqConf {
  const logLevel = c.get(limitReqLogLevel);
  const delayLogLevel = logLevel === 'info' ? 'info' : logLevel === 'notice' ? 'info' : logLevel === 'warn' ? 'notice' : 'warn';
  return {
    limits: c.list(limitReqs).map((l) => ({ zone: boundZone(cx, l.zone), burstMilli: l.burstMilli, delayMilli: l.delayMilli })),
    logLevel,
    delayLogLevel,
    status: c.get(limitReqStatus),
    dryRun: c.get(limitReqDryRun),
  };
}

function boundZone(cx: CompileContext, name: string): LimitReqZone {
  const zones = cx.memo(BOUND_ZONES, () => new Map<string, LimitReqZone>());
  let zone = zones.get(name);
  if (!zone) {
    // a zone no limit_req_zone defines is "zero size shared memory zone" once the configuration is read
    const vars = cx.scope.variables;
    const decl = cx.scope.registry(limitReqZones).get(name);
    zone = decl
      ? { name, key: vars.bind(decl.key), rateMilli: decl.rateMilli, sizeBytes: decl.sizeBytes }
      : { name, key: vars.bind(vars.value('', { file: '', line: 0 })), rateMilli: 1000, sizeBytes: 0 };
    zones.set(name, zone);
  }
  return zone;
}
