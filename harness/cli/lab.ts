// `skewgate-lab lab up|down|status`: a real mixed-version control plane on loopback (etcd, three
// kube-apiservers, Envoy + skewgate), started detached so that it outlives this command. `lab pki`
// writes only the lab's PKI (the docker-compose demo's init service runs it).
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../../src/constants.js';
import { Lab } from '../lab/lab.js';
import { LAB_MAX_SLOT, labAddresses, type LabAddresses } from '../lab/addresses.js';
import type { ApiServerSpec } from '../lab/flags.js';
import { LAB_USERS } from '../lab/gateway-config.js';
import { LAB_MAX_LOOPBACK, LAB_PKI_FILES, LAB_SANS, createLabPki } from '../lab/pki.js';
import { defaultLabDir, labBinDir, labVersions } from '../lab/versions.js';
import { formatTable } from '../../src/cli/one-shot.js';
import { sanEntry } from '../../src/cli/gateway-cert.js';

const APISERVER_PORT = 6443;

export interface LabUpOptions {
  readonly dir: string;
  /** The lab's slot (harness/lab/addresses.ts): its addresses and etcd ports (default 0). */
  readonly slot?: number;
  readonly mixed: boolean;
  readonly port: number;
  readonly baselinePort?: number | undefined;
  /** kas-N listens on this address + N - 1 (default: the slot's first loopback address, 127.0.<slot>.1). */
  readonly firstIp?: string | undefined;
  /** etcd's client port; its peer port is this + 10 (default: the slot's, 23790 for slot 0). */
  readonly etcdPort?: number | undefined;
}

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};
const rel = (p: string): string => {
  const r = relative(process.cwd(), p);
  return r === '' || r.startsWith('..') ? p : r;
};

/** kas-1..3 on 127.0.0.1..3:6443 at KUBE_OLD; with mixed, kas-3 at KUBE_NEW. */
export function labUpSpecs(mixed: boolean, firstIp = '127.0.0.1'): ApiServerSpec[] {
  const v = labVersions();
  const m = /^127\.(\d+)\.(\d+)\.(\d+)$/.exec(firstIp);
  const last = Number(m?.[3]);
  if (!m || last < 1 || last > LAB_MAX_LOOPBACK - 2)
    throw new Error(
      `--first-ip must be 127.x.y.z with z from 1 to ${LAB_MAX_LOOPBACK - 2} (the serving certificate covers 127.0.0.1-${LAB_MAX_LOOPBACK}), got ${firstIp}`,
    );
  return [1, 2, 3].map((i) => ({
    name: `kas-${i}`,
    version: mixed && i === 3 ? v.kubeNew : v.kubeOld,
    ip: `127.${m[1]}.${m[2]}.${last + i - 1}`,
    port: APISERVER_PORT,
  }));
}

