// The lab's process supervisor. Every process is started detached (its own process group,
// stdout/stderr appended to a log file under a run header) with a pid file and a JSON record in
// the run dir, so it outlives the command that started it and another shell can adopt or stop it.
// Whether a record's process still runs is judged by pid, start time and boot (procfs.ts), never
// by the pid alone. A supervisor can SIGKILL what it spawned when Node exits (a crashing test).
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { open as openFile, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LabError } from './errors.js';
import { findProcesses, ownership, readBootId, readStat, type ProcIdentity } from './procfs.js';

/** The pid file's companion: enough to recognise, describe and stop the process from any shell. */
export interface ProcRecord {
  readonly name: string;
  readonly kind: string;
  readonly pid: number;
  readonly startTime: string;
  readonly bootId?: string;
  readonly marker: string;
  readonly logFile: string;
  readonly startedAt: string;
}

export interface SupervisorOptions {
  /** Pid files and records (`<name>.pid`, `<name>.json`). */
  readonly runDir: string;
  /** Log files (`<name>.log`). */
  readonly logDir: string;
  /** Every process's working directory. */
  readonly cwd: string;
  /** An argument only this run dir's processes carry (every link of an exec chain): strays are found by it. */
  readonly carriesMarker: (argv: readonly string[]) => boolean;
  readonly log: (line: string) => void;
  /** SIGKILL every process this object spawned when the Node process exits (tests). */
  readonly killOnExit?: boolean;
}

/** What to spawn; `extra` becomes part of the record (R's own fields). */
export interface SpawnOptions<R extends ProcRecord> {
  readonly name: string;
  readonly kind: R['kind'];
  readonly cmd: string;
  readonly args: readonly string[];
  /** An argv element every link of the exec chain carries (procfs.ts). */
  readonly marker: string;
  readonly extra: Omit<R, keyof ProcRecord>;
}

const RUN_HEADER = '====';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The last lines of a log file. */
export async function logTail(file: string, lines = 40): Promise<string> {
  try {
    const fh = await openFile(file, 'r');
    try {
      const { size } = await fh.stat();
      const len = Math.min(size, 16_384);
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, size - len);
      let text = buf.toString('utf8');
      // Logs are appended across runs: show only the latest run (spawn writes the header).
      const header = text.lastIndexOf(`\n${RUN_HEADER}`);
      if (header >= 0) text = text.slice(header + 1);
      return text.split('\n').slice(-lines).join('\n');
    } finally {
      await fh.close();
    }
  } catch {
    return `(no log at ${file})`;
  }
}

export class Supervisor<R extends ProcRecord> {
  private readonly procs = new Map<string, R>();
  /** Exit notes of the processes this object spawned (adopted ones are watched through /proc). */
  private readonly exits = new Map<number, string>();
  /**
   * Every process this object spawned, by pid, until it is known to be gone: stopAll() stops
   * these even if a record was dropped, and killOnExit may kill only these.
   */
  private readonly started = new Map<number, R>();
  private readonly killOnExitHook: (() => void) | undefined;
  /** Run-dir record writes, one at a time (parallel starts must not interleave them). */
  private writes: Promise<unknown> = Promise.resolve();
  private tmpSeq = 0;

  constructor(private readonly o: SupervisorOptions) {
    if (o.killOnExit) {
      this.killOnExitHook = (): void => {
        for (const pid of this.started.keys()) if (!this.exits.has(pid)) signal(pid, 'SIGKILL');
      };
      process.on('exit', this.killOnExitHook);
    }
  }

  /** The log file of a process (whether or not it runs). */
  logFile(name: string): string {
    return join(this.o.logDir, `${name}.log`);
  }

  /** The record tracked under `name`, running or not. */
  record(name: string): R | undefined {
    return this.procs.get(name);
  }

  /** Every tracked record. */
  records(): R[] {
    return [...this.procs.values()];
  }

  /** The record of `name` if its process still runs. */
  async alive(name: string): Promise<R | undefined> {
    const rec = this.procs.get(name);
    if (rec === undefined) return undefined;
    if ((this.started.has(rec.pid) && this.exits.has(rec.pid)) || (await ownership(rec)).verdict !== 'ours') return undefined;
    return rec;
  }

