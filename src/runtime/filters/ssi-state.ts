/**
 * What the SSI filter (`filters/ssi.ts`) keeps for a request, apart from the
 * filter, so the request (`runtime/request.ts`) can hold it without
 * importing the filter.
 */
import { SSI_DEFAULT_TIMEFMT } from '../../config/ssi-time.js';

const DEFAULT_ERRMSG = '[an error occurred while processing the directive]';

/** A named `block`: its text, commands in it kept as text (`ngx_http_ssi_block_t`). */
export interface Block {
  readonly name: string;
  readonly parts: Buffer[];
}

/**
 * What the SSI filter keeps for a request (nginx's module ctx): `timefmt`
 * and `errmsg` of its own page; SSI variables, blocks and the last regex's
 * captures live in the main request's state and are shared by every
 * included page.
 */
export class SsiState {
  timefmt = SSI_DEFAULT_TIMEFMT;
  errmsg = DEFAULT_ERRMSG;
  /** Variables of `set`, `include … set=` and named captures, by lowercase name. */
  readonly variables = new Map<string, string>();
  readonly blocks: Block[] = [];
  /** `$0`…`$9` of the last regex an `if` matched. */
  captures: readonly string[] = [];
}
