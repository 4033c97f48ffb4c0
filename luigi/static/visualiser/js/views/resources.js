// The resources page (#tab=resource, Luigi's name): each resource's capacity, how much running tasks
// hold, and which tasks hold it; change a capacity.

import { el, replace } from '../dom.js';
import * as format from '../format.js';
import { dot } from '../status.js';

const HOLDERS_SHOWN = 30;

export default {
  id: 'resource',
  aliases: ['resources'],
  title: 'Resources',
  create: (ctx) => new ResourcesView(ctx),
};

class ResourcesView {
  constructor(ctx) {
    this.ctx = ctx;
    this.body = el('div', { class: 'resource-area' }, el('p', { class: 'muted', text: 'Loading…' }));
    this.summary = el('span', { class: 'summary', role: 'status' });
    this.element = el('div', { class: 'page' },
      el('div', { class: 'page-head' }, el('h1', { text: 'Resources' }), this.summary),
      this.body);
  }

  update() {}

  destroy() {}

  async refresh() {
    let resources;
    try {
      resources = await this.ctx.api.call('resource_list', {});
    } catch (error) {
      replace(this.body, el('p', { class: 'error-box', text: `Could not list the resources: ${error.message}` }));
      throw error;
    }
    resources.sort((a, b) => String(a.name).localeCompare(String(b.name)));
    this.summary.textContent = format.counted(resources.length, 'resource');
    if (!resources.length) {
      replace(this.body, el('div', { class: 'empty' },
        'No resource is configured. Declare them in the [resources] section of the scheduler\'s configuration.'));
      return;
    }
    replace(this.body, el('table', { class: 'resource-table' },
      el('thead', {}, el('tr', {}, ['Resource', 'Used', 'Capacity', 'Use', 'Held by', ''].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, resources.map((r) => this.row(r)))));
  }

  row(resource) {
    const total = Number(resource.num_total) || 0;
    const used = Number(resource.num_used) || 0;
    const share = total > 0 ? Math.min(100, (100 * used) / total) : (used > 0 ? 100 : 0);
    const fill = el('div', { class: ['progress-fill', share >= 100 ? 'st-FAILED' : share >= 75 ? 'st-PENDING' : 'st-DONE'] });
    fill.style.width = `${share}%`;
    const holders = Object.entries(resource.running || {});
    const list = holders.slice(0, HOLDERS_SHOWN).map(([taskId, task]) => el('li', {},
      el('button', { type: 'button', class: 'task-link', title: taskId, on: { click: () => this.ctx.openTask(taskId) } },
        dot(task.status), el('span', { text: format.displayName(task, taskId) }),
        el('span', { class: 'muted', text: ` × ${format.text((task.resources_running || task.resources || {})[resource.name] ?? '')}` }))));
    if (holders.length > HOLDERS_SHOWN) list.push(el('li', { class: 'muted', text: `…and ${holders.length - HOLDERS_SHOWN} more` }));
    return el('tr', { dataset: { resource: resource.name } },
      el('th', { scope: 'row', class: 'resource-name', text: resource.name }),
      el('td', { class: 'num', text: format.count(used) }),
      el('td', { class: 'num', text: format.count(total) }),
      el('td', { class: 'col-bar' }, el('div', { class: 'progress-track' }, fill)),
      el('td', {}, holders.length ? el('ul', { class: 'neighbours' }, list) : el('span', { class: 'muted', text: 'Nothing' })),
      el('td', { class: 'actions' }, el('button', {
        type: 'button', class: 'btn btn-small', text: 'Capacity…',
        on: { click: () => this.ctx.actions.setResourceCapacity(resource.name, total) },
      })));
  }
}
