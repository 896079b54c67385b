/**
 * The limit_conn module's directives (`src/http/modules/ngx_http_limit_conn_module.c`):
 * `limit_conn_zone KEY zone=NAME:SIZE`, `limit_conn ZONE N` (several per
 * level, one per zone; a level without any takes its parent's),
 * `limit_conn_status`, `limit_conn_log_level`, `limit_conn_dry_run`, and
 * `$limit_conn_status`. The phase handler is
 * `src/runtime/handlers/limit-conn.ts`.
 */
import type { Directive } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { scopeRegistry } from '../scope.js';
import {
  DirectiveFailure, enumSetter, fail, flagSetter, listSlot, numBounds, numSetter, parseNumber, parseSize, slot, type ConfChain, type DirectiveSpec,
  type SetContext,
} from '../spec.js';
import type { CompiledValue, ValueSource, VariableDef } from '../variables.js';
import type { CompileContext } from '../compile-context.js';

export const LIMIT_CONN = 'ngx_http_limit_conn_module';

/** A `limit_conn_zone`: its key and its size. */
interface LimitConnZoneDecl {
  readonly key: ValueSource;
  readonly sizeBytes: number;
}

/** The `limit_conn_zone` zones of a configuration by name (the size is also in `sharedZones`). */
const limitConnZones = scopeRegistry(() => new Map<string, LimitConnZoneDecl>());

/** A `limit_conn` of a level: the zone's name and the connections it allows per key. */
interface LimitConnDef {
  readonly zone: string;
  readonly conn: number;
}

const limitConns = listSlot<LimitConnDef>('limit_conn');
/** `limit_conn_log_level`'s levels. */
export type LimitConnLogLevel = 'info' | 'notice' | 'warn' | 'error';
const limitConnLogLevel = slot<LimitConnLogLevel>('limit_conn_log_level', 'error');
const limitConnStatus = slot('limit_conn_status', 503);
const limitConnDryRun = slot('limit_conn_dry_run', false);

/**
 * The `zone=NAME:SIZE` parameter of `limit_conn_zone` (http's and stream's:
 * `ngx_http_limit_conn_zone`, `ngx_stream_limit_conn_zone`), the last one
 * winning as in nginx.
 * @throws DirectiveFailure `invalid parameter "…"`, `invalid zone size "…"`,
 *   `zone "…" is too small` (under 8 pages), `"…" must have "zone" parameter`
 */
export function limitConnZoneParam(d: Directive): { readonly name: string; readonly sizeBytes: number } {
  let name = '';
  let sizeBytes = 0;
  for (const p of d.args.slice(1)) {
    if (!p.startsWith('zone=')) fail(`invalid parameter "${p}"`);
    const colon = p.indexOf(':');
    if (colon === -1) fail(`invalid zone size "${p}"`);
    name = p.slice(5, colon);
    const size = parseSize(p.slice(colon + 1));
    if (size === undefined) fail(`invalid zone size "${p}"`);
    if (size < 8 * 4096) fail(`zone "${p}" is too small`);
    sizeBytes = size;
  }
  if (name === '') fail(`"${d.name}" must have "zone" parameter`);
  return { name, sizeBytes };
}

/** `ngx_http_limit_conn_zone`. */
function setZone(d: Directive, cx: SetContext): void {
  const key = cx.scope.variables.value(d.args[0]!, d.loc);
  const { name, sizeBytes } = limitConnZoneParam(d);
  cx.scope.sharedZone(name, sizeBytes, LIMIT_CONN);
  const zones = cx.scope.registry(limitConnZones);
  const bound = zones.get(name);
  if (bound) fail(`${d.name} "${name}" is already bound to key "${bound.key.text}"`);
  zones.set(name, { key, sizeBytes });
}

/** `ngx_http_limit_conn`: one limit per zone and level. */
function setLimit(d: Directive, cx: SetContext): void {
  const zone = d.args[0]!;
  cx.scope.sharedZone(zone, 0, LIMIT_CONN);
  if (cx.level.ownList(limitConns)?.some((e) => e.value.zone === zone)) throw new DirectiveFailure('is duplicate');
  const n = parseNumber(d.args[1]!);
  if (n === undefined || n <= 0) fail(`invalid number of connections "${d.args[1]!}"`);
  if (n > 65535) fail('connection limit must be less 65536');
  cx.level.append(limitConns, { zone, conn: n }, d.loc);
}

export const limitConnDirectives: readonly DirectiveSpec[] = [
  { name: 'limit_conn_zone', module: LIMIT_CONN, contexts: ['http'], args: ['TAKE2'], effect: 'runtime', set: setZone },
  { name: 'limit_conn', module: LIMIT_CONN, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime', set: setLimit },
  {
    name: 'limit_conn_log_level', module: LIMIT_CONN, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: enumSetter(limitConnLogLevel, ['info', 'notice', 'warn', 'error']),
  },
  {
    name: 'limit_conn_status', module: LIMIT_CONN, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      numSetter(limitConnStatus)(d, cx);
      numBounds(400, 599)(cx.level.own(limitConnStatus)!.value, d, cx);
    },
  },
  { name: 'limit_conn_dry_run', module: LIMIT_CONN, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(limitConnDryRun) },
];

/** `$limit_conn_status` (`ngx_http_limit_conn_status_variable`): the main request's, not found before limit_conn counted it. */
export const limitConnVariables: readonly VariableDef[] = [
  { name: 'limit_conn_status', get: (r) => (r.parent ?? r).limitConnStatus },
];

/** A `limit_conn_zone`, bound: its name, key and size in bytes. */
export interface LimitConnZone {
  readonly name: string;
  readonly key: CompiledValue;
  readonly sizeBytes: number;
}

/** The limit_conn settings of a location (`ngx_http_limit_conn_conf_t`). */
export interface LimitConnConf {
  /** Its `limit_conn`s in order: the zone, and the requests it lets each key have at once (1 to 65535). */
  readonly limits: readonly { readonly zone: LimitConnZone; readonly conn: number }[];
  readonly logLevel: LimitConnLogLevel;
  readonly status: number;
  readonly dryRun: boolean;
}

/** The zones bound so far in one compile, by name. */
const BOUND_ZONES = Symbol('limit_conn zones');

/** The limit_conn settings of a level (`ngx_http_limit_conn_merge_conf`), zones bound once per compile. */
export function limitConnConf(cx: CompileContext, c: ConfChain): LimitConnConf {
  return {
    limits: c.list(limitConns).map((l) => ({ zone: boundZone(cx, l.zone), conn: l.conn })),
    logLevel: c.get(limitConnLogLevel),
    status: c.get(limitConnStatus),
    dryRun: c.get(limitConnDryRun),
  };
}

function boundZone(cx: CompileContext, name: string): LimitConnZone {
  const zones = cx.memo(BOUND_ZONES, () => new Map<string, LimitConnZone>());
  let zone = zones.get(name);
  if (!zone) {
    // a zone no limit_conn_zone defines is "zero size shared memory zone" once the configuration is read
    const vars = cx.scope.variables;
    const decl = cx.scope.registry(limitConnZones).get(name);
    zone = decl
      ? { name, key: vars.bind(decl.key), sizeBytes: decl.sizeBytes }
      : { name, key: vars.bind(vars.value('', { file: '', line: 0 })), sizeBytes: 0 };
    zones.set(name, zone);
  }
  return zone;
}
