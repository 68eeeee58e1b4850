import type { CursorStore } from './index.js';

export * from './index.js';

/** Keeps cursors in a JSON file, replaced atomically on every write. */
export declare class FileStore implements CursorStore {
  constructor(path: string);
  get(key: string): Promise<string>;
  set(key: string, cursor: string): Promise<void>;
  delete(key: string): Promise<void>;
}
