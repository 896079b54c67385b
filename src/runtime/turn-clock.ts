/**
 * nginx's cached time (`ngx_time_update`, `src/core/ngx_times.c`): nginx
 * reads the clock once per turn of its event loop, when the loop wakes,
 * and everything done in that turn sees that time. jinx's turn clock reads
 * `performance.now()` at the first use in a turn of node's event loop and
 * keeps it until the turn's check phase (`setImmediate`, which also keeps
 * the poll phase from blocking meanwhile), so that the work of one turn
 * takes no time, as in nginx, whatever the speed of the code.
 */
let cachedMs: number | undefined;
let turn = 0;

const endTurn = (): void => {
  cachedMs = undefined;
};

/** The current turn's time: monotonic milliseconds (fractional), the same for the whole turn. */
export function turnNowMs(): number {
  if (cachedMs === undefined) {
    cachedMs = performance.now();
    turn++;
    setImmediate(endTurn);
  }
  return cachedMs;
}

/** A number for the current turn, different in each turn in which the clock was read. */
export function currentTurn(): number {
  turnNowMs();
  return turn;
}
