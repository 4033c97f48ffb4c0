// The backfills part of the Schedules tab: a form that starts one (a task family of a module over a date
// or hour range, its parameters, a concurrency cap) and the backfills luigid runs, each with its progress
// (days or hours done out of the range) and a Cancel button while it runs.

import { el, replace } from '../dom.js';

const STATE_STATUS = { running: 'RUNNING', cancelled: 'DISABLED', 'not-started': 'FAILED' };

export class BackfillPanel {
  constructor(ctx) {
    this.ctx = ctx;
    this.message = el('p', { class: 'backfill-message', role: 'status' });
    this.list = el('div', { class: 'backfill-list' });
    this.form = this.buildForm();
    this.element = el('section', { class: 'backfill-card backfills' },
      el('header', { class: 'schedule-head' }, el('div', { class: 'schedule-title' }, el('h2', { text: 'Backfills' }),
        el('span', { class: 'muted small', text: "Luigi's RangeDaily / RangeHourly, run by luigid" }))),
      this.form, this.message, this.list);
  }

  buildForm() {
    const field = (label, input) => el('label', { class: 'backfill-field' }, el('span', { text: label }), input);
    const input = (name, attrs) => el('input', { name, type: 'text', class: 'input', required: true, ...attrs });
    return el('form', { class: 'backfill-form', on: { submit: (event) => this.submit(event) } },
      field('Module', input('module', { placeholder: 'pipeline' })),
      field('Task family', input('family', { placeholder: 'DailyReport' })),
      field('Unit', el('select', { name: 'kind', class: 'input' },
        el('option', { value: 'daily', text: 'daily' }), el('option', { value: 'hourly', text: 'hourly' }))),
      field('Start (first)', input('start', { placeholder: '2024-01-01 or 2024-01-01T00' })),
      field('Stop (not included)', input('stop', { placeholder: '2024-02-01' })),
      field('Parameters (JSON object)', el('input', { name: 'params', type: 'text', class: 'input', value: '{}' })),
      field('Concurrency (workers)', input('concurrency', { type: 'number', min: '1', max: '256', value: '1' })),
      el('button', { type: 'submit', class: 'btn btn-primary', text: 'Start backfill' }));
  }

  async submit(event) {
    event.preventDefault();
    const data = new FormData(this.form);
    let params;
    try {
      params = JSON.parse(String(data.get('params') || '{}'));
      if (params === null || typeof params !== 'object' || Array.isArray(params)) throw new Error('not an object');
    } catch (error) {
      this.say(`Parameters: write a JSON object such as {"region": "eu"} (${error.message}).`, true);
      return;
    }
    const kwargs = {
      module: String(data.get('module')).trim(), family: String(data.get('family')).trim(), kind: String(data.get('kind')),
      start: String(data.get('start')).trim(), stop: String(data.get('stop')).trim(), params,
      concurrency: Number(data.get('concurrency')),
    };
    try {
      const started = await this.ctx.api.call('backfill_start', kwargs);
      this.say(`Backfill #${started.id} started: ${started.total} ${started.kind === 'daily' ? 'days' : 'hours'} of ${started.family}.`, false);
    } catch (error) {
      this.say(`Not started: ${error.message}`, true);
      return;
    }
    this.ctx.refresh();
  }

  say(text, isError) {
    this.message.textContent = text;
    this.message.className = isError ? 'backfill-message error-box' : 'backfill-message muted';
  }

  async refresh() {
    let backfills;
    try {
      backfills = await this.ctx.api.call('backfill_list', {});
    } catch (error) {
      replace(this.list, el('p', { class: 'error-box', text: `Could not list the backfills: ${error.message}` }));
      return;
    }
    if (!backfills.length) {
      replace(this.list, el('p', { class: 'muted small', text: 'No backfill yet.' }));
      return;
    }
    replace(this.list, el('table', { class: 'run-table backfill-table' },
      el('thead', {}, el('tr', {}, ['Backfill', 'Task', 'Range', 'Progress', 'State', ''].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, backfills.map((b) => this.row(b)))));
  }

  row(b) {
    const percent = b.total ? Math.round((100 * b.done) / b.total) : 0;
    const params = Object.keys(b.params || {}).length ? ` ${JSON.stringify(b.params)}` : '';
    const state = b.state === 'ended' ? endedBadge(b) : [b.state, STATE_STATUS[b.state] || 'UNKNOWN'];
    const cancel = b.state === 'running'
      ? el('button', { type: 'button', class: 'btn btn-small backfill-cancel', text: 'Cancel', on: { click: () => this.cancel(b) } })
      : null;
    return el('tr', { class: 'backfill-row', dataset: { backfill: String(b.id), state: b.state } },
      el('td', { class: 'num', text: `#${b.id}` }),
      el('td', {}, el('code', { class: 'wrap', text: `${b.module}.${b.family}${params}` })),
      el('td', { text: `${b.start} → ${b.stop} (${b.kind}, ${b.concurrency} worker${b.concurrency === 1 ? '' : 's'})` }),
      el('td', {},
        el('progress', { class: 'backfill-bar', max: String(b.total), value: b.done, title: `${percent}%` }),
        el('span', { class: 'backfill-progress small', text: `${b.done}/${b.total}` })),
      el('td', {}, el('span', { class: ['badge', `st-${state[1]}`, 'backfill-state'], text: state[0], title: b.meaning || b.note || null })),
      el('td', {}, cancel));
  }

  async cancel(b) {
    try {
      await this.ctx.api.call('backfill_cancel', { id: b.id });
      this.say(`Backfill #${b.id} cancelled.`, false);
    } catch (error) {
      this.say(`Not cancelled: ${error.message}`, true);
    }
    this.ctx.refresh();
  }
}

/** An ended backfill is done only when its command succeeded and every day (hour) of the range is done:
 * Luigi's default exit codes say 0 for a run whose tasks failed or could not be scheduled. */
function endedBadge(b) {
  if (b.exit_code !== 0) return ['failed', 'FAILED'];
  return b.done === b.total ? ['done', 'DONE'] : ['incomplete', 'UPSTREAM_FAILED'];
}
