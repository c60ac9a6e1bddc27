// What the numbers were measured on.
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';
import { findEnvoyBinary } from '../src/envoy-runtime/process.js';
import type { MachineInfo } from './report.js';

const run = promisify(execFile);

async function envoyVersion(): Promise<string> {
  try {
    const { stdout } = await run(findEnvoyBinary(), ['--version'], { timeout: 10_000 });
    // "envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL"
    const line =
      stdout
        .trim()
        .split('\n')
        .find((l) => l.includes('version:')) ?? stdout.trim();
    return line.replace(/^.*version:\s*/, '');
  } catch (err) {
    return `unavailable (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
  }
}

export async function machineInfo(): Promise<MachineInfo> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    node: process.version,
    envoy: await envoyVersion(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    date: new Date().toISOString(),
  };
}
