// Charts drawn as inline SVG, no library: stacked bars over time, lines over time, horizontal bars.
// Each chart is drawn at its container's width and redrawn when that changes. Colours come from CSS
// classes (series-0, series-1, ...), so they follow the light and dark themes.

import { clear, h, s } from './dom.js';

const HEIGHT = 220;
const MARGIN = { top: 12, right: 12, bottom: 28, left: 48 };
const LABEL_CHAR_PX = 6.5; // the average width of a character of the 11 px axis labels (style.css)
const observed = new WeakMap();
const resizer = typeof ResizeObserver === 'function'
  ? new ResizeObserver((entries) => {
    for (const entry of entries) {
      const state = observed.get(entry.target);
      if (!state) continue;
      const width = Math.round(entry.contentRect.width);
      if (width && width !== state.width) draw(entry.target, state.paint);
    }
  })
  : null;

function draw(container, paint) {
  const width = Math.max(240, Math.round(container.clientWidth || 600));
  observed.set(container, { paint, width });
  clear(container).append(paint(width));
}

/** Draw ``paint(width) → node`` into ``container`` now and on every resize. */
function mount(container, paint) {
  if (resizer && !observed.has(container)) resizer.observe(container);
  draw(container, paint);
}

/** A note instead of a chart (no data, or the data's route is not there). */
export function note(container, text) {
  observed.delete(container);
  if (resizer) resizer.unobserve(container);
  clear(container).append(h('p', { class: 'empty' }, text));
}

/** A round axis top at or above ``value`` and how many ticks divide it evenly. ``whole``: values in
 * whole units (requests, milliseconds), so never a fractional tick (an axis of at least 5). */
function niceScale(value, whole = false) {
  if (whole && value <= 5) return { max: 5, ticks: 5 };
  if (!(value > 0)) return { max: 1, ticks: 4 };
  const power = 10 ** Math.floor(Math.log10(value));
  const m = value / power;
  if (m <= 1) return { max: power, ticks: 5 };
  if (m <= 2) return { max: 2 * power, ticks: 4 };
  if (m <= 5) return { max: 5 * power, ticks: 5 };
  return { max: 10 * power, ticks: 5 };
}

function svgRoot(width, height, summary) {
  return s('svg', {
    class: 'chart-svg',
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': summary,
    focusable: 'false',
  }, s('title', {}, summary));
}

function yAxis(svg, plot, { max, ticks }, format) {
  for (let i = 0; i <= ticks; i += 1) {
    const value = (max * i) / ticks;
    const y = plot.y + plot.h - (plot.h * i) / ticks;
    svg.append(
      s('line', { class: 'grid', x1: plot.x, x2: plot.x + plot.w, y1: y, y2: y }),
      s('text', { class: 'axis', x: plot.x - 6, y: y + 4, 'text-anchor': 'end' }, format(value)),
    );
  }
}

function xLabels(svg, plot, labels, slot) {
  const every = Math.max(1, Math.ceil(labels.length / Math.max(2, Math.floor(plot.w / 70))));
  labels.forEach((label, i) => {
    if (i % every !== 0) return;
    svg.append(s('text', {
      class: 'axis', x: plot.x + slot * i + slot / 2, y: plot.y + plot.h + 18, 'text-anchor': 'middle',
    }, label));
  });
}

function plotArea(width) {
  return { x: MARGIN.left, y: MARGIN.top, w: width - MARGIN.left - MARGIN.right, h: HEIGHT - MARGIN.top - MARGIN.bottom };
}

const compact = new Intl.NumberFormat(undefined, { notation: 'compact', maximumFractionDigits: 1 });

/**
 * Stacked bars per time bucket. ``buckets``: [{label, title, values: [n per series]}];
 * ``series``: [name per series]; ``summary``: the chart's accessible description.
 */
