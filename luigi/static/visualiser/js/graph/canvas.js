// Drawing a laid-out graph as SVG, with pan (drag), zoom (wheel, buttons) and node clicks.
// Colours come from the .st-<STATUS> classes. Zoomed out, a box shows only its name, drawn large
// (.compact); further out, no text at all (.zoomed-out). Failed and disabled boxes carry a halo.

import { el, svg } from '../dom.js';
import { cssClass, DISABLED, FAILED, SEVERITY } from '../status.js';
import { TEXT_LEFT } from './model.js';

const MIN_SCALE = 0.02;
const MAX_SCALE = 3;
const DETAIL_SCALE = 0.6; // below this the parameters (11px) are too small to read: the name alone, large
const LABELS_BELOW_SCALE = 0.25; // below this even the large name is unreadable: no text at all
const CLICK_SLOP_PX = 4;
const READABLE_SCALE = 0.4; // a fit at least this large is the first view; else the failures, readable
const READING_SCALE = 0.85;
const FIT_SHARE = 0.97; // of the window a fitted graph fills (the layout has margins of its own)
const ALARMING = new Set([FAILED, DISABLED]);
const TEXT_KINDS = ['title', 'subtitle', 'label'];

export class GraphCanvas {
  constructor({ onNodeClick }) {
    this.onNodeClick = onNodeClick;
    this.view = { x: 0, y: 0, k: 1 };
    this.nodeElements = new Map();
    this.edgesByNode = new Map();
    this.size = { width: 0, height: 0 };
    this.viewport = svg('g', { class: 'viewport' });
    this.svg = svg('svg', { class: 'graph-svg', role: 'img', 'aria-label': 'Dependency graph' },
      svg('defs', {}, svg('marker', {
        id: 'arrow', viewBox: '0 0 10 10', refX: '9', refY: '5', markerWidth: '7', markerHeight: '7', orient: 'auto-start-reverse',
      }, svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }))),
      this.viewport);
    this.element = el('div', { class: 'graph-canvas' }, this.svg);
    this.fonts = null;
    this.alarms = []; // centres of the failed and disabled boxes
    this.firstViewShown = false; // the first view, not yet panned or zoomed: kept on a resize
    new ResizeObserver(() => {
      if (this.firstViewShown) this.firstView();
    }).observe(this.svg);
    this.listen();
  }

  /** measure(kind, text): the width in px of `text` in the font CSS gives a box's title, subtitle or label. */
  measurer() {
    const context = document.createElement('canvas').getContext('2d');
    const fonts = this.textFonts();
    const cache = new Map();
    return (kind, text) => {
      const key = `${kind}\u0000${text}`;
      if (!cache.has(key)) {
        context.font = fonts[kind];
        cache.set(key, context.measureText(text).width);
      }
      return cache.get(key);
    };
  }

  /** The canvas fonts of the node text classes, read once from the page's CSS. */
  textFonts() {
    if (this.fonts) return this.fonts;
    const probe = svg('g', { class: 'node', visibility: 'hidden' }, TEXT_KINDS.map((kind) => svg('text', { class: `node-${kind}`, text: 'x' })));
    this.svg.append(probe);
    const fonts = Object.fromEntries([...probe.children].map((text, i) => {
      const style = getComputedStyle(text);
      return [TEXT_KINDS[i], `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`];
    }));
    probe.remove();
    if (this.svg.isConnected) this.fonts = fonts; // off the page no CSS applies yet: read again next time
    return fonts;
  }

  /** Draw model at layout; keepView keeps the current pan and zoom (a live redraw). */
  draw(model, layout, { keepView = false } = {}) {
    this.nodeElements.clear();
    this.edgesByNode.clear();
    this.size = { width: layout.width, height: layout.height };
    const edgeLayer = svg('g', { class: 'edges' });
    const nodeLayer = svg('g', { class: 'nodes' });
    model.edges.forEach(([from, to], i) => {
      const path = svg('path', { class: 'edge', d: pathFor(layout.routes[i] || []), 'marker-end': 'url(#arrow)', dataset: { from, to } });
      edgeLayer.append(path);
      for (const end of [from, to]) {
        if (!this.edgesByNode.has(end)) this.edgesByNode.set(end, []);
        this.edgesByNode.get(end).push(path);
      }
    });
    this.rootAt = null;
    this.alarms = [];
    for (const node of model.nodes) {
      const [x, y] = layout.positions[node.id] || [0, 0];
      if (node.root) this.rootAt = [x, y];
      if (alarming(node)) this.alarms.push([x, y]);
      const group = nodeElement(node, x, y);
      this.nodeElements.set(node.id, group);
      nodeLayer.append(group);
    }
    this.alarms.sort((a, b) => a[1] - b[1] || a[0] - b[0]); // reading order, for nextFailure
    this.alarmAt = -1;
    this.viewport.replaceChildren(edgeLayer, nodeLayer);
    if (this.selected) this.select(this.selected);
    if (keepView) this.apply();
    else this.firstView();
  }

  /** Redraw boxes whose status or counts changed, in place (same shape: no layout needed). */
  recolour(model) {
    for (const node of model.nodes) {
      const group = this.nodeElements.get(node.id);
      if (!group || (group.dataset.status === node.status && group.dataset.subtitle === node.subtitle)) continue;
      const [x, y] = group.dataset.center.split(',').map(Number);
      const fresh = nodeElement(node, x, y);
      fresh.classList.toggle('selected', group.classList.contains('selected'));
      this.nodeElements.set(node.id, fresh);
      group.replaceWith(fresh);
    }
  }

  /** Highlight one node and its edges (null clears). */
  select(id) {
    for (const marked of this.viewport.querySelectorAll('.selected, .edge-hl')) marked.classList.remove('selected', 'edge-hl');
    this.selected = id;
    const group = id ? this.nodeElements.get(id) : null;
    if (!group) return;
    group.classList.add('selected');
    for (const path of this.edgesByNode.get(id) || []) path.classList.add('edge-hl');
  }

  clear() {
    this.firstViewShown = false;
    this.alarms = [];
    this.viewport.replaceChildren();
    this.nodeElements.clear();
    this.edgesByNode.clear();
  }

  fit() {
    const box = this.svg.getBoundingClientRect();
    const { width, height } = this.size;
    if (!width || !height || !box.width || !box.height) return;
    const k = clamp(Math.min(box.width / width, box.height / height) * FIT_SHARE, MIN_SCALE, 1.4);
    this.view = { k, x: (box.width - width * k) / 2, y: (box.height - height * k) / 2 };
    this.apply();
  }

  /** Fit the graph when it stays readable; otherwise the failures (or else the root) at a readable size. */
  firstView() {
    this.fit();
    if (this.view.k < READABLE_SCALE && !this.focusFailures() && this.rootAt) this.centreOn(this.rootAt, READING_SCALE);
    this.firstViewShown = true;
  }

  /** Centre on the biggest cluster of failed or disabled boxes at reading size; false when there are none. */
  focusFailures() {
    if (!this.alarms.length) return false;
    const box = this.svg.getBoundingClientRect();
    const k = READING_SCALE;
    const reach = [box.width / k / 2, box.height / k / 2];
    const sample = this.alarms.slice(0, 200);
    let best = [];
    for (const [cx, cy] of sample) {
      const near = sample.filter(([x, y]) => Math.abs(x - cx) < reach[0] * 0.8 && Math.abs(y - cy) < reach[1] * 0.8);
      if (near.length > best.length) best = near;
    }
    const mean = (i) => best.reduce((sum, point) => sum + point[i], 0) / best.length;
    this.centreOn([mean(0), mean(1)], k);
    return true;
  }

  /** Centre on the next failed or disabled box (top to bottom), at least at reading size; false if none. */
  nextFailure() {
    if (!this.alarms.length) return false;
    this.alarmAt = (this.alarmAt + 1) % this.alarms.length;
    this.centreOn(this.alarms[this.alarmAt], Math.max(this.view.k, READING_SCALE));
    return true;
  }

  centreOn([x, y], k) {
    const box = this.svg.getBoundingClientRect();
    this.view = { k, x: box.width / 2 - x * k, y: box.height / 2 - y * k };
    this.apply();
  }

  zoomBy(factor, cx, cy) {
    const box = this.svg.getBoundingClientRect();
    const px = cx ?? box.width / 2;
    const py = cy ?? box.height / 2;
    const k = clamp(this.view.k * factor, MIN_SCALE, MAX_SCALE);
    const ratio = k / this.view.k;
    this.view = { k, x: px - (px - this.view.x) * ratio, y: py - (py - this.view.y) * ratio };
    this.apply();
  }

  apply() {
    this.firstViewShown = false;
    const { x, y, k } = this.view;
    this.viewport.setAttribute('transform', `translate(${x.toFixed(1)},${y.toFixed(1)}) scale(${k.toFixed(4)})`);
    this.svg.classList.toggle('compact', k < DETAIL_SCALE);
    this.svg.classList.toggle('zoomed-out', k < LABELS_BELOW_SCALE);
    this.svg.dataset.scale = k.toFixed(4);
  }

  listen() {
    let drag = null;
    this.svg.addEventListener('wheel', (event) => {
      event.preventDefault();
      const box = this.svg.getBoundingClientRect();
      this.zoomBy(Math.exp(-event.deltaY * 0.0015), event.clientX - box.left, event.clientY - box.top);
    }, { passive: false });
    this.svg.addEventListener('pointerdown', (event) => {
      if (event.button !== 0) return;
      const node = event.target.closest ? event.target.closest('.node') : null;
      drag = { x: event.clientX, y: event.clientY, view: { ...this.view }, node, moved: false };
      this.svg.setPointerCapture(event.pointerId);
    });
    this.svg.addEventListener('pointermove', (event) => {
      if (!drag) return;
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < CLICK_SLOP_PX) return;
      drag.moved = true;
      this.svg.classList.add('panning');
      this.view = { ...drag.view, x: drag.view.x + dx, y: drag.view.y + dy };
      this.apply();
    });
    const end = () => {
      if (drag && !drag.moved && drag.node) this.onNodeClick(drag.node.dataset.id);
      drag = null;
      this.svg.classList.remove('panning');
    };
    this.svg.addEventListener('pointerup', end);
    this.svg.addEventListener('pointercancel', () => {
      drag = null;
      this.svg.classList.remove('panning');
    });
  }
}

