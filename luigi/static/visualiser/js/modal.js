// In-page dialogs (the <dialog> element): confirmations, small forms and the token prompt.
// Nothing here uses window.alert/confirm/prompt.

import { el } from './dom.js';

/**
 * Open a modal form and resolve with what onSubmit returns (or null when cancelled).
 * onSubmit(form) may return undefined to keep the dialog open (e.g. invalid input), or throw: the
 * error message is shown inside the dialog.
 */
export function openForm({ title, body = [], fields = [], submitLabel = 'OK', danger = false, onSubmit, cancelLabel = 'Cancel' }) {
  return new Promise((resolve) => {
    const error = el('p', { class: 'modal-error', role: 'alert', hidden: true });
    const submit = el('button', { type: 'submit', class: ['btn', danger ? 'btn-danger' : 'btn-primary'], text: submitLabel });
    const cancel = el('button', { type: 'button', class: 'btn', text: cancelLabel });
    const form = el('form', { class: 'modal-form', novalidate: true },
      el('h2', { class: 'modal-title', text: title }),
      el('div', { class: 'modal-body' }, body),
      fields,
      error,
      el('div', { class: 'modal-actions' }, cancelLabel ? cancel : null, submit));
    const dialog = el('dialog', { class: 'modal' }, form);
    let settled = false;
    const finish = (value) => {
      if (settled) return;
      settled = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    cancel.addEventListener('click', () => finish(null));
    dialog.addEventListener('cancel', (event) => {
      event.preventDefault();
      finish(null);
    });
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      submit.disabled = true;
      error.hidden = true;
      try {
        const value = await onSubmit(form);
        if (value !== undefined) finish(value);
      } catch (problem) {
        error.textContent = problem && problem.message ? problem.message : String(problem);
        error.hidden = false;
      } finally {
        submit.disabled = false;
      }
    });
    document.body.append(dialog);
    dialog.showModal();
    const first = form.querySelector('input, textarea') || submit;
    first.focus();
  });
}

/** Ask "are you sure?"; resolves true or false. */
export async function confirmAction({ title, body, confirmLabel = 'Confirm', cancelLabel, danger = false }) {
  const answer = await openForm({ title, body, submitLabel: confirmLabel, cancelLabel, danger, onSubmit: () => true });
  return answer === true;
}

/** Ask for a whole number (>= min); resolves the number or null. */
export function askInteger({ title, body, label, value, min = 0, submitLabel = 'Apply' }) {
  const input = el('input', { type: 'number', name: 'value', min: String(min), step: '1', required: true, value: value ?? '' });
  const field = el('label', { class: 'field' }, el('span', { text: label }), input);
  return openForm({
    title,
    body,
    fields: [field],
    submitLabel,
    onSubmit: () => {
      const number = Number(input.value);
      if (input.value.trim() === '' || !Number.isInteger(number) || number < min) {
        throw new Error(`Enter a whole number of at least ${min}.`);
      }
      return number;
    },
  });
}

/** Ask for free text; resolves the text or null. */
export function askText({ title, body, label, submitLabel = 'Send', placeholder = '' }) {
  const input = el('textarea', { name: 'value', rows: '4', placeholder });
  const field = el('label', { class: 'field' }, el('span', { text: label }), input);
  return openForm({ title, body, fields: [field], submitLabel, onSubmit: () => input.value });
}

/** The token prompt luigid's 401 leads to; resolves the token or null. */
export function askToken(reason) {
  const input = el('input', { type: 'password', name: 'token', autocomplete: 'current-password', required: true });
  const field = el('label', { class: 'field' }, el('span', { text: 'Access token' }), input);
  const why = reason === 'refused'
    ? 'The scheduler refused the token this page used. Enter the current one.'
    : 'This scheduler requires an access token ([scheduler] auth_token).';
  return openForm({
    title: 'Sign in to the scheduler',
    body: [el('p', { text: why }), el('p', { class: 'muted', text: 'It is kept for this browser tab only (session storage).' })],
    fields: [field],
    submitLabel: 'Use token',
    onSubmit: () => {
      const token = input.value.trim();
      if (!token) throw new Error('Enter the token.');
      return token;
    },
  });
}

/** Show a result (text) with a single close button. */
export function showResult({ title, body }) {
  return openForm({ title, body, submitLabel: 'Close', cancelLabel: null, onSubmit: () => true });
}
