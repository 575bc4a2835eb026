// Live requests: GET /admin/requests polled every 2 s while the view is open (and the tab visible),
// newest first, filtered by status class and route. New rows are marked; a polite live region says how
// many arrived, never the whole table.

import { api } from './api.js';
import { $, clear, clock, h, ms, num, say, table } from './dom.js';

const POLL_MS = 2000;
const MISSING_POLL_MS = 15000;
const LIMIT = 50;

function statusBadge(status) {
  const cls = status >= 200 && status < 400 ? 'good' : status === 429 ? 'warn' : 'bad';
  return h('span', { class: `badge ${cls}` }, String(status));
}

export function createRequests(shared) {
  const view = $('#requests-table');
  const status = $('#requests-status');
  const pause = $('#requests-pause');
  const statusFilter = $('#filter-status');
  const routeFilter = $('#filter-route');
  const routeOptions = $('#route-options');
  const filterForm = $('#requests-filter');

  let active = false;
  let paused = false;
  let timer = null;
  let seen = new Set();
  let first = true;
  let inflight = null;

  function query() {
    const params = new URLSearchParams({ limit: String(LIMIT) });
    if (statusFilter.value) params.set('status', statusFilter.value);
    const route = routeFilter.value.trim();
    if (route) params.set('route', route);
    return `/admin/requests?${params}`;
  }

  function render(rows) {
    const fresh = first ? new Set() : new Set(rows.filter((r) => !seen.has(r.id)).map((r) => r.id));
    seen = new Set(rows.map((r) => r.id));
    clear(view);
    if (!rows.length) {
      view.append(h('p', { class: 'empty' }, 'No requests yet. Send one from the Playground.'));
    } else {
      view.append(table([
        { label: 'Time', cell: (r) => h('time', { datetime: new Date(r.time * 1000).toISOString() }, clock(r.time)) },
        { label: 'Route', class: 'wide', cell: (r) => (r.route ? h('code', {}, r.route) : h('span', { class: 'muted' }, 'none')) },
        { label: 'Status', cell: (r) => statusBadge(r.status) },
        { label: 'Latency', cell: (r) => ms(r.latency_ms), class: 'n' },
        { label: 'TTFT', cell: (r) => ms(r.ttft_ms), class: 'n' },
        { label: 'Tokens', cell: (r) => `${num(r.tokens_in)} → ${num(r.tokens_out)}`, class: 'n' },
        { label: 'Attempts', cell: (r) => num(r.attempts), class: 'n' },
        { label: 'Surface', cell: (r) => r.surface || '—' },
        {
          label: 'Notes',
          class: 'wide',
          cell: (r) => [r.cached ? h('span', { class: 'badge neutral' }, 'cached') : null,
            r.error_class ? h('span', { class: 'badge bad' }, r.error_class) : null],
        },
      ], rows, {
        caption: 'Recent requests, newest first',
        compact: true,
        rowAttrs: (r) => ({ class: fresh.has(r.id) ? 'fresh' : '', 'data-request-id': r.id, title: `Request ${r.id}` }),
      }));
    }
    const count = fresh.size;
    say(status, count ? `${count} new request${count > 1 ? 's' : ''} · updated ${new Date().toLocaleTimeString()}`
      : `${rows.length} shown · updated ${new Date().toLocaleTimeString()}`);
    first = false;
  }

  function renderRouteOptions() {
    const routes = new Set();
    for (const p of shared.providers) for (const m of p.models) routes.add(`${p.name}/${m.id}`);
    routes.add('cache');
    clear(routeOptions).append(...[...routes].map((r) => h('option', { value: r })));
  }

  async function poll() {
    let delay = POLL_MS;
    try {
      const data = await api(query());
      render(data.data);
    } catch (error) {
      if (error.missing) {
        clear(view).append(h('p', { class: 'empty' },
          'Not available: this gateway has no request log API (GET /admin/requests).'));
        say(status, '');
        delay = MISSING_POLL_MS;
      } else {
        say(status, `Could not load the requests: ${error.message}`, 'error');
      }
    }
    return delay;
  }

  function tick() {
    if (inflight) return inflight;
    inflight = poll().finally(() => {
      inflight = null;
    });
    return inflight;
  }

  function schedule(delay) {
    clearTimeout(timer);
    if (!active || paused) return;
    timer = setTimeout(async () => {
      const next = document.visibilityState === 'visible' ? await tick() : POLL_MS;
      schedule(next);
    }, delay);
  }

  async function restart() {
    first = true;
    const delay = await tick();
    schedule(delay);
  }

  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    pause.textContent = paused ? 'Resume' : 'Pause';
    if (paused) {
      clearTimeout(timer);
      say(status, 'Paused: the list is not updating.');
    } else restart();
  });
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    restart();
  });
  statusFilter.addEventListener('change', () => restart());
  routeFilter.addEventListener('change', () => restart());

  return {
    async show() {
      active = true;
      renderRouteOptions();
      if (!paused) await restart();
    },
    hide() {
      active = false;
      clearTimeout(timer);
    },
  };
}
