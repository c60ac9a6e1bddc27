// An in-cluster client as a workload runs one: a Job whose pods run the unmodified kubectl image
// with no kubeconfig — kubectl's in-cluster config: the ServiceAccount token the kubelet mounts,
// the cluster CA from kube-root-ca.crt, the `kubernetes` Service's address from the environment —
// listing one resource with -v=6, so that each pod's log holds the URL it asked and the status it
// got. The Job allows no failure: a false 404 fails it.
import type { ApiAnswer } from './node-lab.js';

type Api = (base: string, method: string, path: string, body?: unknown) => Promise<ApiAnswer>;

export interface Listed {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
}

export const listPath = (r: Listed): string => `/apis/${r.group}/${r.version}/${r.resource}`;

/** Lets `namespace`'s default ServiceAccount get and list `r` (a ClusterRole and its binding). */
export async function allowList(api: Api, base: string, namespace: string, r: Listed): Promise<boolean> {
  const name = `${namespace}-list-${r.resource}`;
  const role = await api(base, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    metadata: { name },
    rules: [{ apiGroups: [r.group], resources: [r.resource], verbs: ['get', 'list'] }],
  });
  const binding = await api(base, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace }],
  });
  return role.status === 201 && binding.status === 201;
}

export interface JobRun {
  /** Complete or Failed (the Job's condition). */
  readonly outcome: string;
  readonly succeeded: number;
  readonly failed: number;
  /** Per pod: the server kubectl asked, the path, the status it got (from its -v=6 log). */
  readonly answers: readonly { readonly pod: string; readonly server: string; readonly path: string; readonly status: string }[];
}

export interface JobSpec {
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  readonly image: string;
  readonly runs: number;
  readonly parallelism: number;
  readonly list: Listed;
}

/** Creates the Job and waits (`until`) for its outcome; reads each pod's answer. */
export async function runInClusterJob(
  api: Api,
  base: string,
  j: JobSpec,
  until: <T>(what: string, limitMs: number, probe: () => Promise<T | undefined>) => Promise<T>,
  limitMs: number,
): Promise<JobRun> {
  const created = await api(base, 'POST', `/apis/batch/v1/namespaces/${j.namespace}/jobs`, {
    metadata: { name: j.name },
    spec: {
      completions: j.runs,
      parallelism: j.parallelism,
      // Each pod runs once and to its end: a pod that fails (as every one must while no apiserver
      // serves the resource) neither is retried nor ends the Job — and so its sibling — early,
      // which backoffLimit: 0 did (the Job failed at the first failure and its other pod was
      // deleted before it answered). The Job's outcome comes once every index has finished.
      completionMode: 'Indexed',
      backoffLimitPerIndex: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          nodeName: j.nodeName,
          containers: [
            {
              name: 'kubectl',
              image: j.image,
              imagePullPolicy: 'Never',
              args: ['get', `${j.list.resource}.${j.list.version}.${j.list.group}`, '-o', 'name', '-v=6'],
            },
          ],
        },
      },
    },
  });
  if (created.status !== 201) throw new Error(`Job ${j.name}: ${created.status} ${JSON.stringify(created.json)}`);
  const done = await until(`Job ${j.name} finished`, limitMs, async () => {
    const s = ((await api(base, 'GET', `/apis/batch/v1/namespaces/${j.namespace}/jobs/${j.name}`)).json as JobStatus).status;
    const c = s?.conditions?.find((x) => (x.type === 'Complete' || x.type === 'Failed') && x.status === 'True');
    return c === undefined ? undefined : { outcome: c.type, succeeded: s?.succeeded ?? 0, failed: s?.failed ?? 0 };
  });
  const pods = (await api(base, 'GET', `/api/v1/namespaces/${j.namespace}/pods?labelSelector=job-name%3D${j.name}`)).json as {
    items?: { metadata: { name: string } }[];
  };
  const answers = [];
  for (const p of pods.items ?? []) {
    const log = String((await api(base, 'GET', `/api/v1/namespaces/${j.namespace}/pods/${p.metadata.name}/log`)).json);
    const line = log.split('\n').find((x) => x.includes(listPath(j.list))) ?? '';
    const m = /"Response" verb="GET" url="(https:\/\/[^/"]+)([^"?]*)[^"]*" status="([^"]+)"/.exec(line);
    answers.push({
      pod: p.metadata.name,
      server: m?.[1] ?? '',
      path: m?.[2] ?? '',
      status: m?.[3] ?? `no answer in its log: ${log.slice(-200)}`,
    });
  }
  return { ...done, answers };
}

interface JobStatus {
  status?: { succeeded?: number; failed?: number; conditions?: { type: string; status: string }[] };
}
