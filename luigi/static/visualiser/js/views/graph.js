// The dependency graph of one task (#tab=graph&taskId=<id>&hideDone=1&invert=0): what it needs
// (upstream) or, inverted, what needs it (downstream), coloured by status; click a task for its detail.
//
// Layout runs in a Web Worker (dagre), so the tab stays responsive. Past GROUP_BY_FAMILY_PAST tasks the
// graph opens one box per family (&group=0 asks for every task, &group=1 groups any graph), and a click on
// a family shows its tasks (&expand=<family>,...); past GRAPH_LIMIT the scheduler itself answers per family.

import { el, replace } from '../dom.js';
import * as format from '../format.js';
import { GraphCanvas } from '../graph/canvas.js';
import { familyModel, groupedModel, shapeKey, taskModel } from '../graph/model.js';
import { badge, MAIN_STATUSES, UNKNOWN } from '../status.js';

export const GRAPH_LIMIT = 2000;
export const GROUP_BY_FAMILY_PAST = 300; // more boxes than this cannot be read at once: families first
const LAYOUT_TIMEOUT_MS = 25000;
const REFRESH_MS_PER_NODE = 5; // a drawn graph of 2,000 tasks is re-read every 10 s, not every tick

export default {
  id: 'graph',
  title: 'Graph',
  create: (ctx) => new GraphView(ctx),
};

class GraphView {
  constructor(ctx) {
    this.ctx = ctx;
    this.options = {};
    this.drawnKey = null;
    this.drawnFor = null;
    this.fetchedNodes = 0; // tasks in the last answer: a big graph is re-read less often, grouped or not
    this.fetchedAt = 0;
    this.layoutRun = 0;
    this.layoutPending = null;
    this.worker = null;
    this.cancelLayout = null;
    this.canvas = new GraphCanvas({ onNodeClick: (id) => this.nodeClicked(id) });
    this.build();
  }

