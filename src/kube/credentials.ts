// Discovery's TLS and authentication towards one apiserver. Files are re-read when they change
// (a rotated token or a renewed certificate is picked up without a restart). Server certificate
// verification is always on. Nothing here ever logs or puts secret material in an error message.
import type { ErrorCode } from '../errors/catalog.js';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { parse as parseYaml } from 'yaml';
import type { Config } from '../config/core/schema.js';
import { fileStamp } from '../util/file-stamp.js';

export type ApiServerSettings = Config['apiservers'][number];

export class CredentialsError extends Error {
  readonly code = 'SKEWGATE_ERR_CREDENTIALS' satisfies ErrorCode;
  constructor(
    readonly server: string,
    message: string,
  ) {
    super(`apiserver "${server}": ${message}`);
    this.name = 'CredentialsError';
  }
}

/** What one request needs: the TLS dispatcher and the Authorization header (if any). */
export interface RequestCredentials {
  readonly dispatcher: Dispatcher;
  readonly authorization: string | undefined;
}

export interface ServerCredentials {
  /** Current dispatcher and header; cheap (a few stat calls), reloads only what changed. */
  current(): Promise<RequestCredentials>;
  /** Names the credential kind and source files, never their content (for logs). */
  readonly description: string;
  /** Closes the undici agent(s). Idempotent. */
  close(): Promise<void>;
}

export interface CredentialsOptions {
  /** Extra undici Agent options (tests; timeouts). TLS options are always ours. */
  readonly agentOptions?: Omit<Agent.Options, 'connect'>;
}

/** The secret-bearing material loaded from files; compared to decide whether the agent must change. */
interface Material {
  readonly ca: Buffer | undefined;
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly servername: string | undefined;
  readonly token: string | undefined;
  /** Every file the material came from; a change in any of them reloads it. */
  readonly files: readonly string[];
}

function errText(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code}` : String((e as Error)?.message ?? e);
}

async function readPart(server: string, what: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new CredentialsError(server, `cannot read ${what} ${file}: ${errText(err)}`);
  }
}

async function readToken(server: string, file: string): Promise<string> {
  const token = (await readPart(server, 'token file', file)).toString('utf8').trim();
  if (token === '') throw new CredentialsError(server, `token file ${file} is empty`);
  return token;
}

async function loadFromSettings(s: ApiServerSettings): Promise<Material> {
  const c = s.credentials;
  const files: string[] = [];
  const opt = async (what: string, file: string | undefined): Promise<Buffer | undefined> => {
    if (!file) return undefined;
    files.push(file);
    return readPart(s.name, what, file);
  };
  const ca = await opt('CA file', s.caFile);
  const cert = await opt('client certificate', c?.clientCertFile);
  const key = await opt('client key', c?.clientKeyFile);
  let token: string | undefined;
  if (c?.tokenFile) {
    files.push(c.tokenFile);
    token = await readToken(s.name, c.tokenFile);
  }
  return { ca, cert, key, servername: s.serverName, token, files };
}

/** kubeconfig + context: server CA, client certificate or token (inline data or files). The URL stays the config's. */
async function loadFromKubeconfig(s: ApiServerSettings, file: string, context: string | undefined): Promise<Material> {
  // Loaded here, not at the top: the client library is ~800 modules (0.5 s of CPU at each start of
  // every command) and only a kubeconfig needs it.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(file);
  } catch (err) {
    // client-node's messages can quote the document; keep only the first line, which names the problem.
    throw new CredentialsError(s.name, `cannot load kubeconfig ${file}: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
  }
  const ctxName = context ?? kc.getCurrentContext();
  if (!ctxName) throw new CredentialsError(s.name, `kubeconfig ${file} has no current-context; set credentials.context`);
  const ctx = kc.getContextObject(ctxName);
  if (!ctx) {
    throw new CredentialsError(
      s.name,
      `kubeconfig ${file} has no context "${ctxName}" (it has: ${
        kc
          .getContexts()
          .map((c) => c.name)
          .join(', ') || 'none'
      })`,
    );
  }
  const cluster = kc.getCluster(ctx.cluster);
  if (!cluster)
    throw new CredentialsError(s.name, `kubeconfig ${file}: context "${ctxName}" names cluster "${ctx.cluster}", which is not defined`);
  const user = ctx.user ? kc.getUser(ctx.user) : null;
  if (ctx.user && !user)
    throw new CredentialsError(s.name, `kubeconfig ${file}: context "${ctxName}" names user "${ctx.user}", which is not defined`);
  if (user?.exec || user?.authProvider) {
    throw new CredentialsError(
      s.name,
      `kubeconfig ${file}: user "${user.name}" uses exec/auth-provider plugins, which skewgate does not run; use a token or a client certificate`,
    );
  }
  if (user?.username || user?.password) {
    throw new CredentialsError(
      s.name,
      `kubeconfig ${file}: user "${user.name}" uses basic auth, which kube-apiserver no longer supports; use a token or a client certificate`,
    );
  }

  const files: string[] = [file];
  const part = async (what: string, data: string | undefined, path: string | undefined): Promise<Buffer | undefined> => {
    if (data) return Buffer.from(data, 'base64');
    if (path) {
      files.push(path);
      return readPart(s.name, `${what} (from kubeconfig)`, path);
    }
    return undefined;
  };
  // An explicit caFile in the config wins over the kubeconfig's CA. skip-tls-verify is ignored on purpose.
  const ca = s.caFile
    ? (files.push(s.caFile), await readPart(s.name, 'CA file', s.caFile))
    : await part('CA', cluster.caData, cluster.caFile);
  const cert = await part('client certificate', user?.certData, user?.certFile);
  const key = await part('client key', user?.keyData, user?.keyFile);
  if (Boolean(cert) !== Boolean(key))
    throw new CredentialsError(
      s.name,
      `kubeconfig ${file}: user "${user?.name}" has a client certificate without a key or the other way round`,
    );

  // client-node reads a token-file once, relative to the working directory; track it ourselves
  // (relative to the kubeconfig, as kubectl does) so that a rotated token is picked up.
  let token: string | undefined;
  const tokenFile = user ? await kubeconfigTokenFile(file, user.name) : undefined;
  if (tokenFile) {
    files.push(tokenFile);
    token = await readToken(s.name, tokenFile);
  } else if (user?.token) {
    token = user.token.trim();
  }
  return { ca, cert, key, servername: s.serverName ?? cluster.tlsServerName, token, files };
}

