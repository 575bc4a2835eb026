// Overview: analytics (GET /admin/analytics), requests and latency over time (bucketed from
// GET /admin/requests), tokens by provider, and the cache and compression savings.

import { api } from './api.js';
import { horizontalBars, lines, note, stackedBars } from './charts.js';
import { $, bytes, clear, h, kv, ms, num, pct, say, table } from './dom.js';

const WINDOWS = {
  '1h': { seconds: 3600, step: 120 },
  '24h': { seconds: 86400, step: 3600 },
  '7d': { seconds: 7 * 86400, step: 6 * 3600 },
  '30d': { seconds: 30 * 86400, step: 86400 },
};
const ROW_LIMIT = 1000;
const REFRESH_MS = 10000;

const NOT_AVAILABLE = {
  requests: 'Not available: this gateway has no request log API (GET /admin/requests).',
  analytics: 'Not available: this gateway has no analytics API (GET /admin/analytics).',
};

function nearestRank(sorted, percent) {
  if (!sorted.length) return null;
  return sorted[Math.ceil((percent * sorted.length) / 100) - 1];
}

function bucketLabel(t, step) {
  const d = new Date(t * 1000);
  if (step >= 86400) return d.toLocaleDateString([], { month: 'short', day: 'numeric' });
  if (step >= 6 * 3600) return `${d.toLocaleDateString([], { weekday: 'short' })} ${d.getHours()}h`;
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

function answered(row) {
  return row.status >= 200 && row.status < 400;
}

/** The rows in time buckets over the window ending now: [{label, title, rows}]. */
function bucketize(rows, windowName, now) {
  const { seconds, step } = WINDOWS[windowName];
  const end = Math.ceil(now / step) * step;
  const start = end - seconds;
  const count = Math.round(seconds / step);
  const buckets = Array.from({ length: count }, (_, i) => {
    const t0 = start + i * step;
    const label = bucketLabel(t0, step);
    return { label, title: label, rows: [] };
  });
  for (const row of rows) {
    const i = Math.floor((row.time - start) / step);
    if (i >= 0 && i < count) buckets[i].rows.push(row);
  }
  return buckets;
}

function providerOf(route) {
  if (!route) return 'none';
  const slash = route.indexOf('/');
  return slash > 0 && !route.startsWith('fusion') ? route.slice(0, slash) : route;
}

function tokensByProvider(entries) {
  const totals = new Map();
  for (const e of entries) {
    const name = providerOf(e.route);
    const t = totals.get(name) || [0, 0];
    t[0] += e.tokens_in || 0;
    t[1] += e.tokens_out || 0;
    totals.set(name, t);
  }
  return [...totals.entries()]
    .map(([label, values]) => ({ label, values }))
    .filter((it) => it.values[0] + it.values[1] > 0)
    .sort((a, b) => b.values[0] + b.values[1] - (a.values[0] + a.values[1]));
}

export function createOverview() {
  const windowSelect = $('#window');
  const status = $('#overview-status');
  const tiles = $('#overview-tiles');
  const requestsChart = $('#chart-requests');
  const latencyChart = $('#chart-latency');
  const tokensChart = $('#chart-tokens');
  const routesTable = $('#routes-table');
  const cacheStats = $('#cache-stats');
  const compressionStats = $('#compression-stats');
  let timer = null;
  let active = false;
  let loading = null;

  async function get(path) {
    try {
      return { data: await api(path) };
    } catch (error) {
      return { error };
    }
  }

  function renderTiles(summary) {
    clear(tiles).append(...summary.map(([label, value, hint]) =>
      h('div', { class: 'tile card' }, h('p', { class: 'tile-label' }, label), h('p', { class: 'tile-value' }, value),
        hint ? h('p', { class: 'tile-hint' }, hint) : null)));
  }

  function renderCharts(rows, windowName, now, capped) {
    const buckets = bucketize(rows, windowName, now);
    const capNote = capped ? ` (the newest ${ROW_LIMIT} requests)` : '';
    const total = rows.length;
    if (!total) {
      note(requestsChart, 'No requests in this window yet.');
      note(latencyChart, 'No requests in this window yet.');
      return;
    }
    const counts = buckets.map((b) => {
      const ok = b.rows.filter(answered).length;
      return { label: b.label, title: b.title, values: [ok, b.rows.length - ok] };
    });
    const busiest = counts.reduce((best, b) => (b.values[0] + b.values[1] > best.values[0] + best.values[1] ? b : best));
    stackedBars(requestsChart, {
      buckets: counts,
      series: ['answered', 'failed'],
      summary: `${total} requests${capNote}; busiest: ${busiest.title} with ${busiest.values[0] + busiest.values[1]}.`,
    });
    const p50 = [];
    const p95 = [];
    for (const b of buckets) {
      const latencies = b.rows.filter(answered).map((r) => r.latency_ms).filter((v) => typeof v === 'number').sort((x, y) => x - y);
      p50.push(nearestRank(latencies, 50));
      p95.push(nearestRank(latencies, 95));
    }
    const all = rows.filter(answered).map((r) => r.latency_ms).filter((v) => typeof v === 'number').sort((x, y) => x - y);
    if (!all.length) {
      note(latencyChart, 'No answered requests in this window yet.');
    } else {
      lines(latencyChart, {
        buckets,
        lines: [{ name: 'p50', values: p50 }, { name: 'p95', values: p95 }],
        summary: `Latency of answered requests${capNote}: p50 ${ms(nearestRank(all, 50))}, p95 ${ms(nearestRank(all, 95))}.`,
        format: ms,
      });
    }
  }

  function renderTokens(entries, source) {
    const items = tokensByProvider(entries);
    if (!items.length) {
      note(tokensChart, 'No tokens counted in this window yet.');
      return;
    }
    const total = items.reduce((a, it) => a + it.values[0] + it.values[1], 0);
    horizontalBars(tokensChart, {
      items,
      series: ['tokens in', 'tokens out'],
      summary: `${num(total)} tokens over ${items.length} provider(s)${source}; most: ${items[0].label}.`,
    });
  }

  function renderRoutes(analytics) {
    clear(routesTable);
    if (!analytics.routes.length) {
      routesTable.append(h('p', { class: 'empty' }, 'No requests in this window yet.'));
      return;
    }
    routesTable.append(table([
      { label: 'Route', cell: (r) => h('code', {}, r.route) },
      { label: 'Requests', cell: (r) => num(r.requests), class: 'n' },
      { label: 'Success', cell: (r) => pct(r.success_rate), class: 'n' },
      { label: 'Fallback', cell: (r) => pct(r.fallback_rate), class: 'n' },
      { label: 'p50', cell: (r) => ms(r.p50_ms), class: 'n' },
      { label: 'p95', cell: (r) => ms(r.p95_ms), class: 'n' },
      { label: 'TTFT p50', cell: (r) => ms(r.ttft_p50_ms), class: 'n' },
      { label: 'Tokens in', cell: (r) => num(r.tokens_in), class: 'n' },
      { label: 'Tokens out', cell: (r) => num(r.tokens_out), class: 'n' },
      { label: 'Failures', cell: (r) => num(r.failures), class: 'n' },
    ], analytics.routes, { caption: 'Per-route statistics' }));
  }

  function renderSavings(cache, compression, analytics) {
    clear(cacheStats);
    if (cache.error) {
      cacheStats.append(h('p', { class: cache.error.missing ? 'empty' : 'error' },
        cache.error.missing ? 'Not available on this gateway.' : cache.error.message));
    } else {
      const c = cache.data;
      const lookups = (c.hits || 0) + (c.misses || 0);
      const entries = c.entries ? Object.values(c.entries).reduce((a, v) => a + v, 0) : 0;
      const pairs = [
        ['Enabled', c.enabled ? 'yes' : 'no'],
        ['Hits', num(c.hits)],
        ['Misses', num(c.misses)],
        ['Hit rate', lookups ? pct(c.hits / lookups) : '—'],
        ['Tokens saved', num(c.tokens_saved)],
        ['Entries', num(entries)],
        ['Size', bytes(c.bytes)],
      ];
      if (analytics) pairs.splice(5, 0, ['Tokens saved in window', num(analytics.cache_tokens_saved)]);
      cacheStats.append(kv(pairs));
    }
    clear(compressionStats);
    if (compression.error) {
      compressionStats.append(h('p', { class: compression.error.missing ? 'empty' : 'error' },
        compression.error.missing ? 'Not available on this gateway.' : compression.error.message));
    } else {
      const c = compression.data;
      compressionStats.append(kv([
        ['Mode', c.mode || '—'],
        ['Requests seen', num(c.requests)],
        ['Compressed', num(c.compressed)],
        ['Tokens saved (est.)', num(c.est_saved_tokens)],
        ['Saved', c.savings_percent === undefined ? '—' : `${c.savings_percent} %`],
        ['Average time', c.avg_duration_ms === undefined ? '—' : `${c.avg_duration_ms} ms`],
      ]));
    }
  }

  async function load() {
    const windowName = windowSelect.value in WINDOWS ? windowSelect.value : '24h';
    const now = Date.now() / 1000;
    const since = Math.floor(now - WINDOWS[windowName].seconds);
    const [analyticsRes, requestsRes, cache, compression] = await Promise.all([
      get(`/admin/analytics?window=${encodeURIComponent(windowName)}`),
      get(`/admin/requests?limit=${ROW_LIMIT}&since=${since}`),
      get('/admin/cache/stats'),
      get('/admin/compression/stats'),
    ]);
    const analytics = analyticsRes.data || null;
    const rows = requestsRes.data ? requestsRes.data.data : null;

    // tiles: from the analytics when there, else from the request rows
    let summary;
    if (analytics) {
      const reqs = analytics.routes.reduce((a, r) => a + r.requests, 0);
      const fails = analytics.routes.reduce((a, r) => a + r.failures, 0);
      const wins = analytics.routes.reduce((a, r) => a + r.success_rate * (r.requests + r.failures), 0);
      const tin = analytics.routes.reduce((a, r) => a + r.tokens_in, 0);
      const tout = analytics.routes.reduce((a, r) => a + r.tokens_out, 0);
      summary = [
        ['Requests', num(reqs)],
        ['Success rate', reqs + fails ? pct(wins / (reqs + fails)) : '—', 'of every attempt'],
        ['Failed attempts', num(fails), 'retried on the next route'],
        ['Tokens', num(tin + tout), `${num(tin)} in · ${num(tout)} out`],
        ['Cache tokens saved', num(analytics.cache_tokens_saved)],
      ];
    } else if (rows) {
      const ok = rows.filter(answered);
      const sorted = ok.map((r) => r.latency_ms).filter((v) => typeof v === 'number').sort((x, y) => x - y);
      summary = [
        ['Requests', num(rows.length)],
        ['Answered', rows.length ? pct(ok.length / rows.length) : '—'],
        ['p50 latency', ms(nearestRank(sorted, 50))],
        ['Tokens', num(rows.reduce((a, r) => a + (r.tokens_in || 0) + (r.tokens_out || 0), 0))],
      ];
    } else {
      summary = [['Requests', '—', 'no request log on this gateway']];
    }
    renderTiles(summary);

    if (rows) renderCharts(rows, windowName, now, rows.length >= ROW_LIMIT);
    else {
      const text = requestsRes.error.missing ? NOT_AVAILABLE.requests : requestsRes.error.message;
      note(requestsChart, text);
      note(latencyChart, text);
    }
    if (analytics) renderTokens(analytics.routes, '');
    else if (rows) renderTokens(rows, ' (from the request log)');
    else note(tokensChart, analyticsRes.error.missing ? NOT_AVAILABLE.analytics : analyticsRes.error.message);

    if (analytics) renderRoutes(analytics);
    else {
      clear(routesTable).append(h('p', { class: analyticsRes.error.missing ? 'empty' : 'error' },
        analyticsRes.error.missing ? NOT_AVAILABLE.analytics : analyticsRes.error.message));
    }
    renderSavings(cache, compression, analytics);
    const problems = [analyticsRes, requestsRes, cache, compression].filter((r) => r.error && !r.error.missing);
    if (problems.length) say(status, `Some data could not be loaded: ${problems[0].error.message}`, 'error');
    else say(status, `Updated ${new Date().toLocaleTimeString()}.`);
  }

  function refresh() {
    if (!loading) {
      loading = load().finally(() => {
        loading = null;
      });
    }
    return loading;
  }

  function schedule() {
    clearTimeout(timer);
    if (!active) return;
    timer = setTimeout(async () => {
      if (document.visibilityState === 'visible') await refresh();
      schedule();
    }, REFRESH_MS);
  }

  windowSelect.addEventListener('change', () => refresh());

  return {
    async show() {
      active = true;
      await refresh();
      schedule();
    },
    hide() {
      active = false;
      clearTimeout(timer);
    },
  };
}
