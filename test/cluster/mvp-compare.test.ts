// skewgate next to Kubernetes' built-in Mixed Version Proxy (MVP, KEP-4020), in a mixed phase:
// two KUBE_OLD apiservers (MVP gate switched on: alpha there) and one KUBE_NEW, all with
// --peer-ca-file, behind (a) plain round-robin Envoy — the MVP forwards what an old server does
// not serve, a second hop — and (b) Envoy + skewgate, which sends it to the new server at once,
// with the fast path on (envoy.xds) and off (routing.fastPath: false, static routes: ext_proc on
// every request). Same client, same run, requests interleaved through all three. Then the new
// server restarts under load: who answers 404 or 503 while it is away and right after it is back.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { account, describe503, total, unexplained503s, type AccountingRules } from '../load/accounting.js';
import { interleavedRun, type TimedRequest } from '../load/interleaved.js';
import { summariseLatency } from '../load/latency.js';
import { sumCounter } from '../load/metrics.js';
import { LoadRun, freeLoopbackPort, seededRng } from '../load/run.js';
import { ensureNamespace, listFinal } from '../load/verify.js';
import { collectionPath, configMaps, labNamespace, mutatingAdmissionPolicies, objectPath, type Workload } from '../load/workload.js';
import {
  false404Table,
  latencyRow,
  phaseTable,
  problemsTable,
  render,
  timelineTable,
  writeClusterPart,
} from '../../bench/cluster-results.js';
import { LAB_READINESS_LAG_MS, withLoadLab } from '../helpers/load-lab.js';
import {
  FAST_OFF,
  FAST_ON,
  SKEWGATE_ARMS,
  accessLogRoutes,
  fastByPhaseText,
  modeText,
  skewgateArmOptions,
} from '../helpers/fast-path-arms.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

const ROUNDS = 500;
const RATE_PER_ARM = 10;
const ARMS = ['mvp', ...SKEWGATE_ARMS] as const;
/** Issue 15's targets: skewed p50 through skewgate ≤ 0.7 × the MVP's two-hop p50; common p50 within 5 % of plain Envoy's. Reported, not asserted. */
const SKEWED_TARGET = 0.7;
const COMMON_TARGET = 1.05;
const PROBE = 'lat-probe';
const REROUTED = 'apiserver_rerouted_request_total';
const PEER_ERRORS = 'apiserver_peer_proxy_errors_total';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const ms = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? 'n/a' : `${v.toFixed(2)} ms`);
const signedMs = (v: number): string => (!Number.isFinite(v) ? 'n/a' : `${v < 0 ? '−' : '+'}${Math.abs(v).toFixed(2)} ms`);

t.setTimeout(8 * 60_000);