  /** Takes over the records in the run dir whose process still runs; drops the others. None: nothing to adopt. */
  async adopt(): Promise<void> {
    const entries = await readdir(this.o.runDir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    for (const entry of entries) {
      if (!entry.endsWith('.json')) continue;
      let rec: R;
      try {
        rec = JSON.parse(await readFile(join(this.o.runDir, entry), 'utf8')) as R;
      } catch {
        continue;
      }
      // A name this object tracks already: its own record wins (stopAll() finds the other one by its marker).
      if (this.procs.has(rec.name)) continue;
      if ((await ownership(rec)).verdict === 'ours') this.procs.set(rec.name, rec);
      else await this.removeRecordFiles(rec.name);
    }
  }

  async spawn(o: SpawnOptions<R>): Promise<R> {
    if (await this.alive(o.name)) throw new LabError(`${o.name} is already running`);
    const logFile = this.logFile(o.name);
    const fd = openSync(logFile, 'a');
    let child;
    try {
      await writeFile(logFile, `\n${RUN_HEADER} ${new Date().toISOString()} ${o.cmd} ${o.args.join(' ')}\n`, { flag: 'a' });
      // detached: its own process group, so a Ctrl-C of `lab up` does not reach it.
      child = spawn(o.cmd, o.args, { detached: true, stdio: ['ignore', fd, fd], cwd: this.o.cwd });
    } finally {
      closeSync(fd);
    }
    const pid = await new Promise<number>((res, rej) => {
      child.once('spawn', () => {
        this.exits.delete(child.pid as number); // a reused pid of an earlier child
        res(child.pid as number);
      });
      child.once('error', (err) => rej(new LabError(`cannot start ${o.name} (${o.cmd}): ${err.message}`)));
      child.once('exit', (code, sig) => {
        if (child.pid !== undefined) this.exits.set(child.pid, sig === null ? `exit code ${String(code)}` : `signal ${sig}`);
      });
    });
    child.unref();
    // Tracked before any await: whatever happens next, stopAll() and killOnExit know this pid.
    const provisional = {
      name: o.name,
      kind: o.kind,
      pid,
      startTime: '',
      marker: o.marker,
      logFile,
      startedAt: new Date().toISOString(),
    } as R;
    this.started.set(pid, provisional);
    const [stat, bootId] = await Promise.all([readStat(pid), readBootId()]);
    const rec = {
      ...provisional,
      startTime: stat?.startTime ?? '',
      ...(bootId === null ? {} : { bootId }),
      ...definedFields(o.extra),
    } as R;
    this.started.set(pid, rec);
    this.procs.set(o.name, rec);
    await this.serialized(async () => {
      await this.writeAtomic(join(this.o.runDir, `${o.name}.pid`), `${pid}\n`);
      await this.writeAtomic(join(this.o.runDir, `${o.name}.json`), `${JSON.stringify(rec, null, 2)}\n`);
    });
    return rec;
  }

  /** Polls `check` (null = ready) until it passes; fails early, with the log tail, if the process dies. */
  async waitFor(rec: R, timeoutMs: number, check: () => Promise<string | null>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'not checked yet';
    for (;;) {
      // Liveness by pid + start time (procfs.ts): a process in the middle of an exec is still ours.
      let gone = this.started.has(rec.pid) ? this.exits.get(rec.pid) : undefined;
      if (gone === undefined) {
        const o = await ownership(rec);
        if (o.verdict !== 'ours') gone = o.detail;
      }
      if (gone !== undefined) {
        await this.forget(rec);
        throw new LabError(`${rec.name} exited before it was ready (${gone}); log: ${rec.logFile}`, await logTail(rec.logFile));
      }
      try {
        const problem = await check();
        if (problem === null) return;
        last = problem;
      } catch (err) {
        last = errorText(err);
      }
      if (Date.now() > deadline) {
        throw new LabError(`${rec.name} not ready within ${seconds(timeoutMs)} (${last}); log: ${rec.logFile}`, await logTail(rec.logFile));
      }
      await sleep(250);
    }
  }

  /** Stops the process tracked under `name` (no-op when there is none): SIGTERM, SIGKILL after graceMs. */
  async stop(name: string, graceMs: number): Promise<void> {
    const rec = this.procs.get(name);
    if (rec !== undefined) await this.stopRecord(rec, graceMs);
  }

  /** SIGKILLs the process tracked under `name` (a crash, not a stop); resolves once it is gone. No-op when there is none. */
  async kill(name: string): Promise<void> {
    const rec = this.procs.get(name);
    if (rec !== undefined) {
      await this.terminate(rec.name, rec, 0, 'SIGKILL');
      await this.forget(rec);
    }
  }

  /**
   * Stops everything, kind by kind in `order` (the processes of one kind in parallel): what this
   * object tracks, records other supervisors wrote since, what this object spawned (even if
   * dropped), then any process still carrying one of the run dir's markers (strayGraceMs);
   * verifies that nothing is left running. first: 'SIGKILL' kills at once (no grace at all).
   */
  async stopAll(
    order: readonly { readonly kind: R['kind']; readonly graceMs: number }[],
    strayGraceMs: number,
    first: NodeJS.Signals = 'SIGTERM',
  ): Promise<void> {
    await this.adopt();
    const all = new Map<string, R>();
    for (const p of [...this.procs.values(), ...this.started.values()]) all.set(`${p.pid}/${p.startTime}`, p);
    for (const { kind, graceMs } of order) {
      await Promise.all([...all.values()].filter((p) => p.kind === kind).map((p) => this.stopRecord(p, graceMs, first)));
    }
    const strays = await findProcesses(this.o.carriesMarker);
    if (strays.length > 0) {
      this.o.log(
        `stopping ${strays.length} process(es) of ${this.o.cwd} without a record: ${strays.map((p) => `pid ${p.pid} ${p.cmdline[0] ?? ''}`).join(', ')}`,
      );
      const bootId = await readBootId();
      await Promise.all(
        strays.map((p) =>
          this.terminate(
            `pid ${p.pid}`,
            {
              pid: p.pid,
              startTime: p.startTime,
              marker: p.cmdline.find((a) => this.o.carriesMarker([a])) ?? '',
              ...(bootId === null ? {} : { bootId }),
            },
            strayGraceMs,
            first,
          ),
        ),
      );
    }
    const left: string[] = [];
    for (const p of all.values()) if ((await ownership(p)).verdict === 'ours') left.push(`${p.name} (pid ${p.pid})`);
    for (const p of await findProcesses(this.o.carriesMarker)) left.push(`pid ${p.pid} (${p.cmdline.join(' ').slice(0, 120)})`);
    if (left.length > 0) throw new LabError(`still running after down: ${left.join(', ')}`);
  }

  /** Stops watching for Node's exit; the processes keep running. */
  close(): void {
    if (this.killOnExitHook) process.removeListener('exit', this.killOnExitHook);
  }

  /** Runs record writes one after another, in call order (a failed one does not block the next). */
  serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writes.then(fn, fn);
    this.writes = run.catch(() => undefined);
    return run;
  }

