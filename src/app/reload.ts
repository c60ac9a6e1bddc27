// Config reload in a running skewgate. A new config is compared with the running one
// (src/config/core/diff.ts); if everything that changed can change at run time, a new discovery service
// and router are built from it, the service's first round is awaited, and both are swapped in at
// once. Until then, and whenever a reload is refused or fails, the running pair keeps deciding: a
// request is never without a router. The ext_proc server and telemetry hold the stable facades
// below and never see the swap.
import type { Logger } from '../util/log.js';
import { ConfigError, type ConfigProblem } from '../config/core/problems.js';
import { type Config } from '../config/core/schema.js';
import { changesEnvoyUpstreams, reloadPlan } from '../config/core/diff.js';
import type { RoundListener } from '../discovery/core/events.js';
import type { Snapshot } from '../discovery/core/types.js';
import type { RequestRouter } from '../routing/router.js';
import type { DiscoverySource } from '../telemetry/telemetry.js';

/** What a reload did; `generation` is the config generation running afterwards (1 at start). */
export type ReloadResult =
  | { readonly result: 'applied'; readonly generation: number; readonly changed: readonly string[] }
  | { readonly result: 'unchanged'; readonly generation: number }
  | { readonly result: 'invalid'; readonly generation: number; readonly problems: readonly ConfigProblem[] }
  | { readonly result: 'restart_required'; readonly generation: number; readonly fields: readonly string[] }
  | { readonly result: 'failed'; readonly generation: number; readonly error: string };

/** A new config, or how to read it (src/config/check.ts, the check of the start): called when the reload runs, a ConfigError making it `invalid`. */
export type ReloadInput = Config | (() => Config | Promise<Config>);

export interface ReloadOptions {
  /** What asked for the reload (SIGHUP, the file changing): logged. */
  readonly trigger?: string;
}

/** The discovery side of the running parts: started once, closed once. DiscoveryService implements it. */
export interface SwappableDiscovery extends DiscoverySource {
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Everything a config feeds at run time, built and swapped as one. */
export interface LiveParts<D extends SwappableDiscovery> {
  readonly config: Config;
  readonly discovery: D;
  readonly router: RequestRouter;
}

export interface LiveConfigDeps<D extends SwappableDiscovery> {
  /** Builds the parts for a config, not started. */
  readonly build: (config: Config) => LiveParts<D>;
  readonly logger: Logger;
  /** After a swap: whatever else follows the config (the log level, telemetry's apiserver addresses). */
  readonly applied?: (config: Config, changed: readonly string[]) => void;
  /** Every reload's result, once per run (the metrics). */
  readonly onResult?: (result: ReloadResult) => void;
  /**
   * Awaited before a new discovery service takes over routing, with its snapshot: what must
   * change outside skewgate first (Envoy's fast-path routes, envoy-runtime/fast-path-sync.ts).
   */
  readonly beforeSwap?: (next: Snapshot) => Promise<void>;
}

interface Job {
  input: ReloadInput;
  trigger: string | undefined;
  readonly waiters: ((r: ReloadResult) => void)[];
}

/**
 * The running parts, the facades that follow them, and the reload queue. One reload runs at a
 * time; those asked for meanwhile are merged into one that runs after it, with the latest input.
 */
export class LiveConfig<D extends SwappableDiscovery> {
  /** For the ext_proc server: every call goes to the router of the parts running now. */
  readonly router: RequestRouter;
  /** For telemetry: the running service's snapshot, rounds and changes, across swaps. */
  readonly discovery: DiscoverySource;
  private live: LiveParts<D>;
  private gen = 1;
  private readonly facade: DiscoveryFacade;
  private starting: Promise<void> | null = null;
  /** Resolves once the first parts have started (well or not): reloads wait for it. */
  private readonly started: Promise<void>;
  private markStarted: () => void = () => undefined;
  private running: Promise<void> | null = null;
  private pending: Job | null = null;
  /** The service being started by the reload in progress: closed at once if skewgate stops. */
  private candidate: D | null = null;
  private ended = false;
  private endSignal: () => void = () => undefined;
  private readonly endedPromise = new Promise<void>((resolve) => (this.endSignal = resolve));
  private closing: Promise<void> | null = null;
  private readonly appliedListeners: ((config: Config, changed: readonly string[]) => void)[] = [];

