/**
 * The auth_basic module (`src/http/modules/ngx_http_auth_basic_module.c`):
 * `auth_basic REALM|off` and `auth_basic_user_file FILE`, both with variables.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { DirectiveFailure, slot, type DirectiveSpec } from '../spec.js';
import type { ValueSource } from '../variables.js';

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
