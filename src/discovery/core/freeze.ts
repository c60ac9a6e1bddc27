// Maps and Sets ignore Object.freeze; these make snapshot data refuse mutation through the normal
// API, so a routing bug cannot silently change what every other request sees. The refusal lives
// on a shared prototype (a per-instance defineProperties turned every one of the ~100,000 maps and
// sets of a large cluster's snapshot into a slow dictionary object and tripled the garbage).
import { runToEnd, STEP_EVERY, type Sliced } from '../../util/core/sliced.js';

function refuse(): never {
  throw new TypeError('discovery data is immutable');
}

/** A Map filled while building, then sealed: from then on set, delete and clear throw. */
class SealableMap<K, V> extends Map<K, V> {
  #sealed = false;
  override set(key: K, value: V): this {
    if (this.#sealed) refuse();
    return super.set(key, value);
  }
  override delete(): boolean {
    return refuse();
  }
  override clear(): void {
    refuse();
  }
  seal(): ReadonlyMap<K, V> {
    this.#sealed = true;
    return Object.freeze(this);
  }
}

class SealableSet<T> extends Set<T> {
  #sealed = false;
  override add(value: T): this {
    if (this.#sealed) refuse();
    return super.add(value);
  }
  override delete(): boolean {
    return refuse();
  }
  override clear(): void {
    refuse();
  }
  seal(): ReadonlySet<T> {
    this.#sealed = true;
    return Object.freeze(this);
  }
}

export interface MapBuilder<K, V> {
  readonly size: number;
  get(key: K): V | undefined;
  has(key: K): boolean;
  set(key: K, value: V): unknown;
  values(): IterableIterator<V>;
  /** The map itself, immutable from now on (no copy). */
  seal(): ReadonlyMap<K, V>;
}

export interface SetBuilder<T> {
  readonly size: number;
  has(value: T): boolean;
  add(value: T): unknown;
  seal(): ReadonlySet<T>;
}

export function mapBuilder<K, V>(): MapBuilder<K, V> {
  return new SealableMap<K, V>();
}

export function setBuilder<T>(): SetBuilder<T> {
  return new SealableSet<T>();
}

export function frozenSet<T>(items: Iterable<T>): ReadonlySet<T> {
  const s = new SealableSet<T>();
  for (const v of items) s.add(v);
  return s.seal();
}

export function frozenMap<K, V>(entries: Iterable<readonly [K, V]>): ReadonlyMap<K, V> {
  const m = new SealableMap<K, V>();
  for (const [k, v] of entries) m.set(k, v);
  return m.seal();
}

/** Freezes plain JSON data (objects and arrays) all the way down; an explicit stack, a pause point every few hundred objects. */
export function* deepFreezeJsonSteps<T>(v: T): Sliced<T> {
  const stack: unknown[] = [v];
  let n = 0;
  while (stack.length > 0) {
    const cur = stack.pop();
    if (cur === null || typeof cur !== 'object' || Object.isFrozen(cur)) continue;
    Object.freeze(cur);
    for (const k of Object.keys(cur)) {
      const child = (cur as Record<string, unknown>)[k];
      if (child !== null && typeof child === 'object') stack.push(child);
    }
    if (++n % STEP_EVERY === 0) yield;
  }
  return v;
}

export function deepFreezeJson<T>(v: T): T {
  return runToEnd(deepFreezeJsonSteps(v));
}
