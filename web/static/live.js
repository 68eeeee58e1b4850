// The stream page's live table: the live changes of one stream over SSE or
// WebSocket, read with the gateway's JavaScript client (clients/js, served
// at vendor/vsg-client/): the page keeps no protocol of its own. The
// client hands over whole transactions only and saves the cursor after
// each one the page has shown in localStorage (per stream), so a reload
// resumes exactly where the page was.
//
// Live first: a stream that starts with a snapshot is read here from the
// live end (start=now), so changes show within a second whatever the table
// size; its current rows load beside the table, in pages (current.js).
import { StreamClient, localStorageStore } from './vendor/vsg-client/index.js';
import { $, el, getJSON, token } from './api.js';

const page = new URLSearchParams(location.search);
const MAX_ROWS = 500;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/; // stream and subscriber names
const store = localStorageStore(); // keys vsg.cursor.<stream>

const st = {
  stream: '', transport: 'sse', subscriber: '',
  defs: new Map(),  // stream definitions by name
  onStream: () => {}, // told when the page switches to another stream
  client: null,     // the StreamClient reading the stream
  paused: false, changes: 0,
};

// ---- cursor

const cursor = () => store.get(st.stream);
function forgetCursor() {
  store.delete(st.stream);
  showCursor();
}

// ---- connection

function connect() {
  disconnect();
  if (!st.stream) return;
  st.paused = false;
  $('pause').disabled = false;
  $('pause').textContent = 'Pause';
  const def = st.defs.get(st.stream);
  const c = st.client = new StreamClient({
    url: new URL('.', location.href).href, // relative: works behind a path prefix
    stream: st.stream,
    transport: st.transport,
    subscriber: st.subscriber || undefined,
    cursorStore: store,
    storeKey: st.stream,
    start: def && def.start === 'snapshot' ? 'now' : undefined,
    getToken: () => token(),
  });
  c.on('state', (state, detail) => { if (c === st.client && state !== 'closed') setState(state, detail); });
  c.on('heartbeat', () => { if (c === st.client) showCursor(); });
  c.on('disconnect', (bye) => {
    if (c === st.client && bye.code === 4008) {
      notice('warn', 'The gateway dropped this page for reading too slowly; resumed from the last whole transaction.');
    }
  });
  c.subscribe((txn) => {
    if (c !== st.client) return;
    for (const ev of txn.events) handle(ev);
    c.commit(); // shown: saved now, so the cursor below is the one a reload resumes from
    showCursor();
  }).then(() => {}, (e) => { if (c === st.client) failed(e); });
}

function disconnect() {
  const c = st.client;
  st.client = null;
  if (c) c.close(); // sends the pending ack; the cursor is already saved
}

// failed answers an error the client cannot get past by retrying.
function failed(e) {
  st.client = null;
  if (e.code === 'invalid_cursor' && cursor()) {
    notice('warn', `The saved cursor was refused (${e.message}). Starting over from where the stream starts.`);
    forgetCursor();
    connect();
    return;
  }
  if (e.status === 401) {
    // At the token's exp the client asks for a fresh one; the console has
    // one only when the user pastes it.
    st.paused = true;
    $('pause').disabled = false;
    $('pause').textContent = 'Resume';
    setState('error', 'token expired: paste a fresh token, then Resume');
    return;
  }
  if (e.cannotContinue) notice('error', `Stream failed (${e.code}): ${e.message}.`);
  setState('error', e.message); // retrying cannot help
  $('pause').disabled = true;
}

// ---- events

function handle(ev) {
  switch (ev.type) {
    case 'change':
      st.changes++;
      addChange(ev);
      break;
    case 'resync':
      clearRows();
      notice('warn', ev.reason === 'store_lost'
        ? 'Resync: the gateway\'s store lost data this position depended on, so the stream restarts from a fresh snapshot. The table was cleared.'
        : 'Resync: the saved position could not be resumed exactly, so the stream restarts from a fresh snapshot. The table was cleared.');
      addControl(ev, 'resync: a fresh snapshot follows');
      break;
    case 'reshard':
      notice('info', `Keyspace ${ev.keyspace} was resharded: ${ev.from.join(', ')} → ${ev.to.join(', ')}. The stream continues on the new shards.`);
      addControl(ev, `reshard ${ev.from.join(',')} → ${ev.to.join(',')} (journal ${ev.journal_id})`);
      break;
    case 'snapshot_complete':
      addControl(ev, 'snapshot complete: live changes follow');
      break;
    case 'ddl':
      addControl(ev, `DDL on ${ev.keyspace || ''}/${ev.shard || ''}: ${ev.statement}`);
      break;
    // moved, blocked: the client follows them; only the cursor moves
  }
}

