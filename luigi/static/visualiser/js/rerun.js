// "Command to re-run" in the task detail: the luigi command line that runs this task again, built from
// the module the worker registered it with (add_task's module), its family and its parameters.

import { el } from './dom.js';

const SHELL_SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** ``value`` as one POSIX shell word: bare when that is safe, else single-quoted ('it'"'"'s'). */
export function shellQuote(value) {
  const s = String(value);
  if (SHELL_SAFE.test(s)) return s;
  return `'${s.replace(/'/g, `'"'"'`)}'`;
}

/** ``luigi --module m Family --a-param value ...`` (without --module when the scheduler was not told it). */
export function rerunCommand(task) {
  const words = ['luigi'];
  if (task.module) words.push('--module', shellQuote(task.module));
  words.push(shellQuote(task.name || ''));
  const params = task.params || {};
  for (const name of Object.keys(params).sort()) {
    const value = params[name];
    words.push(`--${name.replace(/_/g, '-')}`, shellQuote(typeof value === 'string' ? value : JSON.stringify(value)));
  }
  return words.join(' ');
}

/** The command in a box with a copy button (the clipboard API, else a selection copy for plain http). */
export function rerunBox(task, notify) {
  const command = rerunCommand(task);
  const code = el('code', { class: 'rerun-command', text: command });
  const copy = el('button', {
    type: 'button', class: 'btn btn-small copy-command', text: 'Copy',
    title: 'Copy the command to the clipboard',
    on: {
      click: async () => {
        const copied = await copyText(command, code);
        notify(copied ? 'Command copied.' : 'Could not copy: select the command and copy it by hand.', copied ? 'success' : 'error');
      },
    },
  });
  return el('div', { class: 'rerun' },
    el('pre', { class: 'rerun-box' }, code),
    copy,
    task.module ? null : el('p', { class: 'muted small', text: 'The worker did not tell the scheduler the task\'s module: add --module yours.' }));
}

async function copyText(text, node) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      /* refused (permissions): fall back to copying the selection */
    }
  }
  const selection = window.getSelection();
  selection.selectAllChildren(node);
  try {
    return document.execCommand('copy'); // the only way to copy on a page served over plain http
  } finally {
    selection.removeAllRanges();
  }
}
