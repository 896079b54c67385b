/**
 * The auth_request module (`src/http/modules/ngx_http_auth_request_module.c`):
 * `auth_request URI|off` runs a subrequest before the content phase;
 * `auth_request_set $var VALUE` copies values (typically `$upstream_http_*`
 * of the subrequest) once it has completed.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { DirectiveFailure, fail, listSlot, slot, type DirectiveSpec } from '../spec.js';
import type { CompiledValue, ValueSource, VariableDef, VariableRegistry } from '../variables.js';
import type { ConfChain } from '../spec.js';

const AUTH_REQUEST = 'ngx_http_auth_request_module';

/** The subrequest URI, or `off`. */
export const authRequestUri = slot<string | 'off'>('auth_request', 'off');
/** `handler`: the variable's set handler (`$args`, `$limit_rate`), called instead of storing the value. */
export const authRequestSets = listSlot<{ readonly index: number; readonly value: ValueSource; readonly handler: VariableDef['set'] }>('auth_request_set');

export const authRequestDirectives: readonly DirectiveSpec[] = [
  {
    name: 'auth_request', module: AUTH_REQUEST, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(authRequestUri)) throw new DirectiveFailure('is duplicate');
      cx.level.set(authRequestUri, d.args[0] === 'off' ? 'off' : d.args[0]!, d.loc);
    },
  },
  {
    name: 'auth_request_set', module: AUTH_REQUEST, contexts: HTTP_SRV_LOC, args: ['TAKE2'], effect: 'runtime',
    set: (d, cx) => {
      const name = d.args[0]!;
      if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
      const vars = cx.scope.variables;
      const index = vars.declare(name.slice(1), { kind: 'set' });
      cx.level.append(authRequestSets, { index, value: vars.value(d.args[1]!, d.loc), handler: vars.setHandler(name.slice(1)) }, d.loc);
    },
  },
];

/** `auth_request URI` with its `auth_request_set` assignments. */
export interface AuthRequestConf {
  readonly uri: string;
  /** `auth_request_set`: the variable's index, the value, and the variable's set handler if it has one (`$args`). */
  readonly sets: readonly {
    readonly index: number; readonly value: CompiledValue;
    readonly handler: VariableDef['set'];
  }[];
}

/** The auth_request settings of a level (`ngx_http_auth_request_merge_conf`), values bound; undefined for `off`. */
export function authRequestConf(c: ConfChain, vars: VariableRegistry): AuthRequestConf | undefined {
  const uri = c.get(authRequestUri);
  if (uri === 'off') return undefined;
  return { uri, sets: c.list(authRequestSets).map((s) => ({ index: s.index, value: vars.bind(s.value), handler: s.handler })) };
}
