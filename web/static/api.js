// The gateway's API as the console uses it: the token (kept in
// sessionStorage, sent as a bearer header), JSON requests, URLs relative
// to the page so that the console works behind a path prefix.

const TOKEN_KEY = 'vsg.token';

// A token given in the page URL (as `make demo` prints it) is moved to
// sessionStorage and taken out of the address bar: it stays in this tab
// only, and is not left in the history or in a copied link.
export function adoptURLToken() {
  const q = new URLSearchParams(location.search);
  const t = q.get('access_token');
  if (t === null) return;
  setToken(t);
  q.delete('access_token');
  const s = q.toString();
  history.replaceState(null, '', `${location.pathname}${s ? `?${s}` : ''}${location.hash}`);
}

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives as long as the page */ }
}

export function apiURL(path, params = {}) {
  const u = new URL(path, location.href); // relative: works behind a path prefix
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  return u;
}

export function apiError(status, body) {
  const e = (body && body.error) || {};
  return Object.assign(new Error(e.message || `HTTP ${status}`), { status, code: e.code || '' });
}

// request sends a JSON request with the bearer token and returns the
// decoded body (null for 204).
export async function request(method, path, { params, body } = {}) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(apiURL(path, params), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 204) return null;
  const data = await r.json().catch(() => null);
  if (!r.ok) throw apiError(r.status, data);
  return data;
}

export const getJSON = (path, params) => request('GET', path, { params });

// ---- small DOM helpers shared by the views

export const $ = (id) => document.getElementById(id);

export function el(tag, cls, text) {
  const n = document.createElement(tag);
  if (cls) n.className = cls;
  if (text !== undefined) n.textContent = text;
  return n;
}

export function ago(iso) {
  if (!iso) return 'never';
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function num(v, digits = 1) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(digits)}M`;
  if (v >= 1e4) return `${(v / 1e3).toFixed(digits)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

export function bytes(n) {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

// gtid shortens a GTID set for a table cell; the whole set is the title.
export function gtid(s) {
  const n = el('code', 'gtid', s.length > 28 ? `…${s.slice(-26)}` : s);
  n.title = s;
  return n;
}

// confirmButton is an admin action: a first click asks, in place, for a
// second one (keyboard-reachable, no modal dialog).
export function confirmButton(label, question, action) {
  const wrap = el('span', 'action');
  const b = el('button', 'act', label);
  b.type = 'button';
  b.dataset.action = label.toLowerCase();
  b.onclick = () => {
    const yes = el('button', 'confirm danger', `Yes, ${label.toLowerCase()}`);
    yes.type = 'button';
    const no = el('button', 'cancel', 'Cancel');
    no.type = 'button';
    const q = el('span', 'question', question);
    const reset = () => wrap.replaceChildren(b);
    no.onclick = () => { reset(); b.focus(); };
    yes.onclick = async () => {
      yes.disabled = no.disabled = true;
      try {
        await action();
        reset();
      } catch (e) {
        reset();
        wrap.append(el('span', 'err', ` ${e.message}`));
      }
    };
    wrap.replaceChildren(q, yes, no);
    yes.focus();
  };
  wrap.append(b);
  return wrap;
}

// keepFocus re-renders box with fn and puts the keyboard focus back on the
// same control (found by its data- attributes and text): a view that
// refreshes every few seconds must not throw a keyboard user back to the
// top of the page.
export function keepFocus(box, fn) {
  const a = document.activeElement;
  let key = null;
  if (a && a !== document.body && box.contains(a)) {
    const holder = a.closest('[data-webhook], [data-subscriber], [data-seq], [data-stream]');
    key = { holder: holder ? [...holder.attributes].filter((x) => x.name.startsWith('data-')).map((x) => `[${x.name}="${CSS.escape(x.value)}"]`).join('') : '',
      tag: a.tagName, action: a.dataset.action || '', text: a.textContent };
  }
  fn();
  if (!key) return;
  const scope = key.holder ? box.querySelector(key.holder) : box;
  if (!scope) return;
  const same = [...scope.querySelectorAll(key.tag)].find((n) => (key.action ? n.dataset.action === key.action : n.textContent === key.text));
  if (same) same.focus();
}
