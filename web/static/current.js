// The current rows of a stream, beside the live table: a snapshot read in
// pages over HTTP pull (start=snapshot, then next_cursor), on demand. The
// live table never waits for it (DESIGN §13).
import { $, el, getJSON } from './api.js';

const PAGE = 200;
const st = { stream: '', cursor: '', rows: 0, pages: 0, done: false, busy: false, auto: false, gen: 0 };

export function currentFor(stream) {
  st.gen++;
  Object.assign(st, { stream, cursor: '', rows: 0, pages: 0, done: false, busy: false, auto: false });
  $('current-rows').tBodies[0].replaceChildren();
  $('current-load').disabled = false;
  $('current-load').textContent = 'Load current rows';
  $('current-all').disabled = false;
  show();
}

async function nextPage() {
  if (st.busy || st.done || !st.stream) return;
  st.busy = true;
  const gen = st.gen;
  show();
  try {
    const params = st.cursor ? { cursor: st.cursor, limit: PAGE } : { start: 'snapshot', limit: PAGE };
    const b = await getJSON(`v1/streams/${encodeURIComponent(st.stream)}/changes`, params);
    if (gen !== st.gen) return;
    const body = $('current-rows').tBodies[0];
    body.replaceChildren();
    for (const ev of b.events) {
      if (ev.type === 'snapshot_complete') st.done = true;
      if (ev.type !== 'change') continue;
      st.rows++;
      const tr = el('tr');
      const key = ev.key ? Object.entries(ev.key).map(([k, v]) => `${k}=${v}`).join(', ') : '—';
      const cols = Object.entries(ev.after || {}).map(([k, v]) => `${k}: ${v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : v}`).join('  ');
      tr.append(el('td', '', `${ev.table}`), el('td', '', ev.shard), el('td', '', key), el('td', 'cols', cols));
      body.append(tr);
    }
    st.cursor = b.next_cursor;
    st.pages++;
    // A copy that has finished answers up to date with no more rows.
    if (!st.done && b.up_to_date && !b.events.some((e) => e.type === 'change')) st.done = true;
  } catch (e) {
    if (gen === st.gen) $('current-state').textContent = `Failed: ${e.message}`;
    st.auto = false;
    st.busy = false;
    return;
  }
  st.busy = false;
  show();
  if (st.auto && !st.done && gen === st.gen) setTimeout(nextPage, 0);
}

function show() {
  const bar = $('current-progress');
  if (st.done) { bar.max = 1; bar.value = 1; } else if (st.busy || st.pages) bar.removeAttribute('value'); else { bar.max = 1; bar.value = 0; }
  $('current-state').textContent = st.done
    ? `All ${st.rows} current rows read (${st.pages} pages); this page shows the last.`
    : st.pages ? `${st.rows} rows read in ${st.pages} pages${st.busy ? ', reading…' : ''}` : (st.busy ? 'reading…' : 'Not loaded: the live table does not wait for it.');
  $('current-load').textContent = st.pages ? 'Next page' : 'Load current rows';
  $('current-load').disabled = st.done || st.busy;
  $('current-all').disabled = st.done;
  $('current-all').textContent = st.auto && !st.done ? 'Stop' : 'Read all';
}

$('current-load').addEventListener('click', () => nextPage());
$('current-all').addEventListener('click', () => {
  st.auto = !st.auto;
  show();
  if (st.auto) nextPage();
});
