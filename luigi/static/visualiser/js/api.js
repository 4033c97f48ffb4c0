// The only way the visualiser talks to luigid: its JSON API (/api/<method>, {"response": ...}).
//
// Every call is a POST with the form field data=<json kwargs> (luigid answers POST for every method,
// and only POST for the ones that change state). Calls made in the same turn of the event loop (a
// refresh asks for counts, a page of tasks and the pause state at once) travel together in one
// /api/_batch request, so ten open pages cost the scheduler ten requests per refresh, not thirty.
// When luigid asks for a bearer token (401), the page asks the user once and keeps the token in
// sessionStorage for the rest of the session.

const TOKEN_KEY = 'luigi.visualiser.token';

/** The scheduler answered with an error (bad request, refused, failed inside). */
export class ApiError extends Error {
  constructor(method, status, message) {
    super(message);
    this.name = 'ApiError';
    this.method = method;
    this.status = status;
  }
}

/** The scheduler could not be reached at all (network error, proxy says it is down). */
export class UnreachableError extends Error {
  constructor(method, cause) {
    super(`The scheduler is not answering (${method}: ${cause})`);
    this.name = 'UnreachableError';
    this.method = method;
  }
}

/** Status codes that mean "nobody is answering behind this address" rather than a refusal. */
const GATEWAY_DOWN = new Set([502, 503, 504]);
/** How a server without /api/_batch answers it: then calls go one by one. */
const NO_BATCH_ENDPOINT = new Set([404, 405, 501]);

export class LuigiApi {
  /**
   * @param {string} base  the API root relative to the page (index.html lives at /static/visualiser/)
   * @param {object} hooks {askToken(reason) -> Promise<string|null>, reachability(bool)}
   */
  constructor(base = '../../api', hooks = {}) {
    this.base = base.replace(/\/$/, '');
    this.askToken = hooks.askToken || (async () => null);
    this.reachability = hooks.reachability || (() => {});
    this.pendingTokenRequest = null;
    this.queue = [];
    this.flushTimer = null;
    this.batching = true;
  }

  get token() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null; // storage disabled: the user is asked again after a reload
    }
  }

  set token(value) {
    try {
      if (value) window.sessionStorage.setItem(TOKEN_KEY, value);
      else window.sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage disabled: nothing to keep */
    }
  }

  /** Call one RPC method and return its response (ApiError / UnreachableError otherwise). */
  call(method, kwargs = {}) {
    return new Promise((resolve, reject) => {
      this.queue.push({ method, kwargs, resolve, reject });
      if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), 0);
    });
  }

  /** Send what was queued: one request for one call, one /api/_batch request for several. */
  async flush() {
    const calls = this.queue;
    this.queue = [];
    this.flushTimer = null;
    if (calls.length > 1 && this.batching) {
      try {
        const entries = await this.request('_batch', { calls: calls.map(({ method, kwargs }) => ({ method, kwargs })) });
        calls.forEach((call, i) => settle(call, entries[i]));
        return;
      } catch (error) {
        if (!(error instanceof ApiError && NO_BATCH_ENDPOINT.has(error.status))) {
          calls.forEach((call) => call.reject(error));
          return;
        }
        this.batching = false;
      }
    }
    for (const call of calls) this.request(call.method, call.kwargs).then(call.resolve, call.reject);
  }

  /** One HTTP request, asking for a token (and retrying) while luigid answers 401. */
  async request(method, kwargs) {
    for (;;) {
      const sentToken = this.token;
      const reply = await this.send(method, kwargs, sentToken);
      if (reply.status !== 401) return this.unwrap(method, reply);
      const token = await this.requestToken(sentToken ? 'refused' : 'required', sentToken);
      if (!token) throw new ApiError(method, 401, 'The scheduler needs an access token.');
    }
  }

  async send(method, kwargs, token) {
    const headers = { 'Content-Type': 'application/x-www-form-urlencoded;charset=UTF-8', Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch(`${this.base}/${encodeURIComponent(method)}`, {
        method: 'POST',
        headers,
        body: `data=${encodeURIComponent(JSON.stringify(kwargs))}`,
        cache: 'no-store',
        credentials: 'same-origin',
      });
    } catch (error) {
      this.reachability(false);
      throw new UnreachableError(method, error.message || error);
    }
    if (GATEWAY_DOWN.has(response.status)) {
      this.reachability(false);
      throw new UnreachableError(method, `HTTP ${response.status}`);
    }
    this.reachability(true);
    let payload = null;
    try {
      payload = await response.json();
    } catch {
      payload = null;
    }
    return { status: response.status, ok: response.ok, payload };
  }

  unwrap(method, reply) {
    if (!reply.ok) {
      const message = reply.payload && typeof reply.payload.error === 'string' ? reply.payload.error : `HTTP ${reply.status}`;
      throw new ApiError(method, reply.status, message);
    }
    if (!reply.payload || typeof reply.payload !== 'object' || !('response' in reply.payload)) {
      throw new ApiError(method, reply.status, `${method}: the scheduler's answer has no "response"`);
    }
    return reply.payload.response;
  }

  /** Ask the user for a token once, however many calls were refused at the same time. */
  async requestToken(reason, refusedToken) {
    if (this.token && this.token !== refusedToken) return this.token; // another call already got one
    if (!this.pendingTokenRequest) {
      this.pendingTokenRequest = (async () => {
        try {
          const token = await this.askToken(reason);
          this.token = token || null;
          return token || null;
        } finally {
          this.pendingTokenRequest = null;
        }
      })();
    }
    return this.pendingTokenRequest;
  }
}

/** Resolve or reject one call of a batch from its entry ({response} or {error, status}). */
function settle(call, entry) {
  if (entry && typeof entry === 'object' && 'response' in entry) call.resolve(entry.response);
  else call.reject(new ApiError(call.method, entry && entry.status, (entry && entry.error) || `${call.method}: no answer in the batch`));
}
