// The task list (#tab=tasks): counts per status, a family sidebar, server-side search, sortable
// columns and pages. The scheduler does the filtering, sorting and paging (task_page), so the page
// stays fast with any number of tasks; past max_shown_tasks it shows counts and asks to narrow down.

import { debounce, el, replace } from '../dom.js';
import * as format from '../format.js';
import {
  badge, cssClass, DISABLED, DONE, FAILED, hint, label, MAIN_STATUSES, PENDING, RUNNING, UPSTREAM_STATUSES,
} from '../status.js';

const PAGE_SIZES = [25, 50, 100, 200];
const DEFAULT_PAGE_SIZE = 50;
const FAMILIES_SHOWN = 300; // past this the sidebar asks to filter rather than drawing thousands of rows
const COUNTING_RETRY_MS = 800;
const COLLECT_PAGE_SIZE = 1000; // task_page's largest page: the failed tasks to forgive, a page at a time

/** Columns: [sort key, heading, the first direction a click picks (true: descending)]. */
const COLUMNS = [
  ['status', 'Status', false],
  ['family', 'Family', false],
  ['params', 'Parameters', false],
  ['priority', 'Priority', true],
  ['time_running', 'Running for', true],
  ['worker', 'Worker', false],
];

export default {
  id: 'tasks',
  title: 'Tasks',
  create: (ctx) => new TasksView(ctx),
};

class TasksView {
  constructor(ctx) {
    this.ctx = ctx;
    this.params = {};
    this.counts = null;
    this.page = null;
    this.familyFilter = '';
    this.countingTimer = null;
    this.build();
  }

