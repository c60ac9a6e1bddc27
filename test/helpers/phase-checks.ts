// The phases of a cluster upgrade test: after each change, real clients (kubectl, client-node)
// through every gateway while the load runs, then the rest of the phase's dwell. Shared by the
// in-place and the replace-style rolling upgrades.
import { clientNodeChecks, discoveryListing, kubectlChecks, type ClientCheck } from '../load/clients.js';
import type { Clock } from '../load/clock.js';
import type { LoadHttp } from '../load/http.js';
import type { LoadRun } from '../load/run.js';
import { labNamespace, type Workload } from '../load/workload.js';

export interface PhaseCheck {
  readonly phase: string;
  readonly arm: string;
  /** GET /apis answers (of `tries`) that listed the skewed resource. */
  readonly listed: number;
  readonly checks: ClientCheck[];
}

export interface PhaseChecksOptions {
  readonly gateways: Readonly<Record<string, { readonly url: string; readonly kubeconfigFile: string }>>;
  readonly arms: readonly string[];
  readonly http: LoadHttp;
  readonly workload: Workload;
  readonly kubectl: string;
  readonly workDir: string;
  readonly clock: Clock;
  readonly progress: (line: string) => void;
  readonly run: LoadRun;
  readonly dwellMs: number;
  readonly discoveryTries: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function phaseChecks(o: PhaseChecksOptions): {
  readonly checks: PhaseCheck[];
  clientChecks(phase: string, skewedServed: boolean): Promise<void>;
  /** 2 s, the client checks, then the rest of dwellMs counted from sinceMs; a progress line with the load. */
  dwell(phase: string, sinceMs: number, skewedServed: boolean): Promise<void>;
} {
  const checks: PhaseCheck[] = [];
  const clientChecks = async (phase: string, skewedServed: boolean): Promise<void> => {
    for (const arm of o.arms) {
      const gw = o.gateways[arm];
      if (gw === undefined) throw new Error(`no gateway for arm ${arm}`);
      const listed = await discoveryListing(o.http, gw.url, o.workload.skewed, o.discoveryTries);
      const c = {
        kubeconfig: gw.kubeconfigFile,
        workDir: o.workDir,
        tag: `${phase.toLowerCase()}-${arm}`,
        namespace: labNamespace('clients'),
        skewed: o.workload.skewed,
        common: o.workload.common,
        skewedServed,
        clock: o.clock,
      };
      const list = [...(await kubectlChecks(o.kubectl, c)), ...(await clientNodeChecks(c))];
      checks.push({ phase: `${phase} via ${arm}`, arm, listed, checks: list });
      const failed = list.filter((x) => !x.ok);
      o.progress(
        `${phase} real clients via ${arm}: ${list.length - failed.length}/${list.length} ok${failed.length > 0 ? ` (failed: ${failed.map((x) => `${x.client} ${x.what}`).join(', ')})` : ''}; GET /apis listed ${o.workload.skewed.resource} ${listed}/${o.discoveryTries}`,
      );
    }
  };
  return {
    checks,
    clientChecks,
    async dwell(phase, sinceMs, skewedServed) {
      await sleep(2000);
      await clientChecks(phase, skewedServed);
      const left = sinceMs + o.dwellMs - o.clock();
      if (left > 0) await sleep(left);
      o.progress(`${phase} load: ${o.run.progress(sinceMs)}`);
    },
  };
}
