// The page address: the view and its options live in the hash, as in Luigi's visualiser
// (#tab=graph&taskId=<id>&hideDone=1&invert=0), so every view can be bookmarked.

/** "#tab=graph&taskId=A%20B" -> {tab: 'graph', taskId: 'A B'} ('+' stays '+': task ids contain it). */
export function parseHash(hash) {
  const params = {};
  const body = String(hash || '').replace(/^#/, '');
  if (!body) return params;
  for (const part of body.split('&')) {
    if (!part) continue;
    const at = part.indexOf('=');
    const key = decodePart(at < 0 ? part : part.slice(0, at));
    params[key] = at < 0 ? '' : decodePart(part.slice(at + 1));
  }
  return params;
}

function decodePart(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a hand-edited address with a stray '%': keep it as typed
  }
}

/** The inverse of parseHash: tab first, then the other keys; empty values are left out. */
export function formatHash(params) {
  const keys = Object.keys(params).filter((k) => params[k] !== undefined && params[k] !== null && params[k] !== '');
  keys.sort((a, b) => (a === 'tab' ? -1 : b === 'tab' ? 1 : 0));
  return `#${keys.map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(String(params[k]))}`).join('&')}`;
}

export class Router {
  /** onChange(params) runs on every address change, including the ones go() makes. */
  constructor(onChange) {
    this.onChange = onChange;
    window.addEventListener('hashchange', () => this.onChange(this.params));
  }

  get params() {
    return parseHash(window.location.hash);
  }

  /** Go to exactly these params; replace=true edits the current history entry instead of adding one. */
  go(params, { replace = false } = {}) {
    const hash = formatHash(params);
    if (hash === window.location.hash || (hash === '#' && !window.location.hash)) return;
    if (replace) {
      window.history.replaceState(null, '', hash);
      this.onChange(this.params);
    } else {
      window.location.hash = hash;
    }
  }

  /** Change some params of the current address (null/'' removes a key). */
  update(changes, options) {
    this.go({ ...this.params, ...changes }, options);
  }

  /** A link target for params (for <a href>). */
  href(params) {
    return formatHash(params);
  }
}
