// Cursor stores: where a client keeps the cursor of the last transaction
// the application finished with, so that a reload or a restart resumes
// there. A store is anything with get(key) and set(key, cursor), either
// of which may return a promise; delete(key) is optional.

/** Keeps cursors in memory: they last as long as the page or process. */
export class MemoryStore {
  constructor() { this.map = new Map(); }
  get(key) { return this.map.get(key) || ''; }
  set(key, cursor) { this.map.set(key, cursor); }
  delete(key) { this.map.delete(key); }
}

/**
 * Keeps cursors in a Web Storage area: localStorage (across reloads and
 * tabs) or sessionStorage (this tab only). A browser with storage disabled
 * (private modes, a full quota) degrades to memory rather than failing.
 */
export class WebStorageStore {
  /** @param {Storage} storage @param {string} [prefix] */
  constructor(storage, prefix = 'vsg.cursor.') {
    this.storage = storage;
    this.prefix = prefix;
    this.memory = new MemoryStore();
  }

  get(key) {
    try { return this.storage.getItem(this.prefix + key) || ''; } catch { return this.memory.get(key); }
  }

  set(key, cursor) {
    try { this.storage.setItem(this.prefix + key, cursor); } catch { this.memory.set(key, cursor); }
  }

  delete(key) {
    try { this.storage.removeItem(this.prefix + key); } catch { this.memory.delete(key); }
  }
}

/** localStorageStore keeps cursors across reloads and tabs. */
export const localStorageStore = (prefix) => new WebStorageStore(globalThis.localStorage, prefix);
/** sessionStorageStore keeps cursors for this tab only. */
export const sessionStorageStore = (prefix) => new WebStorageStore(globalThis.sessionStorage, prefix);
