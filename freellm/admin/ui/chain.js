// The chain `auto` tries: reordered by drag and drop, by each route's up/down buttons, or from the
// keyboard on its handle (Space picks up, arrows move, Space drops, Escape puts back; Alt+arrow moves at
// once). Nothing changes on the gateway until "Save order" (PUT /admin/chain).

import { api } from './api.js';
import { $, clear, h, say } from './dom.js';

export function createChain(shared) {
  const list = $('#chain-list');
  const saveButton = $('#chain-save');
  const revertButton = $('#chain-revert');
  const status = $('#chain-status');
  const announce = $('#chain-announce');
  const addSelect = $('#chain-add');
  const addButton = $('#chain-add-button');

  let saved = []; // the chain as the gateway has it
  let order = []; // the chain as edited here
  let grabbed = null; // {route, from} while a route is picked up from the keyboard
  let dragging = null;
  let rendering = false; // the list is being rebuilt: a blur then is no user's doing

  const dirty = () => order.length !== saved.length || order.some((r, i) => r !== saved[i]);

  function tellPosition(route) {
    announce.textContent = `${route}: position ${order.indexOf(route) + 1} of ${order.length}.`;
  }

  function move(route, to, { focus } = {}) {
    const from = order.indexOf(route);
    if (from < 0) return;
    const target = Math.max(0, Math.min(order.length - 1, to));
    if (target !== from) {
      order.splice(from, 1);
      order.splice(target, 0, route);
    }
    render(focus ? { route, part: focus } : undefined);
    tellPosition(route);
  }

  function routeItem(route, index) {
    const last = order.length - 1;
    const isGrabbed = grabbed && grabbed.route === route;
    const handle = h('button', {
      type: 'button',
      class: 'handle',
      'data-part': 'handle',
      'aria-label': `Reorder ${route}, position ${index + 1} of ${order.length}`,
      'aria-describedby': 'chain-help',
      'aria-pressed': isGrabbed ? 'true' : 'false',
      onkeydown: (event) => onHandleKey(event, route),
      onclick: (event) => {
        // Space/Enter arrive here as clicks too: toggle picking the route up
        event.preventDefault();
        toggleGrab(route);
      },
      onblur: () => {
        // tabbing away drops the route where it is (no re-render: focus is on its way elsewhere)
        if (rendering || !grabbed || grabbed.route !== route) return;
        grabbed = null;
        handle.setAttribute('aria-pressed', 'false');
        handle.closest('li').classList.remove('grabbed');
        announce.textContent = `${route} dropped at position ${order.indexOf(route) + 1} of ${order.length}.`;
      },
    }, h('span', { 'aria-hidden': 'true' }, '⠿'));
    const up = h('button', {
      type: 'button', class: 'icon', 'data-part': 'up', 'aria-label': `Move ${route} up`,
      'aria-disabled': index === 0 ? 'true' : 'false',
      onclick: () => index > 0 && move(route, index - 1, { focus: 'up' }),
    }, h('span', { 'aria-hidden': 'true' }, '▲'));
    const down = h('button', {
      type: 'button', class: 'icon', 'data-part': 'down', 'aria-label': `Move ${route} down`,
      'aria-disabled': index === last ? 'true' : 'false',
      onclick: () => index < last && move(route, index + 1, { focus: 'down' }),
    }, h('span', { 'aria-hidden': 'true' }, '▼'));
    const remove = h('button', {
      type: 'button', class: 'icon danger', 'data-part': 'remove', 'aria-label': `Remove ${route} from the chain`,
      onclick: () => {
        order = order.filter((r) => r !== route);
        render();
        announce.textContent = `${route} removed from the chain (not saved yet).`;
        const next = list.querySelector('[data-part="handle"]');
        (next || addSelect).focus();
      },
    }, h('span', { 'aria-hidden': 'true' }, '✕'));

    const item = h('li', {
      class: `chain-item${isGrabbed ? ' grabbed' : ''}`,
      draggable: 'true',
      'data-route': route,
      ondragstart: (event) => {
        dragging = route;
        item.classList.add('dragging');
        event.dataTransfer.effectAllowed = 'move';
        event.dataTransfer.setData('text/plain', route);
      },
      ondragend: () => {
        dragging = null;
        item.classList.remove('dragging');
        for (const el of list.querySelectorAll('.drop-before, .drop-after')) el.classList.remove('drop-before', 'drop-after');
      },
      ondragover: (event) => {
        if (!dragging || dragging === route) return;
        event.preventDefault();
        event.dataTransfer.dropEffect = 'move';
        const box = item.getBoundingClientRect();
        const after = event.clientY > box.top + box.height / 2;
        item.classList.toggle('drop-after', after);
        item.classList.toggle('drop-before', !after);
      },
      ondragleave: () => item.classList.remove('drop-before', 'drop-after'),
      ondrop: (event) => {
        event.preventDefault();
        const moving = dragging || event.dataTransfer.getData('text/plain');
        if (!moving || moving === route || !order.includes(moving)) return;
        const box = item.getBoundingClientRect();
        const after = event.clientY > box.top + box.height / 2;
        const without = order.filter((r) => r !== moving);
        const at = without.indexOf(route) + (after ? 1 : 0);
        without.splice(at, 0, moving);
        order = without;
        dragging = null;
        render({ route: moving, part: 'handle' });
        tellPosition(moving);
      },
    },
    handle,
    h('span', { class: 'pos', 'aria-hidden': 'true' }, String(index + 1)),
    h('code', { class: 'route' }, route),
    h('span', { class: 'item-actions' }, up, down, remove));
    return item;
  }

  function toggleGrab(route) {
    if (grabbed && grabbed.route === route) drop(route);
    else {
      grabbed = { route, from: order.indexOf(route) };
      render({ route, part: 'handle' });
      announce.textContent = `${route} picked up, position ${grabbed.from + 1} of ${order.length}. `
        + 'Arrow keys move it, Space drops it, Escape cancels.';
    }
  }

  function drop(route) {
    grabbed = null;
    render({ route, part: 'handle' });
    announce.textContent = `${route} dropped at position ${order.indexOf(route) + 1} of ${order.length}.`;
  }

  function onHandleKey(event, route) {
    const index = order.indexOf(route);
    const isGrabbed = grabbed && grabbed.route === route;
    const step = { ArrowUp: -1, ArrowDown: 1 }[event.key];
    if (step && (isGrabbed || event.altKey)) {
      event.preventDefault();
      move(route, index + step, { focus: 'handle' });
    } else if ((event.key === 'Home' || event.key === 'End') && isGrabbed) {
      event.preventDefault();
      move(route, event.key === 'Home' ? 0 : order.length - 1, { focus: 'handle' });
    } else if (event.key === 'Escape' && isGrabbed) {
      event.preventDefault();
      const from = grabbed.from;
      grabbed = null;
      move(route, from, { focus: 'handle' });
      announce.textContent = `Move cancelled: ${route} is back at position ${from + 1}.`;
    }
  }

  function routesKnown() {
    const known = [];
    for (const p of shared.providers) {
      if (!p.enabled) continue;
      for (const m of p.models) known.push(`${p.name}/${m.id}`);
    }
    return known;
  }

  function renderAdd() {
    const missing = routesKnown().filter((r) => !order.includes(r));
    clear(addSelect).append(...missing.map((r) => h('option', { value: r }, r)));
    addSelect.disabled = !missing.length;
    addButton.disabled = !missing.length;
    if (!missing.length) addSelect.append(h('option', { value: '' }, 'Every route is in the chain'));
  }

  function render(focus) {
    rendering = true;
    try {
      paint(focus);
    } finally {
      rendering = false;
    }
  }

  function paint(focus) {
    clear(list);
    if (!order.length) list.append(h('li', { class: 'empty' }, 'The chain is empty: auto has nothing to try.'));
    order.forEach((route, i) => list.append(routeItem(route, i)));
    const changed = dirty();
    saveButton.disabled = !changed || !order.length;
    revertButton.disabled = !changed;
    if (changed) say(status, 'Unsaved changes.');
    else if (status.textContent === 'Unsaved changes.') say(status, '');
    renderAdd();
    if (focus) {
      const item = [...list.children].find((li) => li.dataset.route === focus.route);
      const el = item && item.querySelector(`[data-part="${focus.part}"]`);
      if (el) el.focus();
    }
  }

  async function load() {
    try {
      const [chain] = await Promise.all([api('/admin/chain'), shared.refreshProviders().catch(() => null)]);
      saved = chain.chain.slice();
      order = chain.chain.slice();
      grabbed = null;
      render();
    } catch (error) {
      say(status, `Could not load the chain: ${error.message}`, 'error');
    }
  }

  saveButton.addEventListener('click', async () => {
    saveButton.disabled = true;
    say(status, 'Saving…');
    try {
      const result = await api('/admin/chain', { method: 'PUT', body: { chain: order } });
      saved = result.chain.slice();
      order = result.chain.slice();
      render();
      say(status, `Saved. auto now tries ${order[0] || 'nothing'} first.`, 'ok');
    } catch (error) {
      saveButton.disabled = false;
      say(status, `Could not save the chain: ${error.message}`, 'error');
    }
  });
  revertButton.addEventListener('click', () => {
    order = saved.slice();
    grabbed = null;
    render();
    say(status, 'Changes reverted.');
  });
  addButton.addEventListener('click', () => {
    const route = addSelect.value;
    if (!route || order.includes(route)) return;
    order.push(route);
    render({ route, part: 'handle' });
    announce.textContent = `${route} added at the end of the chain (not saved yet).`;
  });

  return {
    async show() {
      await load();
    },
    hide() {
      grabbed = null;
    },
  };
}
