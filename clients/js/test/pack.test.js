// The package as npm would publish it: the entry points of the exports
// map, their types and the browser build, and nothing of the tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

test('npm pack holds every export and its types, and no tests', () => {
  const [pack] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { encoding: 'utf8' }));
  const files = new Set(pack.files.map((f) => f.path));
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
  for (const [entry, e] of Object.entries(pkg.exports)) {
    for (const target of typeof e === 'string' ? [e] : Object.values(e)) {
      assert.ok(files.has(target.replace(/^\.\//, '')), `${entry} → ${target} is not in the package`);
    }
  }
  for (const f of ['src/events.d.ts', 'README.md']) assert.ok(files.has(f), f);
  assert.deepEqual([...files].filter((f) => f.startsWith('test/') || f.startsWith('gen/') || f.startsWith('bench/')), []);
  assert.ok(pack.size < 40000, `packed size ${pack.size}`);
});

test('the browser build is at most 15 KiB minified', () => {
  // The flags of `npm run build`, writing to stdout instead of dist/.
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
  const [cmd, ...args] = pkg.scripts.build.split(' ').filter((a) => !a.startsWith('--outfile'));
  const out = execFileSync(`node_modules/.bin/${cmd}`, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  assert.ok(out.length > 5000, `the build printed ${out.length} bytes`);
  assert.ok(out.length <= 15 * 1024, `the browser build has ${out.length} bytes, more than 15 KiB`);
});
