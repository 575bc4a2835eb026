// Providers and their keys: listed masked exactly as the API returns them (the page never sees a full
// key it did not type itself), added, tested, disabled and enabled, removed (keys added at run time).

import { api } from './api.js';
import { $, clear, h, nextId, say } from './dom.js';

const STATUS_CLASS = { healthy: 'good', unknown: 'neutral', disabled: 'neutral', error: 'warn', invalid: 'bad' };

function statusBadge(status) {
  return h('span', { class: `badge ${STATUS_CLASS[status] || 'warn'}` }, status);
}

export function createProviders(shared) {
  const list = $('#providers-list');
  const status = $('#providers-status');
  const form = $('#provider-form');
  const formMsg = $('#provider-form-msg');
  const messages = new Map(); // provider name → [text, kind]: kept across re-renders

  function focusToken(el) {
    return el && el.dataset ? el.dataset.focus : undefined;
  }

  function render(providers) {
    const focused = focusToken(document.activeElement);
    clear(list);
    if (!providers.length) {
      list.append(h('p', { class: 'empty card' }, 'No providers are configured.'));
    }
    for (const provider of providers) list.append(providerCard(provider));
    if (focused) {
      const again = list.querySelector(`[data-focus="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }

  function providerCard(p) {
    const titleId = nextId('provider');
    const msg = h('p', { class: 'msg', role: 'status', 'aria-live': 'polite' });
    const [text, kind] = messages.get(p.name) || ['', 'info'];
    say(msg, text, kind);
    const tell = (t, k = 'info') => {
      messages.set(p.name, [t, k]);
      say(msg, t, k);
    };
    const keyInputId = nextId('new-key');
    const keyInput = h('input', {
      id: keyInputId, type: 'password', autocomplete: 'off', spellcheck: 'false', required: true,
      'data-focus': `newkey:${p.name}`,
    });
    const addForm = h('form', {
      class: 'add-key',
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        const key = keyInput.value.trim();
        if (!key) {
          tell('Type the key to add first.', 'error');
          keyInput.focus();
          return;
        }
        tell('Adding the key…');
        try {
          const added = await api(`/admin/providers/${encodeURIComponent(p.name)}/keys`, { method: 'POST', body: { key } });
          keyInput.value = '';
          tell(`Key ${added.masked} added.`, 'ok');
          await reload();
        } catch (error) {
          tell(`Could not add the key: ${error.message}`, 'error');
        }
      },
    },
    h('label', { for: keyInputId }, `Add a key to ${p.name}`),
    h('div', { class: 'row' }, keyInput, h('button', { type: 'submit', 'data-focus': `addkey:${p.name}` }, 'Add key')));

    const keysBody = p.keys.length
      ? h('table', { class: 'data keys' },
        h('caption', { class: 'sr-only' }, `Keys of ${p.name}`),
        h('thead', {}, h('tr', {}, ['Key', 'Status', 'Source', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, p.keys.map((k) => keyRow(p, k, tell))))
      : h('p', { class: 'empty' }, 'No keys yet.');

    return h('article', { class: 'card provider', 'aria-labelledby': titleId, 'data-provider': p.name },
      h('header', { class: 'provider-head' },
        h('h2', { id: titleId }, p.name),
        h('span', { class: 'badge neutral' }, p.kind),
        h('span', { class: `badge ${p.enabled ? 'good' : 'neutral'}` }, p.enabled ? 'enabled' : 'disabled')),
      h('p', { class: 'muted url' }, p.base_url),
      p.models.length
        ? h('p', { class: 'models' }, h('span', { class: 'sr-only' }, 'Models: '),
          p.models.map((m) => h('code', { class: 'chip' }, m.id)))
        : null,
      keysBody,
      addForm,
      msg);
  }

  function keyRow(p, k, tell) {
    const base = `/admin/providers/${encodeURIComponent(p.name)}/keys/${encodeURIComponent(k.id)}`;
    const label = `key ${k.masked} of ${p.name}`;
    const test = h('button', {
      type: 'button', 'data-focus': `test:${p.name}:${k.id}`, 'aria-label': `Test ${label}`,
      onclick: async () => {
        tell(`Testing key ${k.masked}…`);
        try {
          const r = await api(`${base}/test`, { method: 'POST' });
          tell(r.ok ? `Key ${k.masked} works (HTTP ${r.upstream_status}, ${r.latency_ms} ms).`
            : `Key ${k.masked} failed: ${r.error}.`, r.ok ? 'ok' : 'error');
          await reload();
        } catch (error) {
          tell(`Could not test key ${k.masked}: ${error.message}`, 'error');
        }
      },
    }, 'Test');
    const toggle = h('button', {
      type: 'button', 'data-focus': `toggle:${p.name}:${k.id}`,
      'aria-label': `${k.enabled ? 'Disable' : 'Enable'} ${label}`,
      onclick: async () => {
        try {
          await api(base, { method: 'PATCH', body: { enabled: !k.enabled } });
          tell(`Key ${k.masked} ${k.enabled ? 'disabled' : 'enabled'}.`, 'ok');
          await reload();
        } catch (error) {
          tell(`Could not change key ${k.masked}: ${error.message}`, 'error');
        }
      },
    }, k.enabled ? 'Disable' : 'Enable');
    const actions = [test, toggle];
    if (k.source === 'runtime') {
      let armed = false;
      const remove = h('button', {
        type: 'button', class: 'danger', 'data-focus': `remove:${p.name}:${k.id}`, 'aria-label': `Remove ${label}`,
        onclick: async () => {
          if (!armed) {
            armed = true;
            remove.textContent = 'Confirm remove';
            tell(`Press “Confirm remove” to delete key ${k.masked}.`);
            return;
          }
          try {
            await api(base, { method: 'DELETE' });
            tell(`Key ${k.masked} removed.`, 'ok');
            await reload();
          } catch (error) {
            tell(`Could not remove key ${k.masked}: ${error.message}`, 'error');
          }
        },
        onblur: () => {
          armed = false;
          remove.textContent = 'Remove';
        },
      }, 'Remove');
      actions.push(remove);
    }
    return h('tr', { 'data-key': k.id, class: k.enabled ? '' : 'is-disabled' },
      h('td', { 'data-label': 'Key' }, h('code', { class: 'masked' }, k.masked), ' ', h('span', { class: 'muted small' }, k.id)),
      h('td', { 'data-label': 'Status' }, statusBadge(k.status)),
      h('td', { 'data-label': 'Source' }, k.source),
      h('td', { 'data-label': 'Actions', class: 'actions' }, actions));
  }

  async function reload() {
    try {
      const providers = await shared.refreshProviders();
      render(providers);
      say(status, `${providers.length} provider(s).`);
    } catch (error) {
      say(status, `Could not load the providers: ${error.message}`, 'error');
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const name = String(data.get('name') || '').trim();
    const baseUrl = String(data.get('base_url') || '').trim();
    if (!name || !baseUrl) {
      say(formMsg, 'A name and a base URL are needed.', 'error');
      return;
    }
    const models = String(data.get('models') || '').split(',').map((m) => m.trim()).filter(Boolean).map((id) => ({ id }));
    const key = String(data.get('key') || '').trim();
    const body = { name, kind: data.get('kind'), base_url: baseUrl, models };
    if (key) body.keys = [key];
    say(formMsg, 'Adding the provider…');
    try {
      await api('/admin/providers', { method: 'POST', body });
      form.reset();
      say(formMsg, `Provider ${name} added.`, 'ok');
      await reload();
    } catch (error) {
      say(formMsg, `Could not add the provider: ${error.message}`, 'error');
    }
  });
  $('#providers-refresh').addEventListener('click', () => reload());

  return {
    async show() {
      await reload();
    },
    hide() {},
  };
}
