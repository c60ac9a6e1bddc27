// The process and Node runtime, under the names Prometheus client libraries use
// (process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds,
// process_open_fds, nodejs_heap_*_bytes, nodejs_eventloop_delay_*_seconds), so the dashboards and
// alerts operators already have fit. Read when scraped; the event-loop monitor is the only thing
// that runs in between (a libuv timer, no JavaScript) and is stopped on close.
import type { Meter } from '@opentelemetry/api';
import { readdirSync } from 'node:fs';
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';

export const PROCESS_METRIC = {
  cpuSeconds: 'process.cpu.seconds',
  residentMemory: 'process.resident_memory_bytes',
  startTime: 'process.start_time_seconds',
  openFds: 'process.open_fds',
  heapUsed: 'nodejs.heap_used_bytes',
  heapTotal: 'nodejs.heap_total_bytes',
  external: 'nodejs.external_memory_bytes',
  loopDelayMean: 'nodejs.eventloop_delay_mean_seconds',
  loopDelayP99: 'nodejs.eventloop_delay_p99_seconds',
  loopDelayMax: 'nodejs.eventloop_delay_max_seconds',
} as const;

/** Open file descriptors (Linux /proc); null where there is no /proc. */
function openFds(): number | null {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return null;
  }
}

export class ProcessMetrics {
  private readonly loop: IntervalHistogram;

  constructor(meter: Meter) {
    this.loop = monitorEventLoopDelay({ resolution: 10 });
    this.loop.enable();
    const startSeconds = (performance.timeOrigin + 0) / 1000;
    const cpu = meter.createObservableCounter(PROCESS_METRIC.cpuSeconds, { description: 'User and system CPU time spent, in seconds' });
    const rss = meter.createObservableGauge(PROCESS_METRIC.residentMemory, { description: 'Resident memory, in bytes' });
    const start = meter.createObservableGauge(PROCESS_METRIC.startTime, { description: 'Start of the process, seconds since the epoch' });
    const fds = meter.createObservableGauge(PROCESS_METRIC.openFds, { description: 'Open file descriptors' });
    const heapUsed = meter.createObservableGauge(PROCESS_METRIC.heapUsed, { description: 'V8 heap in use, in bytes' });
    const heapTotal = meter.createObservableGauge(PROCESS_METRIC.heapTotal, { description: 'V8 heap allocated, in bytes' });
    const external = meter.createObservableGauge(PROCESS_METRIC.external, {
      description: 'Memory of C++ objects bound to JavaScript, in bytes',
    });
    const mean = meter.createObservableGauge(PROCESS_METRIC.loopDelayMean, {
      description: 'Mean event-loop delay since the last scrape, in seconds',
    });
    const p99 = meter.createObservableGauge(PROCESS_METRIC.loopDelayP99, {
      description: '99th percentile event-loop delay since the last scrape',
    });
    const max = meter.createObservableGauge(PROCESS_METRIC.loopDelayMax, { description: 'Longest event-loop delay since the last scrape' });
    meter.addBatchObservableCallback(
      (r) => {
        const u = process.cpuUsage();
        r.observe(cpu, (u.user + u.system) / 1e6);
        const m = process.memoryUsage();
        r.observe(rss, m.rss);
        r.observe(heapUsed, m.heapUsed);
        r.observe(heapTotal, m.heapTotal);
        r.observe(external, m.external);
        r.observe(start, startSeconds);
        const n = openFds();
        if (n !== null) r.observe(fds, n);
        // The monitor reports nanoseconds; NaN before its first sample.
        if (this.loop.count > 0) {
          r.observe(mean, this.loop.mean / 1e9);
          r.observe(p99, this.loop.percentile(99) / 1e9);
          r.observe(max, this.loop.max / 1e9);
        }
        this.loop.reset();
      },
      [cpu, rss, start, fds, heapUsed, heapTotal, external, mean, p99, max],
    );
  }

  close(): void {
    this.loop.disable();
  }
}
