// The dashboard: sign-in with an admin key, then one view at a time chosen by the URL's #hash.
// The page ships no data: everything is fetched from the admin API after sign-in.

import { ApiError, api, health, onUnauthorized, session } from './api.js';
import { createChain } from './chain.js';
import { $, say } from './dom.js';
import { createOverview } from './overview.js';
import { createPlayground } from './playground.js';
import { createProviders } from './providers.js';
import { createRequests } from './requests.js';

const VIEWS = ['overview', 'providers', 'chain', 'requests', 'playground'];
const DEFAULT_VIEW = 'overview';
const HEALTH_MS = 15000;

const signin = $('#signin');
const signinForm = $('#signin-form');
const signinKey = $('#admin-key');
const signinError = $('#signin-error');
const signinSubmit = $('#signin-submit');
const appRoot = $('#app');
const nav = $('#nav');
const sessionBar = $('#session');
const healthLabel = $('#health');

const shared = {
  providers: [],
  async refreshProviders() {
    const data = await api('/admin/providers');
    shared.providers = data.data;
    return shared.providers;
  },
};

const views = {
  overview: createOverview(shared),
  providers: createProviders(shared),
  chain: createChain(shared),
  requests: createRequests(shared),
  playground: createPlayground(shared),
};

let current = null;
let healthTimer = null;

function viewFromHash() {
  const name = location.hash.replace(/^#/, '');
  return VIEWS.includes(name) ? name : DEFAULT_VIEW;
}

async function showView(name, { focus = false } = {}) {
  if (current && current !== name) views[current].hide();
  for (const view of VIEWS) {
    const section = $(`#view-${view}`);
    section.hidden = view !== name;
  }
  for (const link of nav.querySelectorAll('a[data-nav]')) {
    if (link.dataset.nav === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  current = name;
  document.title = `${$(`#view-${name} h1`).textContent} · freellm dashboard`;
  if (focus) $(`#view-${name} h1`).focus();
  try {
    await views[name].show();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) console.error(error);
  }
}

async function checkHealth() {
  const ok = await health();
  healthLabel.textContent = ok ? 'Gateway: up' : 'Gateway: not answering';
  healthLabel.classList.toggle('bad', !ok);
  healthLabel.classList.toggle('good', ok);
}

function enterApp() {
  signin.hidden = true;
  appRoot.hidden = false;
  nav.hidden = false;
  sessionBar.hidden = false;
  checkHealth();
  clearInterval(healthTimer);
  healthTimer = setInterval(checkHealth, HEALTH_MS);
  showView(viewFromHash(), { focus: true });
}

function leaveApp(message, { keepKey = false } = {}) {
  if (!keepKey) session.clear();
  shared.providers = [];
  if (current) views[current].hide();
  current = null;
  clearInterval(healthTimer);
  appRoot.hidden = true;
  nav.hidden = true;
  sessionBar.hidden = true;
  for (const view of VIEWS) $(`#view-${view}`).hidden = true;
  signin.hidden = false;
  document.title = 'Sign in · freellm dashboard';
  say(signinError, message || '', message ? 'error' : 'info');
  signinKey.value = '';
  signinKey.focus();
}

function signinMessage(error) {
  if (error.status === 401) return 'That key was not accepted: it is not an admin key of this gateway.';
  if (error.status === 404) {
    return 'The admin API is off on this gateway: no admin keys are configured (auth.admin_keys).';
  }
  return `Could not sign in: ${error.message}`;
}

signinForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  const key = signinKey.value.trim();
  if (!key) {
    say(signinError, 'Type an admin key.', 'error');
    signinKey.focus();
    return;
  }
  signinSubmit.disabled = true;
  say(signinError, '');
  try {
    const data = await api('/admin/providers', { key });
    session.set(key);
    shared.providers = data.data;
    signinKey.value = '';
    enterApp();
  } catch (error) {
    say(signinError, signinMessage(error), 'error');
    signinKey.select();
  } finally {
    signinSubmit.disabled = false;
  }
});

$('#sign-out').addEventListener('click', () => leaveApp(''));

onUnauthorized(() => leaveApp('Signed out: the admin key is no longer accepted.'));

window.addEventListener('hashchange', () => {
  if (!appRoot.hidden) showView(viewFromHash(), { focus: true });
});

for (const view of VIEWS) $(`#view-${view} h1`).setAttribute('tabindex', '-1');

async function start() {
  const key = session.key;
  if (!key) {
    leaveApp('');
    return;
  }
  try {
    const data = await api('/admin/providers', { key });
    shared.providers = data.data;
    enterApp();
  } catch (error) {
    const refused = error.status === 401 || error.status === 404;
    leaveApp(refused ? signinMessage(error) : `Could not reach the admin API: ${error.message}`, { keepKey: !refused });
  }
}

start();