  constructor(
    initial: Config,
    private readonly deps: LiveConfigDeps<D>,
  ) {
    this.started = new Promise<void>((resolve) => (this.markStarted = resolve));
    this.live = deps.build(initial);
    this.facade = new DiscoveryFacade(this.live.discovery, deps.logger);
    this.discovery = this.facade;
    const running = (): RequestRouter => this.live.router;
    this.router = {
      get retryAfterSeconds() {
        return running().retryAfterSeconds;
      },
      route: (method, path, headers) => running().route(method, path, headers),
    };
  }

  /** Also called after every swap, as deps.applied is (for parts built after the live config); returns the unsubscribe function. */
  onApplied(listener: (config: Config, changed: readonly string[]) => void): () => void {
    this.appliedListeners.push(listener);
    return () => {
      const i = this.appliedListeners.indexOf(listener);
      if (i >= 0) this.appliedListeners.splice(i, 1);
    };
  }

  /** The parts running now. */
  get parts(): LiveParts<D> {
    return this.live;
  }

  get generation(): number {
    return this.gen;
  }

  /** Starts the first parts (their first discovery round). Reloads asked for before wait for it. */
  start(): Promise<void> {
    this.starting ??= this.live.discovery.start().finally(() => this.markStarted());
    return this.starting;
  }

  reload(input: ReloadInput, opts: ReloadOptions = {}): Promise<ReloadResult> {
    if (this.ended) return Promise.resolve(this.finish(this.failure('skewgate is shutting down'), opts.trigger));
    return new Promise((resolve) => {
      if (this.pending) {
        this.pending.input = input;
        this.pending.trigger = opts.trigger ?? this.pending.trigger;
        this.pending.waiters.push(resolve);
      } else {
        this.pending = { input, trigger: opts.trigger, waiters: [resolve] };
      }
      this.pump();
    });
  }

  /**
   * No more reloads: the queued one is answered `failed`, a service being started is closed, and
   * the reload in progress has ended when this resolves. The running parts keep running.
   */
  async endReloads(): Promise<void> {
    if (!this.ended) {
      this.ended = true;
      this.endSignal();
      const job = this.pending;
      this.pending = null;
      if (job) {
        const r = this.finish(this.failure('skewgate is shutting down'), job.trigger);
        for (const w of job.waiters) w(r);
      }
      await this.candidate?.close();
    }
    await this.running;
  }

  /** endReloads, then the running discovery service is closed. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.endReloads();
      await this.live.discovery.close();
    })();
    return this.closing;
  }

  private pump(): void {
    if (this.running || !this.pending) return;
    const job = this.pending;
    this.pending = null;
    this.running = (async () => {
      // A reload asked for before or during start runs once the first parts serve (or skewgate stops).
      await Promise.race([this.started, this.endedPromise]);
      const r = this.finish(await this.apply(job.input).catch((err: unknown) => this.failure(errorText(err))), job.trigger);
      for (const w of job.waiters) w(r);
    })().finally(() => {
      this.running = null;
      if (!this.ended) this.pump();
    });
  }

  /** One reload: read, plan, build, start, swap, close the old service. Never throws. */
  private async apply(input: ReloadInput): Promise<ReloadResult> {
    if (this.ended) return this.failure('skewgate is shutting down');
    let next: Config;
    try {
      next = typeof input === 'function' ? await input() : input;
    } catch (err) {
      if (err instanceof ConfigError) return { result: 'invalid', generation: this.gen, problems: err.problems };
      return this.failure(`cannot read the config: ${errorText(err)}`);
    }
    const plan = reloadPlan(this.live.config, next);
    if (plan.kind === 'unchanged') return { result: 'unchanged', generation: this.gen };
    if (plan.kind === 'restart_required') return { result: 'restart_required', generation: this.gen, fields: plan.fields };
    // The log level alone needs no new discovery service.
    if (plan.changed.every((c) => c === 'log.level')) return this.swap({ ...this.live, config: next }, plan.changed);

    let parts: LiveParts<D> | null = null;
    try {
      parts = this.deps.build(next);
      this.candidate = parts.discovery;
      await parts.discovery.start();
    } catch (err) {
      await parts?.discovery.close().catch(() => undefined);
      return this.failure(`the new discovery service did not start: ${errorText(err)}`);
    } finally {
      this.candidate = null;
    }
    if (this.ended) {
      await parts.discovery.close();
      return this.failure('skewgate is shutting down');
    }
    await this.deps.beforeSwap?.(parts.discovery.current()).catch((err: unknown) => {
      this.deps.logger.error({ err: errorText(err) }, 'before-swap step failed; swapping anyway');
    });
    return this.swap(parts, plan.changed);
  }

