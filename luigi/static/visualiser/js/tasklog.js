// The log of a task's runs in the task detail: what its worker shipped to luigid (task_log), followed
// live while the run goes on. Text only: every chunk goes into the page as text, never as markup.

import { el, replace } from './dom.js';

const FOLLOW_EVERY_MS = 1000;

export class TaskLogView {
  constructor(api) {
    this.api = api;
    this.taskId = null;
    this.text = el('pre', { class: 'task-log', 'aria-live': 'polite' });
    this.note = el('p', { class: 'muted task-log-note' });
    this.element = el('section', { class: 'detail-section', id: 'task-log' },
      el('h3', { text: 'Log', title: 'What the task printed, its child processes wrote and the records it logged' }),
      this.note, this.text);
    this.timer = null;
    // Whether the view follows the tail, and where the user left it otherwise: kept apart from the
    // element because the detail panel re-renders (detaching the element resets its scroll position).
    this.following = true;
    this.savedTop = 0;
    this.text.addEventListener('scroll', () => {
      if (!this.text.isConnected) return;
      this.following = this.atBottom();
      this.savedTop = this.text.scrollTop;
    });
  }

  /** Put the scroll position back after the detail panel re-rendered around the log. */
  reattached() {
    this.text.scrollTop = this.following ? this.text.scrollHeight : this.savedTop;
  }

  atBottom() {
    return this.text.scrollTop + this.text.clientHeight >= this.text.scrollHeight - 4;
  }

  /** Show the log of ``taskId`` (a new task starts from the beginning of its last run); a task that
   * runs again after its log ended is looked at again, to follow its new run. */
  show(taskId, running) {
    if (taskId === this.taskId) {
      if (running && this.ended && !this.timer) this.fetch();
      return this.element;
    }
    this.stop();
    this.taskId = taskId;
    this.attempt = null;
    this.offset = 0;
    this.ended = false;
    this.following = true;
    this.savedTop = 0;
    this.text.textContent = '';
    this.note.textContent = 'Loading the log…';
    this.fetch();
    return this.element;
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
    this.taskId = null;
  }

  async fetch() {
    this.timer = null;
    const taskId = this.taskId;
    let log;
    try {
      log = await this.api.call('task_log', { task_id: taskId, attempt: this.attempt, offset: this.offset });
    } catch (error) {
      if (taskId === this.taskId) this.note.textContent = `Could not load the log: ${error.message}`;
      return;
    }
    if (taskId !== this.taskId) return; // the user moved on while we waited
    this.take(log);
    if (!this.ended || log.chunk) this.timer = setTimeout(() => this.fetch(), log.chunk && !this.ended ? 0 : FOLLOW_EVERY_MS);
  }

  take(log) {
    const attempts = log.attempts || [];
    if (!log.kept) {
      this.note.textContent = 'This scheduler keeps no task logs.';
      this.ended = true;
      return;
    }
    if (!attempts.length) {
      this.note.textContent = 'No log was kept for this task: it has not run yet, its runs wrote nothing, '
        + 'or its worker ships no logs (a Luigi worker, or [worker] task_log_max_bytes = 0).';
      return;
    }
    const latest = attempts[attempts.length - 1].attempt;
    if (this.attempt !== null && latest !== this.attempt && this.ended) {
      this.attempt = null; // a new run began: follow it from its start
      this.offset = 0;
      this.ended = false;
      this.text.textContent = '';
      return;
    }
    this.attempt = log.attempt;
    this.append(log.chunk || '');
    this.offset = log.nextOffset;
    this.ended = Boolean(log.ended);
    const state = !this.ended ? 'running, following it'
      : log.cutShort ? 'ended without its last output: its worker was lost or stopped' : 'ended';
    this.note.textContent = `Run ${log.attempt} of ${attempts.length} (${state}).`;
  }

  append(chunk) {
    if (!chunk) return;
    this.text.append(document.createTextNode(chunk));
    if (this.following) this.text.scrollTop = this.text.scrollHeight;
  }
}
