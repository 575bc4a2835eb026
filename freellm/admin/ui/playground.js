// Playground: one chat request through the gateway (POST /v1/chat/completions) with a client key typed
// here, the answer (streamed or not) and the routing headers the gateway set on it. Same origin, so
// every response header is readable.

import { $, clear, h, ms, say } from './dom.js';

const ROUTING_HEADERS = [
  ['X-Routed-Via', 'Routed via'],
  ['X-Fallback-Attempts', 'Fallback attempts'],
  ['X-Fallback-Trail', 'Fallback trail'],
  ['X-Fallback-Detail', 'Fallback detail'],
  ['X-FreeLLM-Cache', 'Cache'],
  ['X-FreeLLM-Compress', 'Compression'],
  ['X-FreeLLM-Session', 'Session'],
  ['X-Request-ID', 'Request id'],
];

export function createPlayground(shared) {
  const form = $('#pg-form');
  const keyInput = $('#pg-key');
  const model = $('#pg-model');
  const models = $('#pg-models');
  const system = $('#pg-system');
  const message = $('#pg-message');
  const stream = $('#pg-stream');
  const maxTokens = $('#pg-max');
  const send = $('#pg-send');
  const stop = $('#pg-stop');
  const status = $('#pg-status');
  const answer = $('#pg-answer');
  const reasoning = $('#pg-reasoning');
  const headersList = $('#pg-headers');
  let controller = null;

  function showHeaders(response, elapsed) {
    const rows = [['HTTP status', String(response.status)], ['Time', ms(elapsed)]];
    for (const [name, label] of ROUTING_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null) rows.push([label, value, name]);
    }
    clear(headersList).append(...rows.flatMap(([label, value, name]) => [
      h('dt', {}, label, name ? h('span', { class: 'muted small header-name' }, ` ${name}`) : null),
      h('dd', { 'data-header': name || label }, h('code', {}, value)),
    ]));
  }

  function errorText(data, response) {
    return (data && data.error && data.error.message) || `HTTP ${response.status}`;
  }

  async function readStream(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let text = '';
    let thinking = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, cut).replace(/\r$/, '');
        buffer = buffer.slice(cut + 1);
        if (!line.startsWith('data:')) continue;
        const payload = line.slice(5).trim();
        if (payload === '[DONE]') return { text, thinking };
        let frame;
        try {
          frame = JSON.parse(payload);
        } catch {
          continue;
        }
        if (frame.error) throw new Error(frame.error.message || 'stream error');
        const delta = frame.choices && frame.choices[0] && frame.choices[0].delta;
        if (!delta) continue;
        if (delta.content) {
          text += delta.content;
          answer.textContent = text;
        }
        const r = delta.reasoning_content || delta.reasoning;
        if (r) {
          thinking += r;
          reasoning.hidden = false;
          reasoning.textContent = thinking;
        }
      }
    }
    return { text, thinking };
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = keyInput.value.trim();
    if (!key) {
      say(status, 'Type a client key first.', 'error');
      keyInput.focus();
      return;
    }
    if (!message.value.trim()) {
      say(status, 'Type a message first.', 'error');
      message.focus();
      return;
    }
    const messages = [];
    if (system.value.trim()) messages.push({ role: 'system', content: system.value });
    messages.push({ role: 'user', content: message.value });
    const body = { model: model.value.trim() || 'auto', messages, stream: stream.checked };
    const max = parseInt(maxTokens.value, 10);
    if (max > 0) body.max_tokens = max;

    controller = new AbortController();
    send.disabled = true;
    stop.hidden = false;
    answer.textContent = '';
    answer.setAttribute('aria-busy', 'true');
    reasoning.hidden = true;
    reasoning.textContent = '';
    clear(headersList);
    say(status, 'Sending…');
    const started = performance.now();
    try {
      const response = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        cache: 'no-store',
        credentials: 'omit',
        signal: controller.signal,
      });
      showHeaders(response, performance.now() - started);
      const streamed = (response.headers.get('Content-Type') || '').includes('text/event-stream');
      if (!response.ok) {
        const data = await response.json().catch(() => null);
        say(status, `The gateway answered ${response.status}: ${errorText(data, response)}`, 'error');
      } else if (streamed) {
        say(status, 'Streaming…');
        const { text } = await readStream(response);
        say(status, `Done in ${ms(performance.now() - started)}${text ? '' : ' (empty answer)'}.`, 'ok');
      } else {
        const data = await response.json();
        const choice = data.choices && data.choices[0];
        const msg = (choice && choice.message) || {};
        answer.textContent = msg.content || '';
        const thinking = msg.reasoning_content || msg.reasoning;
        if (thinking) {
          reasoning.hidden = false;
          reasoning.textContent = thinking;
        }
        const usage = data.usage ? ` · ${data.usage.prompt_tokens} tokens in, ${data.usage.completion_tokens} out` : '';
        say(status, `Done in ${ms(performance.now() - started)}${usage}.`, 'ok');
      }
    } catch (error) {
      if (error && error.name === 'AbortError') say(status, 'Stopped.');
      else say(status, `The request failed: ${error.message}`, 'error');
    } finally {
      answer.removeAttribute('aria-busy');
      send.disabled = false;
      stop.hidden = true;
      controller = null;
    }
  });

  stop.addEventListener('click', () => {
    if (controller) controller.abort();
    send.focus();
  });

  function renderModels() {
    const ids = new Set(['auto']);
    for (const p of shared.providers) for (const m of p.models) ids.add(m.id);
    clear(models).append(...[...ids].map((id) => h('option', { value: id })));
  }

  return {
    show() {
      renderModels();
    },
    hide() {},
  };
}
