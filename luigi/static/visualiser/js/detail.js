// The task detail panel: opens beside any view (#...&detail=<task id>) and shows everything the
// scheduler knows about one task, what it waits for and what waits for it, and the actions on it.

import { el, replace, safeHttpUrl } from './dom.js';
import * as format from './format.js';
import { badge, dot, label, DISABLED, FAILED, RUNNING, DONE } from './status.js';
import { rerunBox } from './rerun.js';
import { TaskLogView } from './tasklog.js';
import { ErrorView } from './traceback.js';

const MAX_NEIGHBOURS = 100;
// Users write a huge retry_count (999999999 is the usual spelling) to mean "retry for ever"; no real
// pipeline counts a million retries, so from there on the count is left out rather than shown as a limit.
const UNLIMITED_RETRIES = 1_000_000;

export class TaskDetail {
  constructor(ctx) {
    this.ctx = ctx;
    this.taskId = null;
    this.lastJson = null;
    this.body = el('div', { class: 'drawer-body' });
    this.log = new TaskLogView(ctx.api);
    this.errorView = new ErrorView();
    this.closeButton = el('button', {
      class: 'btn btn-icon', type: 'button', title: 'Close', 'aria-label': 'Close the task detail', text: '×',
      on: { click: () => ctx.router.update({ detail: null }) },
    });
    this.element = el('aside', { class: 'drawer', id: 'task-detail', hidden: true, 'aria-label': 'Task detail' },
      el('div', { class: 'drawer-head' }, el('span', { class: 'drawer-kicker', text: 'Task' }), this.closeButton),
      this.body);
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && this.taskId && !document.querySelector('dialog[open]')) ctx.router.update({ detail: null });
    });
  }

  /** Show taskId (null hides the panel). */
  show(taskId) {
    if (taskId === this.taskId) return;
    this.taskId = taskId || null;
    this.lastJson = null;
    this.errorView = new ErrorView(); // frames folded again for another task
    this.element.hidden = !this.taskId;
    if (!this.taskId) this.log.stop();
    document.body.classList.toggle('with-drawer', Boolean(this.taskId));
    if (this.taskId) replace(this.body, el('p', { class: 'muted', text: 'Loading…' }));
  }

  async refresh() {
    const taskId = this.taskId;
    if (!taskId) return;
    let detail;
    try {
      detail = await this.ctx.api.call('task_detail', { task_id: taskId, max_neighbours: MAX_NEIGHBOURS });
    } catch (error) {
      if (taskId === this.taskId) replace(this.body, el('p', { class: 'error-box', text: `Could not load the task: ${error.message}` }));
      throw error;
    }
    if (taskId !== this.taskId) return; // the user moved on while we waited
    const json = JSON.stringify(detail);
    if (json === this.lastJson) return; // unchanged: keep the selection and scroll position
    this.lastJson = json;
    if (!detail || !detail.task) {
      replace(this.body, el('div', { class: 'empty' },
        el('p', { text: 'The scheduler does not know this task (any more):' }),
        el('code', { class: 'wrap', text: taskId })));
      return;
    }
    replace(this.body, this.render(detail));
    this.log.reattached();
  }

  render(detail) {
    const task = detail.task;
    const errorText = detail.error ? format.errorText(detail.error) : '';
    const error = errorText ? this.errorView.render(errorText) : null;
    const failing = task.status === FAILED || task.status === DISABLED;
    return [
      el('div', { class: 'detail-title' }, badge(task.status), el('h2', { text: task.name || 'Unknown family' })),
      el('p', { class: 'detail-id' }, el('code', { class: 'wrap', text: format.displayName(task, task.task_id) })),
      error && failing ? error.headline : null,
      this.actionBar(task),
      progress(task),
      task.status_message ? section('Status message', el('pre', { class: 'status-message', text: format.text(task.status_message) })) : null,
      error ? section(failing ? 'Error' : 'Last error', [failing ? null : error.headline, error.body]) : null,
      this.log.show(task.task_id, task.status === RUNNING),
      section('Command to re-run', rerunBox(task, this.ctx.notify), 'The luigi command line that runs this task again'),
      section('Parameters', paramsTable(task.params)),
      section('Details', facts(task)),
      this.neighbours('Upstream', 'Tasks this task needs', detail.upstream, detail.num_upstream),
      this.neighbours('Downstream', 'Tasks that need this task', detail.downstream, detail.num_downstream),
    ];
  }

  actionBar(task) {
    const { actions, router } = this.ctx;
    const id = task.task_id;
    const buttons = [];
    const add = (text, handler, cls = 'btn') => buttons.push(el('button', { type: 'button', class: cls, text, on: { click: handler } }));
    if (task.status === FAILED) add('Forgive failures', () => actions.forgiveFailures(id), 'btn btn-primary');
    if (task.status === DISABLED && task.re_enable_able) add('Re-enable', () => actions.reEnable(id), 'btn btn-primary');
    if ([RUNNING, FAILED, DISABLED].includes(task.status)) add('Mark as done', () => actions.markAsDone(id));
    if (task.status === RUNNING) add('Cancel', () => actions.cancelTask(id));
    if (task.status === RUNNING && task.accepts_messages) add('Send message…', () => actions.sendMessage(task));
    const graph = (invert) => el('a', {
      class: 'btn btn-link',
      href: router.href({ tab: 'graph', taskId: id, hideDone: task.status === DONE ? 0 : 1, invert: invert ? 1 : 0 }),
      text: invert ? 'Downstream graph' : 'Dependency graph',
    });
    return el('div', { class: 'detail-actions' }, buttons, graph(false), graph(true));
  }

  neighbours(title, hint, list, total) {
    const items = (list || []).map((n) => el('li', {},
      el('button', {
        type: 'button', class: 'task-link', title: n.task_id,
        on: { click: () => this.ctx.openTask(n.task_id) },
      }, dot(n.status), el('span', { text: format.displayName(n, n.task_id) }))));
    const more = total > items.length ? el('li', { class: 'muted', text: `…and ${format.count(total - items.length)} more` }) : null;
    const content = items.length ? el('ul', { class: 'neighbours' }, items, more) : el('p', { class: 'muted', text: 'None.' });
    return section(`${title} (${format.count(total || 0)})`, content, hint);
  }
}

