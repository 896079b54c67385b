/**
 * The MP4 module (`src/http/modules/ngx_http_mp4_module.c`, in nginx's and
 * Debian's packages): `mp4` makes a location's content handler serve MP4
 * files with pseudo-streaming, `?start=SECONDS` and `?end=SECONDS` cropping
 * the movie to that time span. `mp4_buffer_size` is the first read of a
 * file, `mp4_max_buffer_size` the largest `moov` atom it reads, and
 * `mp4_start_key_frame on` starts each track at the key frame before the
 * start time. The handler is `src/runtime/handlers/mp4.ts`.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { flagSetter, sizeSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';
import { setContentHandler } from './http-core.js';

const MODULE = 'ngx_http_mp4_module';

const bufferSize = slot('mp4_buffer_size', 512 * 1024);
const maxBufferSize = slot('mp4_max_buffer_size', 10 * 1024 * 1024);
const startKeyFrame = slot('mp4_start_key_frame', false);

export const mp4Directives: readonly DirectiveSpec[] = [
  {
    name: 'mp4', module: MODULE, contexts: ['location'], args: ['NOARGS'], effect: 'runtime',
    // ngx_http_mp4 sets the location's handler again without complaint
    set: (d, cx) => setContentHandler(cx, 'mp4', d.loc),
  },
  { name: 'mp4_buffer_size', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(bufferSize) },
  { name: 'mp4_max_buffer_size', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: sizeSetter(maxBufferSize) },
  { name: 'mp4_start_key_frame', module: MODULE, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(startKeyFrame) },
];

/** A level's MP4 settings (`ngx_http_mp4_conf_t`). */
export interface Mp4Conf {
  /** `mp4_buffer_size`: how much of the file the first read takes, in bytes (512k by default). */
  readonly bufferSizeBytes: number;
  /** `mp4_max_buffer_size`: the largest `moov` atom read beyond `mp4_buffer_size`, in bytes (10m by default). */
  readonly maxBufferSizeBytes: number;
  /** `mp4_start_key_frame`: a track starts at the sync sample before the start time (an edit list skips to the time). */
  readonly startKeyFrame: boolean;
}

/** The merged settings of a level (`ngx_http_mp4_merge_conf`). */
export function mp4Conf(c: ConfChain): Mp4Conf {
  return { bufferSizeBytes: c.get(bufferSize), maxBufferSizeBytes: c.get(maxBufferSize), startKeyFrame: c.get(startKeyFrame) };
}
