/**
 * The stream limit_conn module (`src/stream/ngx_stream_limit_conn_module.c`):
 * `limit_conn_zone KEY zone=NAME:SIZE` (stream level), `limit_conn ZONE N`,
 * `limit_conn_log_level`, `limit_conn_dry_run` (stream and server levels),
 * and `$limit_conn_status`. The directives read as http's do
 * (`modules/limit-conn.ts`), over the stream module's variables; the zones'
 * state is the one `LimitConnStore` of the process (shared zones are one
 * namespace in nginx, so a name is http's or stream's). The preaccess
 * handler is `src/runtime/stream/limit-conn.ts`.
 */
import type { Directive } from '../../parser/ast.js';
import type { ConfigScope } from '../scope.js';
import { scopeRegistry } from '../scope.js';
import {
  DirectiveFailure, enumSetter, fail, flagSetter, listSlot, parseNumber, slot, type ConfChain, type DirectiveSpec, type SetContext,
} from '../spec.js';
import type { StreamView } from '../stream-view.js';
import type { CompiledValue, ValueSource, VariableDef, VariableRegistry } from '../variables.js';
import { limitConnZoneParam, type LimitConnLogLevel } from './limit-conn.js';

const MODULE = 'ngx_stream_limit_conn_module';

/** The stream `limit_conn_zone` zones of a configuration by name: key and size. */
const zones = scopeRegistry(() => new Map<string, { readonly key: ValueSource; readonly sizeBytes: number }>());

const limits = listSlot<{ readonly zone: string; readonly conn: number }>('stream limit_conn');
const logLevel = slot<LimitConnLogLevel>('stream limit_conn_log_level', 'error');
const dryRun = slot('stream limit_conn_dry_run', false);

/**
 * The stream limit_conn directives, over the stream variables of a
 * configuration (`vars`).
 */
export function streamLimitConnDirectives(vars: (scope: ConfigScope) => VariableRegistry<StreamView>): DirectiveSpec[] {
  /** `ngx_stream_limit_conn_zone`. */
  const setZone = (d: Directive, cx: SetContext): void => {
    const key = vars(cx.scope).value(d.args[0]!, d.loc);
    const { name, sizeBytes } = limitConnZoneParam(d);
    cx.scope.sharedZone(name, sizeBytes, MODULE);
    const bound = cx.scope.registry(zones).get(name);
    if (bound) fail(`${d.name} "${name}" is already bound to key "${bound.key.text}"`);
    cx.scope.registry(zones).set(name, { key, sizeBytes });
  };
  /** `ngx_stream_limit_conn`: one limit per zone and level. */
  const setLimit = (d: Directive, cx: SetContext): void => {
    const zone = d.args[0]!;
    cx.scope.sharedZone(zone, 0, MODULE);
    if (cx.level.ownList(limits)?.some((e) => e.value.zone === zone)) throw new DirectiveFailure('is duplicate');
    const n = parseNumber(d.args[1]!);
    if (n === undefined || n <= 0) fail(`invalid number of connections "${d.args[1]!}"`);
    if (n > 65535) fail('connection limit must be less 65536');
    cx.level.append(limits, { zone, conn: n }, d.loc);
  };
  const any = ['stream', 'stream_server'] as const;
  return [
    { name: 'limit_conn_zone', module: MODULE, contexts: ['stream'], args: ['TAKE2'], effect: 'runtime', set: setZone },
    { name: 'limit_conn', module: MODULE, contexts: any, args: ['TAKE2'], effect: 'runtime', set: setLimit },
    {
      name: 'limit_conn_log_level', module: MODULE, contexts: any, args: ['TAKE1'], effect: 'runtime',
      set: enumSetter(logLevel, ['info', 'notice', 'warn', 'error']),
    },
    { name: 'limit_conn_dry_run', module: MODULE, contexts: any, args: ['FLAG'], effect: 'runtime', set: flagSetter(dryRun) },
  ];
}

/** `$limit_conn_status` (`ngx_stream_limit_conn_status_variable`): not found before limit_conn counted the session. */
export const streamLimitConnVariables: readonly VariableDef<StreamView>[] = [
  { name: 'limit_conn_status', get: (s) => s.limitConnStatus },
];

/** A stream `limit_conn_zone`, bound: its name, key and size in bytes. */
export interface StreamLimitConnZone {
  readonly name: string;
  readonly key: CompiledValue<StreamView>;
  readonly sizeBytes: number;
}

/** The limit_conn settings of a stream server (`ngx_stream_limit_conn_conf_t`). */
export interface StreamLimitConnConf {
  /** Its `limit_conn`s in order: the zone, and the sessions it lets each key have at once (1 to 65535). */
  readonly limits: readonly { readonly zone: StreamLimitConnZone; readonly conn: number }[];
  readonly logLevel: LimitConnLogLevel;
  readonly dryRun: boolean;
}

/**
 * The limit_conn settings of a server (`ngx_stream_limit_conn_merge_conf`);
 * `bound` keeps each zone bound once per compile. A zone no
 * `limit_conn_zone` defines is nginx's `zero size shared memory zone`,
 * reported with the other shared zones.
 */
export function streamLimitConnConf(
  scope: ConfigScope, c: ConfChain, v: VariableRegistry<StreamView>, bound: Map<string, StreamLimitConnZone>,
): StreamLimitConnConf {
  const zoneOf = (name: string): StreamLimitConnZone => {
    let zone = bound.get(name);
    if (!zone) {
      const decl = scope.registry(zones).get(name);
      zone = { name, key: v.bind(decl?.key ?? v.value('', { file: '', line: 0 })), sizeBytes: decl?.sizeBytes ?? 0 };
      bound.set(name, zone);
    }
    return zone;
  };
  return {
    limits: c.list(limits).map((l) => ({ zone: zoneOf(l.zone), conn: l.conn })),
    logLevel: c.get(logLevel),
    dryRun: c.get(dryRun),
  };
}