export function stackedBars(container, { buckets, series, summary, format = (v) => compact.format(v) }) {
  mount(container, (width) => {
    const svg = svgRoot(width, HEIGHT, summary);
    const plot = plotArea(width);
    const scale = niceScale(Math.max(0, ...buckets.map((b) => b.values.reduce((a, v) => a + v, 0))), true);
    const { max } = scale;
    yAxis(svg, plot, scale, format);
    const slot = plot.w / Math.max(1, buckets.length);
    const barWidth = Math.max(1, slot * 0.72);
    buckets.forEach((bucket, i) => {
      let base = plot.y + plot.h;
      bucket.values.forEach((value, k) => {
        if (!value) return;
        const height = (plot.h * value) / max;
        base -= height;
        svg.append(s('rect', {
          class: `bar series-${k}`,
          x: plot.x + slot * i + (slot - barWidth) / 2,
          y: base,
          width: barWidth,
          height: Math.max(0.5, height),
        }, s('title', {}, `${bucket.title}: ${value} ${series[k]}`)));
      });
    });
    xLabels(svg, plot, buckets.map((b) => b.label), slot);
    return h('div', {}, svg, legend(series));
  });
}

/**
 * Lines over time buckets. ``buckets``: [{label, title}]; ``lines``: [{name, values: [n|null per bucket]}].
 */
export function lines(container, { buckets, lines: series, summary, format }) {
  mount(container, (width) => {
    const svg = svgRoot(width, HEIGHT, summary);
    const plot = plotArea(width);
    const all = series.flatMap((l) => l.values.filter((v) => v !== null && v !== undefined));
    const scale = niceScale(Math.max(0, ...all), true); // whole milliseconds
    const { max } = scale;
    yAxis(svg, plot, scale, format);
    const slot = plot.w / Math.max(1, buckets.length);
    series.forEach((line, k) => {
      const points = [];
      line.values.forEach((value, i) => {
        if (value === null || value === undefined) return;
        const x = plot.x + slot * i + slot / 2;
        const y = plot.y + plot.h - (plot.h * value) / max;
        points.push([x, y, i, value]);
      });
      if (points.length > 1) {
        const d = points.map(([x, y], j) => `${j ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`).join(' ');
        svg.append(s('path', { class: `line series-${k}`, d }));
      }
      for (const [x, y, i, value] of points) {
        svg.append(s('circle', { class: `dot series-${k}`, cx: x, cy: y, r: 3 },
          s('title', {}, `${buckets[i].title}: ${line.name} ${format(value)}`)));
      }
    });
    xLabels(svg, plot, buckets.map((b) => b.label), slot);
    return h('div', {}, svg, legend(series.map((l) => l.name)));
  });
}

/**
 * Horizontal stacked bars, one per item. ``items``: [{label, values: [n per series]}].
 */
export function horizontalBars(container, { items, series, summary, format = (v) => compact.format(v) }) {
  mount(container, (width) => {
    const rowHeight = 26;
    const labelWidth = Math.min(180, Math.max(110, Math.round(width * 0.32)));
    const fits = Math.floor((labelWidth - 12) / LABEL_CHAR_PX); // what the label column shows unclipped
    const height = MARGIN.top + items.length * rowHeight + 8;
    const svg = svgRoot(width, height, summary);
    const plot = { x: labelWidth, y: MARGIN.top, w: width - labelWidth - 56, h: items.length * rowHeight };
    const { max } = niceScale(Math.max(0, ...items.map((it) => it.values.reduce((a, v) => a + v, 0))));
    items.forEach((item, i) => {
      const y = plot.y + i * rowHeight;
      const total = item.values.reduce((a, v) => a + v, 0);
      const shown = item.label.length > fits ? `${item.label.slice(0, fits - 1)}…` : item.label;
      svg.append(s('text', { class: 'axis label', x: labelWidth - 8, y: y + rowHeight / 2 + 4, 'text-anchor': 'end' },
        shown, s('title', {}, item.label)));
      let x = plot.x;
      item.values.forEach((value, k) => {
        if (!value) return;
        const w = (plot.w * value) / max;
        svg.append(s('rect', {
          class: `bar series-${k}`, x, y: y + 4, width: Math.max(0.5, w), height: rowHeight - 8,
        }, s('title', {}, `${item.label}: ${format(value)} ${series[k]}`)));
        x += w;
      });
      svg.append(s('text', { class: 'axis', x: x + 6, y: y + rowHeight / 2 + 4 }, format(total)));
    });
    return h('div', {}, svg, legend(series));
  });
}

function legend(names) {
  return h('ul', { class: 'legend' }, names.map((name, k) =>
    h('li', {}, h('span', { class: `swatch series-${k}`, 'aria-hidden': 'true' }), name)));
}