  build() {
    const { router } = this.ctx;
    this.cards = el('div', { class: 'cards', role: 'list', 'aria-label': 'Tasks per status' });
    this.upstreamCards = el('div', { class: 'cards cards-secondary', role: 'list', 'aria-label': 'Pending tasks by what blocks them' });
    this.search = el('input', {
      type: 'search', class: 'search', id: 'task-search', placeholder: 'Search tasks by family or parameter value…',
      'aria-label': 'Search tasks', autocomplete: 'off', spellcheck: 'false',
    });
    const pushSearch = debounce(() => router.update({ search: this.search.value.trim() || null, page: null }, { replace: true }), 300);
    this.search.addEventListener('input', pushSearch);
    this.search.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        pushSearch.cancel();
        router.update({ search: this.search.value.trim() || null, page: null }, { replace: true });
      }
    });
    this.chips = el('div', { class: 'chips' });
    this.summary = el('span', { class: 'summary', role: 'status' });
    this.forgiveAllButton = el('button', {
      type: 'button', class: 'btn btn-small', id: 'forgive-all', hidden: true, text: 'Forgive all failed',
      title: 'Set every failed task this list shows (with its filters and search) back to PENDING',
      on: { click: () => this.forgiveAll() },
    });
    this.familyInput = el('input', { type: 'search', class: 'family-filter', placeholder: 'Filter families…', 'aria-label': 'Filter families' });
    this.familyInput.addEventListener('input', () => {
      this.familyFilter = this.familyInput.value.trim().toLowerCase();
      this.renderFamilies();
    });
    this.familyList = el('ul', { class: 'family-list' });
    this.table = el('table', { class: 'task-table' });
    this.tableArea = el('div', { class: 'table-area' }, this.table);
    this.pager = el('div', { class: 'pager' });
    this.element = el('div', { class: 'tasks-view' },
      el('section', { class: 'counts' }, this.cards, this.upstreamCards),
      el('div', { class: 'tasks-body' },
        el('aside', { class: 'sidebar', 'aria-label': 'Families' },
          el('h2', { class: 'sidebar-title', text: 'Families' }), this.familyInput, this.familyList),
        el('section', { class: 'task-panel' },
          el('div', { class: 'toolbar' }, this.search, this.chips, this.summary, this.forgiveAllButton),
          this.tableArea,
          this.pager)));
  }

  // -- address -----------------------------------------------------------------------------------

  update(params) {
    this.params = params;
    if (document.activeElement !== this.search) this.search.value = params.search || '';
    this.renderCards();
    this.renderChips();
    this.renderFamilies();
    this.renderForgiveAll();
    if (this.page) this.renderTable();
  }

  query() {
    const p = this.params;
    const upstream = UPSTREAM_STATUSES.includes(p.status) ? p.status : '';
    const size = PAGE_SIZES.includes(Number(p.size)) ? Number(p.size) : DEFAULT_PAGE_SIZE;
    const page = Math.max(1, Number.parseInt(p.page, 10) || 1);
    return {
      status: upstream ? PENDING : (MAIN_STATUSES.includes(p.status) || p.status === 'UNKNOWN' ? p.status : ''),
      upstream_status: upstream,
      family: p.family || '',
      search: p.search || '',
      sort_by: COLUMNS.some(([key]) => key === p.sort) ? p.sort : '',
      sort_desc: p.desc === '1',
      offset: (page - 1) * size,
      page_size: size,
    };
  }

  // -- data --------------------------------------------------------------------------------------

  async refresh() {
    const query = this.query();
    const [counts, page] = await Promise.all([
      this.ctx.api.call('task_counts', {}),
      this.ctx.api.call('task_page', query).catch((error) => ({ error })),
    ]);
    this.showCounts(counts);
    const pageJson = JSON.stringify([query, page.error ? String(page.error.message) : page]);
    if (pageJson !== this.pageJson) { // unchanged rows are left alone: no flicker, no lost selection
      this.pageJson = pageJson;
      this.page = page;
      this.renderTable();
    } else {
      this.tickDurations();
    }
    this.retryWhileCounting(counts, page);
  }

  showCounts(counts) {
    const json = JSON.stringify(counts);
    if (json === this.countsJson) return;
    this.countsJson = json;
    this.counts = counts;
    this.renderCards();
    this.renderFamilies();
    this.renderForgiveAll();
  }

  /** Upstream counts come from a census the scheduler builds in slices: until the first one is
   * complete, ask again soon (later passes are picked up by the normal refresh). */
  retryWhileCounting(counts, page) {
    clearTimeout(this.countingTimer);
    if (page && page.counting) {
      this.countingTimer = setTimeout(() => this.ctx.refresh(), COUNTING_RETRY_MS);
    } else if (counts && counts.census && !counts.census.ready) {
      this.countingTimer = setTimeout(() => this.refreshCounts(), COUNTING_RETRY_MS);
    }
  }

  async refreshCounts() {
    try {
      const counts = await this.ctx.api.call('task_counts', {});
      this.showCounts(counts);
      this.retryWhileCounting(counts, this.page);
    } catch {
      /* the live loop reports an unreachable scheduler */
    }
  }

  /** Advance the "Running for" cells between refreshes that changed nothing else. */
  tickDurations() {
    const now = Date.now() / 1000;
    for (const cell of this.table.querySelectorAll('td[data-since]')) {
      cell.textContent = format.duration(now - Number(cell.dataset.since));
    }
  }

  destroy() {
    clearTimeout(this.countingTimer);
  }

  // -- acting on many ----------------------------------------------------------------------------

  /** The list's failed tasks: what it shows when its status is FAILED (or any) with the same
   * family and search. Null when the list holds none (shown or not). */
  failedQuery() {
    const q = this.query();
    if ((q.status && q.status !== FAILED) || q.upstream_status) return null;
    const counts = this.counts || {};
    const failed = q.family
      ? ((counts.family_statuses || {})[q.family] || {})[FAILED] || 0
      : (counts.statuses || {})[FAILED] || 0;
    return failed ? { ...q, status: FAILED, sort_by: '', sort_desc: false } : null;
  }

  renderForgiveAll() {
    this.forgiveAllButton.hidden = !this.failedQuery();
  }

  /** Collect every failed task the list matches (all its pages), confirm, forgive them. */
  async forgiveAll() {
    const query = this.failedQuery();
    if (!query) return;
    const tasks = [];
    try {
      for (let offset = 0; ; offset += COLLECT_PAGE_SIZE) {
        const page = await this.ctx.api.call('task_page', { ...query, offset, page_size: COLLECT_PAGE_SIZE });
        if (page.too_many) throw new Error(`${format.count(page.total)} failed tasks match, more than this scheduler lists at once; narrow the list first`);
        tasks.push(...page.tasks);
        if (!page.tasks.length || offset + COLLECT_PAGE_SIZE >= page.total) break;
      }
    } catch (error) {
      this.ctx.notify(`Forgive all failed: ${error.message}`, 'error');
      return;
    }
    if (!tasks.length) {
      this.ctx.notify('No failed task matches this list.', 'info');
      return;
    }
    await this.ctx.actions.forgiveAll(tasks);
  }

  // -- rendering ---------------------------------------------------------------------------------

  renderCards() {
    const statuses = (this.counts && this.counts.statuses) || {};
    const upstream = this.counts ? this.counts.upstream : null;
    replace(this.cards, MAIN_STATUSES.map((s) => this.card(s, statuses[s], false)));
    replace(this.upstreamCards, UPSTREAM_STATUSES.map((s) => this.card(s, upstream ? upstream[s] || 0 : null, true)));
  }

  card(status, value, secondary) {
    const active = this.params.status === status;
    const counting = value === null || value === undefined;
    return el('a', {
      class: ['card', cssClass(status), active && 'active', secondary && 'card-secondary'],
      role: 'listitem',
      href: this.ctx.router.href({ ...this.params, status: active ? null : status, page: null }),
      title: `${hint(status)}${active ? ' (click again to show every status)' : ''}`,
      dataset: { status },
      'aria-current': active ? 'true' : null,
    },
    el('span', { class: 'card-count', text: counting ? (this.counts ? '…' : '–') : format.count(value) }),
    el('span', { class: 'card-label', text: label(status) }));
  }

  renderChips() {
    const p = this.params;
    const chip = (text, changes) => el('a', {
      class: 'chip', href: this.ctx.router.href({ ...p, ...changes, page: null }), title: 'Remove this filter',
    }, el('span', { text }), el('span', { class: 'chip-x', 'aria-hidden': 'true', text: '×' }));
    replace(this.chips,
      p.status ? chip(`Status: ${label(p.status)}`, { status: null }) : null,
      p.family ? chip(`Family: ${p.family}`, { family: null }) : null,
      p.search ? chip(`Search: ${p.search}`, { search: null }) : null);
  }

  renderFamilies() {
    const families = (this.counts && this.counts.families) || {};
    const perStatus = this.counts && this.counts.family_statuses;
    const status = this.query().status;
    const active = this.params.family || '';
    let names = Object.keys(families).sort((a, b) => a.localeCompare(b));
    if (this.familyFilter) names = names.filter((n) => n.toLowerCase().includes(this.familyFilter) || n === active);
    const shown = names.slice(0, FAMILIES_SHOWN);
    const rows = shown.map((name) => {
      const n = status && perStatus ? (perStatus[name] || {})[status] || 0 : families[name];
      return el('li', {}, el('a', {
        class: ['family', name === active && 'active', status && perStatus && !n && 'zero'],
        href: this.ctx.router.href({ ...this.params, family: name === active ? null : name, page: null }),
        title: name, dataset: { family: name },
      }, el('span', { class: 'family-name', text: name || '(no family)' }), el('span', { class: 'family-count', text: format.count(n) })));
    });
    if (names.length > shown.length) rows.push(el('li', { class: 'muted small', text: `${format.count(names.length - shown.length)} more: filter to find them.` }));
    if (!names.length) rows.push(el('li', { class: 'muted small', text: this.counts ? 'No families.' : 'Loading…' }));
    replace(this.familyList, rows);
  }

  renderTable() {
    const page = this.page;
    if (!page) return;
    if (page.error) {
      this.showMessage('error-box', `Could not list the tasks: ${page.error.message}`);
      return;
    }
    if (page.too_many) {
      this.showMessage('notice-box',
        el('strong', { text: `${format.count(page.total)} tasks match.` }),
        ` That is more than this scheduler lists at once (max_shown_tasks = ${format.count(page.max_shown_tasks)}). `,
        'Narrow the list: pick a status above, a family on the left, or search.');
      return;
    }
    if (page.counting) {
      this.showMessage('notice-box', 'Working out which pending tasks are blocked upstream…');
      return;
    }
    if (!page.tasks.length) {
      const none = this.counts && this.counts.total === 0;
      this.showMessage('empty', none ? 'The scheduler has no tasks yet. Run a pipeline against it and they appear here.'
        : 'No task matches these filters.');
      return;
    }
    replace(this.table, this.head(), el('tbody', {}, page.tasks.map((t) => this.row(t))));
    if (!this.table.isConnected) replace(this.tableArea, this.table);
    this.renderPager(page);
  }

  showMessage(kind, ...content) {
    replace(this.tableArea, el('div', { class: kind, role: 'status' }, content));
    replace(this.pager);
    const total = this.page ? this.page.total : null;
    this.summary.textContent = Number.isFinite(total) ? format.counted(total, 'task') : '';
  }

  head() {
    const q = this.query();
    return el('thead', {}, el('tr', {}, COLUMNS.map(([key, heading, firstDesc]) => {
      const sorted = q.sort_by === key;
      const desc = sorted ? !q.sort_desc : firstDesc;
      return el('th', { scope: 'col', 'aria-sort': sorted ? (q.sort_desc ? 'descending' : 'ascending') : null, class: `col-${key}` },
        el('a', {
          class: 'sort', href: this.ctx.router.href({ ...this.params, sort: key, desc: desc ? 1 : null, page: null }),
          title: `Sort by ${heading.toLowerCase()}`, dataset: { sort: key },
        }, heading, el('span', { class: 'sort-arrow', 'aria-hidden': 'true', text: sorted ? (q.sort_desc ? '▼' : '▲') : '' })));
    }), el('th', { class: 'col-actions', scope: 'col' }, el('span', { class: 'visually-hidden', text: 'Actions' }))));
  }

  /** The buttons a row shows while hovered or focused: the task's actions, without opening its detail. */
  rowActions(task) {
    const { actions, router } = this.ctx;
    const id = task.task_id;
    const button = (text, handler, title) => el('button', { type: 'button', class: 'btn btn-small', text, title, on: { click: handler } });
    return el('span', {
      class: 'row-actions',
      // The row opens the detail on click and Enter; an action is not that.
      on: { click: (event) => event.stopPropagation(), keydown: (event) => event.stopPropagation() },
    },
    task.status === FAILED ? button('Forgive', () => actions.forgiveFailures(id), 'Set this failed task back to PENDING') : null,
    task.status === DISABLED && task.re_enable_able ? button('Re-enable', () => actions.reEnable(id), 'Clear the failures that disabled it') : null,
    [RUNNING, FAILED, DISABLED].includes(task.status) ? button('Mark done', () => actions.markAsDone(id), 'Tell the scheduler this task is DONE') : null,
    el('a', {
      class: 'btn btn-small', text: 'Graph', title: 'Its dependency graph',
      href: router.href({ tab: 'graph', taskId: id, hideDone: task.status === DONE ? 0 : 1, invert: 0 }),
    }));
  }

  row(task) {
    const now = Date.now() / 1000;
    const params = format.paramsText(task.params);
    const worker = task.worker_running || (task.workers && task.workers[0]) || '';
    const open = () => this.ctx.openTask(task.task_id);
    const tr = el('tr', {
      tabindex: '0', class: ['task-row', this.params.detail === task.task_id && 'selected'], dataset: { taskId: task.task_id },
      on: { click: open, keydown: (event) => { if (event.key === 'Enter') open(); } },
    },
    el('td', { class: 'col-status' }, badge(task.status),
      task.upstream_status ? el('span', { class: ['upstream-hint', cssClass(task.upstream_status)], text: label(task.upstream_status) }) : null),
    el('td', { class: 'col-family', text: task.name || '' }),
    el('td', { class: 'col-params', title: params }, el('span', { class: 'params', text: params })),
    el('td', { class: 'col-priority num', text: format.text(task.priority) }),
    task.status === RUNNING && task.time_running
      ? el('td', { class: 'col-time_running num', dataset: { since: String(task.time_running) }, text: format.duration(now - task.time_running) })
      : el('td', { class: 'col-time_running num' }),
    el('td', { class: 'col-worker', title: worker }, el('span', { class: 'worker', text: format.workerLabel(worker) })),
    el('td', { class: 'col-actions' }, this.rowActions(task)));
    return tr;
  }

  renderPager(page) {
    const first = page.offset + 1;
    const last = page.offset + page.tasks.length;
    this.summary.textContent = `${format.count(first)}–${format.count(last)} of ${format.counted(page.total, 'task')}`;
    const size = page.page_size;
    const current = Math.floor(page.offset / size) + 1;
    const pages = Math.max(1, Math.ceil(page.total / size));
    const link = (text, target, title) => el('a', {
      class: ['btn', 'btn-small', (target < 1 || target > pages || target === current) && 'disabled'],
      href: this.ctx.router.href({ ...this.params, page: target > 1 ? target : null }),
      title, 'aria-disabled': target < 1 || target > pages || target === current ? 'true' : null, text,
    });
    const sizes = el('select', { class: 'page-size', 'aria-label': 'Tasks per page' },
      PAGE_SIZES.map((n) => el('option', { value: String(n), selected: n === size, text: `${n} per page` })));
    sizes.addEventListener('change', () => this.ctx.router.update({ size: sizes.value, page: null }));
    replace(this.pager,
      link('«', 1, 'First page'), link('‹', current - 1, 'Previous page'),
      el('span', { class: 'page-of', text: `Page ${format.count(current)} of ${format.count(pages)}` }),
      link('›', current + 1, 'Next page'), link('»', pages, 'Last page'),
      sizes);
  }
}