  build() {
    const { router } = this.ctx;
    this.taskInput = el('input', { type: 'text', class: 'task-input', placeholder: 'Task id, e.g. MyTask(date=2024-05-01)', 'aria-label': 'Task id', spellcheck: 'false' });
    const form = el('form', { class: 'graph-form' }, this.taskInput, el('button', { type: 'submit', class: 'btn btn-primary', text: 'Show' }));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      router.update({ taskId: this.taskInput.value.trim() || null });
    });
    this.upstreamButton = el('button', { type: 'button', class: 'seg', text: 'Upstream', title: 'What this task needs', on: { click: () => router.update({ invert: 0 }) } });
    this.downstreamButton = el('button', { type: 'button', class: 'seg', text: 'Downstream', title: 'What needs this task', on: { click: () => router.update({ invert: 1 }) } });
    this.hideDone = el('input', { type: 'checkbox', id: 'hide-done' });
    this.hideDone.addEventListener('change', () => router.update({ hideDone: this.hideDone.checked ? 1 : 0 }));
    this.group = el('input', { type: 'checkbox', id: 'group-families' });
    this.group.addEventListener('change', () => router.update({ group: this.group.checked ? 1 : 0, expand: null }));
    this.stats = el('span', { class: 'summary', role: 'status' });
    this.message = el('div', { class: 'graph-message', hidden: true });
    this.overlay = el('div', { class: 'graph-overlay', hidden: true });
    const zoom = (text, title, fn) => el('button', { type: 'button', class: 'btn btn-small', text, title, on: { click: fn } });
    this.element = el('div', { class: 'graph-view', dataset: { state: 'empty' } },
      el('div', { class: 'toolbar graph-toolbar' },
        form,
        el('div', { class: 'segmented', role: 'group', 'aria-label': 'Direction' }, this.upstreamButton, this.downstreamButton),
        el('label', { class: 'check' }, this.hideDone, 'Hide done'),
        el('label', { class: 'check' }, this.group, 'Group by family'),
        el('div', { class: 'zoom' },
          zoom('−', 'Zoom out', () => this.canvas.zoomBy(1 / 1.3)),
          zoom('+', 'Zoom in', () => this.canvas.zoomBy(1.3)),
          zoom('Fit', 'Fit the graph in the window', () => this.canvas.fit()),
          this.failuresButton = zoom('Next failure', 'Centre on the next failed or disabled task', () => this.canvas.nextFailure())),
        this.stats),
      this.message,
      el('div', { class: 'graph-stage' }, this.canvas.element, this.overlay),
      el('div', { class: 'legend' }, [...MAIN_STATUSES, UNKNOWN].map((s) => badge(s))));
  }

  update(params) {
    const options = {
      taskId: params.taskId || '',
      invert: params.invert === '1',
      hideDone: params.hideDone === '1',
      group: params.group === '1' || params.group === '0' ? params.group : 'auto',
      expand: (params.expand || '').split(',').filter(Boolean),
    };
    if (document.activeElement !== this.taskInput) this.taskInput.value = options.taskId;
    this.hideDone.checked = options.hideDone;
    if (options.group !== 'auto') this.group.checked = options.group === '1';
    this.upstreamButton.classList.toggle('active', !options.invert);
    this.downstreamButton.classList.toggle('active', options.invert);
    this.upstreamButton.setAttribute('aria-pressed', String(!options.invert));
    this.downstreamButton.setAttribute('aria-pressed', String(options.invert));
    this.options = options;
    this.canvas.select(params.detail || null);
    if (!options.taskId) this.showEmpty();
  }

  showEmpty() {
    this.canvas.clear();
    this.drawnKey = null;
    this.stats.textContent = '';
    this.element.dataset.state = 'empty';
    this.say('info', 'Pick a task: type or paste its id above, or open a task from the Tasks list and choose “Dependency graph”.');
  }

  say(kind, ...content) {
    this.message.className = `graph-message ${kind === 'error' ? 'error-box' : 'notice-box'}`;
    replace(this.message, content);
    this.message.hidden = !content.length;
  }

  async refresh() {
    const options = this.options;
    if (!options.taskId) return;
    if (this.layoutPending && this.layoutPending.for === optionsKey(options)) return; // still laying out
    if (this.drawnFor === optionsKey(options) && performance.now() - this.fetchedAt < this.fetchedNodes * REFRESH_MS_PER_NODE) return;
    this.fetchedAt = performance.now();
    let answer;
    try {
      answer = await this.ctx.api.call('graph_view', {
        task_id: options.taskId,
        inverse: options.invert,
        include_done: !options.hideDone,
        max_nodes: GRAPH_LIMIT,
      });
    } catch (error) {
      this.say('error', `Could not load the graph: ${error.message}`);
      throw error;
    }
    if (optionsKey(options) !== optionsKey(this.options)) return; // the address changed meanwhile
    if (!answer || (!answer.collapsed && !Object.keys(answer.nodes || {}).length)) {
      this.canvas.clear();
      this.drawnKey = null;
      this.stats.textContent = '';
      this.element.dataset.state = 'missing';
      this.say('error', 'The scheduler does not know the task ', el('code', { text: options.taskId }), '.');
      return;
    }
    this.fetchedNodes = answer.num_nodes || 0;
    const model = this.modelOf(answer, options);
    this.group.checked = model.kind !== 'task';
    this.group.disabled = Boolean(answer.collapsed);
    this.explain(answer, model);
    const key = shapeKey(model);
    if (key === this.drawnKey) {
      this.canvas.recolour(model);
      return;
    }
    this.layOut(model, key, options);
  }

  /** Tasks one by one, or grouped by family: as asked, or by default past GROUP_BY_FAMILY_PAST tasks. */
  modelOf(answer, options) {
    const measure = this.canvas.measurer();
    if (answer.collapsed) return familyModel(answer, measure);
    const grouped = options.group === '1' || (options.group === 'auto' && answer.num_nodes > GROUP_BY_FAMILY_PAST);
    return grouped ? groupedModel(answer, new Set(options.expand), measure) : taskModel(answer, measure);
  }

  explain(answer, model) {
    const n = format.count(answer.num_nodes);
    const cap = answer.truncated ? ` The scheduler stopped collecting at ${format.count(answer.num_nodes)} tasks ([scheduler] max_graph_nodes).` : '';
    if (answer.collapsed) {
      this.say('info', el('strong', { text: `${n} tasks` }),
        ` are more than the ${format.count(GRAPH_LIMIT)} this page draws one by one, so they are grouped by family. Click a family to list its tasks, or open the graph of a task further down.${cap}`);
    } else if (model.kind === 'grouped') {
      const why = this.options.group === '1' ? 'grouped by family' : `more than ${format.count(GROUP_BY_FAMILY_PAST)}, so grouped by family`;
      this.say('info', el('strong', { text: `${n} tasks` }),
        `, ${why}. Click a family to show its tasks; untick “Group by family” to show every task.${cap}`,
        this.expandedList());
    } else {
      this.say('info');
      if (cap) this.say('info', cap.trim());
    }
  }

  /** The families shown task by task, each with a button that groups it again. */
  expandedList() {
    const { expand } = this.options;
    if (!expand.length) return null;
    return el('div', { class: 'expanded' }, 'Shown task by task: ', expand.map((family) => el('button', {
      type: 'button',
      class: 'btn btn-small chip',
      title: `Group the ${family} tasks again`,
      dataset: { family },
      text: `${family} ×`,
      on: { click: () => this.ctx.router.update({ expand: expand.filter((f) => f !== family).join(',') || null }) },
    })));
  }

  /** Lay the model out in the worker, then draw it (unless the user moved on meanwhile). */
  layOut(model, key, options) {
    const started = performance.now();
    const run = ++this.layoutRun;
    const forKey = optionsKey(options);
    const sameGraph = this.drawnFor === forKey;
    this.element.dataset.state = 'layout';
    const shape = `${nodesText(model)} · ${format.counted(model.edges.length, 'dependency', 'dependencies')}`;
    // Said before the layout, so the toolbar has its final height when the window's shape is measured.
    this.stats.textContent = `${shape} · laying out…`;
    if (!sameGraph || model.nodes.length > 300) {
      replace(this.overlay, el('div', { class: 'spinner', 'aria-hidden': 'true' }),
        el('span', { text: `Laying out ${nodesText(model)}…` }));
      this.overlay.hidden = false;
    }
    const done = this.layoutWith(model).then((layout) => {
      if (run !== this.layoutRun) return;
      this.canvas.draw(model, layout, { keepView: sameGraph });
      this.canvas.select(this.ctx.router.params.detail || null);
      this.drawnKey = key;
      this.drawnFor = forKey;
      const ms = performance.now() - started;
      this.stats.textContent = `${shape} · laid out in ${(ms / 1000).toFixed(1)} s`;
      this.element.dataset.state = 'ready';
      this.element.dataset.nodes = String(model.nodes.length);
      this.element.dataset.edges = String(model.edges.length);
      this.element.dataset.renderMs = String(Math.round(ms));
      this.element.dataset.layoutMs = String(layout.ms);
      this.failuresButton.disabled = !this.canvas.alarms.length;
    }).catch((error) => {
      if (run !== this.layoutRun) return;
      this.element.dataset.state = 'error';
      this.say('error', `${error.message} `, options.group === '1' ? '' : el('a', {
        href: this.ctx.router.href({ ...this.ctx.router.params, group: 1 }), text: 'Group by family instead',
      }));
    }).finally(() => {
      if (run === this.layoutRun) {
        this.overlay.hidden = true;
        this.layoutPending = null;
      }
    });
    this.layoutPending = { for: forKey, done };
  }

  layoutWith(model) {
    if (this.cancelLayout) this.cancelLayout(); // a newer graph replaces one still being laid out
    if (!this.worker) this.worker = new Worker(new URL('../graph/layout-worker.js', import.meta.url));
    const worker = this.worker;
    const id = this.layoutRun;
    return new Promise((resolve, reject) => {
      const finish = () => {
        clearTimeout(timer);
        worker.removeEventListener('message', onMessage);
        worker.removeEventListener('error', onError);
        this.cancelLayout = null;
      };
      const timer = setTimeout(() => {
        finish();
        this.stopWorker();
        reject(new Error(`Laying out ${format.count(model.nodes.length)} nodes took longer than ${LAYOUT_TIMEOUT_MS / 1000} s, so it was stopped.`));
      }, LAYOUT_TIMEOUT_MS);
      const onMessage = (event) => {
        if (event.data.id !== id) return;
        finish();
        if (event.data.ok) resolve(event.data);
        else reject(new Error(`The layout failed: ${event.data.error}`));
      };
      const onError = (event) => {
        finish();
        this.stopWorker();
        reject(new Error(`The layout worker failed: ${event.message || 'unknown error'}`));
      };
      this.cancelLayout = () => {
        finish();
        this.stopWorker(); // drop the old layout's work rather than queueing behind it
        reject(new Error('superseded'));
      };
      worker.addEventListener('message', onMessage);
      worker.addEventListener('error', onError);
      worker.postMessage({
        id,
        nodes: model.nodes.map((n) => ({ id: n.id, width: n.width, height: n.height })),
        edges: model.edges,
        rankdir: 'TB',
        viewport: viewportOf(this.canvas.svg),
      });
    });
  }

  stopWorker() {
    if (this.worker) this.worker.terminate();
    this.worker = null;
  }

  nodeClicked(id) {
    const node = this.canvas.nodeElements.get(id);
    const family = node ? node.dataset.family : undefined;
    if (family === undefined) {
      this.ctx.openTask(id);
    } else if (this.drawnKey.startsWith('grouped')) {
      this.ctx.router.update({ expand: [...this.options.expand, family].join(',') });
    } else {
      this.ctx.router.go({ tab: 'tasks', family });
    }
  }

  destroy() {
    this.layoutRun += 1;
    if (this.cancelLayout) this.cancelLayout();
    this.stopWorker();
  }
}

function optionsKey(o) {
  return JSON.stringify([o.taskId, o.invert, o.hideDone, o.group, o.expand]);
}

/** The drawing area's size, which the layout folds a wide graph to fit. */
function viewportOf(element) {
  const { width, height } = element.getBoundingClientRect();
  return { width, height };
}

/** "1 task", "40 tasks", "3 families", "2 families and 19 tasks": what the model's boxes stand for. */
function nodesText(model) {
  const families = model.nodes.filter((n) => n.kind === 'family').length;
  const tasks = model.nodes.length - families;
  const parts = [families && format.counted(families, 'family', 'families'), (tasks || !families) && format.counted(tasks, 'task')];
  return parts.filter(Boolean).join(' and ');
}
