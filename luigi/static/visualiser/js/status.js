// The statuses the scheduler reports and how the visualiser names and colours them (css/app.css
// holds the colours as .st-<STATUS> classes).

import { el } from './dom.js';

export const PENDING = 'PENDING';
export const RUNNING = 'RUNNING';
export const BATCH_RUNNING = 'BATCH_RUNNING';
export const DONE = 'DONE';
export const FAILED = 'FAILED';
export const DISABLED = 'DISABLED';
export const UNKNOWN = 'UNKNOWN';

/** The statuses with a count card, in the order shown. */
export const MAIN_STATUSES = [PENDING, RUNNING, BATCH_RUNNING, DONE, FAILED, DISABLED];

/** Upstream statuses: PENDING tasks blocked by something upstream (most severe first). */
export const UPSTREAM_STATUSES = ['UPSTREAM_FAILED', 'UPSTREAM_DISABLED', 'UPSTREAM_RUNNING', 'UPSTREAM_MISSING_INPUT'];

const LABELS = {
  PENDING: 'Pending',
  RUNNING: 'Running',
  BATCH_RUNNING: 'Batch running',
  DONE: 'Done',
  FAILED: 'Failed',
  DISABLED: 'Disabled',
  UNKNOWN: 'Unknown',
  UPSTREAM_FAILED: 'Upstream failed',
  UPSTREAM_DISABLED: 'Upstream disabled',
  UPSTREAM_RUNNING: 'Upstream running',
  UPSTREAM_MISSING_INPUT: 'Missing input',
};

const HINTS = {
  PENDING: 'Waiting to run',
  RUNNING: 'Running on a worker now',
  BATCH_RUNNING: 'Running as part of a batch',
  DONE: 'Complete',
  FAILED: 'Failed; retried after the retry delay',
  DISABLED: 'Failed too often, or disabled: not run again until re-enabled',
  UPSTREAM_FAILED: 'Pending tasks waiting on a failed task',
  UPSTREAM_DISABLED: 'Pending tasks waiting on a disabled task',
  UPSTREAM_RUNNING: 'Pending tasks waiting on running tasks',
  UPSTREAM_MISSING_INPUT: 'Pending tasks waiting on input no task produces yet',
};

/** Severity order for sorting neighbours: what needs attention first. */
export const SEVERITY = [FAILED, DISABLED, RUNNING, BATCH_RUNNING, PENDING, UNKNOWN, DONE];

export function label(status) {
  return LABELS[status] || String(status || 'Unknown');
}

export function hint(status) {
  return HINTS[status] || '';
}

/** The CSS class carrying a status colour (unknown values get the UNKNOWN colour). */
export function cssClass(status) {
  return `st-${LABELS[status] ? status : UNKNOWN}`;
}

/** A coloured pill naming the status. */
export function badge(status, extra = '') {
  return el('span', { class: ['badge', cssClass(status), extra], text: label(status), title: hint(status) || null });
}

/** A small coloured dot. */
export function dot(status) {
  return el('span', { class: ['dot', cssClass(status)], 'aria-hidden': 'true' });
}
