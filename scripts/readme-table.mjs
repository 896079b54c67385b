/**
 * What README's generated tables share (scripts/directive-table.mjs,
 * scripts/lint-rule-table.mjs): the table between two markers replaced, and
 * the command each script is: print the table, `--write` it into README.md,
 * or `--check` that README.md has it (exit 1 otherwise).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's README.md. */
export const README = join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');

/** README's text with the table between the markers `begin` and `end` replaced. @throws when a marker is missing */
export function replaceTable(readme, table, begin, end) {
  const from = readme.indexOf(begin);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) throw new Error(`README.md lacks the markers ${begin} … ${end}`);
  return `${readme.slice(0, from + begin.length)}\n${table}${readme.slice(to)}`;
}

/**
 * Runs a table script when it is the process's main module (`scriptUrl`:
 * its `import.meta.url`): `--write`, `--check` or print, as above. `what`
 * names the table in `--check`'s message.
 */
export async function tableCommand(scriptUrl, { makeTable, begin, end, what }) {
  if (!process.argv[1] || fileURLToPath(scriptUrl) !== process.argv[1]) return;
  const table = await makeTable();
  const mode = process.argv[2];
  if (mode !== '--write' && mode !== '--check') {
    process.stdout.write(table);
    return;
  }
  const readme = readFileSync(README, 'utf8');
  const next = replaceTable(readme, table, begin, end);
  if (mode === '--write') {
    if (next !== readme) writeFileSync(README, next);
  } else if (next !== readme) {
    process.stderr.write(`README.md: ${what} is out of date; run \`npm run docs\`\n`);
    process.exitCode = 1;
  }
}