function nodeElement(node, x, y) {
  const { width: w, height: h } = node;
  const left = String(TEXT_LEFT);
  const group = svg('g', {
    class: ['node', `node-${node.kind}`, cssClass(node.status), node.root && 'root', alarming(node) && 'alarm'],
    transform: `translate(${(x - w / 2).toFixed(1)},${(y - h / 2).toFixed(1)})`,
    dataset: { id: node.id, status: node.status, subtitle: node.subtitle, center: `${x},${y}`, ...(node.kind === 'family' && { family: node.family }) },
  },
  svg('title', { text: node.tooltip }),
  alarming(node) && svg('rect', { class: 'node-halo', x: '-5', y: '-5', width: String(w + 10), height: String(h + 10), rx: '11', ry: '11' }),
  svg('rect', { class: 'node-box', width: String(w), height: String(h), rx: '7', ry: '7' }),
  svg('rect', { class: 'node-stripe', width: '5', height: String(h), rx: '2' }),
  svg('text', { class: 'node-title', x: left, y: '17', text: node.title }),
  svg('text', { class: 'node-subtitle', x: left, y: '31', text: node.subtitle }),
  svg('text', { class: 'node-label', x: left, y: String(node.kind === 'family' ? h / 2 - 3 : h / 2), 'dominant-baseline': 'central', text: node.label }));
  if (node.kind === 'family') group.append(statusBar(node, w, h));
  return group;
}

