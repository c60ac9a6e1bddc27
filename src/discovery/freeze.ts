// Maps and Sets ignore Object.freeze; these wrappers make snapshot data refuse mutation through
// the normal API, so a routing bug cannot silently change what every other request sees.

function refuse(): never {
  throw new TypeError('discovery data is immutable');
}

export function frozenSet<T>(items: Iterable<T>): ReadonlySet<T> {
  const s = new Set(items);
  Object.defineProperties(s, { add: { value: refuse }, delete: { value: refuse }, clear: { value: refuse } });
  return Object.freeze(s);
}

export function frozenMap<K, V>(entries: Iterable<readonly [K, V]>): ReadonlyMap<K, V> {
  const m = new Map(entries);
  Object.defineProperties(m, { set: { value: refuse }, delete: { value: refuse }, clear: { value: refuse } });
  return Object.freeze(m);
}

/** Freezes plain JSON data (objects and arrays) all the way down. */
export function deepFreezeJson<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreezeJson((v as Record<string, unknown>)[k]);
  }
  return v;
}
