/**
 * The mirror module (`src/http/modules/ngx_http_mirror_module.c`):
 * `mirror URI|off` (several URIs at one level, each a background
 * subrequest of the main request in the precontent phase) and
 * `mirror_request_body on|off` (whether the client's body is read before
 * the mirrors start, and given to them).
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { DirectiveFailure, flagSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';

const MIRROR = 'ngx_http_mirror_module';

/** The level's mirror URIs in order, `off`, or unset (inherited, nginx's `NGX_CONF_UNSET_PTR`). */
const mirrorUris = slot<readonly string[] | 'off'>('mirror', 'off');
const mirrorRequestBody = slot('mirror_request_body', true);

export const mirrorDirectives: readonly DirectiveSpec[] = [
  {
    name: 'mirror', module: MIRROR, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    // ngx_http_mirror: `off` only alone at its level, URIs appended
    set: (d, cx) => {
      const own = cx.level.own(mirrorUris)?.value;
      const uri = d.args[0]!;
      if (uri === 'off') {
        if (own !== undefined) throw new DirectiveFailure('is duplicate');
        cx.level.set(mirrorUris, 'off', d.loc);
        return;
      }
      if (own === 'off') throw new DirectiveFailure('is duplicate');
      cx.level.replace(mirrorUris, [...(own ?? []), uri], d.loc);
    },
  },
  {
    name: 'mirror_request_body', module: MIRROR, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime',
    set: flagSetter(mirrorRequestBody),
  },
];

/** A location's mirrors: the URIs subrequested, and whether the client's body is read first and passed to them. */
export interface MirrorConf {
  readonly uris: readonly string[];
  readonly requestBody: boolean;
}

/** The mirror settings of a level (`ngx_http_mirror_merge_loc_conf`); undefined without mirrors. */
export function mirrorConf(c: ConfChain): MirrorConf | undefined {
  const uris = c.get(mirrorUris);
  if (uris === 'off') return undefined;
  return { uris, requestBody: c.get(mirrorRequestBody) };
}
