// Keeping the open page current: one refresh loop (polling luigid's JSON API), never two refreshes
// at once, slower while the tab is hidden, backing off while the scheduler does not answer.

import { UnreachableError } from './api.js';

export const REFRESH_MS = 5000;
const REFRESH_KEY = 'luigi.visualiser.refreshSeconds'; // optional preference in localStorage (1 to 300)
const HIDDEN_MS = 30000;
const MAX_BACKOFF_MS = 30000;

export class LiveLoop {
  /**
   * @param {() => Promise<void>} tick  fetches and renders everything on screen
   * @param {(state: {reachable: boolean, since: number|null, updated: number|null}) => void} onState
   */
  constructor(tick, onState, { interval = preferredInterval() } = {}) {
    this.tick = tick;
    this.onState = onState;
    this.interval = interval;
    this.timer = null;
    this.running = null;
    this.again = false;
    this.failures = 0;
    this.unreachableSince = null;
    this.updated = null;
    this.ticks = 0; // refreshes done (the benchmark counts them)
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) this.kick();
    });
  }

  /** Refresh now (or right after the refresh in progress) and restart the timer. */
  kick() {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    clearTimeout(this.timer);
    this.running = this.run().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        this.kick();
      } else {
        this.schedule();
      }
    });
    return this.running;
  }

  async run() {
    this.ticks += 1;
    let reachable = true;
    try {
      await this.tick();
      this.updated = Date.now();
    } catch (error) {
      reachable = !(error instanceof UnreachableError);
      // Otherwise the scheduler answered, with an error the views already show; keep refreshing.
      if (reachable) console.warn('refresh failed:', error);
    }
    this.failures = reachable ? 0 : this.failures + 1;
    this.unreachableSince = reachable ? null : this.unreachableSince || Date.now();
    this.onState({ reachable, since: this.unreachableSince, updated: this.updated, retryIn: this.delay() });
  }

  /** The wait before the next refresh: the interval, doubled per failure, longer while hidden. */
  delay() {
    if (this.failures) return Math.min(this.interval * 2 ** (this.failures - 1), MAX_BACKOFF_MS);
    // +-10%, so that pages opened together do not all ask the scheduler at the same moment forever.
    return (document.hidden ? HIDDEN_MS : this.interval) * (0.9 + 0.2 * Math.random());
  }

  schedule() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.kick(), this.delay());
  }
}

/** The refresh interval: REFRESH_MS unless localStorage holds another number of seconds. */
function preferredInterval() {
  let seconds = null;
  try {
    seconds = Number(window.localStorage.getItem(REFRESH_KEY));
  } catch {
    return REFRESH_MS;
  }
  return seconds >= 1 && seconds <= 300 ? seconds * 1000 : REFRESH_MS;
}
