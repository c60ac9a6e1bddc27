// The rooms' boundaries (eslint.config.js, docs/design.md "Rooms in layers") bite: each row lints
// a small module placed at a path in src/ and expects the rule named, or no problem at all. A rule
// that matched nothing would pass every other test; these rows fail if a glob stops matching.
import t from 'tap';
import { ESLint } from 'eslint';
import { packageRoot } from '../../src/util/package-root.js';

const eslint = new ESLint({ cwd: packageRoot() });

const PURE_RULE = '@typescript-eslint/no-restricted-imports';
const LAYER_RULE = 'no-restricted-imports';

interface Row {
  readonly name: string;
  readonly path: string;
  readonly code: string;
  /** The rule expected to report, or undefined for a clean module. */
  readonly rule?: string;
}

const rows: readonly Row[] = [
  {
    name: "a core module imports its own room's I/O part",
    path: 'src/discovery/core/probe.ts',
    code: "import { DiscoveryClient } from '../fetcher.js';\nexport const x = DiscoveryClient;\n",
    rule: PURE_RULE,
  },
  {
    name: 'a core module may name a type of its own room’s I/O part',
    path: 'src/discovery/core/probe.ts',
    code: "import type { DiscoveryClient } from '../fetcher.js';\nexport type X = DiscoveryClient;\n",
  },
  {
    name: "a core module imports util's logger",
    path: 'src/util/core/probe.ts',
    code: "import { createLogger } from '../log.js';\nexport const x = createLogger;\n",
    rule: PURE_RULE,
  },
  {
    name: 'a pure room imports a mixed room’s core',
    path: 'src/routing/probe.ts',
    code: "import { buildSnapshot } from '../discovery/core/snapshot.js';\nexport const x = buildSnapshot;\n",
  },
  {
    name: 'a pure room imports a mixed room’s I/O part',
    path: 'src/routing/probe.ts',
    code: "import { DiscoveryService } from '../discovery/service.js';\nexport const x = DiscoveryService;\n",
    rule: PURE_RULE,
  },
  {
    name: 'a pure room imports an I/O room',
    path: 'src/inspect/probe.ts',
    code: "import { drainTime } from '../app/skewgate.js';\nexport const x = drainTime;\n",
    rule: PURE_RULE,
  },
  {
    name: 'a pure room imports node:fs',
    path: 'src/membership/probe.ts',
    code: "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
    rule: PURE_RULE,
  },
  {
    name: 'a core module reads the clock',
    path: 'src/config/core/probe.ts',
    code: 'export const now = Date.now();\n',
    rule: 'no-restricted-properties',
  },
  {
    name: 'an I/O part reads the clock',
    path: 'src/discovery/probe.ts',
    code: 'export const now = Date.now();\n',
  },
  {
    name: 'a pure room imports constants.ts',
    path: 'src/routing/probe.ts',
    code: "import { UPSTREAM_HEADER } from '../constants.js';\nexport const x = UPSTREAM_HEADER;\n",
  },
  {
    name: 'a lower room imports a higher room’s core (layer order)',
    path: 'src/kube/probe.ts',
    code: "import { buildSnapshot } from '../discovery/core/snapshot.js';\nexport const x = buildSnapshot;\n",
    rule: LAYER_RULE,
  },
  {
    name: 'a lower room names a type of a higher room (layer order holds for types)',
    path: 'src/config/probe.ts',
    code: "import type { Snapshot } from '../discovery/core/types.js';\nexport type X = Snapshot;\n",
    rule: LAYER_RULE,
  },
  {
    name: 'the service imports the harness',
    path: 'src/app/probe.ts',
    code: "import { startLab } from '../../harness/lab/lab.js';\nexport const x = startLab;\n",
    rule: LAYER_RULE,
  },
];

for (const row of rows) {
  t.test(row.name, async (t) => {
    const [result] = await eslint.lintText(row.code, { filePath: `${packageRoot()}/${row.path}` });
    const rules = (result?.messages ?? []).map((m) => m.ruleId ?? `fatal: ${m.message}`);
    if (row.rule === undefined) t.same(rules, [], `${row.path} lints clean`);
    else t.ok(rules.includes(row.rule), `${row.path}: ${row.rule} reports (got ${rules.join(', ') || 'nothing'})`);
  });
}
