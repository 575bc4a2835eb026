// Small DOM helpers. Every text goes in through textContent or an attribute: the dashboard never
// builds HTML from strings, so nothing an upstream or a provider name says can become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name === 'class') el.setAttribute('class', value);
    else if (name === 'text') el.textContent = String(value);
    else if (name === 'dataset') Object.assign(el.dataset, value);
    else if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  return el;
}

function fill(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** An HTML element: ``h('button', {class: 'primary', onclick: f}, 'Save')``. */
export function h(tag, attrs, ...children) {
  return fill(apply(document.createElement(tag), attrs), children);
}

/** An SVG element (same shape as ``h``). */
export function s(tag, attrs, ...children) {
  return fill(apply(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function $(selector, root = document) {
  const el = root.querySelector(selector);
  if (!el) throw new Error(`missing element ${selector}`);
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

let uid = 0;
/** A fresh id for label/aria wiring. */
export function nextId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** Say something (role=status / aria-live region) and mark it an error or not. */
export function say(el, text, kind = 'info') {
  el.textContent = text || '';
  el.classList.toggle('error', kind === 'error');
  el.classList.toggle('ok', kind === 'ok');
}

const NUMBER = new Intl.NumberFormat();

export function num(value) {
  return value === null || value === undefined ? '—' : NUMBER.format(value);
}

export function ms(value) {
  if (value === null || value === undefined) return '—';
  return value >= 10000 ? `${(value / 1000).toFixed(1)} s` : `${NUMBER.format(Math.round(value))} ms`;
}

export function pct(value) {
  return value === null || value === undefined ? '—' : `${(value * 100).toFixed(1)} %`;
}

export function bytes(value) {
  if (value === null || value === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let v = value;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

export function clock(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** A definition list from ``[[term, value], ...]`` (value: text or a node). */
export function kv(pairs, cls = 'kv') {
  return h('dl', { class: cls }, pairs.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]));
}

/**
 * A table that turns into labelled cards on a narrow screen (each cell carries its column name).
 * ``columns``: [{label, cell: row => text|node, class?}]
 */
export function table(columns, rows, { caption, rowAttrs, compact = false } = {}) {
  return h(
    'table',
    { class: compact ? 'data compact' : 'data' },
    caption ? h('caption', { class: 'sr-only' }, caption) : null,
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
    h(
      'tbody',
      {},
      rows.map((row) =>
        h(
          'tr',
          rowAttrs ? rowAttrs(row) : {},
          columns.map((c) => h('td', { 'data-label': c.label, class: c.class }, c.cell(row))),
        ),
      ),
    ),
  );
}
