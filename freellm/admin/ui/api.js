// The admin API client. The admin key lives in sessionStorage (this tab only, gone when it closes) and
// goes out only as an Authorization header to this origin.

const STORAGE_KEY = 'freellm.adminKey';

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code || null;
  }

  /** The route does not exist on this gateway (yet): an older gateway, or a feature not built in. */
  get missing() {
    return this.status === 404 || this.status === 405;
  }
}

export const session = {
  get key() {
    try {
      return sessionStorage.getItem(STORAGE_KEY);
    } catch {
      return null;
    }
  },
  set(key) {
    sessionStorage.setItem(STORAGE_KEY, key);
  },
  clear() {
    try {
      sessionStorage.removeItem(STORAGE_KEY);
    } catch {
      // storage disabled: nothing was kept
    }
  },
};

let unauthorized = () => {};

/** Called once the stored key stops working (a 401 on any call): the app signs out. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

async function parse(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * Call the admin API: ``api('/admin/chain', {method: 'PUT', body: {...}})`` → the decoded JSON.
 * Throws ApiError (status 0: the gateway did not answer) with the API's own error message.
 * ``key`` overrides the stored key (sign-in checks a key before keeping it).
 */
export async function api(path, { method = 'GET', body, key, signal } = {}) {
  const useKey = key ?? session.key ?? '';
  const headers = { Authorization: `Bearer ${useKey}`, Accept: 'application/json' };
  const init = { method, headers, cache: 'no-store', credentials: 'omit', signal };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err && err.name === 'AbortError') throw err;
    throw new ApiError(0, 'The gateway did not answer. Is it running?', 'network');
  }
  const data = await parse(response);
  if (!response.ok) {
    const message = (data && data.error && data.error.message) || `HTTP ${response.status}`;
    const error = new ApiError(response.status, message, data && data.error && data.error.code);
    if (response.status === 401 && key === undefined) unauthorized(error);
    throw error;
  }
  return data;
}

/** ``GET /health`` (no key needed). */
export async function health() {
  try {
    const response = await fetch('/health', { cache: 'no-store', credentials: 'omit' });
    return response.ok;
  } catch {
    return false;
  }
}
