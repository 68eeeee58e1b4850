// Node-only additions: a cursor store in a file. Kept out of the main
// entry so that browser bundles never see node: imports.
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';

export * from './index.js';

/**
 * FileStore keeps cursors in one JSON file ({ key: cursor }). Every set
 * writes a temporary file and renames it over the old one, so a crash
 * leaves the old cursor or the new one, never half of either.
 */
export class FileStore {
  /** @param {string} path */
  constructor(path) {
    this.path = path;
    this.cache = null;
    this.writing = Promise.resolve();
  }

  async load() {
    if (this.cache) return this.cache;
    try {
      this.cache = JSON.parse(await readFile(this.path, 'utf8'));
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
      this.cache = {};
    }
    return this.cache;
  }

  async get(key) { return (await this.load())[key] || ''; }

  async set(key, cursor) {
    (await this.load())[key] = cursor;
    return this.flush();
  }

  async delete(key) {
    delete (await this.load())[key];
    return this.flush();
  }

  // flush writes the whole map; writes are chained so that an older one
  // never lands after a newer one.
  flush() {
    const text = JSON.stringify(this.cache);
    this.writing = this.writing.catch(() => {}).then(async () => {
      await mkdir(dirname(this.path), { recursive: true });
      const tmp = `${this.path}.${process.pid}.tmp`;
      await writeFile(tmp, text);
      await rename(tmp, this.path);
    });
    return this.writing;
  }
}
