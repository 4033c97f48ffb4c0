// luigid's /tasklist/<family> page: draws the history chart into every [data-history-runs] element
// (the page is server-rendered and carries no inline script).

import { fetchHistory, renderError, renderRuns } from './history-chart.js';

for (const view of document.querySelectorAll('[data-history-runs]')) {
  const root = view.getAttribute('data-history-root') || '';
  view.setAttribute('aria-busy', 'true');
  fetchHistory(view.getAttribute('data-history-runs'))
    .then((data) => renderRuns(view, data, root))
    .catch((error) => renderError(view, `Could not load the history: ${error.message}`))
    .finally(() => view.removeAttribute('aria-busy'));
}
