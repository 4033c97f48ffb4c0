// The workers page (#tab=workers): every worker the scheduler knows, what it runs, when it was last
// heard from; disable a worker or change how many processes it runs.

import { el, replace } from '../dom.js';
import * as format from '../format.js';
import { badge, dot } from '../status.js';

const RUNNING_SHOWN = 20;

export default {
  id: 'workers',
  title: 'Workers',
  create: (ctx) => new WorkersView(ctx),
};

class WorkersView {
  constructor(ctx) {
    this.ctx = ctx;
    this.list = el('div', { class: 'worker-grid' }, el('p', { class: 'muted', text: 'Loading…' }));
    this.summary = el('span', { class: 'summary', role: 'status' });
    this.element = el('div', { class: 'page' },
      el('div', { class: 'page-head' }, el('h1', { text: 'Workers' }), this.summary),
      this.list);
  }

  update() {}

  destroy() {}

  async refresh() {
    let workers;
    try {
      workers = await this.ctx.api.call('worker_list', { include_running: true });
    } catch (error) {
      replace(this.list, el('p', { class: 'error-box', text: `Could not list the workers: ${error.message}` }));
      throw error;
    }
    const running = workers.reduce((n, w) => n + (w.num_running || 0), 0);
    this.summary.textContent = `${format.counted(workers.length, 'worker')} · ${format.counted(running, 'running task')}`;
    if (!workers.length) {
      replace(this.list, el('div', { class: 'empty' }, 'No worker is connected. Workers appear here while they talk to the scheduler.'));
      return;
    }
    replace(this.list, workers.map((w) => this.card(w)));
  }

  card(worker) {
    const now = Date.now() / 1000;
    const { actions } = this.ctx;
    const disabled = worker.state === 'disabled';
    const runningTasks = Object.entries(worker.running || {});
    const fact = (k, v) => [el('dt', { text: k }), el('dd', { text: v === undefined || v === null || v === '' ? '–' : format.text(v) })];
    const buttons = el('div', { class: 'card-actions' },
      el('button', {
        type: 'button', class: 'btn btn-small', text: 'Processes…', disabled,
        on: { click: () => actions.setWorkerProcesses(worker.name, worker.workers) },
      }),
      el('button', {
        type: 'button', class: 'btn btn-small btn-danger', text: 'Disable', disabled,
        on: { click: () => actions.disableWorker(worker.name) },
      }));
    const tasks = runningTasks.slice(0, RUNNING_SHOWN).map(([taskId, task]) => el('li', {},
      el('button', { type: 'button', class: 'task-link', title: taskId, on: { click: () => this.ctx.openTask(taskId) } },
        dot(task.status), el('span', { text: format.displayName(task, taskId) }))));
    if (runningTasks.length > RUNNING_SHOWN) tasks.push(el('li', { class: 'muted', text: `…and ${runningTasks.length - RUNNING_SHOWN} more` }));
    return el('article', { class: ['worker-card', disabled && 'is-disabled'], dataset: { worker: worker.name } },
      el('header', { class: 'worker-head' },
        el('div', { class: 'worker-title' },
          el('h2', { text: worker.host || 'unknown host', title: worker.name }),
          el('code', { class: 'worker-id', text: worker.name, title: worker.name })),
        disabled ? badge('DISABLED') : el('span', { class: 'badge badge-live', text: 'Active' })),
      el('dl', { class: 'facts facts-compact' },
        fact('PID', worker.pid),
        fact('User', worker.username),
        fact('Processes', worker.workers),
        fact('Started', format.timestamp(worker.started)),
        fact('Last seen', format.ago(worker.last_active, now)),
        fact('First task', worker.first_task_display_name)),
      el('div', { class: 'worker-stats' },
        stat(worker.num_running, 'running'), stat(worker.num_pending, 'pending'), stat(worker.num_uniques, 'only here')),
      runningTasks.length ? el('ul', { class: 'neighbours' }, tasks) : el('p', { class: 'muted small', text: 'Running nothing.' }),
      buttons);
  }
}

function stat(n, text) {
  return el('div', { class: 'stat' }, el('span', { class: 'stat-n', text: format.count(n || 0) }), el('span', { class: 'stat-label', text }));
}
