// A Lab of its own for one cluster test file (its own run dir, and the addresses and etcd ports of
// the slot the file claimed, so it never meets another lab's), killed and removed after the file,
// and an admin-token GET through it that returns skewgate's reason header.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { Agent, request } from 'undici';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import { Lab } from '../../harness/lab/lab.js';
import { REASON_HEADER } from '../../src/constants.js';

export interface ReasonedResponse {
  readonly status: number;
  readonly reason: string | undefined;
  readonly body: string;
}

export async function ownLab(
  t: Test,
  o: { readonly name: string; readonly addresses: LabAddresses; readonly servername?: string },
): Promise<{ readonly lab: Lab; get(url: string): Promise<ReasonedResponse> }> {
  const dir = await mkdtemp(join(tmpdir(), `skewgate-${o.name}-`));
  const lab = await Lab.open({
    dir,
    killOnExit: true,
    addresses: o.addresses,
    log: (l) => t.comment(l),
  });
  const ca = await readFile(lab.pki.caFile, 'utf8');
  const agent = new Agent({ connect: { ca, ...(o.servername === undefined ? {} : { servername: o.servername }) } });
  t.teardown(async () => {
    await agent.close();
    await lab.down({ kill: true }).catch((err: unknown) => t.fail(`down: ${(err as Error).message}`));
    await rm(dir, { recursive: true, force: true });
  });
  return {
    lab,
    async get(url) {
      const res = await request(url, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${lab.pki.adminToken}` },
        signal: AbortSignal.timeout(10_000),
      });
      const reason = res.headers[REASON_HEADER];
      return { status: res.statusCode, reason: typeof reason === 'string' ? reason : undefined, body: await res.body.text() };
    },
  };
}