async function kubeconfigTokenFile(kubeconfig: string, userName: string): Promise<string | undefined> {
  let doc: unknown;
  try {
    doc = parseYaml(await readFile(kubeconfig, 'utf8'));
  } catch {
    return undefined;
  }
  const users = (doc as { users?: unknown } | null)?.users;
  if (!Array.isArray(users)) return undefined;
  const entry = users.find((u: unknown) => (u as { name?: unknown })?.name === userName) as
    { user?: { 'token-file'?: unknown } } | undefined;
  const tf = entry?.user?.['token-file'];
  if (typeof tf !== 'string' || tf === '') return undefined;
  return isAbsolute(tf) ? tf : resolve(dirname(kubeconfig), tf);
}

function sameBuffer(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.equals(b));
}

function sameTls(a: Material, b: Material): boolean {
  return sameBuffer(a.ca, b.ca) && sameBuffer(a.cert, b.cert) && sameBuffer(a.key, b.key) && a.servername === b.servername;
}

class FileBackedCredentials implements ServerCredentials {
  readonly description: string;
  private material: Material | null = null;
  private stamps: readonly string[] = [];
  private agent: Agent | null = null;
  private pending: Promise<RequestCredentials> | null = null;
  private closed = false;

  constructor(
    private readonly settings: ApiServerSettings,
    private readonly options: CredentialsOptions,
  ) {
    const c = settings.credentials;
    const kinds: string[] = [];
    if (c?.kubeconfig) kinds.push(`kubeconfig ${c.kubeconfig}${c.context ? ` context ${c.context}` : ''}`);
    if (c?.clientCertFile) kinds.push(`client certificate ${c.clientCertFile}`);
    if (c?.tokenFile) kinds.push(`token file ${c.tokenFile}`);
    this.description = kinds.length ? kinds.join(' + ') : 'no credentials';
  }

  current(): Promise<RequestCredentials> {
    if (this.closed) return Promise.reject(new CredentialsError(this.settings.name, 'credentials are closed'));
    // Concurrent callers share one check, so a change is loaded once and one agent is built.
    this.pending ??= this.refresh().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  private async refresh(): Promise<RequestCredentials> {
    const stamps = this.material ? await Promise.all(this.material.files.map(fileStamp)) : [];
    if (!this.material || stamps.some((s, i) => s !== this.stamps[i])) {
      const c = this.settings.credentials;
      const next = c?.kubeconfig ? await loadFromKubeconfig(this.settings, c.kubeconfig, c.context) : await loadFromSettings(this.settings);
      // Stamps are taken after reading: a write racing the read is seen as a change next time.
      this.stamps = await Promise.all(next.files.map(fileStamp));
      if (this.closed) throw new CredentialsError(this.settings.name, 'credentials are closed');
      if (!this.agent || !this.material || !sameTls(this.material, next)) {
        const old = this.agent;
        this.agent = new Agent({
          ...this.options.agentOptions,
          connect: { ca: next.ca, cert: next.cert, key: next.key, servername: next.servername, rejectUnauthorized: true },
        });
        // Requests already running on the old agent finish; it then closes.
        if (old) void old.close().catch(() => undefined);
      }
      this.material = next;
    }
    const agent = this.agent as Agent;
    return { dispatcher: agent, authorization: this.material.token ? `Bearer ${this.material.token}` : undefined };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pending?.catch(() => undefined);
    const agent = this.agent;
    this.agent = null;
    this.material = null;
    // destroy, not close: in-flight requests were already aborted by the caller, and a held-open
    // watch must not keep close() waiting.
    if (agent) await agent.destroy().catch(() => undefined);
  }
}

/** Credentials for one configured apiserver. Files are read on the first current() call. */
export function createCredentials(settings: ApiServerSettings, options: CredentialsOptions = {}): ServerCredentials {
  return new FileBackedCredentials(settings, options);
}
