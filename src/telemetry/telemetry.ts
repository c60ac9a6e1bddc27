// skewgate's telemetry as the app sees it: a decision observer, a discovery listener, start and
// shutdown. The SDK (./sdk.js) is imported only on start, and only when something is enabled.
import type { Logger } from 'pino';
import type { DiscoveryRoundEvent, RoundListener } from '../discovery/core/events.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { DecisionObserver } from '../extproc/observer.js';
import { createDecisionSpans, serverAddresses } from './decision-spans.js';
import { recordRoundSpan } from './discovery-spans.js';
import { MembershipSpans } from './membership-spans.js';
import { recordCordonSpan } from './operator-spans.js';
import type { CordonChange } from '../cordon/core/cordons.js';
import { ProcessMetrics } from './process-metrics.js';
import type { ReloadResultName } from './core/names.js';
import { ConfigMetrics, SkewgateMetrics, type ConfigState, type DecisionTally } from './metrics.js';
import type { SdkOptions, TelemetrySdk } from './sdk.js';
import { describeTelemetry, telemetryDisabled, type TelemetrySettings } from './core/settings.js';
import { SkewTracker } from './core/skew-diff.js';
import { runSliced } from '../util/slice-runner.js';
import type { FastTable } from '../routing/fast-path.js';

/** What telemetry reads from discovery; DiscoveryService implements it. */
export interface DiscoverySource {
  current(): Snapshot;
  onRound(listener: RoundListener): () => void;
  onChange(listener: (snapshot: Snapshot) => void): () => void;
}

export interface TelemetryDeps {
  readonly settings: TelemetrySettings;
  readonly apiservers: readonly { readonly name: string; readonly url: string }[];
  readonly logger: Logger;
  /** Tests: in-memory span exporter and metric readers (these turn the SDK on by themselves). */
  readonly sdk?: SdkOptions;
  /** The fast-path table in Envoy's routes (envoy-runtime/xds-files.ts), for its gauges; none without envoy.xds. */
  readonly fastPath?: () => FastTable | null;
}

export interface Telemetry {
  /** A no-op until start() has resolved. */
  readonly observer: DecisionObserver;
  /** Loads the SDK, binds /metrics, subscribes to discovery rounds. Throws TelemetryStartError. */
  start(discovery: DiscoverySource): Promise<void>;
  /** Bound port of the Prometheus endpoint, once started. */
  prometheusPort(): number | null;
  forceFlush(): Promise<void>;
  /** A config reload ended (src/app/reload.ts): counted, and the generation now running. */
  recordReload(result: ReloadResultName, generation: number): void;
  /** Decisions made in ext_proc worker processes (workers/), counted as the main process's are. */
  recordTallies(tallies: readonly DecisionTally[], routeErrors: number): void;
  /** An operator cordoned or uncordoned an apiserver: a span naming who asked. */
  recordCordon(change: CordonChange): void;
  /** The apiservers of a reloaded config: decision spans name the address of the upstream. */
  setApiservers(apiservers: TelemetryDeps['apiservers']): void;
  /** Flushes and stops; idempotent. */
  shutdown(): Promise<void>;
}

