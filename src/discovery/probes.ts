// The two small questions a discovery round asks an apiserver beside its documents: is it ready
// (/readyz), and which version is it (/version). Neither fails the round: an answer that is not the
// expected one is "not ready" or "no version read".
import { getText } from '../kube/requests.js';
import type { ServerTarget } from '../kube/transport.js';
import { parseGitVersion } from './core/version.js';

/** GET /readyz → true on 200; any other answer or error → false. */
export async function probeReady(target: ServerTarget, signal: AbortSignal): Promise<boolean> {
  try {
    await getText(target, '/readyz', { accept: 'text/plain, */*', signal });
    return true;
  } catch {
    return false;
  }
}

/** GET /version → its gitVersion (parseGitVersion); any other answer or error → null. */
export async function probeVersion(target: ServerTarget, signal: AbortSignal): Promise<string | null> {
  try {
    const res = await getText(target, '/version', { accept: 'application/json', signal });
    return parseGitVersion(res.text);
  } catch {
    return null;
  }
}
