// Fault tests under load (issue 14, item 5): real kube-apiservers (two KUBE_OLD, one KUBE_NEW: the
// only one serving the skewed resource), a real Envoy rendered by skewgate with a local and a peer
// skewgate (envoy.extprocPeers, mutual TLS) and its health listener, and an open-loop load of
// token and client-certificate clients (creates, gets, lists of the skewed and a common resource,
// plus watches). One fault after another, each in its own phase:
//   1. the local skewgate SIGKILLed, restarted once the peer has answered enough requests;
//   2. the only apiserver serving the skewed resource SIGKILLed, restarted once skewgate has
//      answered enough requests for it itself;
//   3. an old apiserver made unreachable without closing anything (iptables DROP, both
//      directions, the INPUT chain; test/helpers/packet-drop.ts) until skewgate has logged it
//      not ready, enough requests were sent after that and envoy.requestTimeout has passed;
//   4. etcd stopped until skewgate has logged every apiserver not ready and answered enough
//      requests itself, then started again on its data.
// Every step waits for the event it needs (test/load/wait.ts) and each claim is an ordering of
// recorded events: the gateway's own logged transitions (test/load/gateway-view.ts), the
// harness's timeline, the requests; the only durations judged are bounds of the gateway's config.
// Per fault and arm: requests sent, failed (by cause), false 404s, lost and duplicated writes (every
// object listed straight from an apiserver at the end), the longest request, how long new requests
// kept failing. Written to bench/RESULTS.md. Fails, never skips, when a part or root is missing.
// Claims: nothing fails after the skewgate kill but what was in flight (a cut stream fails open);
// no false 404 otherwise; no lost or duplicated write; skewgate's fast 503 + Retry-After only while
// no capable apiserver is ready; no request (watches aside) past envoy.requestTimeout; new
// requests avoid a silent apiserver once skewgate has logged it not ready; recovery from etcd unaided.
// Uses three alias addresses of its lab slot (removed afterwards).
import t from 'tap';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { removeLoopbackAlias } from '../../harness/lab/net.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { faultTable, phaseTable, problemsTable, render, timelineTable, writeClusterPart } from '../../bench/cluster-results.js';
import { loadConfig } from '../../src/config/load.js';
import { account, isProblem, judge404, UNAVAILABLE_REASON, total, type AccountingRules } from '../load/accounting.js';
import { faultRows, type FaultMark, type FaultRow } from '../load/faults.js';
import { certainlyInGap, describe503, gatewayGaps, skewgateLogRecords, unexplained503s } from '../load/gateway-view.js';
import { LoadHttp } from '../load/http.js';
import { ReadinessWatch, servingForGoodAt } from '../load/readiness-watch.js';
import { LoadRun, freeLoopbackPort, seededRng } from '../load/run.js';
import { allUnreadySpans, readyForGoodAt, readySpans, type AllUnreadySpan } from '../load/timeline.js';
import { untilAnswered, untilGap, untilInEffect, untilTrue } from '../load/wait.js';
import type { RequestRecord } from '../load/types.js';
import { ensureNamespace, listFinal } from '../load/verify.js';
import { configMaps, labNamespace, mutatingAdmissionPolicies, type Workload } from '../load/workload.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { dropPackets } from '../helpers/packet-drop.js';

const RATE_PER_ARM = 15;
const ARMS = ['token', 'cert'] as const;
const GATEWAY = 'faults';
/** Each fault phase begins this long before its fault, so that what was in flight at it belongs to it. */
const LEAD_MS = 1500;
// The least evidence each claim needs, per arm (token and cert alike). The phases last until the
// load has produced it: at RATE_PER_ARM, 30 requests are 2 s of load.
/** Answered before the first fault. */
const MIN_STEADY = 30;
/** Sent while the local skewgate is gone (after its exit, before its restart): the peer decides them. */
const MIN_WHILE_SKEWGATE_DOWN = 30;
/** skewgate's own 503s (Retry-After) while kas-33, the only server of the skewed resource, is down. */
const MIN_SKEWGATE_503 = 10;
/** Sent after skewgate logged the silent apiserver not ready, while its packets are still dropped. */
const MIN_SILENT = 30;
/** Decided for certain while skewgate saw no apiserver ready (etcd away): each must be skewgate's own 503. */
const MIN_OUTAGE = 20;
/** The outage lasts until a few more than MIN_OUTAGE: an apiserver ready for one probe mid-outage splits it. */
const OUTAGE_MARGIN = 5;
/** Sent after each repair was in effect (skewgate back, kas-33 routed by again, packets flowing, every apiserver serving). */
const MIN_AFTER = 30;
/** Acknowledged creates over the run (both arms), for the lost and duplicated writes check. */
const MIN_ACKED_CREATES = 100;
/** The clients' own bound: long enough to see how long a request to a silent apiserver hangs. */
const CLIENT_TIMEOUT_MS = 30_000;
/**
 * envoy.requestTimeout of the test's gateway (default 65 s, kube-apiserver's own 60 s and a
 * margin): Envoy answers 504 to a request the apiserver would have ended itself (not a watch)
 * once it has waited this long. Short here so that the silent apiserver shows it within the run;
 * the claim is that no request lasts as long as CLIENT_TIMEOUT_MS (6 × this, under the default).
 */
const REQUEST_TIMEOUT_MS = 5000;
/** A read from etcd, sent straight to each apiserver after each /readyz that passes. */
const SERVING_PATH = '/api/v1/namespaces/default/configmaps?limit=1';

