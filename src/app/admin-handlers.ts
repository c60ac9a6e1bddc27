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

export function adminHandlers(o: {
  readonly live: LiveConfig<DiscoveryService>;
  readonly clientIdentity: ClientIdentityOf;
  readonly version: string;
  readonly startedAt: number;
  readonly history: HistoryRecorder;
  readonly cordons: CordonControl;
  readonly cordonStore: CordonStore;
}): AdminHandlers {
  const { live } = o;
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
    cordon: (req, peer) => o.cordons.change(req, peer),
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
