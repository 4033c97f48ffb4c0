// Building DOM safely: every value from the scheduler becomes a text node or an attribute value,
// never markup. Nothing in the visualiser assigns innerHTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * Create an element: el('a', {class: 'x', href, text, dataset: {id}, on: {click}}, child, ...).
 * Children may be nodes, strings (added as text), numbers, arrays, or null/false (skipped).
 */
export function el(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** The same as el() for SVG elements. */
export function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else if (name === 'class') node.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else if (name === 'on') for (const [type, fn] of Object.entries(value)) node.addEventListener(type, fn);
    else if (name === 'href') node.setAttribute('href', value);
    else if (name.startsWith('on')) throw new Error(`inline handler attribute ${name} is not allowed`);
    else if (name in PROPERTIES) node[name] = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

const PROPERTIES = { value: 1, checked: 1, disabled: 1, hidden: 1, selected: 1, open: 1 };

/** Append children (see el()) to node. */
export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace every child of node with children. */
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A URL fit for href: only http(s) links (tracking URLs come from tasks and could say javascript:). */
export function safeHttpUrl(value) {
  if (typeof value !== 'string' || !value) return null;
  try {
    const url = new URL(value, window.location.href);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/** Call fn at most once per `wait` ms, after the calls stop. */
export function debounce(fn, wait) {
  let timer = null;
  const debounced = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), wait);
  };
  debounced.cancel = () => clearTimeout(timer);
  return debounced;
}