export async function runLabUp(o: LabUpOptions): Promise<number> {
  const started = Date.now();
  let addresses: LabAddresses;
  let specs: ApiServerSpec[];
  try {
    addresses = slotAddresses(o.slot ?? 0);
    specs = labUpSpecs(o.mixed, o.firstIp ?? addresses.loopback(1));
  } catch (err) {
    process.stderr.write(`skewgate-lab lab up: ${(err as Error).message}\n`);
    return EXIT_BAD_CONFIG;
  }
  const lab = await Lab.open({
    dir: o.dir,
    addresses,
    log: (l) => out(`  ${l}`),
    ...(o.etcdPort === undefined ? {} : { etcdClientPort: o.etcdPort, etcdPeerPort: o.etcdPort + 10 }),
  });
  try {
    out(`skewgate-lab lab: run dir ${rel(lab.dir)}`);
    await lab.startEtcd();
    // One at a time: in parallel they take about as long on 2 cores, and a failure is clearer.
    for (const spec of specs) await lab.startApiServer(spec);
    const gw = await lab.startGateway({ name: 'gateway', withSkewgate: true, port: o.port });
    const baseline =
      o.baselinePort === undefined ? undefined : await lab.startGateway({ name: 'baseline', withSkewgate: false, port: o.baselinePort });
    const v = labVersions();
    const kubectl = `${labBinDir()}/kubectl-${v.kubeNew}`;
    const k = existsSync(kubectl) ? rel(kubectl) : 'kubectl';
    out(`\nup in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    out(formatTable(statusRows(await lab.status())).trimEnd());
    out(`\ngateway (Envoy + skewgate): ${gw.url}`);
    if (baseline) out(`baseline (plain Envoy):     ${baseline.url}   (no skewgate: expect false 404s for skewed APIs)`);
    out(`kubeconfig:                 ${rel(gw.kubeconfigFile)}`);
    out(`  contexts: token [current], cert, ${LAB_USERS.join(', ')} through the gateway; kas-1..3 and <user>@kas-N direct`);
    out(`skewgate config:            ${rel(gw.configFile)}`);
    out(`logs:                       ${rel(lab.dir)}/logs/`);
    out('\ntry:');
    out(`  ${k} --kubeconfig ${rel(gw.kubeconfigFile)} api-resources`);
    out(`  ${k} --kubeconfig ${rel(gw.kubeconfigFile)} get mutatingadmissionpolicies`);
    out(`  node dist/src/cli/main.js skew --discover --config ${rel(gw.configFile)}`);
    out(
      `  node dist/harness/cli/main.js lab down${o.dir === defaultLabDir() ? '' : ` --dir ${rel(o.dir)}`}${o.slot ? ` --slot ${o.slot}` : ''}`,
    );
    return EXIT_OK;
  } catch (err) {
    process.stderr.write(`skewgate-lab lab up: ${(err as Error).message}\n`);
    process.stderr.write(`what started is still running (logs in ${rel(lab.dir)}/logs): \`skewgate-lab lab down\` stops it\n`);
    return EXIT_PROBLEMS;
  } finally {
    await lab.close();
  }
}

/** The addresses of slot `slot`; a clear error for one out of range. */
export function slotAddresses(slot: number): LabAddresses {
  if (!Number.isInteger(slot) || slot < 0 || slot > LAB_MAX_SLOT) throw new Error(`--slot must be 0…${LAB_MAX_SLOT}, got ${slot}`);
  return labAddresses(slot);
}

export async function runLabDown(dir: string, slot = 0): Promise<number> {
  const lab = await Lab.open({ dir, addresses: slotAddresses(slot), log: (l) => out(`  ${l}`) });
  const before = (await lab.status()).filter((r) => r.alive).map((r) => r.name);
  await lab.down();
  out(before.length === 0 ? 'skewgate-lab lab: nothing was running' : `skewgate-lab lab: stopped ${before.join(', ')}`);
  return EXIT_OK;
}

export async function runLabStatus(dir: string, slot = 0): Promise<number> {
  const lab = await Lab.open({ dir, addresses: slotAddresses(slot) });
  try {
    out(formatTable(statusRows(await lab.status())).trimEnd());
    return EXIT_OK;
  } finally {
    await lab.close();
  }
}

/**
 * The lab's PKI set in dir, with extra SANs ("DNS:kas-1", "IP:172.31.250.11", or bare) on the
 * apiserver and gateway serving certificates; a complete set with the same SANs is reused.
 */
export async function runLabPki(dir: string, sans: readonly string[]): Promise<number> {
  const entries = sans.map((s) => [s, sanEntry(s)] as const);
  const bad = entries.filter(([, e]) => e === null).map(([raw]) => raw);
  if (bad.length > 0) {
    process.stderr.write(
      `skewgate-lab lab pki: ${bad.map((b) => `--san ${JSON.stringify(b)}: not a DNS name or IP address (DNS:name, IP:addr)`).join('; ')}\n`,
    );
    return EXIT_BAD_CONFIG;
  }
  const extraSans = [...new Set(entries.map(([, e]) => e as string))];
  const pki = await createLabPki(dir, { extraSans });
  out(`skewgate-lab lab pki: ${LAB_PKI_FILES.length - 1} files in ${pki.dir}`);
  out(`  serving certificates (apiserver, gateway): ${[...LAB_SANS, ...extraSans].join(', ')}`);
  return EXIT_OK;
}

function statusRows(rows: Awaited<ReturnType<Lab['status']>>): string[][] {
  return [
    ['NAME', 'PID', 'ALIVE', 'DETAIL'],
    ...rows.map((r) => [r.name, r.pid === null ? '-' : String(r.pid), r.alive ? 'yes' : 'no', r.detail]),
  ];
}

/** Adds `lab up|down|status` to the skewgate program. */
