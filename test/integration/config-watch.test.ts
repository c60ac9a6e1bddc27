// watchConfigFile on a real folder: a write in place, a rename over the file, and a ConfigMap
// volume's `..data` symlink swap each count once; a file beside it, a change already seen
// (SIGHUP) and a closed watch do not.
import t from 'tap';
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watchConfigFile } from '../../src/app/config-watch.js';
import { fileStamp } from '../../src/util/file-stamp.js';
import { captureLogs } from '../helpers/extproc-client.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

const DEBOUNCE_MS = 50;
/**
 * Well past the debounce: where nothing may be reported, a window for a wrong report to show in
 * (nothing can be waited for; a slow machine can only hide a wrong report, never invent one).
 */
const settle = (): Promise<void> => new Promise((r) => setTimeout(r, DEBOUNCE_MS * 10));
/** Where a change must be reported: waited for, then a settle for any extra report to show. */
async function reported(calls: readonly number[], n: number): Promise<void> {
  await eventually(`${n} change(s) reported`, () => calls.length >= n, waitMs(DEBOUNCE_MS)).catch(() => undefined);
  await settle();
}

async function watched(t: Tap, file: string) {
  const calls: number[] = [];
  const logs = captureLogs('debug');
  const w = watchConfigFile(file, {
    stamp: await fileStamp(file),
    logger: logs.logger,
    debounceMs: DEBOUNCE_MS,
    onChange: () => calls.push(Date.now()),
  });
  t.teardown(() => w.close());
  return { w, calls, logs };
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

t.test('a plain file: in place, renamed over, and files beside it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-watch-'));
  const file = join(dir, 'skewgate.yaml');
  writeFileSync(file, 'log: { level: info }\n');
  const { w, calls, logs } = await watched(t, file);

  writeFileSync(join(dir, 'token'), 'rotated');
  await settle();
  t.equal(calls.length, 0, 'another file in the folder is not a change');

  writeFileSync(file, 'log: { level: debug }\n');
  writeFileSync(file, 'log: { level: warn }\n');
  await reported(calls, 1);
  t.equal(calls.length, 1, 'writes in quick succession: one change');

  writeFileSync(join(dir, '.skewgate.yaml.tmp'), 'log: { level: error }\n');
  renameSync(join(dir, '.skewgate.yaml.tmp'), file);
  await reported(calls, 2);
  t.equal(calls.length, 2, 'a new file renamed over it: one change');

  writeFileSync(file, 'log: { level: info }\n');
  await w.markSeen();
  await settle();
  t.equal(calls.length, 2, 'a change marked seen (SIGHUP read it) is not reported again');

  w.close();
  writeFileSync(file, 'log: { level: trace }\n');
  await settle();
  t.equal(calls.length, 2, 'closed: nothing more');
  t.same(logs.problems(), []);
});

t.test('a ConfigMap volume: the file is a symlink through ..data, which is swapped', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-watch-cm-'));
  // What the kubelet's atomic writer lays out: a timestamped folder, ..data pointing at it, and
  // the key as a symlink through ..data.
  const version = (name: string, text: string): void => {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'skewgate.yaml'), text);
  };
  version('..2026_01_01_00_00_00.1', 'log: { level: info }\n');
  symlinkSync('..2026_01_01_00_00_00.1', join(dir, '..data'));
  symlinkSync('..data/skewgate.yaml', join(dir, 'skewgate.yaml'));
  const { calls } = await watched(t, join(dir, 'skewgate.yaml'));

  version('..2026_01_01_00_01_00.2', 'log: { level: debug }\n');
  symlinkSync('..2026_01_01_00_01_00.2', join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  await reported(calls, 1);
  t.equal(calls.length, 1, 'the swap of ..data is one change of the file');
});
