// Go's string order, which kube-apiserver's sorting and selection rules follow. Pure.

/**
 * Go compares strings byte by byte (UTF-8). UTF-16 code units give the same order except when a
 * supplementary character (a surrogate pair) meets a BMP character above U+D7FF.
 */
export function compareGoStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
}