// ---- rendering

function fmt(v) {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function value(v, cls = '') {
  const s = fmt(v);
  const n = el('span', v === null ? `${cls} null`.trim() : cls, s.length > 120 ? `${s.slice(0, 119)}…` : s);
  if (s.length > 120) n.title = s;
  return n;
}

function column(name, ...parts) {
  const n = el('span', 'col');
  n.append(el('b', '', `${name}: `), ...parts);
  return n;
}

function changedColumns(ev) {
  const td = el('td');
  const before = ev.before || {};
  const after = ev.after || {};
  if (ev.op === 'update') {
    for (const k of Object.keys(after)) {
      if (fmt(after[k]) !== fmt(before[k])) td.append(column(k, value(before[k], 'before'), ' → ', value(after[k], 'after')));
    }
    if (!td.childNodes.length) td.append(el('span', 'null', 'no column changed'));
  } else if (ev.op === 'delete') {
    for (const [k, v] of Object.entries(before)) td.append(column(k, value(v, 'gone')));
  } else {
    for (const [k, v] of Object.entries(after)) td.append(column(k, value(v)));
  }
  return td;
}

function addChange(ev) {
  const tr = el('tr', 'new');
  tr.dataset.cursor = ev.cursor || '';
  const time = el('td', 'time', ev.commit_ts ? new Date(ev.commit_ts).toLocaleTimeString() : 'copy');
  time.title = ev.commit_ts || 'read by the copy phase';
  const op = el('td');
  op.append(el('span', `op ${ev.op}`, ev.op));
  const key = ev.key ? Object.entries(ev.key).map(([k, v]) => `${k}=${fmt(v)}`).join(', ') : '—';
  tr.append(time, op, el('td', '', `${ev.keyspace}.${ev.table}`), el('td', '', ev.shard), el('td', '', key), changedColumns(ev));
  addRow(tr);
}

function addControl(ev, text) {
  const tr = el('tr', 'ctl new');
  tr.dataset.cursor = ev.cursor || '';
  const td = el('td', '', `— ${text} —`);
  td.colSpan = 6;
  tr.append(td);
  addRow(tr);
}

function addRow(tr) {
  const body = $('changes').tBodies[0];
  body.prepend(tr);
  while (body.rows.length > MAX_ROWS) body.lastElementChild.remove();
  updateCount();
}

function clearRows() {
  $('changes').tBodies[0].replaceChildren();
  updateCount();
}

function updateCount() {
  const n = $('changes').tBodies[0].rows.length;
  $('count').textContent = n;
  $('empty').hidden = n > 0;
}

function notice(kind, text) {
  const box = $('notices');
  for (const n of box.children) if (n.dataset.text === text) n.remove(); // show each once, newest first
  const n = el('div', `notice ${kind}`);
  n.dataset.text = text;
  const close = el('button', '', '×');
  close.type = 'button';
  close.title = 'Dismiss';
  close.setAttribute('aria-label', 'Dismiss');
  close.onclick = () => n.remove();
  // Upstream errors can be long: show the start, keep the rest in the tooltip.
  const span = el('span', '', text.length > 300 ? `${text.slice(0, 299)}…` : text);
  span.title = text;
  n.append(span, close);
  box.prepend(n);
  while (box.children.length > 5) box.lastElementChild.remove();
}

function setState(state, detail = '') {
  $('dot').className = `dot ${state}`;
  const via = st.transport === 'ws' ? 'WebSocket' : 'SSE';
  const who = st.subscriber ? ` as ${st.subscriber}` : '';
  const text = { connected: `connected to ${st.stream} via ${via}${who}` }[state] || state;
  $('state').textContent = detail ? `${text} ${detail}` : text;
}

function showCursor() {
  const c = $('cursor');
  const cur = cursor();
  c.textContent = cur ? `…${cur.slice(-16)}` : 'none (stream start)';
  c.title = cur ? `${cur}\n(click to copy)` : '';
}

// ---- controls

function syncURL() {
  const q = new URLSearchParams({ view: 'stream', stream: st.stream });
  if (st.transport === 'ws') q.set('transport', 'ws');
  if (st.subscriber) q.set('subscriber', st.subscriber);
  history.replaceState(null, '', `?${q}`);
}

function start() {
  syncURL();
  showCursor();
  connect();
  st.onStream(st.stream, st.defs.get(st.stream));
}

$('controls').addEventListener('submit', (e) => {
  e.preventDefault();
  const stream = $('stream').value;
  if (stream !== st.stream) clearRows();
  st.stream = stream;
  st.transport = document.querySelector('input[name=transport]:checked').value;
  st.subscriber = $('subscriber').value.trim();
  start();
});
$('stream').addEventListener('change', () => $('controls').requestSubmit());
for (const r of document.querySelectorAll('input[name=transport]')) r.addEventListener('change', () => $('controls').requestSubmit());

$('pause').addEventListener('click', () => {
  if (st.paused) { connect(); return; }
  disconnect(); // resuming continues from the cursor: nothing is missed
  st.paused = true;
  setState('paused');
  $('pause').textContent = 'Resume';
});
$('clear').addEventListener('click', () => { clearRows(); $('notices').replaceChildren(); });
$('reset').addEventListener('click', () => {
  disconnect();
  forgetCursor();
  clearRows();
  notice('info', st.subscriber
    ? `Cursor forgotten: reading from ${st.subscriber}'s stored cursor, or where the stream starts.`
    : 'Cursor forgotten: reading from where the stream starts.');
  if (st.stream) connect();
});
$('cursor-copy').addEventListener('click', () => {
  if (cursor() && navigator.clipboard) navigator.clipboard.writeText(cursor()).catch(() => {});
});

// Leaving the page closes the connection first, so its error callbacks do
// not mistake the unload for a failure and start probing the gateway.
window.addEventListener('pagehide', disconnect);
// A page restored from the back/forward cache keeps its table and cursor but
// not the connection closed on pagehide: resume from the cursor (unless the
// page was left paused).
window.addEventListener('pageshow', (e) => {
  if (e.persisted && st.stream && !st.paused) connect();
});

setInterval(() => { $('rate').textContent = st.changes; st.changes = 0; }, 1000);

// initLive starts the live table; onStream is told the stream shown (now
// and at every switch), for the panels beside the table.
export async function initLive(onStream) {
  st.onStream = onStream;
  st.transport = page.get('transport') === 'ws' ? 'ws' : 'sse';
  st.subscriber = page.get('subscriber') || '';
  if (st.subscriber && !NAME.test(st.subscriber)) {
    notice('error', `"${st.subscriber}" is not a valid subscriber name (${$('subscriber').title}); reading anonymously.`);
    st.subscriber = '';
  }
  document.querySelector(`input[name=transport][value=${st.transport}]`).checked = true;
  $('subscriber').value = st.subscriber;
  showCursor();
  let list;
  try {
    list = (await getJSON('v1/streams')).streams;
  } catch (e) {
    setState('error', `cannot list streams: ${e.message}`);
    return;
  }
  if (!list.length) {
    $('empty').textContent = 'No streams are defined yet: create one with POST /v1/streams (see the API link).';
    return;
  }
  $('stream').replaceChildren();
  for (const s of list) {
    st.defs.set(s.name, s);
    $('stream').append(new Option(`${s.name} (${s.keyspace})`, s.name));
  }
  const want = page.get('stream');
  st.stream = list.some((s) => s.name === want) ? want : list[0].name;
  if (want && want !== st.stream) notice('warn', `There is no stream named "${want}"; showing ${st.stream}.`);
  $('stream').value = st.stream;
  start();
}

// stopLive closes the connection (the page left the stream view).
export function stopLive() {
  disconnect();
}

// resumeLive reconnects after stopLive, from the saved cursor.
export function resumeLive() {
  if (st.stream && !st.paused && !st.client) connect();
}