function section(title, content, hint) {
  return el('section', { class: 'detail-section' },
    el('h3', { text: title, title: hint || null }),
    content);
}

function progress(task) {
  const value = Number(task.progress_percentage);
  if (task.progress_percentage === null || task.progress_percentage === undefined || !Number.isFinite(value)) return null;
  const clamped = Math.max(0, Math.min(100, value));
  const fill = el('div', { class: ['progress-fill', task.status === FAILED ? 'st-FAILED' : 'st-RUNNING'] });
  fill.style.width = `${clamped}%`;
  return el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': String(clamped) },
    el('div', { class: 'progress-track' }, fill),
    el('span', { class: 'progress-label', text: `${format.text(task.progress_percentage)} %` }));
}

function paramsTable(params) {
  const keys = Object.keys(params || {}).sort();
  if (!keys.length) return el('p', { class: 'muted', text: 'No parameters.' });
  return el('table', { class: 'kv' },
    el('tbody', {}, keys.map((k) => el('tr', {}, el('th', { text: k }), el('td', {}, el('code', { class: 'wrap', text: format.text(params[k]) }))))));
}

/** "retry 2 of 3"; "retry 2" when retry_count stands for unlimited. */
function retryText({ number, of }) {
  const limited = typeof of === 'number' && of < UNLIMITED_RETRIES;
  return limited ? `retry ${number} of ${of}` : `retry ${number}`;
}

function facts(task) {
  const now = Date.now() / 1000;
  const url = safeHttpUrl(task.tracking_url);
  const rows = [
    ['Task id', el('code', { class: 'wrap', text: task.task_id })],
    ['Module', task.module || '–'],
    ['Priority', format.text(task.priority)],
    ['Worker', task.worker_running ? el('span', { title: task.worker_running, text: format.workerLabel(task.worker_running) }) : '–'],
    ['Workers', (task.workers || []).length
      ? task.workers.map((w, i) => [i ? ', ' : '', el('span', { title: w, text: format.workerLabel(w) })]) : '–'],
    ['Created', format.timestamp(task.start_time)],
    ['Last updated', format.timestamp(task.last_updated)],
    ['Running for', task.status === RUNNING && task.time_running ? format.duration(now - task.time_running) : '–'],
    ['Tracking URL', url ? el('a', { href: url, target: '_blank', rel: 'noopener noreferrer', text: task.tracking_url })
      : (task.tracking_url ? format.text(task.tracking_url) : '–')],
    ['Resources', format.resourcesText(task.resources) || '–'],
    ['Resources held', format.resourcesText(task.resources_running) || '–'],
  ];
  if (task.upstream_status) rows.push(['Blocked by', label(task.upstream_status)]);
  if (task.retry) rows.push(['Retry', `${retryText(task.retry)} at ${format.timestamp(task.retry.at)}`]);
  return el('dl', { class: 'facts' }, rows.map(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]));
}