  /** Readers (another Lab, another shell) see the old file or the new one, never half of one. */
  async writeAtomic(file: string, text: string): Promise<void> {
    const tmp = `${file}.${process.pid}.${++this.tmpSeq}.tmp`;
    try {
      await writeFile(tmp, text);
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  private async stopRecord(rec: R, graceMs: number, first: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.terminate(rec.name, rec, graceMs, first);
    await this.forget(rec);
  }

  /** `first` (SIGTERM), SIGKILL after graceMs; resolves once the process is gone (no-op if it is). */
  private async terminate(label: string, id: ProcIdentity, graceMs: number, first: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const ours = async (): Promise<boolean> => (await ownership(id)).verdict === 'ours';
    if (!(await ours())) return;
    signal(id.pid, first);
    const deadline = Date.now() + graceMs;
    while ((await ours()) && Date.now() < deadline) await sleep(first === 'SIGKILL' ? 10 : 100);
    if (!(await ours())) return;
    if (first !== 'SIGKILL') this.o.log(`${label} did not stop within ${seconds(graceMs)}: SIGKILL`);
    signal(id.pid, 'SIGKILL');
    const killDeadline = Date.now() + 5000;
    while ((await ours()) && Date.now() < killDeadline) await sleep(100);
    if (await ours()) throw new LabError(`${label} (pid ${id.pid}) survived SIGKILL`);
  }

  /** Drops the record of a process that is gone; one still running stays tracked, whatever the caller thought. */
  private async forget(rec: R): Promise<void> {
    if ((await ownership(rec)).verdict === 'ours') {
      this.o.log(`${rec.name} (pid ${rec.pid}) still runs: it stays in the lab's records`);
      return;
    }
    if (this.started.get(rec.pid)?.startTime === rec.startTime) this.started.delete(rec.pid);
    const current = this.procs.get(rec.name);
    if (current !== undefined && current.pid !== rec.pid) return; // replaced meanwhile: keep the newer record
    this.procs.delete(rec.name);
    await this.removeRecordFiles(rec.name);
  }

  private removeRecordFiles(name: string): Promise<void> {
    return this.serialized(async () => {
      await rm(join(this.o.runDir, `${name}.pid`), { force: true });
      await rm(join(this.o.runDir, `${name}.json`), { force: true });
    });
  }
}

/** The fields of `o` that are not undefined (a record's JSON and its object then agree). */
function definedFields<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function errorText(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}
