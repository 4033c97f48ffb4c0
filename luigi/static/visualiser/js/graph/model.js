// From the scheduler's graph_view answer to what the canvas draws: boxes with labels and a status,
// and edges that always point from a dependency to the task that needs it (data flows downwards).
//
// Boxes are as wide as their text, measured in the fonts they are drawn in (`measure(kind, text)`, see
// GraphCanvas.measurer); text longer than the widest box ends in an ellipsis, and the full name is the
// box's tooltip. A graph can be grouped by family (one box per family, with its count per status),
// some families expanded back into their tasks.

import * as format from '../format.js';
import { label, SEVERITY, UNKNOWN } from '../status.js';

export const TEXT_LEFT = 13; // where a box's text starts (after its status stripe)
const TEXT_RIGHT = 10;
const MIN_WIDTH = 96;
const MAX_WIDTH = 300;
const TASK_HEIGHT = 40;
const FAMILY_HEIGHT = 50;

/** One box per task; `deps` in the answer are dependencies (or dependents when inverted). */
export function taskModel(answer, measure) {
  const tasks = answer.nodes || {};
  const nodes = Object.keys(tasks).map((id) => taskNode(id, tasks[id], id === answer.task_id, measure));
  return { kind: 'task', nodes, edges: taskEdges(answer, (id) => id) };
}

/**
 * One box per family, except the tasks of `expanded` families, from a full (not collapsed) answer.
 * Family boxes can be expanded; edges between two tasks of one family disappear inside its box.
 */
export function groupedModel(answer, expanded, measure) {
  const tasks = answer.nodes || {};
  const counts = new Map();
  const boxOf = new Map();
  const nodes = [];
  for (const [id, task] of Object.entries(tasks)) {
    const family = task.name || id;
    if (expanded.has(family)) {
      nodes.push(taskNode(id, task, id === answer.task_id, measure));
      boxOf.set(id, id);
      continue;
    }
    if (!counts.has(family)) counts.set(family, {});
    const statuses = counts.get(family);
    const status = task.status || UNKNOWN;
    statuses[status] = (statuses[status] || 0) + 1;
    boxOf.set(id, familyId(family));
  }
  const rootFamily = tasks[answer.task_id] ? tasks[answer.task_id].name : null;
  for (const [family, statuses] of counts) {
    nodes.push(familyNode(family, statuses, { root: family === rootFamily, expandable: true }, measure));
  }
  return { kind: 'grouped', nodes, edges: taskEdges(answer, (id) => boxOf.get(id)) };
}

/** The scheduler's own grouping (a graph too big to send task by task): families only, not expandable. */
export function familyModel(answer, measure) {
  const nodes = Object.entries(answer.families || {}).map(([family, statuses]) => ({
    ...familyNode(family, statuses, { root: family === answer.root_family, expandable: false }, measure),
    id: family, // no task boxes beside them, so the family name alone is a unique id
  }));
  const known = new Set(nodes.map((n) => n.id));
  const edges = (answer.edges || []).filter(([a, b]) => a !== b && known.has(a) && known.has(b)).map(([a, b]) => [a, b]);
  return { kind: 'family', nodes, edges: unique(edges) };
}

/** A family box's id beside task boxes: apart from every task id, which never starts with a space. */
export function familyId(family) {
  return ` family ${family}`;
}

function taskNode(id, task, root, measure) {
  const name = task.name || id;
  return {
    id,
    kind: 'task',
    tooltip: format.displayName(task, id),
    status: task.status || UNKNOWN,
    root,
    ...boxText(name, format.paramsText(task.params), TASK_HEIGHT, measure),
  };
}

function familyNode(family, statuses, { root, expandable }, measure) {
  const name = family || '(no family)';
  const total = Object.values(statuses).reduce((a, b) => a + b, 0);
  const present = SEVERITY.filter((s) => statuses[s]);
  const mix = present.map((s) => `${format.count(statuses[s])} ${label(s).toLowerCase()}`).join(', ');
  const hint = expandable ? 'click to show its tasks' : 'click to list its tasks';
  return {
    id: familyId(family),
    kind: 'family',
    family,
    expandable,
    tooltip: `${name}: ${format.counted(total, 'task')} (${mix}); ${hint}`,
    status: present[0] || UNKNOWN,
    statuses,
    total,
    root,
    ...boxText(name, `${format.counted(total, 'task')}: ${mix}`, FAMILY_HEIGHT, measure),
  };
}

/** Title, subtitle and the large label (the name zoomed out) cut to fit a box as wide as its text. */
function boxText(title, subtitle, height, measure) {
  const room = MAX_WIDTH - TEXT_LEFT - TEXT_RIGHT;
  const shown = {
    title: fitted(measure, 'title', title, room),
    subtitle: fitted(measure, 'subtitle', subtitle, room),
    label: fitted(measure, 'label', title, room),
  };
  const text = Math.max(...Object.entries(shown).map(([kind, value]) => measure(kind, value)));
  const width = Math.ceil(Math.min(MAX_WIDTH, Math.max(MIN_WIDTH, text + TEXT_LEFT + TEXT_RIGHT)));
  return { ...shown, width, height };
}

/** `text` itself when it fits in `room` pixels, else its longest prefix that fits with an ellipsis. */
export function fitted(measure, kind, text, room) {
  const value = String(text);
  if (measure(kind, value) <= room) return value;
  let low = 0;
  let high = value.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (measure(kind, `${value.slice(0, mid)}…`) <= room) low = mid;
    else high = mid - 1;
  }
  return `${value.slice(0, low)}…`;
}

function taskEdges(answer, boxOf) {
  const tasks = answer.nodes || {};
  const edges = [];
  for (const [id, task] of Object.entries(tasks)) {
    for (const other of task.deps || []) {
      if (!(other in tasks) || other === id) continue;
      const [from, to] = answer.inverse ? [boxOf(id), boxOf(other)] : [boxOf(other), boxOf(id)];
      if (from !== to) edges.push([from, to]);
    }
  }
  return unique(edges);
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
