// What the benchmark children and the parent say to each other over IPC. Kept apart from the
// child modules, which start their work when loaded and so must never be imported by the parent.

/** (b) The ext_proc server child is listening. */
export interface ExtProcChildReady {
  readonly port: number;
  readonly logLevel: string;
}

/** (b) The ladder's rungs above bare node:http2 and below grpc-js (extproc-ladder-child.ts). */
export type LadderRung = 'codec' | 'headers' | 'route' | 'routing';

/** (b) The ext_proc server child's CPU time so far. */
export interface CpuSample {
  /** process.cpuUsage() user + system, µs. */
  readonly cpuUs: number;
  readonly rssBytes: number;
}

/** (c) The stack lives here, under the package root; its PKI is reused from run to run. */
export const STACK_DIR = '.cache/bench-stack';

/** (c) The three Envoys of the stack child, one per arm. */
export type EnvoyArm = 'fast' | 'every' | 'baseline';

/** (c) The stack child is up: where to send load, and the Envoy processes to kill if it hangs. */
export interface StackChildReady {
  /** Each arm's gateway URL and Envoy pid. */
  readonly urls: Readonly<Record<EnvoyArm, string>>;
  readonly pids: Readonly<Record<EnvoyArm, number>>;
  readonly caFile: string;
  readonly token: string;
}

/** (c) CPU time so far, µs: the stack child (fakes + skewgate) and each Envoy (all threads). */
export interface StackCpuSample {
  readonly nodeUs: number;
  readonly envoyUs: Readonly<Record<EnvoyArm, number>>;
}

/** (c) Whether the fast arm's Envoy runs skewgate's fast-path routes: rds.json has them and Envoy runs that version. */
export interface FastPathState {
  readonly written: boolean;
  readonly fileVersion: string | null;
  readonly runningVersion: string | null;
  /** The fast-path routes in rds.json and the length of each one's path regex. */
  readonly routes: readonly { readonly name: string; readonly regexChars: number }[];
  /** The cluster the routes send to: the fast pool (envoy/clusters.ts fastClusterName); null without routes. */
  readonly cluster: string | null;
}

/** (f) what the stall child is asked to run: the apiservers to discover, and the slice budget (null: one slice, unbounded). */
export interface StallChildStart {
  readonly apiservers: readonly { name: string; url: string; caFile: string; credentials: { tokenFile: string } }[];
  readonly sliceBudgetMs: number | null;
  /** discovery.maxDocumentBytes (absent: the default). */
  readonly maxDocumentBytes?: number;
}

export interface StallChildStatus {
  readonly generation: number;
  /** Resources in each apiserver's view, in config order. */
  readonly perServer: readonly number[];
  /** Each apiserver's failed discovery rounds in a row, and the last one's error code. */
  readonly failures: readonly { readonly consecutive: number; readonly code: string | null }[];
  readonly rssBytes: number;
  /** V8's heap in use and its size, and memory outside it (Buffers' included). */
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
  /** The child's own event-loop delay since the last resetLoopDelay (perf_hooks, 5 ms resolution). */
  readonly loopDelayMaxMs: number;
  /** The longest garbage collection pause since the last resetLoopDelay, and its kind. */
  readonly gcMaxMs: number;
  readonly gcMaxKind: string;
}

/** (i) The node-phases stack lives here, under the package root; its PKI is reused from run to run. */
export const NODE_STACK_DIR = '.cache/bench-node-stack';

/** (i) The node-phases stack child is up: each arm's gateway and Envoy pid, and the client's credentials. */
export interface NodeStackReady {
  readonly urls: { readonly skewgate: string; readonly baseline: string };
  readonly pids: { readonly skewgate: number; readonly baseline: number; readonly skewgateProcess: number };
  readonly caFile: string;
  readonly token: string;
  /** A client certificate of the stack's CA, presented to every arm (only skewgate's asks for it). */
  readonly certFile: string;
  readonly keyFile: string;
}

/** (i) CPU time so far, µs: the stack child (the fakes), skewgate's own process and each Envoy (all threads). */
export interface NodeStackCpu {
  readonly fakesUs: number;
  readonly skewgateUs: number;
  readonly skewgateEnvoyUs: number;
  readonly baselineEnvoyUs: number;
}
