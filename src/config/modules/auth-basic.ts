/**
 * The auth_basic module (`src/http/modules/ngx_http_auth_basic_module.c`):
 * `auth_basic REALM|off` and `auth_basic_user_file FILE`, both with variables.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { DirectiveFailure, slot, type DirectiveSpec } from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import type { ConfChain } from '../spec.js';
import type { ConfigScope } from '../scope.js';

const AUTH_BASIC = 'ngx_http_auth_basic_module';

/** `off` is kept as the literal value "off", as nginx compares it at request time. */
export const authBasicRealm = slot<ValueSource | undefined>('auth_basic', undefined);
export const authBasicUserFile = slot<ValueSource | undefined>('auth_basic_user_file', undefined);

export const authBasicDirectives: readonly DirectiveSpec[] = [
  {
    name: 'auth_basic', module: AUTH_BASIC, contexts: [...HTTP_SRV_LOC, 'limit_except'], args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(authBasicRealm)) throw new DirectiveFailure('is duplicate');
      cx.level.set(authBasicRealm, cx.scope.variables.value(d.args[0]!, d.loc), d.loc);
    },
  },
  {
    name: 'auth_basic_user_file', module: AUTH_BASIC, contexts: [...HTTP_SRV_LOC, 'limit_except'], args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(authBasicUserFile)) throw new DirectiveFailure('is duplicate');
      const path = d.args[0]!.startsWith('$') ? d.args[0]! : cx.scope.confPath(d.args[0]!);
      cx.level.set(authBasicUserFile, cx.scope.variables.value(path, d.loc), d.loc);
    },
  },
];

/**
 * `auth_basic` and `auth_basic_user_file`; a file name made from a leading
 * variable that is not absolute is taken relative to `confPrefix` (the
 * configuration's directory) when evaluated, as nginx's `conf_prefix`
 * complex values are.
 */
export interface AuthBasicConf {
  readonly realm: CompiledValue;
  readonly userFile: CompiledValue;
  readonly confPrefix: string | undefined;
}

/** The auth_basic settings of a level (`ngx_http_auth_basic_merge_loc_conf`), bound; undefined unless both are set. */
export function authBasicConf(c: ConfChain, scope: ConfigScope): AuthBasicConf | undefined {
  const realm = c.get(authBasicRealm);
  const userFile = c.get(authBasicUserFile);
  if (!realm || !userFile) return undefined;
  const vars = scope.variables;
  return { realm: vars.bind(realm), userFile: vars.bind(userFile), confPrefix: userFile.text.startsWith('$') ? scope.confPrefix : undefined };
}
