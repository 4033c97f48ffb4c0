// The schedules page (#tab=schedules): each [schedule:<name>] luigid runs, when it runs next, its last
// runs with their exit code and log, and the pause/resume and run-now buttons (confirmed in a dialog).

import { el, replace } from '../dom.js';
import * as format from '../format.js';
import { BackfillPanel } from './backfills.js';

// How each run outcome is coloured (the .st-<STATUS> classes of css/app.css).
const OUTCOME_STATUS = {
  starting: 'RUNNING',
  running: 'RUNNING',
  skipped: 'DISABLED',
  missed: 'UPSTREAM_MISSING_INPUT',
  stopped: 'DISABLED',
  lost: 'UPSTREAM_FAILED',
  'not-started': 'FAILED',
};
const OPEN_OUTCOMES = new Set(['starting', 'running']);

export default {
  id: 'schedules',
  title: 'Schedules',
  create: (ctx) => new SchedulesView(ctx),
};

class SchedulesView {
  constructor(ctx) {
    this.ctx = ctx;
    this.openLogs = new Map(); // "name#run" -> the log answer last fetched (kept open across refreshes)
    this.body = el('div', { class: 'schedule-list' }, el('p', { class: 'muted', text: 'Loading…' }));
    this.summary = el('span', { class: 'summary', role: 'status' });
    this.backfills = new BackfillPanel(ctx);
    this.element = el('div', { class: 'page' },
      el('div', { class: 'page-head' }, el('h1', { text: 'Schedules' }), this.summary),
      this.body, this.backfills.element);
  }

  update() {}

  destroy() {}

  async refresh() {
    await Promise.all([this.refreshSchedules(), this.backfills.refresh()]);
  }

  async refreshSchedules() {
    let schedules;
    try {
      schedules = await this.ctx.api.call('schedule_list', {});
    } catch (error) {
      replace(this.body, el('p', { class: 'error-box', text: `Could not list the schedules: ${error.message}` }));
      throw error;
    }
    const running = schedules.filter((s) => s.running !== null && s.running !== undefined).length;
    this.summary.textContent = `${format.counted(schedules.length, 'schedule')} · ${format.count(running)} running`;
    if (!schedules.length) {
      replace(this.body, el('div', { class: 'empty' },
        'luigid runs no schedule. Declare them as [schedule:<name>] sections in its configuration (see doc/schedules.md).'));
      return;
    }
    await this.refreshOpenLogs(schedules);
    replace(this.body, schedules.map((s) => this.card(s)));
  }

  /** Fetch again the open logs of runs still going (an ended run's log does not change). */
  async refreshOpenLogs(schedules) {
    const going = new Set();
    for (const s of schedules) for (const run of s.runs) if (OPEN_OUTCOMES.has(run.outcome)) going.add(`${s.name}#${run.id}`);
    const stale = [...this.openLogs.entries()].filter(([key, log]) => !log || !log.ended || going.has(key));
    await Promise.all(stale.map(([key]) => this.fetchLog(key)));
  }

  async fetchLog(key) {
    const [name, run] = splitKey(key);
    try {
      this.openLogs.set(key, await this.ctx.api.call('schedule_log', { name, run }));
    } catch (error) {
      this.openLogs.set(key, { ended: false, has_log: false, error: error.message, text: '' });
    }
  }

  card(schedule) {
    const now = Date.now() / 1000;
    const state = schedule.paused ? ['Paused', 'DISABLED'] : schedule.running !== null ? ['Running', 'RUNNING'] : ['Active', 'DONE'];
    const fact = (k, v) => [el('dt', { text: k }), el('dd', {}, v)];
    const next = schedule.paused
      ? el('span', { class: 'muted', text: 'paused: its slots pass without a run' })
      : [format.zonedTimestamp(schedule.next_due, schedule.timezone), el('span', { class: 'muted', text: ` (in ${format.duration(schedule.next_due - now)})` })];
    return el('article', { class: 'schedule-card', dataset: { schedule: schedule.name } },
      el('header', { class: 'schedule-head' },
        el('div', { class: 'schedule-title' },
          el('h2', { text: schedule.name }),
          el('code', { class: 'schedule-cadence', text: schedule.cadence })),
        el('span', { class: ['badge', `st-${state[1]}`, 'schedule-state'], text: state[0] }),
        el('div', { class: 'card-actions' }, this.buttons(schedule))),
      el('dl', { class: 'facts facts-compact schedule-facts' },
        fact('Next run', el('span', { class: 'schedule-next' }, next)),
        fact('Command', el('code', { class: 'wrap', text: `luigi ${schedule.command}` })),
        fact('Time zone', schedule.timezone),
        fact('Catch-up', schedule.catchup ? 'runs every slot missed while luigid was down' : 'off: slots missed while luigid was down are not run'),
        schedule.deadline ? fact('Deadline', `${format.duration(schedule.deadline)} after each start: a run not ended well by then is late`) : null,
        schedule.cwd ? fact('Directory', el('code', { class: 'wrap', text: schedule.cwd })) : null,
        schedule.env.length ? fact('Environment', el('code', { class: 'wrap', text: schedule.env.join(', ') })) : null),
      this.runsTable(schedule));
  }