t.test('skewgate vs the built-in Mixed Version Proxy', async (t) => {
  await withLoadLab(
    'mvp-compare',
    { connections: 16, addresses: slot },
    async ({ parts: { versions: v }, session, lab, timeline, http, clock, origin, progress, runSeconds, track }) => {
      const specs: ApiServerSpec[] = [
        { name: 'kas-1', version: v.kubeOld, ip: slot.loopback(1), port: 6443, peerProxy: true },
        { name: 'kas-2', version: v.kubeOld, ip: slot.loopback(2), port: 6443, peerProxy: true },
        { name: 'kas-3', version: v.kubeNew, ip: slot.loopback(3), port: 6443, peerProxy: true },
      ];
      await Promise.all(specs.map((s) => session.start(s)));
      const url = (name: string): string => lab.apiServerUrl(name);
      const workload: Workload = { skewed: mutatingAdmissionPolicies, common: configMaps, namespace: labNamespace };
      for (const arm of ARMS) {
        await ensureNamespace(session.direct, url('kas-1'), labNamespace(arm));
        const cm = await session.direct.send('POST', `${url('kas-1')}${collectionPath(configMaps, labNamespace(arm))}`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: PROBE },
        });
        t.equal(cm.status, 201, `configmap ${PROBE} in ${labNamespace(arm)}`);
      }
      const map = await session.direct.send('POST', `${url('kas-3')}${collectionPath(mutatingAdmissionPolicies, '')}`, {
        ...mutatingAdmissionPolicies.body(),
        metadata: { name: PROBE },
      });
      t.equal(map.status, 201, `${PROBE} created on kas-3 (v${v.kubeNew})`);

      // The MVP must really proxy: an old server answers for the new resource once its peer discovery has synced.
      const skewedGet = objectPath(mutatingAdmissionPolicies, '', PROBE);
      const kas3Ready = timeline.snapshot().servers.find((e) => e.server === 'kas-3' && e.what === 'ready')?.atMs ?? clock();
      const proxyingAfter: Record<string, number> = {};
      for (const old of ['kas-1', 'kas-2']) {
        const deadline = clock() + 60_000;
        for (;;) {
          const res = await session.direct.send('GET', `${url(old)}${skewedGet}`).catch(() => null);
          if (res?.status === 200) break;
          if (clock() > deadline)
            throw new Error(
              `${old} (v${v.kubeOld}, MVP on) never proxied ${skewedGet} to kas-3: last ${res?.status ?? 'no answer'} ${res?.text.slice(0, 200) ?? ''}`,
            );
          await sleep(100);
        }
        proxyingAfter[old] = clock() - kas3Ready;
      }
      progress(
        `MVP proxies on both v${v.kubeOld} servers (${Object.entries(proxyingAfter)
          .map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`)
          .join(', ')} after kas-3 was ready)`,
      );

      const gateways = {
        mvp: await lab.startGateway({ name: 'plain', withSkewgate: false, port: await freeLoopbackPort() }),
        [FAST_ON]: await lab.startGateway(skewgateArmOptions(FAST_ON, await freeLoopbackPort())),
        [FAST_OFF]: await lab.startGateway(skewgateArmOptions(FAST_OFF, await freeLoopbackPort())),
      };
      const arms = ARMS.map((arm) => ({ arm, baseUrl: gateways[arm].url }));

      const metrics = async (): Promise<Record<string, { rerouted: number; errors: number }>> => {
        const out: Record<string, { rerouted: number; errors: number }> = {};
        for (const s of specs) {
          const text = (await session.direct.send('GET', `${url(s.name)}/metrics`)).text;
          out[s.name] = { rerouted: sumCounter(text, REROUTED), errors: sumCounter(text, PEER_ERRORS) };
        }
        return out;
      };

      // ---- (1) latency, interleaved, one request at a time ----
      await interleavedRun({ arms, http, workload, rounds: 10, clock, rng: seededRng(1), existing: { skewed: PROBE, common: PROBE } }); // warm-up
      const before = await metrics();
      const latencyFrom = clock();
      progress(`latency run: ${ROUNDS} rounds × 4 requests × ${ARMS.length} arms, interleaved`);
      const timed = await interleavedRun({
        arms,
        http,
        workload,
        rounds: ROUNDS,
        clock,
        rng: seededRng(2),
        existing: { skewed: PROBE, common: PROBE },
      });
      const after = await metrics();
      const latencyTo = clock();
      await sleep(1000);
      const hopsOf = await session.auditIds();
      const hops = (r: TimedRequest): number => (r.auditId === undefined ? 0 : (hopsOf.get(r.auditId)?.size ?? 0));

      const ok = (r: TimedRequest): boolean => r.status !== null && r.status >= 200 && r.status < 300;
      const rows: string[][] = [];
      const stats: Record<string, { n: number; ok: number; proxied: number; unknown: number }> = {};
      const p50: Record<string, number> = {};
      const p99: Record<string, number> = {};
      const groups: { label: string; arm: string; pick: (r: TimedRequest) => boolean }[] = [];
      for (const arm of ARMS) {
        groups.push({ label: 'skewed: all', arm, pick: (r) => r.kind === 'skewed' });
        for (const op of ['get', 'list', 'create'] as const)
          groups.push({ label: `skewed: ${op}`, arm, pick: (r) => r.kind === 'skewed' && r.op === op });
        if (arm === 'mvp') {
          groups.push({ label: 'skewed: 1 hop (landed on the new server)', arm, pick: (r) => r.kind === 'skewed' && hops(r) === 1 });
          groups.push({ label: 'skewed: 2 hops (proxied by an old server)', arm, pick: (r) => r.kind === 'skewed' && hops(r) === 2 });
        }
        groups.push({ label: 'common (configmaps get), reference', arm, pick: (r) => r.kind === 'common' });
      }
      for (const g of groups) {
        const rs = timed.filter((r) => r.arm === g.arm && g.pick(r));
        const s = {
          n: rs.length,
          ok: rs.filter(ok).length,
          proxied: rs.filter((r) => hops(r) === 2).length,
          unknown: rs.filter((r) => hops(r) === 0).length,
        };
        stats[`${g.arm}/${g.label}`] = s;
        const lat = summariseLatency(rs.filter(ok).map((r) => r.endMs - r.startMs));
        p50[`${g.arm}/${g.label}`] = lat.p50;
        p99[`${g.arm}/${g.label}`] = lat.p99;
        rows.push(
          latencyRow(`${armText(g.arm)} — ${g.label}`, lat, [
            `${s.n - s.ok}`,
            s.n === 0 ? '—' : `${s.proxied} (${((100 * s.proxied) / s.n).toFixed(1)} %)`,
            `${s.unknown}`,
          ]),
        );
      }
      const delta = Object.fromEntries(
        specs.map((s) => [
          s.name,
          {
            rerouted: (after[s.name]?.rerouted ?? 0) - (before[s.name]?.rerouted ?? 0),
            errors: (after[s.name]?.errors ?? 0) - (before[s.name]?.errors ?? 0),
          },
        ]),
      );
      const mvpSkewed = stats['mvp/skewed: all'] ?? { n: 0, ok: 0, proxied: 0, unknown: 0 };
      const sgSkewed = Object.fromEntries(
        SKEWGATE_ARMS.map((arm) => [arm, stats[`${arm}/skewed: all`] ?? { n: 0, ok: 0, proxied: 0, unknown: 0 }]),
      ) as Record<(typeof SKEWGATE_ARMS)[number], { n: number; ok: number; proxied: number; unknown: number }>;
      progress(
        `latency run done: MVP arm ${mvpSkewed.proxied}/${mvpSkewed.n} skewed requests proxied; ${SKEWGATE_ARMS.map((arm) => `${arm} ${sgSkewed[arm].proxied}/${sgSkewed[arm].n}`).join(', ')}`,
      );
      // Issue 15's targets, per skewgate arm (p50 and p99 ratios; the targets are on p50).
      const twoHop = 'mvp/skewed: 2 hops (proxied by an old server)';
      const common = 'common (configmaps get), reference';
      const ratio = (x: number | undefined, y: number | undefined): number => (x ?? NaN) / (y ?? NaN);
      const targets = SKEWGATE_ARMS.map((arm) => ({
        arm,
        skewed50: ratio(p50[`${arm}/skewed: all`], p50[twoHop]),
        skewed99: ratio(p99[`${arm}/skewed: all`], p99[twoHop]),
        common50: ratio(p50[`${arm}/${common}`], p50[`mvp/${common}`]),
        common99: ratio(p99[`${arm}/${common}`], p99[`mvp/${common}`]),
      }));
      const verdict = (v: number, target: number): string => (!Number.isFinite(v) ? 'n/a' : v <= target ? 'met' : '**missed**');
      const targetRows = targets.map((x) => [
        armText(x.arm),
        x.skewed50.toFixed(2),
        verdict(x.skewed50, SKEWED_TARGET),
        x.skewed99.toFixed(2),
        x.common50.toFixed(3),
        verdict(x.common50, COMMON_TARGET),
        x.common99.toFixed(3),
      ]);
      for (const x of targets)
        progress(
          `${x.arm}: skewed p50 ${x.skewed50.toFixed(2)} × the MVP's two-hop p50; common p50 ${x.common50.toFixed(3)} × plain Envoy's`,
        );
      const latencyRoutes = {
        [FAST_ON]: await accessLogRoutes(lab.logFile(`envoy-${FAST_ON}`), latencyFrom, (at, path) =>
          at > latencyTo ? 'after' : path.includes('/configmaps/') ? 'common' : 'skewed',
        ),
        [FAST_OFF]: await accessLogRoutes(lab.logFile(`envoy-${FAST_OFF}`), latencyFrom, (at, path) =>
          at > latencyTo ? 'after' : path.includes('/configmaps/') ? 'common' : 'skewed',
        ),
      };

      // ---- (2) the new server restarts under load ----
      const run = track(new LoadRun({ arms, http, workload, ratePerSec: RATE_PER_ARM, clock, rng: seededRng(5), watch: ['skewed'] }));
      timeline.phase('steady');
      run.start();
      await sleep(8000);
      timeline.phase('kas-3 restart');
      progress(`restart of kas-3 (v${v.kubeNew}) under load, ${RATE_PER_ARM} req/s per arm`);
      await session.stop('kas-3');
      const back = await session.start(specs[2] as ApiServerSpec);
      await sleep(Math.max(0, back + 15_000 - clock()));
      await run.stop();
      const final = await listFinal(session.direct, url('kas-3'), workload, ARMS);
      const rules: AccountingRules = { serves: { skewed: (_s, version) => version === v.kubeNew, common: () => true }, graceMs: 1000 };
      const a = account({
        timeline: timeline.snapshot(),
        requests: run.log.requests,
        watch: run.log.watch,
        final,
        rules,
      });

      const md = [
        `### skewgate vs the built-in Mixed Version Proxy (test/cluster/mvp-compare.test.ts)`,
        '',
        `**Method.** A mixed phase: kas-1 and kas-2 run v${v.kubeOld} with the Mixed Version Proxy switched on (\`--feature-gates=UnknownVersionInteroperabilityProxy=true\`, alpha in 1.35), kas-3 runs v${v.kubeNew} (gate beta, on); all three with \`--peer-ca-file\` (the cluster CA), \`--peer-advertise-ip/port\` and the front-proxy client certificate, so an old server forwards a request for a resource only a peer serves. Checked first: a GET of \`${skewedGet}\` straight to each old server answers 200 once its peer discovery has synced (${Object.entries(
          proxyingAfter,
        )
          .map(([k, ms]) => `${k} after ${(ms / 1000).toFixed(1)} s`)
          .join(
            ', ',
          )}, counted from kas-3's readiness). Three gateways in front of the same servers: (a) plain round-robin Envoy (no ext_proc) — the MVP does the work; (b) Envoy + skewgate, ${modeText(FAST_ON)}; (c) Envoy + skewgate, ${modeText(FAST_OFF)}. One client (undici, keep-alive, HTTPS, bearer token), one request at a time, ${ROUNDS} rounds of get/list/create of the skewed \`mutatingadmissionpolicies\` plus a configmap get as a reference, each request sent through all three gateways in a random order (interleaved). Hops per request from the audit logs: the MVP copies the Audit-ID to the peer, so an ID logged by two servers was proxied. Latency from the client, successful answers only.`,
        '',
        render({ headers: ['arm — requests', 'n (2xx)', 'p50', 'p90', 'p99', 'max', 'errors', 'proxied (2 hops)', 'hops unknown'], rows }),
        '',
        `In short (this run): skewed requests p50/p99 ${ms(p50['mvp/skewed: all'])}/${ms(p99['mvp/skewed: all'])} through plain Envoy + MVP against ${SKEWGATE_ARMS.map((arm) => `${ms(p50[`${arm}/skewed: all`])}/${ms(p99[`${arm}/skewed: all`])} through ${armText(arm)}`).join(' and ')}. The MVP's second hop costs ${ms((p50[twoHop] ?? NaN) - (p50['mvp/skewed: 1 hop (landed on the new server)'] ?? NaN))} at p50 on the ${((100 * mvpSkewed.proxied) / Math.max(1, mvpSkewed.n)).toFixed(0)} % of skewed requests that land on an old server. On the configmap reference rows (p50, against plain Envoy): ${SKEWGATE_ARMS.map((arm) => `${armText(arm)} ${signedMs((p50[`${arm}/${common}`] ?? NaN) - (p50[`mvp/${common}`] ?? NaN))}`).join(', ')} — with the fast path off that is skewgate's ext_proc round trip on every request; with it on, a configmap get that the fast-path routes take skips ext_proc (requests on a \`fast-path-*\` route in Envoy's access log during the latency run: ${SKEWGATE_ARMS.map((arm) => `${arm} ${fastByPhaseText(latencyRoutes[arm])}`).join('; ')}). Two cores run everything here (three apiservers, etcd, three Envoys, two skewgates, the client), so differences of a millisecond are within the noise between runs.`,
        '',
        `Issue 15's latency targets (p50; p99 ratios beside them for reference, not targets): skewed requests through skewgate at most ${SKEWED_TARGET} × the MVP's two-hop latency, common requests within ${Math.round((COMMON_TARGET - 1) * 100)} % of plain Envoy's. Reported, not asserted: one run on a shared two-core machine.`,
        '',
        render({
          headers: [
            'arm',
            'skewed p50 / MVP 2-hop p50',
            `≤ ${SKEWED_TARGET}`,
            'skewed p99 / MVP 2-hop p99',
            'common p50 / plain p50',
            `≤ ${COMMON_TARGET}`,
            'common p99 / plain p99',
          ],
          rows: targetRows,
        }),
        '',
        `\`${REROUTED}\` during the run (MVP's own count of proxied requests): ${specs.map((s) => `${s.name} +${delta[s.name]?.rerouted ?? 0}`).join(', ')}; \`${PEER_ERRORS}\`: ${specs.map((s) => `${s.name} +${delta[s.name]?.errors ?? 0}`).join(', ')}. Requests sent through the MVP arm for the skewed resource: ${mvpSkewed.n}, proxied according to the audit logs: ${mvpSkewed.proxied}.`,
        '',
        `**kas-3 (the only v${v.kubeNew} server) restarts under load** (${RATE_PER_ARM} req/s per arm, open loop, a watch of the skewed resource per arm): while it is away nobody serves \`mutatingadmissionpolicies\`; a 404 is false from 1 s after it is ready again.`,
        '',
        render(phaseTable(a)),
        '',
        render(problemsTable(a)),
        '',
        render(false404Table(a, origin, 10, await session.auditIds())),
        '',
        'Timeline (t from etcd ready):',
        '',
        render(timelineTable(timeline.snapshot(), origin)),
        '',
        `Run time ${runSeconds().toFixed(0)} s.`,
      ].join('\n');
      await writeClusterPart('mvp-compare', md);
      t.comment(md);

      t.ok(mvpSkewed.proxied > 0, `the MVP really proxied: ${mvpSkewed.proxied}/${mvpSkewed.n} skewed requests took 2 hops`);
      t.ok(
        (delta['kas-1']?.rerouted ?? 0) + (delta['kas-2']?.rerouted ?? 0) >= mvpSkewed.proxied,
        `${REROUTED} on the old servers grew at least as much`,
      );
      t.ok(mvpSkewed.ok >= 0.99 * mvpSkewed.n, `MVP arm: ${mvpSkewed.ok}/${mvpSkewed.n} skewed requests 2xx`);
      t.ok(
        latencyRoutes[FAST_ON].fast > 0,
        `${FAST_ON}: the fast path was in effect in the latency run (${fastByPhaseText(latencyRoutes[FAST_ON])} on fast-path routes)`,
      );
      t.equal(
        latencyRoutes[FAST_OFF].fast,
        0,
        `${FAST_OFF}: no request on a fast-path route (${latencyRoutes[FAST_OFF].requests} requests)`,
      );
      for (const arm of SKEWGATE_ARMS) {
        const sk = sgSkewed[arm];
        t.equal(sk.ok, sk.n, `${arm} arm: every skewed request 2xx (${sk.ok}/${sk.n})`);
        t.ok(sk.n > 0, `${arm} arm: skewed requests sent`);
        t.equal(sk.proxied, 0, `${arm} arm: no request took a second hop`);
        t.equal(sk.unknown, 0, `${arm} arm: every answer found in an audit log`);
        t.equal(total(a, 'false404s', arm), 0, `restart: no false 404 through ${arm}`);
        // While kas-3, the only server of the skewed resource, is away skewgate answers 503: only then.
        const sg503 = run.log.requests.filter((r) => r.arm === arm && r.status === 503);
        const unexplained = unexplained503s({ timeline: timeline.snapshot(), requests: sg503, rules, lagMs: LAB_READINESS_LAG_MS });
        t.comment(`restart, ${arm} arm: ${sg503.length} 503s, ${unexplained.length} outside the windows the timeline allows`);
        t.same(
          unexplained.map(describe503),
          [],
          `restart: every 503 through ${arm} fell in a window when no capable apiserver was ready (or, not skewgate's own, while one was going down)`,
        );
      }
      t.equal(total(a, 'lostWrites'), 0, 'restart: no lost write in any arm');
      t.equal(total(a, 'duplicatedWrites'), 0, 'restart: no duplicated write in any arm');
    },
  );
});

function armText(arm: string): string {
  return arm === 'mvp' ? 'plain Envoy + MVP' : arm === FAST_ON ? 'Envoy + skewgate, fast path on' : 'Envoy + skewgate, fast path off';
}
