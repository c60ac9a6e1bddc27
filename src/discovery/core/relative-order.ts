// kube-apiserver's relative-order-preserving merge of name lists (the rule
// apimachinery's util/sort MergePreservingRelativeOrder implements), re-stated from its documented
// behaviour. Pure.

import { compareGoStrings } from '../../k8s/go-strings.js';

export { compareGoStrings };

/** A binary min-heap of strings in Go order. */
class MinHeap {
  private readonly items: string[] = [];

  get size(): number {
    return this.items.length;
  }

  push(v: string): void {
    const h = this.items;
    h.push(v);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (compareGoStrings(h[i] as string, h[parent] as string) >= 0) break;
      [h[i], h[parent]] = [h[parent] as string, h[i] as string];
      i = parent;
    }
  }

  pop(): string {
    const h = this.items;
    const top = h[0] as string;
    const last = h.pop() as string;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && compareGoStrings(h[l] as string, h[m] as string) < 0) m = l;
        if (r < h.length && compareGoStrings(h[r] as string, h[m] as string) < 0) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m] as string, h[i] as string];
        i = m;
      }
    }
    return top;
  }
}

/**
 * One list holding every item of `lists`, keeping each list's relative order wherever the lists
 * agree: if a single list already holds every item (without duplicates), that list as it is;
 * otherwise a topological sort of the "comes right before" edges of all lists that always takes
 * the smallest ready item (Go order); if the lists contradict each other (a cycle), all items in
 * Go order.
 */
export function mergePreservingRelativeOrder(lists: readonly (readonly string[])[]): string[] {
  if (lists.length === 0) return [];
  const out = new Map<string, Set<string>>();
  const inDegree = new Map<string, number>();
  const node = (name: string): Set<string> => {
    let edges = out.get(name);
    if (edges === undefined) {
      edges = new Set();
      out.set(name, edges);
      inDegree.set(name, 0);
    }
    return edges;
  };
  for (const list of lists) {
    for (let i = 0; i < list.length; i++) {
      const edges = node(list[i] as string);
      if (i + 1 < list.length) {
        const next = list[i + 1] as string;
        node(next);
        // One edge per ordered pair, however many lists repeat it.
        if (!edges.has(next)) {
          edges.add(next);
          inDegree.set(next, (inDegree.get(next) as number) + 1);
        }
      }
    }
  }

  for (const list of lists) {
    if (list.length === out.size && new Set(list).size === list.length) return [...list];
  }

  const ready = new MinHeap();
  for (const [name, d] of inDegree) if (d === 0) ready.push(name);
  const result: string[] = [];
  while (ready.size > 0) {
    const current = ready.pop();
    result.push(current);
    for (const next of out.get(current) as Set<string>) {
      const d = (inDegree.get(next) as number) - 1;
      inDegree.set(next, d);
      if (d === 0) ready.push(next);
    }
  }
  if (result.length !== out.size) return [...out.keys()].sort(compareGoStrings);
  return result;
}