/** null when telemetry is off and no test hook asks for it: then nothing is loaded or created. */
export function createTelemetry(deps: TelemetryDeps): Telemetry | null {
  const hooks = deps.sdk;
  if (telemetryDisabled(deps.settings) && !hooks?.spanExporter && !hooks?.metricReaders?.length) return null;
  const log = deps.logger;
  const servers = serverAddresses(deps.apiservers);
  const skew = new SkewTracker();
  let sdk: TelemetrySdk | null = null;
  let unsubscribe: (() => void) | null = null;
  /** The skew diffs still being computed, one after the other; shutdown waits for them. */
  let skewQueue: Promise<void> = Promise.resolve();
  let active: DecisionObserver | null = null;
  let stopping: Promise<void> | null = null;
  let configState: ConfigState = { generation: 1, lastReloadSucceeded: true };
  let configMetrics: ConfigMetrics | null = null;
  let decisionMetrics: SkewgateMetrics | null = null;
  let processMetrics: ProcessMetrics | null = null;

  const observer: DecisionObserver = {
    onRequest: (ctx) => active?.onRequest?.(ctx),
    onDecision: (result, ctx) => active?.onDecision(result, ctx),
    onRouteError: (err, ctx) => active?.onRouteError?.(err, ctx),
  };

  return {
    observer,
    async start(discovery) {
      if (sdk || stopping) return;
      for (const w of deps.settings.warnings) log.warn(w);
      const { startSdk } = await import('./sdk.js');
      sdk = await startSdk(deps.settings, hooks);
      const { tracer, meter } = sdk;
      const spans = tracer ? createDecisionSpans(tracer, servers) : null;
      const metrics = meter ? new SkewgateMetrics(meter, discovery, skew, Date.now, deps.fastPath) : null;
      configMetrics = meter ? new ConfigMetrics(meter, () => configState) : null;
      processMetrics = meter ? new ProcessMetrics(meter) : null;
      decisionMetrics = metrics;
      active = {
        ...(spans ? { onRequest: spans.onRequest } : {}),
        onDecision(result, ctx) {
          spans?.onDecision(result, ctx);
          metrics?.recordDecision(result, ctx.durationNs);
        },
        onRouteError(err, ctx) {
          spans?.onRouteError(err, ctx);
          metrics?.recordRouteError();
        },
      };
      const membership = tracer ? new MembershipSpans(tracer) : null;
      const offChange = membership ? discovery.onChange((snap) => void membership.record(snap, Date.now())) : () => undefined;
      // The skew diff walks every resource: on a large cluster's change that is a slice-by-slice
      // computation (slice-runner.ts), one round after the other, never in the request path's way.
      const offRound = discovery.onRound((e: DiscoveryRoundEvent) => {
        metrics?.recordRound(e);
        skewQueue = skewQueue
          .then(async () => {
            const change = await runSliced(skew.updateSteps(e.snapshot));
            if (change)
              log.info(
                {
                  apiserver: e.server,
                  skewedBefore: change.before,
                  skewedAfter: change.after,
                  newlySkewed: change.newlySkewed.slice(0, 10),
                  noLongerSkewed: change.noLongerSkewed.slice(0, 10),
                  ...(change.changed.length === 0 ? {} : { missingFromChanged: change.changed.slice(0, 10) }),
                },
                'skew changed',
              );
            if (tracer) recordRoundSpan(tracer, e, servers.get(e.server), change);
          })
          .catch((err: unknown) => log.error({ err: String(err) }, 'skew tracking failed'));
      });
      unsubscribe = () => {
        offRound();
        offChange();
      };
      log.info({ telemetry: describeTelemetry(deps.settings), prometheusPort: sdk.prometheusPort }, 'telemetry started');
    },
    prometheusPort: () => sdk?.prometheusPort ?? null,
    recordTallies(tallies, routeErrors) {
      if (stopping) return;
      for (const t of tallies) decisionMetrics?.recordTally(t);
      for (let i = 0; i < routeErrors; i++) decisionMetrics?.recordRouteError();
    },
    recordCordon(change) {
      if (sdk?.tracer && !stopping) recordCordonSpan(sdk.tracer, change, Date.now());
    },
    recordReload(result, generation) {
      configState = { generation, lastReloadSucceeded: result === 'applied' || result === 'unchanged' };
      configMetrics?.recordReload(result);
    },
    setApiservers(apiservers) {
      // The decision spans hold this map: refilled in place, never replaced.
      servers.clear();
      for (const [name, address] of serverAddresses(apiservers)) servers.set(name, address);
    },
    async forceFlush() {
      await sdk?.forceFlush();
    },
    shutdown() {
      stopping ??= (async () => {
        unsubscribe?.();
        active = null;
        await skewQueue;
        processMetrics?.close();
        await sdk?.shutdown();
      })();
      return stopping;
    },
  };
}
