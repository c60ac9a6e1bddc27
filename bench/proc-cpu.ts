// CPU time of processes from /proc (Linux): what the benchmarks read for children they did not
// write (Envoy, a neighbour, a skewgate's worker processes).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const clockTicks = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a whole process, µs; NaN when /proc has no such process. */
export function procCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks;
  } catch {
    return Number.NaN;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** procCpuUs of a process and every descendant alive now (a process gone counts 0). */
export function procTreeCpuUs(pid: number): number {
  let total = 0;
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    const us = procCpuUs(p);
    if (Number.isFinite(us)) total += us;
    stack.push(...childrenOf(p));
  }
  return total;
}
