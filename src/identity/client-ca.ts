// The client CA bundle (envoy.tls.clientCaFile) that skewgate verifies client certificates
// against, re-read when the file changes so that a CA rotation needs no restart. A bundle that no
// longer parses is logged and the last good one kept. The only I/O of the identity module.
import type { ErrorCode } from '../errors/catalog.js';
import { readFile } from 'node:fs/promises';
import type { Logger } from '../util/log.js';
import { fileStamp } from '../util/file-stamp.js';
import { ClientIdentityVerifier, parsePemCertificates, type ClientTrust } from './core/client-identity.js';

export class ClientCaError extends Error {
  readonly code = 'SKEWGATE_ERR_CLIENT_CA' satisfies ErrorCode;
  constructor(message: string) {
    super(message);
    this.name = 'ClientCaError';
  }
}

export interface ClientCaOptions {
  readonly logger: Logger;
  /** How often the file is checked for a change (a stat call). */
  readonly checkIntervalMs?: number;
}

/** Reads and parses a PEM bundle; throws ClientCaError naming the file and what is wrong. */
export async function loadClientTrust(file: string): Promise<ClientTrust> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new ClientCaError(`client CA bundle ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let cas;
  try {
    cas = parsePemCertificates(pem);
  } catch (err) {
    throw new ClientCaError(`client CA bundle ${file} holds a certificate that does not parse: ${(err as Error).message}`);
  }
  if (cas.length === 0) throw new ClientCaError(`client CA bundle ${file} holds no PEM certificate`);
  return { cas, source: file };
}

/** Without a file, verifier() is null: a request with a client certificate is then never stated. */
export class ClientCaBundle {
  private current: ClientIdentityVerifier | null = null;
  private stamp = '';
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  private loaded: (() => void) | null = null;

  constructor(
    readonly file: string | undefined,
    private readonly opts: ClientCaOptions,
  ) {}

  /** Loads the bundle; a bundle that cannot be loaded at start is an error (the operator asked for it). */
  async start(): Promise<void> {
    if (this.file === undefined || this.timer !== null) return;
    this.stamp = await fileStamp(this.file);
    this.current = new ClientIdentityVerifier(await loadClientTrust(this.file));
    this.opts.logger.info({ file: this.file, cas: this.current.trust?.cas.length }, 'client CA bundle loaded');
    this.loaded?.();
    this.timer = setInterval(() => void this.check(), this.opts.checkIntervalMs ?? 5000);
    this.timer.unref();
  }

  /** Called after each bundle loaded (at start and on every change), for what renders from it. */
  onLoaded(fn: () => void): void {
    this.loaded = fn;
  }

  verifier(): ClientIdentityVerifier | null {
    return this.current;
  }

  /** Re-reads the bundle if the file changed. Public so that tests need not wait for the timer. */
  check(): Promise<void> {
    this.checking ??= this.reload().finally(() => {
      this.checking = null;
    });
    return this.checking;
  }

  private async reload(): Promise<void> {
    const file = this.file;
    if (file === undefined) return;
    const stamp = await fileStamp(file);
    if (stamp === this.stamp) return;
    // Once per change: a file that stays broken is reported once, a later write is seen again.
    this.stamp = stamp;
    try {
      const trust = await loadClientTrust(file);
      this.current = new ClientIdentityVerifier(trust);
      this.opts.logger.info({ file, cas: trust.cas.length }, 'client CA bundle changed; reloaded');
      this.loaded?.();
    } catch (err) {
      // Half-written files are common during a rotation: keep the last good bundle, try again later.
      this.opts.logger.warn({ err, file }, 'client CA bundle changed but cannot be loaded; keeping the previous one');
    }
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
