import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryStore, WebStorageStore, FileStore } from '../src/node.js';

test('MemoryStore', () => {
  const s = new MemoryStore();
  assert.equal(s.get('a'), '');
  s.set('a', 'c1');
  assert.equal(s.get('a'), 'c1');
  s.delete('a');
  assert.equal(s.get('a'), '');
});

test('WebStorageStore falls back to memory when storage throws', () => {
  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('quota'); }, removeItem() { throw new Error('denied'); } };
  const s = new WebStorageStore(broken);
  s.set('a', 'c1');
  assert.equal(s.get('a'), 'c1');
  const map = new Map();
  const ok = new WebStorageStore({ getItem: (k) => map.get(k) ?? null, setItem: (k, v) => map.set(k, v), removeItem: (k) => map.delete(k) }, 'p.');
  ok.set('s', 'c2');
  assert.equal(map.get('p.s'), 'c2');
  assert.equal(ok.get('s'), 'c2');
});

test('FileStore survives a new instance and orders its writes', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'vsg-store-'));
  t.after(() => rm(dir, { recursive: true }));
  const path = join(dir, 'sub', 'cursors.json');
  const s = new FileStore(path);
  assert.equal(await s.get('orders'), '');
  const writes = [];
  for (let i = 0; i < 50; i++) writes.push(s.set('orders', `c${i}`));
  await Promise.all(writes);
  assert.equal(JSON.parse(await readFile(path, 'utf8')).orders, 'c49');
  assert.equal(await new FileStore(path).get('orders'), 'c49');
  await s.delete('orders');
  assert.equal(await new FileStore(path).get('orders'), '');
});
