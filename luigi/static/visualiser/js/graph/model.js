// From the scheduler's graph_view answer to what the canvas draws: boxes with labels and a status,
// and edges that always point from a dependency to the task that needs it (data flows downwards).

import * as format from '../format.js';
import { SEVERITY, UNKNOWN } from '../status.js';

const TITLE_CHAR_WIDTH = 7.3; // px per character of the bold 12px title, near enough for box sizes
const SUBTITLE_CHAR_WIDTH = 6.7; // px per character of the 11px monospace subtitle
const MIN_WIDTH = 96;
const MAX_WIDTH = 270;
const PARAMS_CHARS = 36;
const TITLE_CHARS = 32;

/** One box per task; `deps` in the answer are dependencies (or dependents when inverted). */
export function taskModel(answer) {
  const nodes = [];
  const edges = [];
  const ids = Object.keys(answer.nodes || {});
  const known = new Set(ids);
  for (const id of ids) {
    const task = answer.nodes[id];
    const title = format.ellipsis(task.name || id, TITLE_CHARS);
    const params = format.ellipsis(format.paramsText(task.params), PARAMS_CHARS);
    nodes.push({
      id,
      kind: 'task',
      title,
      subtitle: params,
      tooltip: format.displayName(task, id),
      status: task.status || UNKNOWN,
      root: id === answer.task_id,
      ...size(title, params),
    });
    for (const other of task.deps || []) {
      if (!known.has(other) || other === id) continue;
      edges.push(answer.inverse ? [id, other] : [other, id]);
    }
  }
  return { kind: 'task', nodes, edges: unique(edges) };
}

/** One box per family, coloured by its most severe status, with a bar of its status mix. */
export function familyModel(answer) {
  const nodes = Object.entries(answer.families || {}).map(([family, statuses]) => {
    const total = Object.values(statuses).reduce((a, b) => a + b, 0);
    const subtitle = format.counted(total, 'task');
    return {
      id: family,
      kind: 'family',
      title: format.ellipsis(family || '(no family)', TITLE_CHARS),
      subtitle,
      tooltip: `${family}: ${Object.entries(statuses).map(([s, n]) => `${n} ${s}`).join(', ')}`,
      status: SEVERITY.find((s) => statuses[s]) || UNKNOWN,
      statuses,
      total,
      root: family === answer.root_family,
      ...size(format.ellipsis(family, TITLE_CHARS), subtitle),
      height: 50,
    };
  });
  const known = new Set(nodes.map((n) => n.id));
  const edges = (answer.edges || []).filter(([a, b]) => a !== b && known.has(a) && known.has(b)).map(([a, b]) => [a, b]);
  return { kind: 'family', nodes, edges: unique(edges) };
}

function size(title, subtitle) {
  const text = Math.max(String(title).length * TITLE_CHAR_WIDTH, String(subtitle).length * SUBTITLE_CHAR_WIDTH);
  return { width: Math.round(Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, text + 26))), height: 40 };
}

function unique(edges) {
  const seen = new Set();
  return edges.filter(([a, b]) => {
    const key = `${a}\u0000${b}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A string that changes whenever the drawn shape would (not when only statuses change). */
export function shapeKey(model) {
  const nodes = model.nodes.map((n) => `${n.id}\u0001${n.width}`).sort();
  const edges = model.edges.map(([a, b]) => `${a}\u0000${b}`).sort();
  return `${model.kind}\u0002${nodes.join('\u0002')}\u0003${edges.join('\u0002')}`;
}
