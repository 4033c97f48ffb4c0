// The task-history chart: a family's runs over time as an SVG of durations, failures marked, and the
// error of each failed run below it. Shared by the History view (views/history.js) and luigid's
// /tasklist/<family> page (views/history-page.js). Data comes from /history/api/runs/<family>; every
// value becomes a text node or an attribute through dom.js, never markup.

import { el, replace, svg } from '../dom.js';
import * as format from '../format.js';

const WIDTH = 760;
const HEIGHT = 280;
const MARGIN = { top: 16, right: 20, bottom: 44, left: 76 };
const TOKEN_KEY = 'luigi.visualiser.token'; // where the visualiser keeps luigid's bearer token

/** The JSON URL of a family's runs, relative to the page through root (the path to luigid's root). */
export function runsUrl(root, family) {
  return `${root}history/api/runs/${encodeURIComponent(family)}`;
}

/** The page of one history record. */
export function recordUrl(root, recordId) {
  return `${root}history/by_id/${encodeURIComponent(recordId)}`;
}

/** GET a history JSON URL (with the visualiser's token, if it has one); Error with luigid's message. */
export async function fetchHistory(url, token = storedToken()) {
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(url, { headers, cache: 'no-store', credentials: 'same-origin' });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = new Error(body && typeof body.error === 'string' ? body.error : `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function storedToken() {
  try {
    return window.sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

/** Load css/history.css into the page once (the visualiser's own stylesheet does not carry it). */
export function ensureStylesheet(href) {
  if (document.querySelector('link[data-history-css]')) return;
  document.head.append(el('link', { rel: 'stylesheet', href, dataset: { historyCss: '1' } }));
}

/** Seconds as text, with decimals below a minute (no-op tasks take milliseconds). */
function seconds(value) {
  return value < 60 ? `${value.toFixed(value < 10 ? 2 : 1)} s` : format.duration(value);
}

function runDuration(run) {
  return typeof run.duration === 'number' ? seconds(run.duration) : 'no duration';
}

function runTime(run) {
  return typeof run.at_ms === 'number' ? format.timestamp(run.at_ms / 1000) : 'unknown time';
}

function runLabel(run) {
  const parts = [run.status, runTime(run), runDuration(run)];
  if (run.retry) parts.push(`retry ${run.retry}`);
  if (run.host) parts.push(`on ${run.host}`);
  if (run.exception_type) parts.push(run.exception_type);
  return parts.join(' · ');
}

/** Time on x (by order when every run has the same time), duration on y from 0 at the bottom. */
function scales(runs) {
  const times = runs.map((r) => r.at_ms).filter((t) => typeof t === 'number');
  const minT = times.length ? Math.min(...times) : 0;
  const maxT = times.length ? Math.max(...times) : 0;
  const maxD = Math.max(0.001, ...runs.map((r) => r.duration || 0)) * 1.1;
  const innerW = WIDTH - MARGIN.left - MARGIN.right;
  const innerH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const byOrder = (index) => MARGIN.left + innerW * (runs.length === 1 ? 0.5 : index / (runs.length - 1));
  return {
    minT,
    maxT,
    maxD,
    x: (t, index) => (maxT === minT || typeof t !== 'number' ? byOrder(index) : MARGIN.left + (innerW * (t - minT)) / (maxT - minT)),
    y: (d) => MARGIN.top + innerH * (1 - (d || 0) / maxD),
  };
}

function axes(scale) {
  const bottom = HEIGHT - MARGIN.bottom;
  const right = WIDTH - MARGIN.right;
  const nodes = [
    svg('line', { class: 'history-axis', x1: MARGIN.left, y1: MARGIN.top, x2: MARGIN.left, y2: bottom }),
    svg('line', { class: 'history-axis', x1: MARGIN.left, y1: bottom, x2: right, y2: bottom }),
  ];
  for (const fraction of [0, 0.5, 1]) {
    const d = (scale.maxD / 1.1) * fraction;
    const y = scale.y(d);
    nodes.push(svg('line', { class: 'history-grid', x1: MARGIN.left, y1: y, x2: right, y2: y }));
    nodes.push(svg('text', { class: 'history-tick', x: MARGIN.left - 6, y: y + 4, 'text-anchor': 'end', text: seconds(d) }));
  }
  nodes.push(svg('text', { class: 'history-tick', x: MARGIN.left, y: HEIGHT - 24, 'text-anchor': 'start', text: format.timestamp(scale.minT / 1000) }));
  nodes.push(svg('text', { class: 'history-tick', x: right, y: HEIGHT - 24, 'text-anchor': 'end', text: format.timestamp(scale.maxT / 1000) }));
  nodes.push(svg('text', { class: 'history-axis-label', x: (MARGIN.left + right) / 2, y: HEIGHT - 6, 'text-anchor': 'middle', text: 'run start' }));
  return nodes;
}

function point(run, x, y, root) {
  const kind = run.status === 'FAILED' ? 'failed' : run.status === 'DONE' ? 'done' : 'other';
  const marks = kind === 'failed'
    ? [svg('circle', { r: 7, class: 'history-failed-halo' }), svg('path', { d: 'M-5,-5L5,5M-5,5L5,-5', class: 'history-failed-mark' })]
    : [svg('circle', { r: 5 })];
  return svg('a', { href: recordUrl(root, run.record_id), class: 'history-point-link' },
    svg('g', {
      class: ['history-point', `history-point-${kind}`],
      'data-run-id': run.id,
      'data-status': run.status,
      transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
    }, svg('title', { text: runLabel(run) }), marks));
}

/** The SVG chart of runs (oldest first). */
export function chart(runs, root) {
  const scale = scales(runs);
  const xy = runs.map((run, index) => [scale.x(run.at_ms, index), scale.y(run.duration)]);
  return svg('svg', {
    class: 'history-chart',
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: WIDTH,
    height: HEIGHT,
    role: 'img',
    'aria-label': 'Run durations over time',
  },
  axes(scale),
  svg('polyline', { class: 'history-trend', points: xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ') }),
  runs.map((run, index) => point(run, xy[index][0], xy[index][1], root)));
}

function summary(runs) {
  const failed = runs.filter((r) => r.status === 'FAILED').length;
  const done = runs.filter((r) => r.status === 'DONE').length;
  const last = runs[runs.length - 1];
  return el('p', { class: 'history-summary', text: `${runs.length} runs: ${done} done, ${failed} failed. Last run: ${runLabel(last)}.` });
}

function legend() {
  return el('p', { class: 'history-legend' },
    el('span', { class: 'history-legend-done', text: '● done' }),
    el('span', { class: 'history-legend-failed', text: '✕ failed' }),
    el('span', { class: 'history-legend-other', text: '○ ended otherwise' }));
}

function errors(runs, root) {
  const failures = runs.filter((r) => r.status === 'FAILED').reverse();
  const items = failures.map((run) => el('li', { class: 'history-error-item', id: `run-${run.id}`, dataset: { runId: String(run.id) } },
    el('p', { class: 'history-error-head' },
      el('a', { href: recordUrl(root, run.record_id), text: runTime(run) }),
      ` · retry ${run.retry || 0}${run.host ? ` · ${run.host}` : ''} · `,
      el('code', { class: 'history-exception', text: run.exception_type || 'no exception type' })),
    el('pre', { class: 'history-error-text', text: run.error || 'No error text was reported.' })));
  return el('section', { class: 'history-errors' },
    el('h2', { text: 'Errors' }),
    items.length ? el('ol', { class: 'history-error-list' }, items) : el('p', { class: 'history-empty', text: 'No failed runs.' }));
}

/** Fill container with the chart, legend and errors of data (a /history/api/runs reply). */
export function renderRuns(container, data, root) {
  const runs = (data && Array.isArray(data.runs)) ? data.runs : [];
  if (!runs.length) {
    replace(container, el('p', { class: 'history-empty', text: `No runs of ${data && data.name} are recorded.` }));
    return;
  }
  replace(container,
    summary(runs),
    chart(runs, root),
    legend(),
    runs.length >= data.limit ? el('p', { class: 'history-more', text: `Showing the latest ${data.limit} runs.` }) : null,
    errors(runs, root));
}

/** Replace container's content with an error message. */
export function renderError(container, message) {
  replace(container, el('p', { class: 'history-error', role: 'alert', text: message }));
}
