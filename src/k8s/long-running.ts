// Which requests kube-apiserver treats as long-running, and so bounds with no --request-timeout:
// its BasicLongRunningRequestCheck with the verbs and subresources kube-apiserver registers
// (k8s.io/apiserver pkg/server/filters/longrunning.go, cmd/kube-apiserver's options). Pure.
import type { RequestInfo } from './request-info.js';

const LONG_RUNNING_VERBS: ReadonlySet<string> = new Set(['watch', 'proxy']);
const LONG_RUNNING_SUBRESOURCES: ReadonlySet<string> = new Set(['attach', 'exec', 'proxy', 'log', 'portforward']);

/**
 * True for a watch, a proxy, attach/exec/portforward, logs (`-f` or not: kube-apiserver cannot
 * tell either) and /debug/pprof/; false for everything kube-apiserver ends at --request-timeout.
 * An invalid path is never long-running (kube-apiserver answers it at once).
 */
export function isLongRunning(info: RequestInfo): boolean {
  switch (info.kind) {
    case 'resource':
      return LONG_RUNNING_VERBS.has(info.verb) || LONG_RUNNING_SUBRESOURCES.has(info.subresource);
    case 'non-resource':
      return info.path.startsWith('/debug/pprof/');
    case 'invalid':
      return false;
    default: {
      const unreachable: never = info;
      throw new Error(`unknown request kind ${JSON.stringify(unreachable)}`);
    }
  }
}
