// Walking parsed JSON/YAML in tests: each step asserts the shape it expects, so a wrong path fails
// with what was there instead of an undefined slipping through an assertion.
export type Obj = Record<string, unknown>;

export const obj = (v: unknown, what = 'value'): Obj => {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${what} is not an object: ${JSON.stringify(v)}`);
  return v as Obj;
};

export const arr = (v: unknown, what = 'value'): unknown[] => {
  if (!Array.isArray(v)) throw new Error(`${what} is not an array: ${JSON.stringify(v)}`);
  return v;
};

/** An array of objects; absent counts as empty. */
export const objs = (v: unknown, what = 'value'): Obj[] => arr(v ?? [], what).map((x) => obj(x, what));

export const str = (v: unknown, what = 'value'): string => {
  if (typeof v !== 'string') throw new Error(`${what} is not a string: ${JSON.stringify(v)}`);
  return v;
};

/** Walks a dotted path; numbers index arrays. Keys with dots are read with obj(...)[key]. */
export const at = (root: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((v, k) => (Array.isArray(v) ? v[Number(k)] : obj(v, path)[k]), root);

/** Like at, but undefined where the path ends early. */
export const opt = (root: unknown, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>((v, k) => (v === null || typeof v !== 'object' ? undefined : Array.isArray(v) ? v[Number(k)] : (v as Obj)[k]), root);
