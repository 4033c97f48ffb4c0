// The views of the visualiser, one module each. To add a view (e.g. History), write a module that
// default-exports {id, title, aliases?, create(ctx)} and add it to VIEWS: the navigation and the
// router pick it up from here.
//
// create(ctx) returns {element, update(params), refresh(), destroy()}:
//   element    the view's root node, placed in <main>
//   update     the address changed but still names this view (params from the hash)
//   refresh    the live loop asks for fresh data (return a promise; errors are reported by the loop)
//   destroy    the user left the view (stop timers, workers, listeners)
// ctx holds {api, router, openTask(taskId), actions, notify(message, kind)}.

import tasks from './tasks.js';
import graph from './graph.js';
import workers from './workers.js';
import resources from './resources.js';
import history from './history.js';
import schedules from './schedules.js';

export const VIEWS = [tasks, graph, workers, resources, schedules, history];

/** The view a `tab` value names (Luigi's names and aliases), or the task list. */
export function viewFor(tab) {
  return VIEWS.find((view) => view.id === tab || (view.aliases || []).includes(tab)) || VIEWS[0];
}
