// What the admin endpoint answers (GET /v1/status, /v1/skew, /v1/history, POST /v1/explain, /v1/cordon): the same pure
// inspect/ functions as the CLI's own discovery round, over the live snapshot, config and client
// CA bundle of the running gateway.
import type { DiscoveryService } from '../discovery/service.js';
import { explainRequest } from '../inspect/explanation.js';
import { skewReport } from '../inspect/skew-report.js';
import { gatewayStatus } from '../inspect/status.js';
import type { ClientIdentityOf } from '../routing/router.js';
import type { AdminHandlers } from './admin-server.js';
import type { LiveConfig } from './reload.js';
import type { HistoryRecorder } from '../history/recorder.js';
import type { CordonControl } from './cordon-control.js';
import type { CordonStore } from '../cordon/store.js';
import type { Logger } from 'pino';
import type { GateRecorder } from '../gate/recorder.js';
import type { EnvoySampler } from '../gate/envoy-sampler.js';
import { gateVerdict } from '../gate/core/verdict.js';
import { gateSettingsOf } from '../gate/core/settings.js';

export function adminHandlers(o: {
  readonly live: LiveConfig<DiscoveryService>;
  readonly clientIdentity: ClientIdentityOf;
  readonly version: string;
  readonly startedAt: number;
  readonly history: HistoryRecorder;
  readonly cordons: CordonControl;
  readonly cordonStore: CordonStore;
  readonly gate: GateRecorder;
  readonly envoy: EnvoySampler;
  readonly log: Logger;
  /** Whether the ext_proc server reports SERVING. */
  readonly serving: () => boolean;
}): AdminHandlers {
  const { live } = o;
  // The last answer per question: a change is logged once, not every poll.
  const lastGate = new Map<string, string>();
  return {
    status: () => {
      const { config: c, discovery } = live.parts;
      return gatewayStatus({
        version: o.version,
        pid: process.pid,
        startedAt: o.startedAt,
        now: Date.now(),
        configSource: c.source,
        configGeneration: live.generation,
        staleAfterMs: c.discovery.staleAfter,
        snapshot: discovery.current(),
        members: discovery.members().map((m) => ({
          name: m.spec.name,
          url: m.spec.url,
          role: m.role,
          seed: m.seed,
          sources: m.sources,
          ...(m.cordon ? { cordon: m.cordon } : {}),
        })),
        cordons: [...o.cordonStore.current().values()],
      });
    },
    skew: () => skewReport(live.parts.discovery.current(), Date.now(), null),
    history: () => o.history.answer(),
    serving: o.serving,
    cordon: (req, peer) => o.cordons.change(req, peer),
    gate: async (question) => {
      const { config: c, discovery } = live.parts;
      const settings = gateSettingsOf(c.gate);
      const envoy = await o.envoy.reading(settings.windowMs);
      const answer = gateVerdict({
        now: Date.now(),
        snapshot: discovery.current(),
        members: discovery.members().map((m) => ({ name: m.spec.name, url: m.spec.url, hostname: m.spec.hostname, role: m.role })),
        staleAfterMs: c.discovery.staleAfter,
        window: o.gate.summary(settings.windowMs),
        envoy,
        usageOf: o.gate.usageOf,
        settings,
        question,
      });
      const key = JSON.stringify(question);
      const said = `${answer.verdict} ${answer.holds.map((h) => h.reason).join(',')}`;
      if (lastGate.get(key) !== said) {
        if (lastGate.size > 64) lastGate.clear();
        lastGate.set(key, said);
        o.log.info(
          { verdict: answer.verdict, reasons: answer.holds.map((h) => h.reason), holds: answer.holds.map((h) => h.detail), ...question },
          `gate: ${answer.verdict}`,
        );
      }
      return answer;
    },
    explain: (req) => {
      const { config: c, discovery } = live.parts;
      return explainRequest(req, {
        snapshot: discovery.current(),
        now: Date.now(),
        rng: Math.random,
        staleAfterMs: c.discovery.staleAfter,
        clientIdentity: o.clientIdentity,
        fastPath: { xds: c.envoy.xds !== undefined, enabled: c.routing.fastPath, certificates: c.envoy.tls.clientCaFile !== undefined },
        membershipProblem: null,
      });
    },
  };
}