/** Whether a box needs attention: failed or disabled, or a family holding such tasks. */
function alarming(node) {
  if (node.kind === 'family') return [...ALARMING].some((status) => node.statuses[status]);
  return ALARMING.has(node.status);
}

/** The mix of statuses in a family box, as a thin stacked bar along its bottom. */
function statusBar(node, w, h) {
  const bar = svg('g', { class: 'status-bar' });
  const inner = w - 18;
  let x = 13;
  for (const status of SEVERITY) {
    const n = node.statuses[status] || 0;
    if (!n) continue;
    const part = (inner * n) / node.total;
    bar.append(svg('rect', { class: cssClass(status), x: x.toFixed(1), y: String(h - 11), width: Math.max(1, part).toFixed(1), height: '5' }));
    x += part;
  }
  return bar;
}

/** A smooth path through dagre's route points. */
function pathFor(points) {
  if (points.length < 2) return '';
  const [x0, y0] = points[0];
  let d = `M${x0.toFixed(1)},${y0.toFixed(1)}`;
  for (let i = 1; i < points.length - 1; i += 1) {
    const [x, y] = points[i];
    const [nx, ny] = points[i + 1];
    const mx = (x + nx) / 2;
    const my = (y + ny) / 2;
    d += ` Q${x.toFixed(1)},${y.toFixed(1)} ${mx.toFixed(1)},${my.toFixed(1)}`;
  }
  const [xn, yn] = points[points.length - 1];
  return `${d} L${xn.toFixed(1)},${yn.toFixed(1)}`;
}

function clamp(value, low, high) {
  return Math.min(high, Math.max(low, value));
}