  /** Puts parts in place of the running ones, then closes the replaced service if it is another. */
  private async swap(parts: LiveParts<D>, changed: readonly string[]): Promise<ReloadResult> {
    const old = this.live;
    // One synchronous step: the router and the facade move together, so no decision sees a mix.
    this.live = parts;
    if (parts.discovery !== old.discovery) this.facade.switchTo(parts.discovery);
    this.gen += 1;
    // With envoy.xds the files follow the members; without, the bootstrap holds them.
    if (parts.config.envoy.xds === undefined && changesEnvoyUpstreams(old.config, parts.config))
      this.deps.logger.warn(
        { generation: this.gen },
        "apiservers changed as Envoy's bootstrap names them (one cluster and route each): render it again " +
          '(skewgate envoy-config) and restart Envoy, or use envoy.xds; until then a request routed to a new apiserver is answered 503 by Envoy (upstream_unknown_to_envoy)',
      );
    try {
      this.deps.applied?.(parts.config, changed);
      for (const l of this.appliedListeners) l(parts.config, changed);
    } catch (err) {
      this.deps.logger.error({ err: errorText(err) }, 'config reloaded, but applying it outside discovery and routing failed');
    }
    if (old.discovery !== parts.discovery) {
      await old.discovery.close().catch((err: unknown) => {
        this.deps.logger.warn({ err: errorText(err) }, 'the replaced discovery service did not close cleanly');
      });
    }
    return { result: 'applied', generation: this.gen, changed };
  }

  private failure(error: string): ReloadResult {
    return { result: 'failed', generation: this.gen, error };
  }

  /** The log line and the metric of every result. */
  private finish(r: ReloadResult, trigger: string | undefined): ReloadResult {
    const log = this.deps.logger;
    const base = { result: r.result, generation: r.generation, ...(trigger ? { trigger } : {}) };
    switch (r.result) {
      case 'applied':
        log.info(
          {
            ...base,
            changed: r.changed,
            file: this.live.config.source,
            // Not fetched in the new service's first round: that apiserver proves nothing until it is.
            unsynced: this.live.discovery
              .current()
              .servers.filter((s) => s.view === null)
              .map((s) => s.name),
          },
          'config reloaded',
        );
        break;
      case 'unchanged':
        log.info(base, 'config reload: nothing changed');
        break;
      case 'invalid':
        log.error({ ...base, problems: r.problems.map((p) => `${p.path || '(top)'}: ${p.message}`) }, 'config reload refused');
        break;
      case 'restart_required':
        log.error(
          { ...base, fields: r.fields, hint: 'these fields take effect only at start: restart skewgate to apply them' },
          'config reload refused',
        );
        break;
      case 'failed':
        log.error({ ...base, err: r.error }, 'config reload failed');
        break;
      default: {
        const unreachable: never = r;
        throw new Error(`unknown reload result ${String(unreachable)}`);
      }
    }
    this.deps.onResult?.(r);
    return r;
  }
}

/**
 * Telemetry's view of discovery, which outlives any one service: it forwards the running
 * service's rounds and snapshots to its own listeners, and on a swap tells them the new snapshot.
 */
class DiscoveryFacade implements DiscoverySource {
  private readonly changeListeners = new Set<(snapshot: Snapshot) => void>();
  private readonly roundListeners = new Set<RoundListener>();
  private unsubscribe: () => void;

  constructor(
    private active: DiscoverySource,
    private readonly log: Logger,
  ) {
    this.unsubscribe = this.follow(active);
  }

  current(): Snapshot {
    return this.active.current();
  }

  onChange(listener: (snapshot: Snapshot) => void): () => void {
    this.changeListeners.add(listener);
    return () => {
      this.changeListeners.delete(listener);
    };
  }

  onRound(listener: RoundListener): () => void {
    this.roundListeners.add(listener);
    return () => {
      this.roundListeners.delete(listener);
    };
  }

  switchTo(next: DiscoverySource): void {
    this.unsubscribe();
    this.active = next;
    this.unsubscribe = this.follow(next);
    this.emit(this.changeListeners, next.current());
  }

  private follow(source: DiscoverySource): () => void {
    const offChange = source.onChange((snap) => this.emit(this.changeListeners, snap));
    const offRound = source.onRound((e) => this.emit(this.roundListeners, e));
    return () => {
      offChange();
      offRound();
    };
  }

  /** One listener's error is logged and does not keep the others from hearing. */
  private emit<E>(listeners: ReadonlySet<(event: E) => void>, event: E): void {
    for (const l of listeners) {
      try {
        l(event);
      } catch (err) {
        this.log.error({ err: errorText(err) }, 'discovery listener threw');
      }
    }
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