const slot = claimLabSlot();
const SERVERS = [
  { name: 'kas-31', ip: slot.alias(1), version: 'old' },
  { name: 'kas-32', ip: slot.alias(2), version: 'old' },
  { name: 'kas-33', ip: slot.alias(3), version: 'new' },
] as const;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.setTimeout(10 * 60_000);
t.teardown(() => Promise.all(SERVERS.map((s) => removeLoopbackAlias(s.ip))));

t.test('faults under a mixed token and client-certificate load', async (t) => {
  await withLoadLab(
    'faults',
    // Enough connections that a request held by a silent apiserver never queues another in the client.
    { connections: 512, addresses: slot, timeoutMs: CLIENT_TIMEOUT_MS },
    async ({ parts: { versions: v }, dir, session, lab, timeline, http, clock, origin, progress, runSeconds, track }) => {
      const spec = (s: (typeof SERVERS)[number]): ApiServerSpec => ({
        name: s.name,
        version: s.version === 'old' ? v.kubeOld : v.kubeNew,
        ip: s.ip,
        port: 6443,
        placement: 'alias',
      });
      const [old1, , skewed] = SERVERS.map(spec) as [ApiServerSpec, ApiServerSpec, ApiServerSpec];
      await Promise.all(SERVERS.map((s) => session.start(spec(s))));
      const gw = await lab.startGateway({
        name: GATEWAY,
        withSkewgate: true,
        peerSkewgate: true,
        healthListener: true,
        requestTimeout: `${REQUEST_TIMEOUT_MS / 1000}s`,
        port: await freeLoopbackPort(),
      });
      const healthUrl = gw.healthUrl ?? '';
      const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
      for (const arm of ARMS) await ensureNamespace(session.direct, lab.apiServerUrl(old1.name), labNamespace(arm));

      // kubeadm's kubelets, scheduler and controller-manager authenticate with client certificates.
      const certHttp = new LoadHttp({
        caFile: lab.pki.caFile,
        clientCert: { certFile: lab.pki.adminCertFile, keyFile: lab.pki.adminKeyFile },
        timeoutMs: CLIENT_TIMEOUT_MS,
        connections: 512,
      });
      const probeHttp = new LoadHttp({ caFile: lab.pki.caFile, token: lab.pki.adminToken, timeoutMs: 1000, connections: 8 });
      const readiness = new ReadinessWatch({
        http: probeHttp,
        servers: SERVERS.map((s) => ({ name: s.name, version: spec(s).version, url: lab.apiServerUrl(s.name) })),
        timeline,
        clock,
        servingPath: SERVING_PATH,
      });
      // The gateway's health listener, as the load balancer in front of the gateways sees it.
      const health: { atMs: number; status: number }[] = [];
      let probing = true;
      const healthProbe = (async () => {
        while (probing) {
          const atMs = clock();
          let status = 0;
          try {
            const res = await request(healthUrl, { signal: AbortSignal.timeout(1000) });
            await res.body.dump();
            status = res.statusCode;
          } catch {
            // no answer: 0
          }
          health.push({ atMs, status });
          await sleep(200);
        }
      })();

      const run = track(
        new LoadRun({
          arms: [
            { arm: 'token', baseUrl: gw.url },
            { arm: 'cert', baseUrl: gw.url, http: certHttp },
          ],
          http,
          workload,
          ratePerSec: RATE_PER_ARM,
          clock,
          rng: seededRng(14),
        }),
      );
      const marks: FaultMark[] = [];
      const notes: string[] = [];
      // The bounds the verdicts use, read from the gateway's own config (src/config/core/schema.ts defaults).
      const config = loadConfig(gw.configFile);
      const connectTimeoutMs = config.envoy.connectTimeout;
      const localLog = lab.logFile(`skewgate-${GATEWAY}`);
      const names = SERVERS.map((s) => s.name);
      const waits = { requests: () => run.log.requests, clock, progress };
      /** Until each arm has `min` answered requests that `pick` selects. */
      const eachArm = async (what: string, pick: (r: RequestRecord) => boolean, min: number): Promise<void> => {
        for (const arm of ARMS)
          await untilAnswered(
            `${what} (${arm})`,
            waits,
            (r) => r.arm === arm && r.op !== 'watch' && pick(r),
            min,
            (r) => r.arm === arm,
          );
      };
      /** When each arm's skewgate routed by `server` again after `sinceMs`: its log line, then a 2xx of `kind` sent after it. */
      const inEffect = async (server: string, sinceMs: number, kind: 'skewed' | 'common'): Promise<Record<string, number>> => {
        const out: Record<string, number> = {};
        for (const arm of ARMS)
          out[arm] = (
            await untilInEffect({ logFile: localLog, seeds: names, server, sinceMs, logFromMs: origin, arm, kind, ...waits })
          ).inEffectAtMs;
        return out;
      };
      const phase = async (name: string): Promise<void> => {
        timeline.phase(name);
        progress(`${name}: ${run.progress()}`);
        await sleep(LEAD_MS);
      };
      let kas33Back: Record<string, number> = {};
      let silentAt = Number.POSITIVE_INFINITY;
      let etcdBack: Record<string, number> = {};
      try {
        readiness.start();
        const steadyAt = timeline.phase('steady');
        progress(`steady: ${RATE_PER_ARM} req/s per arm (${ARMS.join(', ')}) through ${gw.url}`);
        run.start();
        await eachArm('answers before the first fault', (r) => r.startMs >= steadyAt, MIN_STEADY);

        // 1. The local skewgate crashes; the peer states certificates meanwhile.
        await phase('skewgate SIGKILL');
        {
          const at = clock();
          await lab.killSkewgate(GATEWAY, 'local');
          const done = clock();
          const flags = (await lab.extprocHosts(GATEWAY)).get('local');
          notes.push(`skewgate SIGKILL: signal to exit ${(done - at).toFixed(0)} ms; Envoy's flags for it right after: ${flags ?? '?'}`);
          await eachArm('requests sent while the local skewgate is gone', (r) => r.startMs > done, MIN_WHILE_SKEWGATE_DOWN);
          const restartAt = clock();
          await lab.startSkewgate(GATEWAY, 'local');
          const back = clock();
          notes.push(
            `skewgate restarted: serving and healthy in Envoy again ${((back - restartAt) / 1000).toFixed(1)} s after the start command`,
          );
          marks.push({ phase: 'skewgate SIGKILL', faultAtMs: at, faultDoneMs: done, repairAtMs: back });
          await eachArm('answers after the restart', (r) => r.startMs > back, MIN_AFTER);
        }

        // 2. The only apiserver that serves the skewed resource crashes, and is restarted.
        await phase('apiserver SIGKILL');
        {
          const at = clock();
          await session.kill(skewed.name);
          const done = clock();
          await eachArm(
            `skewgate's own 503s while ${skewed.name} is down`,
            (r) => r.startMs > done && r.status === 503 && r.reason === UNAVAILABLE_REASON,
            MIN_SKEWGATE_503,
          );
          const ready = await session.start(skewed);
          marks.push({ phase: 'apiserver SIGKILL', faultAtMs: at, faultDoneMs: done, repairAtMs: ready });
          kas33Back = await inEffect(skewed.name, ready, 'skewed');
          await eachArm(`answers after ${skewed.name} is routed by again`, (r) => r.startMs >= (kas33Back[r.arm] ?? Infinity), MIN_AFTER);
        }

        // 3. An old apiserver goes silent: no RST, no FIN, packets dropped both ways.
        await phase('packets dropped');
        {
          const at = clock();
          const drop = await dropPackets(t, { ip: old1.ip, port: old1.port });
          progress(`packets to and from ${old1.ip}:${old1.port} dropped`);
          silentAt = await untilGap({
            logFile: localLog,
            seeds: names,
            capable: (s) => s === old1.name,
            what: `${old1.name} not ready`,
            sinceMs: at,
            logFromMs: origin,
            ...waits,
          });
          progress(`skewgate logged ${old1.name} not ready ${((silentAt - at) / 1000).toFixed(1)} s after the drop`);
          await eachArm('requests sent after skewgate saw the silent apiserver', (r) => r.startMs >= silentAt, MIN_SILENT);
          // What was sent to it before is held until envoy.requestTimeout ends it (a 504), not the packets' return.
          await sleep(Math.max(0, silentAt + REQUEST_TIMEOUT_MS - clock()));
          const restoreAt = clock();
          await drop.restore();
          progress('packets flow again');
          marks.push({ phase: 'packets dropped', faultAtMs: at, repairAtMs: restoreAt });
          await eachArm('answers after the packets flow again', (r) => r.startMs > restoreAt, MIN_AFTER);
        }

        // 4. etcd away: every apiserver fails /readyz; nothing is done to the gateway.
        await phase('etcd stopped');
        {
          const at = clock();
          await lab.stopEtcd();
          const done = clock();
          progress(`etcd stopped in ${((done - at) / 1000).toFixed(1)} s`);
          const outageAt = await untilGap({
            logFile: localLog,
            seeds: names,
            capable: () => true,
            what: 'every apiserver not ready',
            sinceMs: at,
            logFromMs: origin,
            ...waits,
          });
          progress(`skewgate logged every apiserver not ready ${((outageAt - at) / 1000).toFixed(1)} s after the stop`);
          await eachArm(
            "skewgate's own 503s while it sees no apiserver ready",
            (r) => r.startMs >= outageAt && r.reason === UNAVAILABLE_REASON,
            MIN_OUTAGE + OUTAGE_MARGIN,
          );
          await lab.startEtcd({ keepData: true });
          const back = clock();
          progress(`etcd started again (${((back - at) / 1000).toFixed(1)} s after the stop)`);
          marks.push({ phase: 'etcd stopped', faultAtMs: at, faultDoneMs: done, repairAtMs: back });
          // Nothing is done to the gateway or the apiservers: they are waited for, not helped.
          await untilTrue('every apiserver ready and serving again', waits, () => readiness.allReady() && readiness.allServing());
          const servingAt = clock();
          progress(`every apiserver ready and serving again ${((servingAt - back) / 1000).toFixed(1)} s after etcd`);
          const each = await Promise.all(names.map((n) => inEffect(n, back, n === skewed.name ? 'skewed' : 'common')));
          etcdBack = Object.fromEntries(ARMS.map((arm) => [arm, Math.max(servingAt, ...each.map((e) => e[arm] ?? Infinity))]));
          await eachArm('answers after the recovery', (r) => r.startMs > (etcdBack[r.arm] ?? Infinity), MIN_AFTER);
        }
        progress(`stopping the load: ${run.progress()}`);
        await run.stop();
      } finally {
        probing = false;
        await healthProbe;
        await readiness.stop();
        await certHttp.close().catch(() => undefined);
        await probeHttp.close().catch(() => undefined);
      }

      // The raw records, for a closer look at a run (not part of the results).
      await writeFile(
        join(dir, 'faults-requests.json'),
        JSON.stringify({ marks, timeline: timeline.snapshot(), requests: run.log.requests }),
      );
      const final = await listFinal(session.direct, lab.apiServerUrl(skewed.name), workload, ARMS);
      const tl = timeline.snapshot();
      const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
      const a = account({ timeline: tl, requests: run.log.requests, watch: run.log.watch, final, rules });
      const acked = new Map<string, { atMs: number }>();
      for (const r of run.log.requests)
        if (r.op === 'create' && r.status !== null && r.status < 300 && r.name !== undefined)
          acked.set(`${r.arm}\u0000${r.kind}\u0000${r.name}`, { atMs: r.endMs });
      const spans = readySpans(tl);
      const false404 = (r: RequestRecord): boolean => judge404(r, tl, spans, rules, acked) !== null;
      const rows = faultRows({ timeline: tl, requests: run.log.requests, marks, false404 });
      const row = (phaseName: string, arm: string): FaultRow => rows.find((r) => r.phase === phaseName && r.arm === arm) as FaultRow;
      const mark = (phaseName: string): FaultMark => marks.find((m) => m.phase === phaseName) as FaultMark;
      const inPhase = (phaseName: string, r: RequestRecord): boolean => {
        const i = tl.phases.findIndex((p) => p.phase === phaseName);
        const from = tl.phases[i]?.atMs ?? Number.POSITIVE_INFINITY;
        const to = tl.phases[i + 1]?.atMs ?? Number.POSITIVE_INFINITY;
        return r.startMs >= from && r.startMs < to;
      };
      /** The phase's end: the next phase's mark (or the end of the run). */
      const phaseEnd = (phaseName: string): number => tl.phases[tl.phases.findIndex((p) => p.phase === phaseName) + 1]?.atMs ?? Infinity;
      /** The health listener's answers from the fault to the end of its phase. */
      const healthFrom = (phaseName: string): typeof health => {
        const m = mark(phaseName);
        return health.filter((h) => h.atMs >= m.faultAtMs && h.atMs < phaseEnd(phaseName));
      };
      const healthIn = (phaseName: string): string => {
        const seen = new Map<number, number>();
        for (const h of healthFrom(phaseName)) seen.set(h.status, (seen.get(h.status) ?? 0) + 1);
        return [...seen].map(([s, c]) => `${s === 0 ? 'no answer' : s}×${c}`).join(' ');
      };

      /** When the health listener first failed after `fromMs`, and when it passed again after that (null: never). */
      const readyFlip = (fromMs: number): { failAt: number | null; passAt: number | null } => {
        const fail = health.find((h) => h.atMs >= fromMs && h.status !== 200);
        const pass = fail === undefined ? undefined : health.find((h) => h.atMs > fail.atMs && h.status === 200);
        return { failAt: fail?.atMs ?? null, passAt: pass?.atMs ?? null };
      };

      // ---- the numbers ----
      const reqs = run.log.requests;
      const kill = mark('skewgate SIGKILL');
      // A stream open on the skewgate that dies is cut. Cut before its answer, Envoy retries it on the
      // peer; an answer already begun cannot be, and Envoy fails open (extproc.failureMode): balanced,
      // an old apiserver may answer 404 (a token) or the backstop 401 (a certificate).
      const inFlightAtKill = (r: RequestRecord): boolean =>
        inPhase('skewgate SIGKILL', r) && r.startMs <= (kill.faultDoneMs ?? 0) && r.endMs >= kill.faultAtMs;
      const cutAtKill = reqs.filter((r) => inFlightAtKill(r) && (r.status === 401 || (r.status === 404 && false404(r))));
      const kasKill = mark('apiserver SIGKILL');
      const drop = mark('packets dropped');
      const etcd = mark('etcd stopped');
      const skewgate503s = reqs.filter((r) => inPhase('apiserver SIGKILL', r) && r.status === 503 && r.reason === UNAVAILABLE_REASON);
      const slowest503 = Math.max(0, ...skewgate503s.map((r) => r.endMs - r.startMs));
      const kas33After = reqs.filter(
        (r) => inPhase('apiserver SIGKILL', r) && r.op !== 'watch' && r.startMs >= (kas33Back[r.arm] ?? Infinity),
      );
      // Sent once skewgate had logged the silent apiserver not ready, while its packets were still dropped.
      const silentNew = reqs.filter((r) => r.op !== 'watch' && r.startMs >= silentAt && r.startMs < (drop.repairAtMs ?? 0));
      const silentInFlight = reqs.filter((r) => r.op !== 'watch' && r.startMs < silentAt && r.endMs > drop.faultAtMs);
      // The client's own bound: reached only by a request nobody else ended (no route timeout).
      const atClientBound = reqs.filter((r) => r.op !== 'watch' && r.endMs - r.startMs >= CLIENT_TIMEOUT_MS);
      const longest = (rs: readonly RequestRecord[]): number => Math.max(0, ...rs.map((r) => r.endMs - r.startMs));
      // The harness's view of the outage, for the report: the longest span in which every
      // apiserver failed /readyz (one can flap ready for a probe, and pass /readyz before the
      // harness sees etcd healthy, so it is taken from the timeline, not the marks).
      const outage = allUnreadySpans(tl, names, etcd.faultAtMs, Number.POSITIVE_INFINITY).reduce<AllUnreadySpan | null>((best, sp) => {
        const len = (x: AllUnreadySpan): number => (x.endMs ?? Number.POSITIVE_INFINITY) - x.startMs;
        return best === null || len(sp) > len(best) ? sp : best;
      }, null);
      const allUnreadyAt = outage?.startMs ?? Number.POSITIVE_INFINITY;
      // The gateway's view of it: the gaps with no apiserver usable in its log since the stop;
      // within them, what was certainly decided there (test/load/gateway-view.ts certainlyInGap).
      const views = Object.fromEntries(
        await Promise.all(
          ARMS.map(
            async (arm) =>
              [
                arm,
                await gatewayGaps({
                  logFile: localLog,
                  fromMs: origin,
                  seeds: names,
                  capable: { skewed: (server) => server === skewed.name, common: () => true },
                  requests: reqs.filter((r) => r.arm === arm),
                }),
              ] as const,
          ),
        ),
      );
      const etcdDown = ARMS.flatMap((arm) => {
        const own = reqs.filter((r) => r.arm === arm && r.op !== 'watch' && inPhase('etcd stopped', r));
        const gaps = views[arm]?.gaps.common.filter((g) => g.fromMs >= etcd.faultAtMs) ?? [];
        return gaps.flatMap((g) => certainlyInGap(own, g));
      });
      const notSkewgate503 = (r: RequestRecord): boolean =>
        !(r.status === 503 && r.reason === UNAVAILABLE_REASON && r.retryAfter !== undefined);
      // Each apiserver ready for the rest of the phase; the latest of those.
      const allReadyAgainAt = Math.max(
        ...names.map((n) => readyForGoodAt(tl, n, etcd.faultAtMs, Number.POSITIVE_INFINITY) ?? Number.POSITIVE_INFINITY),
      );
      // /readyz can pass while a read from an apiserver's storage still hangs (seen in CI: configmap
      // gets and lists through the gateway answered 504 at envoy.requestTimeout 3 s after every
      // /readyz passed). Recovery is the gateway's once the apiservers answer reads straight.
      const servingLog = readiness.servingChanges();
      const allServingAgainAt = Math.max(
        ...names.map((n) => servingForGoodAt(servingLog, n, etcd.faultAtMs, Number.POSITIVE_INFINITY) ?? Number.POSITIVE_INFINITY),
      );
      const recoveredAt = Math.max(allReadyAgainAt, allServingAgainAt);
      // After the apiservers' recovery and the gateway's (its log line for each, then an answer routed after it).
      const etcdAfter = reqs.filter(
        (r) => r.op !== 'watch' && inPhase('etcd stopped', r) && r.startMs > Math.max(recoveredAt, etcdBack[r.arm] ?? Infinity),
      );
      const s = (ms: number): string => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)} s` : 'never');

      const md = [
        `### Faults under load (test/cluster/faults.test.ts)`,
        '',
        `**Method.** etcd and three kube-apiservers (kas-31/32 v${v.kubeOld}, kas-33 v${v.kubeNew}, the only one serving \`${workload.skewed.group}/${workload.skewed.version} ${workload.skewed.resource}\`; alias addresses ${SERVERS.map((s) => s.ip).join(', ')}, port 6443, started with the lab's flags, \`--shutdown-delay-duration=10s\` among them), one gateway: Envoy rendered by skewgate with its local skewgate and a peer skewgate (\`envoy.extprocPeers\`, priority 1, mutual TLS) and its health listener. Two arms through the same gateway, each an open loop of ${RATE_PER_ARM} req/s (creates with generateName and a unique token label, gets of acknowledged objects, lists; of the skewed resource and of configmaps) plus a watch of each: **token** (the admin's bearer token) and **cert** (the admin's client certificate, stated by skewgate as front-proxy identity — how kubeadm's kubelets, scheduler and controller-manager authenticate). Clients never retry; each request is bounded at ${CLIENT_TIMEOUT_MS / 1000} s. Faults, one per phase (a phase begins ${LEAD_MS / 1000} s before its fault, so what was in flight at the fault belongs to it; each step waits for the event it needs, never for a set time): the local skewgate SIGKILLed and started again once ${MIN_WHILE_SKEWGATE_DOWN} requests per arm sent after its exit were answered; kas-33 SIGKILLed and started again once skewgate had answered ${MIN_SKEWGATE_503} skewed requests per arm itself; kas-31 made silent by iptables DROP of every packet to and from ${SERVERS[0].ip}:6443 (connections stay open, nothing is reset) until skewgate had logged it not ready, ${MIN_SILENT} requests per arm sent after that line were answered and \`envoy.requestTimeout\` had passed since it; etcd stopped (SIGTERM) until skewgate had logged every apiserver not ready and answered ${MIN_OUTAGE + OUTAGE_MARGIN} requests per arm itself after that, then started again on its data, nothing done to the gateway. After each repair, ${MIN_AFTER} requests per arm sent once it was in effect: skewgate's own log line for the apiserver, then a request routed after it. Every apiserver's /readyz is polled straight every 100 ms (timeout 1 s) and each change goes into the timeline; after each /readyz that passes, a list of configmaps (\`limit=1\`, a read from etcd) is sent straight too, and the etcd phase's recovery counts from when both pass. **Failed**: an answer other than 2xx/404, no answer, or a false 404 (a capable apiserver ready for 1 s, or the object acknowledged). **In flight at the fault**: sent before the fault was complete (process gone), answered after it struck. **New requests failing for**: from the fault to the last failed request sent after it (requests that hung show in *max request* instead); **after the repair**: the same from the restart being ready, the rules removed, etcd healthy. Lost and duplicated writes: every object listed straight from kas-33 at the end, matched by token.`,
        '',
        render(faultTable(rows, a)),
        '',
        `What the run shows, fault by fault:`,
        '',
        `- **skewgate SIGKILL.** Failed after the kill (not in flight at it): token ${row('skewgate SIGKILL', 'token').failedAfterFault}, cert ${row('skewgate SIGKILL', 'cert').failedAfterFault}; in flight at the kill and failed: ${cutAtKill.length === 0 ? 'none' : cutAtKill.map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? '?'}${r.status === 404 ? ' (false)' : ''}`).join(', ')} — a stream open on the dying skewgate is cut; cut before its answer, Envoy retries it on the peer (the ext_proc retry policy's \`reset\`), and only one whose answer had begun fails open (\`extproc.failureMode: open\`): balanced, so a token request for the skewed resource may meet an old apiserver's 404 and a certificate request the 401 backstop. The gateway's /ready from the kill to the end of the phase: ${healthIn('skewgate SIGKILL')}. ${notes.join('; ')}.`,
        `- **apiserver SIGKILL** (kas-33, the only server of the skewed resource). skewgate's own 503s (\`${UNAVAILABLE_REASON}\`): ${skewgate503s.length}, every one with Retry-After: ${skewgate503s.length > 0 && skewgate503s.every((r) => r.retryAfter !== undefined) ? 'yes' : '**no**'}, the slowest answered in ${slowest503.toFixed(0)} ms (skewgate's own answer, so within \`extproc.messageTimeout\`, ${config.extproc.messageTimeout} ms, or Envoy would have failed open). Common reads (get, list) failed: ${reqs.filter((r) => inPhase('apiserver SIGKILL', r) && r.kind === 'common' && r.op !== 'create' && r.op !== 'watch' && r.status !== null && r.status >= 500).length + reqs.filter((r) => inPhase('apiserver SIGKILL', r) && r.kind === 'common' && r.op !== 'create' && r.op !== 'watch' && r.status === null).length}; creates that failed without an acknowledgement but were stored anyway: ${a.rows.filter((r) => r.phase === 'apiserver SIGKILL').reduce((x, r) => x + r.unackedPersisted, 0)}. Skewed requests succeed again ${s(Math.max(row('apiserver SIGKILL', 'token').recoverAfterRepairMs ?? 0, row('apiserver SIGKILL', 'cert').recoverAfterRepairMs ?? 0))} after kas-33's /readyz passed; requests sent once skewgate routed by it again: ${kas33After.length}, failed ${kas33After.filter((r) => r.status === null || r.status >= 300).length}.`,
        `- **packets dropped** (kas-31 silent ${s((drop.repairAtMs ?? 0) - drop.faultAtMs)}; skewgate logged it not ready ${s(silentAt - drop.faultAtMs)} after the drop). Requests sent after that line until the rules were removed: ${silentNew.length}, failed ${silentNew.filter((r) => r.status === null || r.status >= 500).length}, slowest ${Math.max(0, ...silentNew.map((r) => r.endMs - r.startMs)).toFixed(0)} ms (a request that reached for the silent apiserver would take at least \`envoy.connectTimeout\`, ${connectTimeoutMs} ms). Requests in flight at the drop or sent before the line: ${silentInFlight.length}, the longest ${s(longest(silentInFlight))}; of them ${silentInFlight.filter((r) => r.status === 504).length} answered 504 by Envoy at \`envoy.requestTimeout\` (${REQUEST_TIMEOUT_MS / 1000} s here, 65 s by default) and ${silentInFlight.filter((r) => r.status === 503).length} 503 at \`envoy.connectTimeout\` (${connectTimeoutMs / 1000} s: a new connection never completes its handshake; reads are retried on another apiserver then, and so are writes once the retry policy sees the connection fail: nothing of them was sent).`,
        `- **etcd stopped** (${s((etcd.repairAtMs ?? 0) - etcd.faultAtMs)}). All three apiservers failed /readyz ${s(allUnreadyAt - etcd.faultAtMs)} after the stop (the longest span of all unready by the harness: ${outage === null ? 'none' : s((outage.endMs ?? Infinity) - outage.startMs)}); requests decided for certain while skewgate's own log had no apiserver ready (sent after its first 503 there was answered, answered before its next "ready" line): ${etcdDown.length}, the slowest answered in ${longest(etcdDown).toFixed(0)} ms (statuses ${[...new Set(etcdDown.map((r) => `${r.status ?? 0}${r.reason === undefined ? '' : ` ${r.reason}`}`))].sort().join(', ')}). All passed /readyz for good ${s(allReadyAgainAt - (etcd.repairAtMs ?? 0))} after etcd was healthy (negative: before the harness saw it healthy), and answered a configmap list straight for good ${s(allServingAgainAt - (etcd.repairAtMs ?? 0))} after it; requests sent after the later of the two and after skewgate routed by every apiserver again: ${etcdAfter.length}, failed ${etcdAfter.filter((r) => r.status === null || (r.status >= 300 && r.status !== 404)).length}. The gateway's /ready during the outage: ${healthIn('etcd stopped')} — ${(() => {
          const f = readyFlip(etcd.faultAtMs);
          return f.failAt === null
            ? 'it never failed'
            : `503 from ${s(f.failAt - etcd.faultAtMs)} after the stop (no ready apiserver in Envoy's pool) until ${f.passAt === null ? 'the end' : `${s(f.passAt - (etcd.repairAtMs ?? 0))} after etcd was healthy`}: every gateway fails its balancer check at the same moment`;
        })()}.`,
        '',
        `Requests (watches aside) that ran into the client's own bound (${CLIENT_TIMEOUT_MS / 1000} s; Envoy ends them at envoy.requestTimeout, ${REQUEST_TIMEOUT_MS / 1000} s here, 65 s by default): ${atClientBound.length === 0 ? 'none' : atClientBound.map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} ${s(r.endMs - r.startMs)}`).join(', ')}; the longest of all ${s(longest(reqs.filter((r) => r.op !== 'watch')))}.`,
        '',
        render(phaseTable(a, 'Per phase and arm (the accounting of the rolling-upgrade tests):')),
        '',
        render(problemsTable(a)),
        '',
        `Totals: ${total(a, 'requests')} requests, ${total(a, 'false404s')} false 404s, ${total(a, 'lostWrites')} lost and ${total(a, 'duplicatedWrites')} duplicated writes, ${total(a, 'createsAcked')} acknowledged creates checked.`,
        '',
        'Timeline (t from etcd ready; `unready`/`ready`: the apiserver\u2019s own /readyz):',
        '',
        render(timelineTable(tl, origin)),
        '',
        `Run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('faults', md);
      t.comment(md);
      progress('results written to bench/RESULTS.md');

      // ---- the claims ----
      t.ok(
        total(a, 'createsAcked') >= MIN_ACKED_CREATES,
        `${total(a, 'createsAcked')} acknowledged creates checked (≥ ${MIN_ACKED_CREATES})`,
      );
      t.equal(total(a, 'duplicatedWrites'), 0, 'no write stored twice, in any fault');
      t.equal(total(a, 'lostWrites'), 0, 'no acknowledged write lost, in any fault');
      // skewgate's own routings to an unverified candidate (docs/design.md: a ready apiserver whose
      // view is not current), from its decision log. While etcd is down the views go stale while an
      // old server's /readyz may still pass, and such a routing can reach a server last seen NOT to
      // serve the resource: its 404 is false. A known gap of the product (found by this test, in
      // CI; see the issue notes), allowed only there and only for such a routing, and counted.
      const unverified = skewgateLogRecords(await readFile(lab.logFile('skewgate-faults'), 'utf8')).flatMap((j) =>
        j['reason'] === 'unverified_candidate' && j['method'] === 'GET'
          ? [{ path: String(j['path'] ?? ''), at: Date.parse(String(j['time'] ?? '')) }]
          : [],
      );
      const routedUnverified = (r: RequestRecord): boolean =>
        r.op === 'get' &&
        r.name !== undefined &&
        unverified.some((u) => u.path.endsWith(`/${r.name}`) && u.at >= r.startMs - 5 && u.at <= r.endMs + 5);
      const false404s = reqs.filter((r) => r.status === 404 && false404(r) && !inFlightAtKill(r));
      const inDoubt = false404s.filter((r) => inPhase('etcd stopped', r) && routedUnverified(r));
      if (inDoubt.length > 0)
        t.comment(`KNOWN GAP: ${inDoubt.length} false 404(s) in the etcd outage, each routed by skewgate to an unverified candidate`);
      t.same(
        false404s.filter((r) => !inDoubt.includes(r)).map((r) => `${r.arm} ${r.kind} ${r.op} at ${(r.startMs - origin) / 1000} s`),
        [],
        'no false 404 in any fault, but for a request in flight at the skewgate kill (its stream cut, Envoy fails open) and, in the etcd outage, one skewgate routed to an unverified candidate',
      );

      // Named, not counted: a failure in CI says which request, when (from the kill and from the
      // restart) and who answered, which is all there is to go on afterwards.
      const killFailures = (arm: string): string[] =>
        reqs
          .filter(
            (r) =>
              r.arm === arm &&
              inPhase('skewgate SIGKILL', r) &&
              r.startMs > (kill.faultDoneMs ?? 0) &&
              (isProblem(r) || (r.status === 404 && false404(r))),
          )
          .map(
            (r) =>
              `${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} ${r.detail ?? ''} sent ${(r.startMs - kill.faultAtMs).toFixed(0)} ms after the kill, ` +
              `${(r.startMs - (kill.repairAtMs ?? 0)).toFixed(0)} ms from the restart, took ${(r.endMs - r.startMs).toFixed(0)} ms`,
          );
      for (const arm of ARMS) {
        const r = row('skewgate SIGKILL', arm);
        t.same(
          killFailures(arm),
          [],
          `skewgate SIGKILL, ${arm}: nothing failed that was not in flight at the kill (${r.failedInFlight} of ${r.inFlightAtFault} in flight did)`,
        );
      }
      t.same(
        reqs
          .filter((r) => inPhase('skewgate SIGKILL', r) && r.arm === 'cert' && r.status === 401 && r.startMs > (kill.faultDoneMs ?? 0))
          .map((r) => `${r.op} at ${(r.startMs - kill.faultAtMs).toFixed(0)} ms`),
        [],
        'skewgate SIGKILL: no 401 for a certificate client while the peer lives',
      );
      const killHealth = healthFrom('skewgate SIGKILL');
      t.ok(killHealth.length > 0, `skewgate SIGKILL: the gateway's /ready was probed ${killHealth.length} times in the phase`);
      t.same(
        killHealth.filter((h) => h.status !== 200).map((h) => h.status),
        [],
        "skewgate SIGKILL: the gateway's /ready stays 200 (the peer states certificates)",
      );

      for (const arm of ARMS) {
        const own = skewgate503s.filter((r) => r.arm === arm);
        t.ok(
          own.length >= MIN_SKEWGATE_503,
          `apiserver SIGKILL, ${arm}: skewgate answered ${own.length} skewed requests 503 itself (≥ ${MIN_SKEWGATE_503})`,
        );
      }
      // Its own answer (the reason header) is one Envoy takes within extproc.messageTimeout, or it
      // fails open: that is the bound on how fast it answers. How fast it is, is the report's.
      t.same(
        skewgate503s
          .filter((r) => r.retryAfter === undefined || !(Number(r.retryAfter) >= 1))
          .map((r) => `${r.arm} ${r.op} ${r.retryAfter ?? 'none'}`),
        [],
        'apiserver SIGKILL: every such 503 carries Retry-After',
      );
      for (const arm of ARMS)
        t.same(
          unexplained503s({
            timeline: tl,
            requests: reqs.filter((r) => r.arm === arm && inPhase('apiserver SIGKILL', r)),
            gaps: views[arm]?.gaps ?? { skewed: [], common: [] },
            serves: rules.serves,
          }).map(describe503(origin)),
          [],
          `apiserver SIGKILL, ${arm}: a 503 only where skewgate's own log had no capable apiserver in effect (or, not skewgate\u2019s own, in flight while one was down)`,
        );
      t.same(
        reqs
          .filter(
            (r) =>
              inPhase('apiserver SIGKILL', r) &&
              r.kind === 'common' &&
              (r.op === 'get' || r.op === 'list') &&
              (r.status === null || r.status >= 500),
          )
          .map(
            (r) => `${r.arm} ${r.op} ${r.status ?? r.error ?? '?'} ${r.detail ?? ''} at ${(r.startMs - kasKill.faultAtMs).toFixed(0)} ms`,
          ),
        [],
        'apiserver SIGKILL: reads of what the others serve never fail (retried on another apiserver)',
      );
      for (const arm of ARMS) {
        const own = kas33After.filter((r) => r.arm === arm);
        t.ok(
          own.length >= MIN_AFTER,
          `apiserver SIGKILL, ${arm}: ${own.length} requests sent once skewgate routed by kas-33 again (≥ ${MIN_AFTER})`,
        );
      }
      t.same(
        kas33After
          .filter((r) => r.status === null || r.status >= 300)
          .map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} at ${((r.startMs - origin) / 1000).toFixed(1)} s`),
        [],
        'apiserver SIGKILL: once skewgate routes by kas-33 again (its log line, then an answer routed after it), everything succeeds',
      );

      t.same(
        atClientBound.map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} in ${(r.endMs - r.startMs).toFixed(0)} ms`),
        [],
        `no request (watches aside) ran into the client's own ${CLIENT_TIMEOUT_MS / 1000} s: Envoy ended each at envoy.requestTimeout (${REQUEST_TIMEOUT_MS / 1000} s), not the 65 s default, in any fault`,
      );
      for (const arm of ARMS) {
        const own = silentNew.filter((r) => r.arm === arm);
        t.ok(
          own.length >= MIN_SILENT,
          `packets dropped, ${arm}: ${own.length} requests sent after skewgate logged kas-31 not ready (≥ ${MIN_SILENT})`,
        );
      }
      t.same(
        silentNew
          .filter((r) => isProblem(r) || (r.status === 404 && false404(r)) || r.endMs - r.startMs >= connectTimeoutMs)
          .map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} in ${(r.endMs - r.startMs).toFixed(0)} ms`),
        [],
        `packets dropped: requests sent after skewgate logged the silent apiserver not ready go elsewhere: each succeeds sooner than envoy.connectTimeout (${connectTimeoutMs} ms), the least one that reached for it would take`,
      );

      t.ok(Number.isFinite(allUnreadyAt), 'etcd stopped: every apiserver failed /readyz');
      for (const arm of ARMS) {
        const own = etcdDown.filter((r) => r.arm === arm);
        t.ok(
          own.length >= MIN_OUTAGE,
          `etcd stopped, ${arm}: ${own.length} requests decided while skewgate's own log had no apiserver ready (≥ ${MIN_OUTAGE})`,
        );
      }
      t.same(
        etcdDown
          .filter(notSkewgate503)
          .map((r) => `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} ${r.reason ?? r.detail ?? ''}`),
        [],
        'etcd stopped: while skewgate sees no apiserver ready, the gateway answers every request itself (its own 503 with Retry-After: within extproc.messageTimeout, never held by a hung apiserver)',
      );
      t.ok(Number.isFinite(recoveredAt), 'etcd started: every apiserver ready and answering a read straight again, unaided');
      for (const arm of ARMS) {
        const own = etcdAfter.filter((r) => r.arm === arm);
        t.ok(own.length >= MIN_AFTER, `etcd started, ${arm}: ${own.length} requests after the recovery (≥ ${MIN_AFTER})`);
      }
      t.same(
        etcdAfter
          .filter((r) => r.status === null || (r.status >= 300 && r.status !== 404))
          // When, against the recovery, and for how long: a failure names what a rerun would need.
          .map(
            (r) =>
              `${r.arm} ${r.kind} ${r.op} ${r.status ?? r.error ?? '?'} sent ${((r.startMs - recoveredAt) / 1000).toFixed(1)} s after recovery, answered in ${((r.endMs - r.startMs) / 1000).toFixed(1)} s${r.detail === undefined ? '' : ` (${r.detail})`}`,
          ),
        [],
        'etcd started: the gateway recovers on its own, every request succeeds',
      );
    },
  );
});
