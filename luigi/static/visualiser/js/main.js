// The visualiser's shell: navigation, the view named by the address, the task detail panel, the
// scheduler's pause switch, notifications, and the live loop that keeps it all current.

import { LuigiApi } from './api.js';
import { makeActions } from './actions.js';
import { TaskDetail } from './detail.js';
import { el, replace } from './dom.js';
import * as format from './format.js';
import { LiveLoop } from './live.js';
import { askToken } from './modal.js';
import { Router } from './router.js';
import { VIEWS, viewFor } from './views/registry.js';

const NOTICE_MS = 6000;

class App {
  constructor() {
    this.api = new LuigiApi('../../api', { askToken });
    this.router = new Router((params) => this.route(params));
    this.live = new LiveLoop(() => this.refresh(), (state) => this.showConnection(state));
    this.ctx = {
      api: this.api,
      router: this.router,
      openTask: (taskId) => this.router.update({ detail: taskId }),
      notify: (message, kind) => this.notify(message, kind),
      refresh: () => this.live.kick(),
    };
    this.ctx.actions = makeActions(this.ctx);
    this.detail = new TaskDetail(this.ctx);
    this.viewDef = null;
    this.view = null;
    this.pauseEnabled = null;
    this.paused = null;
  }

  start() {
    this.main = document.getElementById('view');
    this.nav = document.getElementById('nav');
    this.connection = document.getElementById('connection');
    this.banner = document.getElementById('banner');
    this.pausedBanner = document.getElementById('paused-banner');
    this.pauseButton = document.getElementById('pause-toggle');
    this.notices = document.getElementById('notices');
    this.pauseButton.addEventListener('click', () => this.ctx.actions.setPaused(!this.paused));
    document.body.append(this.detail.element);
    replace(this.nav, VIEWS.map((view) => el('a', { href: `#tab=${view.id}`, class: 'nav-link', dataset: { view: view.id }, text: view.title })));
    this.route(this.router.params);
  }

  /** Show what the address names: the view (created only when it changes) and the detail panel. */
  route(params) {
    const def = viewFor(params.tab);
    if (def !== this.viewDef) {
      if (this.view) this.view.destroy();
      this.viewDef = def;
      this.view = def.create(this.ctx);
      replace(this.main, this.view.element);
      document.title = `${def.title} · Luigi`;
      for (const link of this.nav.children) {
        const current = link.dataset.view === def.id;
        link.classList.toggle('active', current);
        if (current) link.setAttribute('aria-current', 'page');
        else link.removeAttribute('aria-current');
      }
    }
    this.view.update(params);
    this.detail.show(params.detail || null);
    this.live.kick();
  }

  /** One live tick: the view, the detail panel and the top bar, together. */
  async refresh() {
    const results = await Promise.allSettled([this.view.refresh(), this.detail.refresh(), this.refreshPause()]);
    const unreachable = results.find((r) => r.status === 'rejected' && r.reason && r.reason.name === 'UnreachableError');
    if (unreachable) throw unreachable.reason;
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async refreshPause() {
    if (this.pauseEnabled === null) this.pauseEnabled = Boolean((await this.api.call('is_pause_enabled')).enabled);
    this.pauseButton.hidden = !this.pauseEnabled;
    if (!this.pauseEnabled) return;
    this.paused = Boolean((await this.api.call('is_paused')).paused);
    this.pauseButton.textContent = this.paused ? 'Resume scheduler' : 'Pause scheduler';
    this.pauseButton.classList.toggle('btn-warning', this.paused);
    this.pausedBanner.hidden = !this.paused;
  }

  showConnection({ reachable, since, updated, retryIn }) {
    this.connection.classList.toggle('down', !reachable);
    this.connection.classList.toggle('up', reachable);
    document.body.classList.toggle('unreachable', !reachable);
    if (reachable) {
      this.connection.textContent = 'Live';
      this.connection.title = updated ? `Updated ${format.timestamp(updated / 1000)}` : '';
      this.banner.hidden = true;
      return;
    }
    this.connection.textContent = 'Unreachable';
    this.connection.title = `Since ${format.timestamp(since / 1000)}`;
    replace(this.banner,
      el('strong', { text: 'The scheduler is not answering.' }),
      ` No answer since ${format.timestamp(since / 1000)}; the page shows the last data it received and retries in ${Math.round(retryIn / 1000)} s.`);
    this.banner.hidden = false;
  }

  notify(message, kind = 'info') {
    const notice = el('div', { class: ['notice', `notice-${kind}`], role: kind === 'error' ? 'alert' : 'status', text: message });
    this.notices.append(notice);
    setTimeout(() => notice.remove(), NOTICE_MS);
  }
}

const app = new App();
app.start();
window.luigiVisualiser = app; // for debugging from the console, and for the browser tests
