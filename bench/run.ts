// `node dist/bench/run.js [--quick] [a] … [k]`: runs the chosen benchmarks (all by default), prints
// progress on stderr and writes bench/RESULTS.md. Exit code 1 when a benchmark failed. --quick runs
// the benchmarks that have a quick shape (b, c) with far fewer rounds, for iterating on the bench
// itself, and writes .cache/RESULTS.quick.md instead (its numbers are not results).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';
import { stopAllChildren } from './child-ipc.js';
import { extractClusterSection } from './cluster-results.js';
import { benchDiscovery } from './discovery-bench.js';
import { DEFAULT_ENVOY_OPTIONS, QUICK_ENVOY_OPTIONS, benchEnvoy } from './envoy-bench.js';
import { DEFAULT_NODE_PHASES, QUICK_NODE_PHASES, benchNodePhases } from './node-phases.js';
import { DEFAULT_NODE_LAB, QUICK_NODE_LAB, benchNodeLab } from './node-phases-lab.js';
import { DEFAULT_EXTPROC_OPTIONS, QUICK_EXTPROC_OPTIONS, benchExtProc } from './extproc-bench.js';
import { benchIdentity } from './identity-bench.js';
import { machineInfo } from './machine.js';
import { keptSections, renderResults, type Failure, type Section } from './report.js';
import { benchRoute } from './route-bench.js';
import { benchWorkers, DEFAULT_WORKERS_OPTIONS, QUICK_WORKERS_OPTIONS } from './workers-bench.js';
import { benchStall } from './stall-bench.js';
import { DEFAULT_MVP_OPTIONS, QUICK_MVP_OPTIONS, benchMvp } from './mvp-bench.js';
import { DEFAULT_CERT_COST, QUICK_CERT_COST, benchCertCost } from './cert-cost.js';

interface Benchmark {
  readonly id: string;
  readonly title: string;
  readonly run: (progress: (msg: string) => void, quick: boolean) => Section | Promise<Section>;
}

const BENCHMARKS: readonly Benchmark[] = [
  { id: 'a', title: 'classify + decide per request', run: benchRoute },
  {
    id: 'b',
    title: 'server CPU per ext_proc request (real gRPC)',
    run: (p, quick) => benchExtProc(p, quick ? QUICK_EXTPROC_OPTIONS : DEFAULT_EXTPROC_OPTIONS),
  },
  {
    id: 'c',
    title: 'latency added through the real Envoy',
    run: (p, quick) => benchEnvoy(p, quick ? QUICK_ENVOY_OPTIONS : DEFAULT_ENVOY_OPTIONS),
  },
  { id: 'd', title: 'peer-aggregated /apis: merge and per-request cost', run: benchDiscovery },
  { id: 'e', title: 'client-certificate identity per request', run: benchIdentity },
  { id: 'f', title: 'the request path while a large discovery change is absorbed', run: benchStall },
  {
    id: 'g',
    title: 'decided requests per second against extproc.workers',
    run: (p, quick) => benchWorkers(p, quick ? QUICK_WORKERS_OPTIONS : DEFAULT_WORKERS_OPTIONS),
  },
  {
    id: 'h',
    title: "latency next to Kubernetes' built-in Mixed Version Proxy (real apiservers)",
    run: (p, quick) => benchMvp(p, quick ? QUICK_MVP_OPTIONS : DEFAULT_MVP_OPTIONS),
  },
  {
    id: 'i',
    title: "a real node's traffic through the phases of an upgrade",
    run: (p, quick) => benchNodePhases(p, quick ? QUICK_NODE_PHASES : DEFAULT_NODE_PHASES),
  },
  {
    id: 'j',
    title: 'what a client certificate costs Envoy on the fast path',
    run: (p, quick) => benchCertCost(p, quick ? QUICK_CERT_COST : DEFAULT_CERT_COST),
  },
  {
    id: 'k',
    title: "a real node's traffic on real apiservers through the phases, next to the built-in Mixed Version Proxy",
    run: (p, quick) => benchNodeLab(p, quick ? QUICK_NODE_LAB : DEFAULT_NODE_LAB),
  },
];

const started = Date.now();
function progress(msg: string): void {
  process.stderr.write(`[bench +${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
}

// Ctrl-C or a kill: stop the children (and their Envoys) before going.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    progress(`${sig}: stopping child processes`);
    void stopAllChildren().finally(() => process.exit(130));
  });
}

async function main(): Promise<number> {
  const all = process.argv.slice(2).map((a) => a.toLowerCase());
  const quick = all.includes('--quick');
  const args = all.filter((a) => a !== '--quick');
  const unknown = args.filter((a) => !BENCHMARKS.some((b) => b.id === a));
  if (unknown.length > 0) {
    process.stderr.write(
      `usage: node dist/bench/run.js [--quick] [${BENCHMARKS.map((b) => b.id).join('] [')}]\nunknown: ${unknown.join(' ')}\n`,
    );
    return 2;
  }
  const chosen = args.length === 0 ? BENCHMARKS : BENCHMARKS.filter((b) => args.includes(b.id));
  const machine = await machineInfo();
  progress(`${machine.cpu} × ${machine.cores}, Node ${machine.node}, Envoy ${machine.envoy}`);

  const sections: Section[] = [];
  const failures: Failure[] = [];
  for (const b of chosen) {
    progress(`(${b.id}) ${b.title}`);
    try {
      const s = await b.run(progress, quick);
      sections.push(s);
      for (const t of s.targets)
        progress(`(${b.id}) ${t.metric}: ${t.measured}${t.met === null ? '' : t.met ? ' — target met' : ` — target ${t.target} MISSED`}`);
    } catch (err) {
      const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
      progress(`(${b.id}) FAILED: ${error}`);
      failures.push({ id: b.id, title: b.title, error });
      await stopAllChildren();
    }
  }

  const file = quick ? join(packageRoot(), '.cache', 'RESULTS.quick.md') : join(packageRoot(), 'bench', 'RESULTS.md');
  // The real-cluster results (npm run test:cluster) live in the same file; keep them.
  const previous = await readFile(join(packageRoot(), 'bench', 'RESULTS.md'), 'utf8').catch(() => '');
  const cluster = extractClusterSection(previous);
  const notRun = BENCHMARKS.filter((b) => !chosen.includes(b));
  await mkdir(dirname(file), { recursive: true });
  await writeFile(
    file,
    renderResults({
      machine,
      command: `${quick ? '(QUICK, not results) ' : ''}npm run bench${args.length > 0 ? ` -- ${args.join(' ')}` : ''}  (= node dist/bench/run.js${args.length > 0 ? ` ${args.join(' ')}` : ''})`,
      sections,
      failures,
      skipped: notRun.map((b) => `(${b.id}) ${b.title}`),
      kept: keptSections(
        previous,
        notRun.map((b) => b.id),
      ),
      durationS: (Date.now() - started) / 1000,
    }) + (cluster === null ? '' : `\n${cluster}\n`),
  );
  progress(`wrote ${file}`);
  return failures.length > 0 ? 1 : 0;
}

main()
  .then(async (code) => {
    await stopAllChildren();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    progress(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    await stopAllChildren();
    process.exit(1);
  });
