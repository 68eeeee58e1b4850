// The operator's console: overview, stream page (live table, current rows,
// subscribers), reshards, webhooks. Plain modules, no build step; every
// URL is relative to the page, so it works behind a path prefix.
//
// The token is pasted once and kept in sessionStorage (this tab only), sent
// as a bearer header — in a URL only where the browser leaves no choice
// (EventSource). Views and actions that need the admin scope are hidden
// from tokens without it; the API refuses them anyway.
import { $, adoptURLToken, getJSON, setToken, token } from './api.js';
import { initLive, stopLive, resumeLive } from './live.js';
import { currentFor } from './current.js';
import { subscribersFor, stopSubscribers } from './subscribers.js';
import { showOverview, hideOverview } from './overview.js';
import { showReshards, hideReshards } from './reshards.js';
import { showWebhooks, hideWebhooks } from './webhooks.js';

const VIEWS = ['overview', 'stream', 'reshards', 'webhooks'];
const ADMIN_VIEWS = new Set(['reshards', 'webhooks']);
const app = { view: '', admin: false, known: false, liveStarted: false, stream: '' };

adoptURLToken();

function setAdmin(admin) {
  app.admin = admin;
  app.known = true;
  document.body.classList.toggle('is-admin', admin);
  for (const n of document.querySelectorAll('[data-admin]')) n.hidden = !admin;
}

// whoami asks the gateway what the token may do (GET /v1/stats says
// whether it has the admin scope); 401 means the token is missing or bad.
async function whoami() {
  try {
    const s = await getJSON('v1/stats');
    setAdmin(s.admin);
    $('who').textContent = s.subject ? `signed in as ${s.subject}${s.admin ? ' (admin)' : ''}` : '';
    $('login-error').textContent = '';
    return true;
  } catch (e) {
    setAdmin(false);
    $('who').textContent = '';
    $('login-error').textContent = e.status === 401
      ? (token() ? 'The token was refused (expired or not valid here). Paste another.' : 'Paste a token to sign in.')
      : `The gateway did not answer: ${e.message}`;
    return e.status !== 401;
  }
}

function show(view) {
  if (!VIEWS.includes(view)) view = 'overview';
  if (ADMIN_VIEWS.has(view) && !app.admin) view = 'overview';
  if (app.view === view) return;
  app.view = view;
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== view;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (view !== 'overview') hideOverview();
  if (view !== 'reshards') hideReshards();
  if (view !== 'webhooks') hideWebhooks();
  if (view !== 'stream') { stopSubscribers(); if (app.liveStarted) stopLive(); }
  switch (view) {
    case 'overview':
      showOverview((s) => { if (s) setAdmin(s.admin); });
      break;
    case 'stream':
      if (!app.liveStarted) {
        app.liveStarted = true;
        initLive((stream) => {
          app.stream = stream;
          currentFor(stream);
          subscribersFor(stream, app.admin);
        });
      } else {
        resumeLive();
        subscribersFor(app.stream, app.admin);
      }
      break;
    case 'reshards':
      showReshards();
      break;
    case 'webhooks':
      getJSON('v1/streams').then((b) => showWebhooks(b.streams)).catch((e) => { $('webhooks-error').textContent = e.message; });
      break;
  }
}

function route() {
  const q = new URLSearchParams(location.search);
  // ?stream= alone is the stream page, as the dashboard's links always were.
  show(q.get('view') || (q.get('stream') ? 'stream' : 'overview'));
}

// Navigation keeps the page (and the live connection's state) and changes
// only the query; links still work opened in a new tab.
$('nav').addEventListener('click', (e) => {
  const a = e.target.closest('a[data-view]');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  const q = new URLSearchParams({ view: a.dataset.view });
  if (a.dataset.view === 'stream' && app.stream) q.set('stream', app.stream);
  history.pushState(null, '', `?${q}`);
  route();
});
document.addEventListener('click', (e) => {
  const a = e.target.closest('#view-overview h2 a');
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
  e.preventDefault();
  history.pushState(null, '', a.getAttribute('href'));
  if (app.liveStarted) location.reload(); // the live table picks its stream at start
  else route();
});
window.addEventListener('popstate', route);

$('login').addEventListener('submit', async (e) => {
  e.preventDefault();
  const t = $('token').value.trim();
  $('token').value = '';
  setToken(t);
  if (await whoami()) location.reload(); // every view and connection starts over with the new token
});
$('logout').addEventListener('click', () => {
  setToken('');
  location.reload();
});

(async () => {
  const ok = await whoami();
  $('logout').hidden = !token();
  if (!ok) {
    $('token').focus();
    show('overview');
    return;
  }
  route();
})();
