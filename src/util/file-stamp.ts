// A file's identity for change detection, for whoever re-reads a file when it changes (discovery
// credentials, the client CA bundle).
import { stat } from 'node:fs/promises';

/** mtime, size and inode: a rename-into-place (kubelet's ..data swap) changes ino. A missing file stamps as `missing:<code>`. */
export async function fileStamp(file: string): Promise<string> {
  try {
    const st = await stat(file);
    return `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return `missing:${e?.code ? e.code : String(e?.message ?? e)}`;
  }
}
