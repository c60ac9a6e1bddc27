// One demo stack (fake apiservers + skewgate + a real Envoy) per test file: started before the
// first test in a temp folder, closed and removed after the last. Envoy missing → startStack
// throws and the file fails (it never skips).
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, type Stack, type StackOptions } from '../../harness/demo/stack.js';

export interface StackFixture {
  /** The running stack (after t.before). */
  readonly stack: () => Stack;
  /** The file's temp folder, for anything else it writes (a second stack, say). */
  readonly dir: string;
}

export function stackFixture(t: Test, name: string, opts: Omit<StackOptions, 'dir'>): StackFixture {
  const dir = mkdtempSync(join(tmpdir(), `sg-${name}-`));
  let stack: Stack | undefined;
  t.before(async () => {
    stack = await startStack({ ...opts, dir: join(dir, 'stack') });
  });
  t.teardown(async () => {
    await stack?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    stack: () => {
      if (stack === undefined) throw new Error(`the ${name} stack is not running`);
      return stack;
    },
  };
}
