// Reshards (admin): a timeline of every journal the gateway recorded,
// newest first, with its bridges, the subscribers still pinning the old
// shards, and the safe_to_complete verdict in large type (GET /v1/reshards).
// A MoveTables cutover listed there (a migration type, a target keyspace,
// tables) is drawn the same way, from whichever of those fields it has.
import { $, el, ago, bytes, getJSON, num } from './api.js';

let timer = 0;

export function showReshards() {
  clearTimeout(timer);
  const tick = async () => {
    try {
      render((await getJSON('v1/reshards')).reshards);
      $('reshards-error').textContent = '';
    } catch (e) {
      $('reshards-error').textContent = `Cannot read the reshards: ${e.message}`;
    }
    timer = setTimeout(tick, 3000);
  };
  tick();
}

export function hideReshards() { clearTimeout(timer); }

function render(list) {
  const box = $('reshard-list');
  $('reshards-empty').hidden = list.length > 0;
  box.replaceChildren();
  for (const r of [...list].reverse()) {
    const item = el('li', 'card reshard');
    item.dataset.journal = r.journal;
    const verdict = el('div', `verdict ${r.safe_to_complete ? 'safe' : 'unsafe'}`, r.safe_to_complete ? 'Safe to complete' : 'Not safe to complete');
    verdict.dataset.safe = String(r.safe_to_complete);
    const when = el('time', 'muted', `${ago(r.seen_at)} · ${new Date(r.seen_at).toLocaleString()}`);
    when.dateTime = r.seen_at;
    const kind = migrationKind(r);
    item.dataset.kind = kind;
    const target = r.target_keyspace || r.to_keyspace || '';
    const head = el('h2');
    head.append(el('span', `kind ${kind}`, kind === 'reshard' ? 'Reshard' : (kind === 'movetables' ? 'MoveTables' : kind)), ' ',
      target && target !== r.keyspace
        ? `${r.keyspace} → ${target}${r.tables && r.tables.length ? `: ${r.tables.join(', ')}` : ''}`
        : `${r.keyspace}: ${r.from.join(', ')} → ${r.to.join(', ')}`);
    const meta = el('p', 'muted', `journal ${r.id}${r.complete ? '' : ' · not every old shard has reported its journal yet'}`);
    item.append(when, head, verdict, meta);

    const bt = el('table', 'bridges');
    bt.innerHTML = '<caption>Bridges</caption><thead><tr><th>stream</th><th>subscriber</th><th>state</th><th>events</th><th>bytes</th><th>error</th></tr></thead><tbody></tbody>';
    for (const b of r.bridges) {
      const tr = el('tr');
      tr.dataset.subscriber = b.subscriber;
      tr.dataset.state = b.state;
      tr.append(el('td', '', b.stream), el('td', '', b.subscriber), el('td', `state ${b.state}`, b.state),
        el('td', '', num(b.events, 0)), el('td', '', bytes(b.bytes)), el('td', 'err', b.error || ''));
      bt.tBodies[0].append(tr);
    }
    if (!r.bridges.length) bt.tBodies[0].append(row('no bridge was needed', 6));

    const blocking = el('div', 'blocking');
    blocking.append(el('h3', '', 'Subscribers still on the old shards'));
    if (!r.blocking_subscribers.length) blocking.append(el('p', 'muted', 'none'));
    const ul = el('ul');
    for (const b of r.blocking_subscribers) {
      const li = el('li');
      li.dataset.subscriber = b.subscriber;
      li.append(el('b', '', `${b.stream} / ${b.subscriber}`), ` — ${b.reason}`);
      ul.append(li);
    }
    blocking.append(ul);
    item.append(bt, blocking);
    box.append(item);
  }
}

function row(text, span) {
  const tr = el('tr');
  const td = el('td', 'muted', text);
  td.colSpan = span;
  tr.append(td);
  return tr;
}

// migrationKind names what a journal records: a reshard, or a MoveTables
// cutover (whatever field the API uses for it: type, migration_type, kind).
function migrationKind(r) {
  const t = String(r.type || r.migration_type || r.kind || '').toLowerCase();
  if (!t || t === 'shards' || t === 'reshard') return 'reshard';
  if (t === 'tables' || t === 'movetables' || t === 'move_tables') return 'movetables';
  return t;
}
