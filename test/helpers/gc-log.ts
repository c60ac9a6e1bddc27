// What kube-controller-manager's garbage collector says of itself in its log (--v=2, klog text
// lines), read from one run's part of the lab's log (each start appends after a "==== " line).
// Pure (test/unit/lab-gc-log.test.ts). The lines are those of the pinned build's
// pkg/controller/garbagecollector (garbagecollector.go, graph_builder.go).

/** The part of a lab log written by its last start. */
export function lastRun(log: string): string {
  const at = log.lastIndexOf('\n==== ');
  return at < 0 ? log : log.slice(at + 1);
}

export interface GcLogFacts {
  /**
   * Its workers run: "all resource monitors have synced", or, after its initial sync timeout,
   * "not all resource monitors could be synced, proceeding anyways"; null before either.
   */
  readonly proceeding: 'synced' | 'not all synced' | null;
  /** namespace/name of every item it logged "Deleting item" for. */
  readonly deleted: readonly string[];
  /** uids it shows it holds as live owners: observed by its informer after a dependent named them, or looked up and found. */
  readonly seenAlive: readonly string[];
}

const ITEM = /\[[^,\]]+, namespace: ([^,\]]*), name: ([^,\]]+), uid: ([0-9a-f-]+)\]/;

export function gcLogFacts(runLog: string): GcLogFacts {
  let proceeding: GcLogFacts['proceeding'] = null;
  const deleted: string[] = [];
  const seenAlive: string[] = [];
  for (const line of runLog.split('\n')) {
    if (line.includes('"Garbage collector: all resource monitors have synced"')) proceeding = 'synced';
    else if (line.includes('"Garbage collector: not all resource monitors could be synced, proceeding anyways"'))
      proceeding ??= 'not all synced';
    const item = ITEM.exec(line);
    if (item === null) continue;
    if (line.includes('"Deleting item"')) deleted.push(`${item[1]}/${item[2]}`);
    else if (
      line.includes('"replacing virtual item with observed item"') ||
      line.includes(`"item doesn't have an owner, continue on next item"`)
    )
      seenAlive.push(item[3] as string);
  }
  return { proceeding, deleted, seenAlive };
}
