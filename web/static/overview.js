// The overview: every stream with its shards, readers by transport,
// events per second in and out, its tail's position and ring fill, and
// charts of the last 15 minutes — all from GET /v1/stats.
import { $, el, getJSON, gtid, num, bytes, keepFocus } from './api.js';
import { chart } from './charts.js';

let timer = 0;

export function showOverview(onStats) {
  clearTimeout(timer);
  const tick = async () => {
    try {
      const s = await getJSON('v1/stats');
      onStats(s);
      keepFocus($('overview-streams'), () => render(s));
      $('overview-error').hidden = true;
      timer = setTimeout(tick, Math.max(2, s.interval_seconds || 5) * 1000);
    } catch (e) {
      $('overview-error').hidden = false;
      $('overview-error').textContent = `Cannot read the gateway's stats: ${e.message}`;
      onStats(null, e);
      timer = setTimeout(tick, 5000);
    }
  };
  tick();
}

export function hideOverview() { clearTimeout(timer); }

function render(s) {
  const list = $('overview-streams');
  $('overview-empty').hidden = s.streams.length > 0;
  $('overview-note').textContent = s.shards_error ? `vtgate's shards are unknown: ${s.shards_error}` : '';
  $('overview-replica').textContent = s.replica ? ` (replica ${s.replica})` : '';
  const seen = new Set();
  for (const st of s.streams) {
    seen.add(st.name);
    let card = list.querySelector(`[data-stream="${CSS.escape(st.name)}"]`);
    if (!card) {
      card = el('article', 'card stream-card');
      card.dataset.stream = st.name;
      list.append(card);
    }
    fill(card, st);
  }
  for (const card of [...list.children]) if (!seen.has(card.dataset.stream)) card.remove();
}

function fill(card, st) {
  const head = el('h2');
  const link = el('a', '', st.name);
  link.href = `?view=stream&stream=${encodeURIComponent(st.name)}`;
  head.append(link, el('span', 'muted', ` ${st.keyspace} · start ${st.start}`));

  const shards = el('div', 'shards');
  shards.append(el('span', 'label', 'shards '));
  if (!st.shards.length) shards.append(el('span', 'muted', 'unknown'));
  for (const sh of st.shards) {
    const c = el('span', `chip ${sh.state}`, sh.shard);
    c.title = sh.state === 'serving' ? 'serving' : 'not serving; its primary still runs (a reshard not completed)';
    shards.append(c);
  }

  const nums = el('dl', 'nums');
  const add = (k, v, key, title) => {
    const t = el('dt', '', k);
    const d = el('dd', '', v);
    d.dataset.k = key;
    if (title) t.title = d.title = title;
    nums.append(t, d);
  };
  add('events in', `${num(st.events_in_per_s)}/s`, 'in', 'events read from vtgate per second, by this replica');
  add('events out', `${num(st.events_out_per_s)}/s`, 'out', 'events sent to readers per second, by this replica');
  for (const t of ['ws', 'sse', 'pull']) {
    add(`${{ ws: 'WebSocket', sse: 'SSE', pull: 'pull' }[t]} readers`, String(st.readers[t] || 0), `readers-${t}`, 'connected to this replica');
  }
  if (st.webhooks !== undefined) add('webhooks', String(st.webhooks), 'webhooks', 'webhooks defined on the stream (all replicas)');
  if (st.webhooks_in_flight !== undefined) {
    add('webhook batches in flight', String(st.webhooks_in_flight), 'webhooks-in-flight', 'batches this replica has sent and not resolved yet (being posted or waiting for a retry)');
  }
  const tail = el('div', 'tail');
  if (!st.tail) {
    tail.append(el('span', 'muted', 'no tail running on this replica (it starts with the first reader)'));
  } else {
    const t = st.tail;
    tail.append(el('span', 'label', 'tail '));
    for (const [shard, g] of Object.entries(t.position)) {
      const p = el('span', 'pos');
      p.append(`${shard}: `, gtid(g));
      tail.append(p);
    }
    const ring = el('div', 'ring');
    const fillE = t.ring_max_entries ? t.ring_entries / t.ring_max_entries : 0;
    const fillB = t.ring_max_bytes ? t.ring_bytes / t.ring_max_bytes : 0;
    const bar = el('progress');
    bar.max = 1;
    bar.value = Math.max(fillE, fillB);
    bar.setAttribute('aria-label', 'ring fill');
    ring.append(el('span', 'label', 'ring '), bar,
      el('span', 'muted', ` ${num(t.ring_entries, 0)} / ${num(t.ring_max_entries, 0)} txns · ${bytes(t.ring_bytes)} / ${bytes(t.ring_max_bytes)} · ${t.followers} following`));
    tail.append(ring);
  }

  let charts = card.querySelector('.charts');
  if (!charts) {
    charts = el('div', 'charts');
    charts.append(el('div', 'chart rate'), el('div', 'chart readers'));
  }
  const h = st.history;
  chart(charts.children[0], 'events/s', h.t, { in: h.events_in_per_s, out: h.events_out_per_s });
  chart(charts.children[1], 'readers · ring', h.t, { readers: h.readers, 'ring txns': h.ring_entries });
  card.replaceChildren(head, shards, nums, tail, charts);
}
