// Envoy's certificates, keys and CA bundles through file-watched SDS (tls-material.ts). `envoy-config`
// writes one SDS file per secret, naming the real files; `serve` stats those files and, when one
// changes, renames a file into the secret's reload folder, which makes Envoy read them again. A
// renewal written in place (`kubeadm certs renew`) is so served with no restart. skewgate never
// reads a private key: Envoy checks the pair itself and keeps the last good one when they do not
// match yet (a key written after its certificate), so each change is triggered again on the next
// two ticks.
import type { X509Certificate } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import { fileStamp } from '../util/file-stamp.js';
import { parsePemCertificates } from '../identity/core/client-identity.js';
import { renderPath } from '../envoy/json.js';
import { renderSecret, sdsDirectory, secretsOf, triggerDirectory, type SecretSpec } from '../envoy/tls-material.js';

/** The files behind one secret that skewgate may look at: never a private key's content, only its stamp. */
function filesOf(spec: SecretSpec): readonly string[] {
  return spec.kind === 'certificate' ? [spec.certFile, spec.keyFile] : [spec.caFile];
}

/** The file whose PEM skewgate checks (and names in its log): the certificate, or the CA bundle. */
function publicFile(spec: SecretSpec): string {
  return spec.kind === 'certificate' ? spec.certFile : spec.caFile;
}

/** Every certificate in a PEM bundle, parsed; none, or one that does not parse, is an error. */
function certificatesIn(pem: string, what: string): X509Certificate[] {
  let certs: X509Certificate[];
  try {
    certs = parsePemCertificates(pem);
  } catch (err) {
    throw new Error(`${what}: a certificate does not parse (${(err as Error).message})`, { cause: err });
  }
  if (certs.length === 0) throw new Error(`${what} holds no PEM certificate`);
  return certs;
}

function atomicSync(dir: string, name: string, text: string): void {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, join(dir, name));
}

/** For `envoy-config`: the SDS file of every secret (file names only) and its reload folder. */
export function writeSecretsSync(config: Config, relativeTo?: string): readonly string[] {
  const dir = sdsDirectory(config);
  if (dir === null) return [];
  mkdirSync(dir, { recursive: true });
  const file = (p: string): string => renderPath(p, relativeTo);
  const written: string[] = [];
  for (const spec of secretsOf(config)) {
    mkdirSync(triggerDirectory(dir, spec), { recursive: true });
    atomicSync(dir, `${spec.name}.json`, `${JSON.stringify(renderSecret(spec, dir, file), null, 2)}\n`);
    written.push(`${spec.name}.json`);
  }
  return written;
}

export interface SecretRotatorOptions {
  /** How often the files are stat'ed. Default 5 s. */
  readonly intervalMs?: number;
}

/** Ticks after a change on which it is triggered again (the rest of a pair may follow). */
const FOLLOW_UPS = 2;

/** `serve`'s half: watches the files behind every secret and makes Envoy re-read the ones that changed. */
export class SecretRotator {
  private readonly dir: string | null;
  private readonly specs: readonly SecretSpec[];
  private readonly stamps = new Map<string, string>();
  private readonly pending = new Map<string, number>();
  private readonly problems = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private closed = false;
  private sequence = 0;

  constructor(
    config: Config,
    private readonly log: Logger,
    private readonly opts: SecretRotatorOptions = {},
  ) {
    this.dir = sdsDirectory(config);
    this.specs = this.dir === null ? [] : secretsOf(config);
  }

  /**
   * Takes the files as they are and starts watching. Envoy is made to re-read every secret once:
   * a file may have been renewed while skewgate was down.
   */
  async start(): Promise<void> {
    if (this.dir === null || this.closed) return;
    await this.tick(true);
    this.timer = setInterval(() => {
      this.running ??= this.tick(false).finally(() => {
        this.running = null;
      });
    }, this.opts.intervalMs ?? 5_000);
    this.timer.unref();
  }

  /** Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private async tick(first: boolean): Promise<void> {
    for (const spec of this.specs) {
      if (this.closed) return;
      const stamp = (await Promise.all(filesOf(spec).map((f) => fileStamp(f)))).join('|');
      const changed = this.stamps.get(spec.name) !== stamp;
      this.stamps.set(spec.name, stamp);
      if (changed && !first) this.pending.set(spec.name, FOLLOW_UPS + 1);
      const left = this.pending.get(spec.name) ?? 0;
      if (!first && left === 0) continue;
      if (left > 0) this.pending.set(spec.name, left - 1);
      try {
        await this.trigger(spec, changed && !first);
      } catch (err) {
        // The reload folder itself (a full disk, a removed xDS folder): logged, tried again next tick.
        this.stamps.delete(spec.name);
        const message = `reload folder: ${(err as Error).message}`;
        if (this.problems.get(spec.name) !== message)
          this.log.warn({ secret: spec.name, err: message }, 'could not make Envoy re-read the certificate files');
        this.problems.set(spec.name, message);
      }
    }
  }

  /** Checks the public PEM, then renames a file into the reload folder; a bad file is logged once and left to Envoy's last good one. */
  private async trigger(spec: SecretSpec, announce: boolean): Promise<void> {
    const what = publicFile(spec);
    let leaf: X509Certificate | undefined;
    try {
      [leaf] = certificatesIn(await readFile(what, 'utf8'), what);
    } catch (err) {
      const message = (err as Error).message;
      if (this.problems.get(spec.name) !== message)
        this.log.warn({ secret: spec.name, file: what, err: message }, 'certificate file not usable; Envoy keeps the last good one');
      this.problems.set(spec.name, message);
      return;
    }
    if (this.problems.delete(spec.name)) this.log.info({ secret: spec.name, file: what }, 'certificate file usable again');
    const dir = triggerDirectory(this.dir as string, spec);
    await mkdir(dir, { recursive: true });
    const tmp = join(dir, `.reload.${process.pid}.tmp`);
    await writeFile(tmp, `${++this.sequence} ${new Date().toISOString()}\n`);
    await rename(tmp, join(dir, 'reload'));
    if (announce)
      this.log.info(
        { secret: spec.name, files: filesOf(spec), serial: leaf?.serialNumber, notAfter: leaf?.validTo },
        'certificate files changed; Envoy reads them again',
      );
  }
}
