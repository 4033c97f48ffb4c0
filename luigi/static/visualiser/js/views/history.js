// The History view (#tab=history, #tab=history&family=<name>): the recorded task families, and for
// one family its runs over time (durations, failures marked) with the error of each failed run.
// Reads luigid's /history/api/... JSON; empty, with a hint, when the scheduler records no history.

import { el, replace } from '../dom.js';
import * as format from '../format.js';
import { ensureStylesheet, fetchHistory, renderError, renderRuns, runsUrl } from './history-chart.js';

const ROOT = '../../'; // from /static/visualiser/index.html to luigid's root

export default {
  id: 'history',
  title: 'History',
  create: (ctx) => new HistoryView(ctx),
};

class HistoryView {
  constructor(ctx) {
    this.ctx = ctx;
    this.family = null;
    this.shown = null; // what the body shows, so a refresh with the same data does not redraw
    this.heading = el('h1', { text: 'History' });
    this.summary = el('span', { class: 'summary', role: 'status' });
    this.links = el('p', { class: 'history-links' });
    this.body = el('div', { class: 'history-view' }, el('p', { class: 'muted', text: 'Loading…' }));
    this.element = el('div', { class: 'page' }, el('div', { class: 'page-head' }, this.heading, this.summary), this.links, this.body);
    ensureStylesheet('css/history.css');
  }

  update(params) {
    const family = params.family || null;
    if (family === this.family) return;
    this.family = family;
    this.shown = null;
    this.heading.textContent = family ? `History of ${family}` : 'History';
    replace(this.links, family
      ? [el('a', { href: this.ctx.router.href({ tab: 'history' }), text: 'All families' }), ' · ',
        el('a', { href: `${ROOT}history/by_name/${encodeURIComponent(family)}`, text: 'Records' })]
      : [el('a', { href: `${ROOT}history`, text: 'Recent runs (last 24 hours)' })]);
    replace(this.body, el('p', { class: 'muted', text: 'Loading…' }));
  }

  destroy() {}

  async refresh() {
    try {
      if (this.family) await this.showFamily(this.family);
      else await this.showFamilies();
    } catch (error) {
      renderError(this.body, `Could not load the history: ${error.message}`);
      this.shown = null;
      throw error;
    }
  }

  async get(url) {
    try {
      return await fetchHistory(url, this.ctx.api.token);
    } catch (error) {
      if (error.status !== 401) throw error;
      const token = await this.ctx.api.requestToken(this.ctx.api.token ? 'refused' : 'required', this.ctx.api.token);
      if (!token) throw error;
      return fetchHistory(url, token);
    }
  }

  async showFamily(family) {
    const data = await this.get(runsUrl(ROOT, family));
    const key = JSON.stringify(data.runs.map((r) => [r.id, r.status]));
    if (family !== this.family || key === this.shown) return;
    this.shown = key;
    this.summary.textContent = format.counted(data.runs.length, 'run');
    renderRuns(this.body, data, ROOT);
  }

  async showFamilies() {
    const data = await this.get(`${ROOT}history/api/names`);
    const key = JSON.stringify(data);
    if (this.family || key === this.shown) return;
    this.shown = key;
    this.summary.textContent = format.counted(data.names.length, 'family', 'families');
    if (!data.recording) {
      replace(this.body, el('div', { class: 'empty' },
        'This scheduler records no task history. Set ', el('code', { text: '[scheduler] record_task_history = true' }),
        ' and restart luigid.'));
      return;
    }
    if (!data.names.length) {
      replace(this.body, el('div', { class: 'empty', text: 'No runs are recorded yet.' }));
      return;
    }
    replace(this.body, el('ul', { class: 'history-families' }, data.names.map(({ name, count }) => el('li', {},
      el('a', { href: this.ctx.router.href({ tab: 'history', family: name }), text: name }),
      el('span', { class: 'muted', text: ` ${format.counted(count, 'record')}` })))));
  }
}
