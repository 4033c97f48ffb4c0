// A task's error in the detail panel: the exception line first (what went wrong, in one line), then the
// traceback with the framework's own frames folded behind a toggle, since they are the same in every
// failure and push the user's frames out of sight. Text only, never markup.

import { el } from './dom.js';

const FRAME = /^\s+File "([^"]*)", line \d+/;
// Frames of the engine that runs tasks (luigi's worker, scheduler, client and command line) and of the
// Python machinery under it: never where a task's own bug is.
const ENGINE_PATH = /[\\/]luigi[\\/](worker|scheduler|rpc|server|interface\.py|cmdline\.py|retcodes\.py)|[\\/](multiprocessing|concurrent|threading\.py|runpy\.py)/;

/**
 * Split an error text into its parts: {headline, lines: [{text, engine}]}. The headline is the exception
 * line(s) after the last frame ("ValueError: ..."); for a text that is not a traceback, its last line.
 */
export function parseTraceback(text) {
  const lines = String(text).replace(/\s+$/, '').split('\n');
  const parsed = [];
  let lastFrameEnd = -1;
  let inEngineFrame = false;
  lines.forEach((line, i) => {
    const frame = FRAME.exec(line);
    if (frame) {
      inEngineFrame = ENGINE_PATH.test(frame[1]);
      lastFrameEnd = i;
    } else if (lastFrameEnd === i - 1 && /^\s/.test(line)) {
      lastFrameEnd = i; // the frame's source line and its ^^^ markers belong to it
    } else {
      inEngineFrame = false;
    }
    parsed.push({ text: line, engine: inEngineFrame });
  });
  const tail = lastFrameEnd < 0 ? '' : lines.slice(lastFrameEnd + 1).join('\n').trim();
  return { headline: tail || lines[lines.length - 1].trim(), lines: parsed };
}

/** The error section's content: the headline, a fold toggle (when there are engine frames) and the text. */
export class ErrorView {
  constructor() {
    this.showEngine = false;
  }

  /** Render ``text``; the fold choice is kept across re-renders (the page refreshes every few seconds). */
  render(text) {
    const { headline, lines } = parseTraceback(text);
    const hidden = lines.filter((l) => l.engine && FRAME.test(l.text)).length;
    const pre = el('pre', { class: 'traceback' });
    const draw = () => {
      pre.replaceChildren(...foldedText(lines, this.showEngine));
      toggle.textContent = this.showEngine ? 'Fold framework frames' : `Show ${hidden} framework frame${hidden === 1 ? '' : 's'}`;
      toggle.setAttribute('aria-expanded', String(this.showEngine));
    };
    const toggle = el('button', {
      type: 'button', class: 'btn btn-small btn-link frames-toggle', hidden: !hidden,
      on: { click: () => { this.showEngine = !this.showEngine; draw(); } },
    });
    draw();
    return {
      headline: el('p', { class: 'error-headline', title: 'The exception the task raised' }, headline),
      body: [toggle, pre],
    };
  }
}

/** The lines as text nodes, each run of engine frames shown as one muted placeholder line unless shown. */
function foldedText(lines, showEngine) {
  const out = [];
  let run = 0;
  const flush = () => {
    if (!run) return;
    out.push(el('span', { class: 'folded-frames', text: `  … ${run} framework frame${run === 1 ? '' : 's'} folded\n` }));
    run = 0;
  };
  for (const line of lines) {
    if (line.engine && !showEngine) {
      if (FRAME.test(line.text)) run += 1;
      continue;
    }
    flush();
    out.push(document.createTextNode(`${line.text}\n`));
  }
  flush();
  return out;
}
