// Reading a mounted ConfigMap volume as the files a person sees in it. The kubelet's atomic writer keeps the
// real files in `..<timestamp>/`, points `..data` at it and makes each visible key a symlink through `..data`:
// dot-entries are skipped and a symlink is followed only when it resolves inside the directory.
import { constants } from 'node:fs';
import { lstat, open, readdir, realpath } from 'node:fs/promises';
import { basename, dirname, join, sep } from 'node:path';

export class MountedFilesError extends Error {
  override name = 'MountedFilesError';
}

/** The directory's visible files, by name in code-unit order, holding at most `maxBytes` in total. */
export async function readMountedFiles(dir: string, maxBytes: number, what: string): Promise<Map<string, Buffer>> {
  let root: string;
  let names: string[];
  try {
    root = await realpath(dir);
    names = (await readdir(root)).filter((name) => !name.startsWith('.')).sort();
  } catch (error) {
    throw new MountedFilesError(`the ${what} directory ${dir} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const files = new Map<string, Buffer>();
  let total = 0;
  for (const name of names) {
    const bytes = await readInside(root, name, what, maxBytes - total, maxBytes);
    total += bytes.length;
    files.set(name, bytes);
  }
  return files;
}

/** One file of a mounted volume (a Secret's or a ConfigMap's key), at most `maxBytes`, read as the directory read reads it. */
export async function readMountedFile(path: string, maxBytes: number, what: string): Promise<Buffer> {
  let root: string;
  try {
    root = await realpath(dirname(path));
  } catch (error) {
    throw new MountedFilesError(`the ${what} ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return readInside(root, basename(path), what, maxBytes, maxBytes);
}

async function readInside(root: string, name: string, what: string, remaining: number, limit: number): Promise<Buffer> {
  const tooLarge = () => new MountedFilesError(`the ${what} files hold more than ${limit} bytes`);
  let target = join(root, name);
  try {
    if ((await lstat(target)).isSymbolicLink()) {
      target = await realpath(target);
      if (!target.startsWith(root + sep)) throw new MountedFilesError(`the ${what} entry ${name} links outside its directory`);
    }
    // O_NOFOLLOW: the resolved path must still be the file itself when opened. O_NONBLOCK: a FIFO cannot hang us.
    const handle = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new MountedFilesError(`the ${what} entry ${name} is not a regular file`);
      if (stat.size > remaining) throw tooLarge();
      const bytes = await handle.readFile();
      if (bytes.length > remaining) throw tooLarge();
      return bytes;
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (error instanceof MountedFilesError) throw error;
    throw new MountedFilesError(`the ${what} entry ${name} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}