  buttons(schedule) {
    const { actions } = this.ctx;
    const pause = schedule.paused
      ? el('button', { type: 'button', class: 'btn btn-small', text: 'Resume', dataset: { action: 'resume' }, on: { click: () => actions.resumeSchedule(schedule.name) } })
      : el('button', { type: 'button', class: 'btn btn-small', text: 'Pause', dataset: { action: 'pause' }, on: { click: () => actions.pauseSchedule(schedule.name) } });
    const runNow = el('button', {
      type: 'button', class: 'btn btn-small btn-primary', text: 'Run now', dataset: { action: 'trigger' },
      disabled: schedule.running !== null, title: schedule.running !== null ? `Run #${schedule.running} is still going` : null,
      on: { click: () => actions.triggerSchedule(schedule.name) },
    });
    return [pause, runNow];
  }

  runsTable(schedule) {
    if (!schedule.runs.length) return el('p', { class: 'muted small', text: 'No run yet.' });
    const rows = [];
    for (const run of schedule.runs) {
      const key = `${schedule.name}#${run.id}`;
      rows.push(this.runRow(schedule, run, key));
      if (this.openLogs.has(key)) rows.push(logRow(this.openLogs.get(key)));
    }
    return el('table', { class: 'run-table' },
      el('thead', {}, el('tr', {}, ['Run', 'Scheduled for', 'Outcome', 'Started', 'Took', 'Exit code', 'Log'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, rows));
  }

  runRow(schedule, run, key) {
    const took = run.started && run.ended ? format.duration(run.ended - run.started) : run.started ? `${format.duration(Date.now() / 1000 - run.started)} so far` : '–';
    const exit = run.exit_code === null || run.exit_code === undefined ? '–' : `${run.exit_code} (${run.meaning || ''})`;
    const [label, status] = outcomeBadge(run);
    const at = (moment) => format.zonedTimestamp(moment, schedule.timezone);
    const open = this.openLogs.has(key);
    const hasLog = run.log_bytes !== null && run.log_bytes !== undefined;
    const toggle = hasLog
      ? el('button', {
        type: 'button', class: 'btn btn-small btn-link log-toggle', 'aria-expanded': open ? 'true' : 'false',
        text: `${open ? 'Hide' : 'Show'} log (${bytes(run.log_bytes)})`,
        on: { click: () => this.toggleLog(key) },
      })
      : el('span', { class: 'muted', text: 'none' });
    return el('tr', { class: 'run-row', dataset: { run: String(run.id), outcome: run.outcome } },
      el('td', { class: 'num', text: `#${run.id}` }),
      el('td', {}, at(run.scheduled_time), el('span', { class: 'muted small', text: run.kind === 'slot' ? '' : ` ${run.kind}` })),
      el('td', {},
        el('span', { class: ['badge', `st-${status}`, 'run-outcome'], text: label, title: run.note || null }),
        lateBadge(run, at),
        run.note ? el('div', { class: 'muted small run-note', text: run.note }) : null),
      el('td', { text: at(run.started) }),
      el('td', { text: took }),
      el('td', { class: 'run-exit', text: exit }),
      el('td', {}, toggle));
  }

  async toggleLog(key) {
    if (this.openLogs.has(key)) this.openLogs.delete(key);
    else await this.fetchLog(key);
    this.ctx.refresh();
  }
}

/** The outcome's words and colour: a run that ended says whether its command succeeded or failed. */
function outcomeBadge(run) {
  if (run.outcome !== 'ended') return [run.outcome, OUTCOME_STATUS[run.outcome] || 'UNKNOWN'];
  return run.exit_code === 0 ? ['done', 'DONE'] : ['failed', 'FAILED'];
}

/** "late" beside a run that did not end well by its deadline (luigid sent its alert). */
function lateBadge(run, at) {
  if (run.late !== true) return null;
  return el('span', { class: ['badge', 'st-FAILED', 'run-late'], text: 'late', title: `Not ended well by its deadline, ${at(run.deadline)}` });
}

function logRow(log) {
  const text = log.error ? `Could not fetch the log: ${log.error}` : log.has_log ? log.text : 'This run has no log.';
  return el('tr', { class: 'log-row' }, el('td', { colspan: '7' },
    el('pre', { class: 'run-log', text: text || '(empty)' }),
    log.ended ? null : el('p', { class: 'muted small', text: 'Still running: the log follows it.' })));
}

function splitKey(key) {
  const at = key.lastIndexOf('#');
  return [key.slice(0, at), Number(key.slice(at + 1))];
}

function bytes(n) {
  if (typeof n !== 'number') return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
