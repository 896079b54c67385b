/**
 * `jinx lint --format sarif`: the findings as a SARIF 2.1.0 log (OASIS
 * Static Analysis Results Interchange Format), as GitHub code scanning
 * reads it. One run; `tool.driver.rules` has every rule of `allRules`, the
 * engine's own codes and each other code a finding has (configuration
 * errors, nginx's warnings); a result has its rule, level, message, the
 * place as `physicalLocation` (a path under the working directory relative
 * to `%SRCROOT%`, else an absolute `file:` URI), the include chain as
 * `relatedLocations`, and a rule's `LintFix` as a `fixes` entry replacing
 * the whole line.
 */
import { relative, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SourceLoc } from '../../source-loc.js';
import { BUILTIN_CODES, includeChain, type LintFinding } from './engine.js';
import type { LintRule } from './rule.js';

/** The SARIF 2.1.0 schema URI, as GitHub expects in `$schema`. */
export const SARIF_SCHEMA = 'https://json.schemastore.org/sarif-2.1.0.json';

/** What the log says of the tool and where paths are relative to. */
export interface SarifOptions {
  readonly version: string;
  /** The working directory: `%SRCROOT%`, paths under it are relative. */
  readonly cwd: string;
  /** The main configuration file: the place of a finding that has none. */
  readonly confFile: string;
}

type Json = Record<string, unknown>;

/** A SARIF `artifactLocation` for an absolute path. */
function artifact(path: string, cwd: string): Json {
  const rel = relative(cwd, path);
  if (rel !== '' && !rel.startsWith('..') && !rel.startsWith(sep)) {
    return { uri: rel.split(sep).map(encodeURIComponent).join('/'), uriBaseId: '%SRCROOT%' };
  }
  return { uri: pathToFileURL(path).href };
}

/** A `physicalLocation` at a line (line 0: the file without a region). */
function physical(loc: SourceLoc, cwd: string): Json {
  return loc.line > 0 ? { artifactLocation: artifact(loc.file, cwd), region: { startLine: loc.line } } : { artifactLocation: artifact(loc.file, cwd) };
}

/** A rule descriptor: from a rule's data, the engine's own codes, or the bare code. */
function descriptor(code: string, rule: LintRule | undefined): Json {
  if (rule) {
    return {
      id: code,
      shortDescription: { text: rule.title },
      fullDescription: { text: rule.explanation },
      help: { text: rule.explanation },
      ...(/^https?:\/\//.test(rule.docUrl) ? { helpUri: rule.docUrl } : {}),
      defaultConfiguration: { level: rule.severity },
    };
  }
  const builtin = BUILTIN_CODES[code];
  if (builtin) return { id: code, shortDescription: { text: builtin.title }, fullDescription: { text: builtin.explanation }, help: { text: builtin.explanation } };
  return { id: code, shortDescription: { text: `nginx configuration check: ${code}` } };
}

/** The SARIF log of `findings`, as a JSON-ready object. */
export function sarifLog(findings: readonly LintFinding[], rules: readonly LintRule[], opts: SarifOptions): Json {
  const codes = [...rules.map((r) => r.code), ...Object.keys(BUILTIN_CODES)];
  for (const f of findings) if (!codes.includes(f.code)) codes.push(f.code);
  const byCode = new Map(rules.map((r) => [r.code, r]));
  const results = findings.map((f) => {
    // no place, or a `-g` directive (nginx's "command line", line 0): the main file
    const loc = f.loc && f.loc.line > 0 ? f.loc : { file: opts.confFile, line: 0 };
    const chain = includeChain(f.loc);
    const result: Json = {
      ruleId: f.code,
      ruleIndex: codes.indexOf(f.code),
      level: f.severity,
      message: { text: f.message },
      locations: [{ physicalLocation: physical(loc, opts.cwd) }],
    };
    if (chain.length > 0) {
      result['relatedLocations'] = chain.map((l, i) => ({ id: i + 1, physicalLocation: physical(l, opts.cwd), message: { text: 'included from here' } }));
    }
    if (f.fix) {
      result['fixes'] = [{
        description: { text: f.fix.description },
        artifactChanges: [{
          artifactLocation: artifact(f.fix.loc.file, opts.cwd),
          replacements: [{ deletedRegion: { startLine: f.fix.loc.line }, insertedContent: { text: f.fix.text } }],
        }],
      }];
    }
    return result;
  });
  return {
    $schema: SARIF_SCHEMA,
    version: '2.1.0',
    runs: [{
      tool: {
        driver: {
          name: 'jinx lint',
          version: opts.version,
          rules: codes.map((c) => descriptor(c, byCode.get(c))),
        },
      },
      originalUriBaseIds: { '%SRCROOT%': { uri: pathToFileURL(opts.cwd.endsWith(sep) ? opts.cwd : opts.cwd + sep).href } },
      results,
    }],
  };
}
