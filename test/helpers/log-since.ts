// A lab process's log read from a mark on: how long it is now (the mark), and the lines written
// after that mark, as text or as skewgate's JSON lines. A test takes a mark just before it acts,
// so that what it then reads was logged after the act: an ordering, not a time.
import { readFile, stat } from 'node:fs/promises';

/** The log's length in bytes now (0 when it does not exist yet). */
export async function logMark(file: string): Promise<number> {
  return stat(file).then(
    (s) => s.size,
    () => 0,
  );
}

/** The lines written after `mark` (the last one may be incomplete). */
export async function linesSince(file: string, mark: number): Promise<string[]> {
  const all = await readFile(file).catch(() => Buffer.alloc(0));
  return all
    .subarray(mark)
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '');
}

/** skewgate's JSON log lines after `mark` whose msg begins with `msg` (other lines, and lines that are not JSON, skipped). */
export async function jsonLinesSince(file: string, mark: number, msg: string): Promise<Record<string, unknown>[]> {
  return jsonLines(await linesSince(file, mark), msg);
}

/** Pure: the JSON lines among `lines` whose msg begins with `msg`. */
export function jsonLines(lines: readonly string[], msg: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line) as Record<string, unknown>;
      if (typeof o['msg'] === 'string' && o['msg'].startsWith(msg)) out.push(o);
    } catch {
      // a line cut short by the read
    }
  }
  return out;
}
