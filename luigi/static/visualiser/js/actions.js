// What an operator can change from the page. Each action asks for confirmation in a dialog, calls
// the API, says what happened, and refreshes the page.

import { el } from './dom.js';
import { askInteger, askText, confirmAction, openForm } from './modal.js';
import * as format from './format.js';

const REPLY_POLL_MS = 1000;
const REPLY_TIMEOUT_MS = 60000;

export function makeActions({ api, notify, refresh }) {
  /** Confirm (unless a form already did), call, report: the shape every action shares. */
  async function perform({ title, body, confirmLabel, cancelLabel, danger, call, done, confirmed = false }) {
    if (!confirmed && !(await confirmAction({ title, body, confirmLabel, cancelLabel, danger }))) return false;
    try {
      const result = await call();
      notify(typeof done === 'function' ? done(result) : done, 'success');
      return true;
    } catch (error) {
      notify(`${title} failed: ${error.message}`, 'error');
      return false;
    } finally {
      refresh();
    }
  }

  const taskLine = (taskId) => el('p', {}, el('code', { class: 'wrap', text: taskId }));

  return {
    forgiveFailures: (taskId) => perform({
      title: 'Forgive failures',
      body: [el('p', { text: 'Set this failed task back to PENDING so that workers try it again:' }), taskLine(taskId)],
      confirmLabel: 'Forgive failures',
      call: () => api.call('forgive_failures', { task_id: taskId }),
      done: (r) => `Failures forgiven: the task is now ${r && r.status ? r.status : 'PENDING'}.`,
    }),

    forgiveAll: (tasks) => perform({
      title: 'Forgive all failed tasks',
      body: [el('p', { text: `Set ${format.counted(tasks.length, 'failed task')} of this list back to PENDING so that workers try ${tasks.length === 1 ? 'it' : 'them'} again:` }),
        taskList(tasks)],
      confirmLabel: `Forgive ${format.counted(tasks.length, 'task')}`,
      call: () => forgiveEach(api, tasks.map((t) => t.task_id)),
      done: (forgiven) => `Failures forgiven: ${format.counted(forgiven, 'task')} now PENDING.`,
    }),

    markAsDone: (taskId) => perform({
      title: 'Mark as done',
      body: [el('p', { text: 'Tell the scheduler this task is DONE without running it. Tasks waiting on it may start.' }), taskLine(taskId)],
      confirmLabel: 'Mark as done',
      danger: true,
      call: () => api.call('mark_as_done', { task_id: taskId }),
      done: (r) => `Marked as done: the task is now ${r && r.status ? r.status : 'DONE'}.`,
    }),

    cancelTask: (taskId) => perform({
      title: 'Cancel the running task',
      body: [el('p', { text: 'Its worker kills the run and every process it started. The task becomes FAILED and is not retried until you forgive its failures.' }), taskLine(taskId)],
      confirmLabel: 'Cancel task',
      cancelLabel: 'Keep it running',
      danger: true,
      call: async () => {
        const answer = await api.call('cancel_task', { task_id: taskId });
        if (!answer || !answer.cancel_requested) throw new Error(answer && answer.problem ? answer.problem : 'the scheduler refused');
        return answer;
      },
      done: 'Cancel requested: the worker stops the task at its next ping.',
    }),

    reEnable: (taskId) => perform({
      title: 'Re-enable task',
      body: [el('p', { text: 'Clear the failures that disabled this task; it becomes FAILED and is retried after the retry delay.' }), taskLine(taskId)],
      confirmLabel: 'Re-enable',
      call: () => api.call('re_enable_task', { task_id: taskId }),
      done: 'Task re-enabled.',
    }),

    disableWorker: (workerId) => perform({
      title: 'Disable worker',
      body: [el('p', { text: 'The worker gets no more tasks from this scheduler; the tasks it runs now finish.' }), taskLine(workerId)],
      confirmLabel: 'Disable worker',
      danger: true,
      call: () => api.call('disable_worker', { worker: workerId }),
      done: 'Worker disabled.',
    }),

    setWorkerProcesses: async (workerId, current) => {
      const n = await askInteger({
        title: 'Change worker processes',
        body: [el('p', { text: 'How many tasks this worker runs at once (it applies the change at its next ping):' }), taskLine(workerId)],
        label: 'Processes',
        value: current,
        min: 1,
      });
      if (n === null) return false;
      return perform({
        title: 'Change worker processes',
        confirmed: true,
        call: () => api.call('set_worker_processes', { worker: workerId, n }),
        done: `The worker was asked to run ${n} process${n === 1 ? '' : 'es'}.`,
      });
    },

    setResourceCapacity: async (resource, current) => {
      const amount = await askInteger({
        title: 'Change resource capacity',
        body: [el('p', {}, 'How many units of ', el('strong', { text: resource }), ' running tasks may hold at once:')],
        label: 'Capacity',
        value: current,
        min: 0,
      });
      if (amount === null) return false;
      return perform({
        title: 'Change resource capacity',
        confirmed: true,
        call: async () => {
          if ((await api.call('update_resource', { resource, amount })) === false) {
            throw new Error('the scheduler refused the amount');
          }
        },
        done: `Capacity of ${resource} set to ${amount}.`,
      });
    },

    setPaused: (paused) => perform({
      title: paused ? 'Pause the scheduler' : 'Resume the scheduler',
      body: [el('p', {
        text: paused
          ? 'Workers get no new tasks while the scheduler is paused; running tasks carry on.'
          : 'Workers get tasks again.',
      })],
      confirmLabel: paused ? 'Pause' : 'Resume',
      danger: paused,
      call: () => api.call(paused ? 'pause' : 'unpause', {}),
      done: paused ? 'Scheduler paused.' : 'Scheduler resumed.',
    }),

    pauseSchedule: (name) => perform({
      title: 'Pause the schedule',
      body: [el('p', { text: 'Its slots pass without a run until it is resumed (luigid remembers this across restarts):' }), taskLine(name)],
      confirmLabel: 'Pause',
      danger: true,
      call: () => api.call('schedule_pause', { name }),
      done: `Schedule ${name} paused.`,
    }),

    resumeSchedule: (name) => perform({
      title: 'Resume the schedule',
      body: [el('p', { text: 'It runs again from its next slot on; the slots passed while paused are not run:' }), taskLine(name)],
      confirmLabel: 'Resume',
      call: () => api.call('schedule_resume', { name }),
      done: `Schedule ${name} resumed.`,
    }),

    triggerSchedule: (name) => perform({
      title: 'Run the schedule now',
      body: [el('p', { text: 'luigid starts its command now, as for a slot at this moment:' }), taskLine(name)],
      confirmLabel: 'Run now',
      call: () => api.call('schedule_trigger', { name }),
      done: (r) => `Run #${r && r.run} of ${name} started.`,
    }),

    sendMessage: async (task) => {
      const content = await askText({
        title: 'Send a message to the task',
        body: [el('p', { text: 'The running task receives this text and may answer it:' }), taskLine(task.task_id)],
        label: 'Message',
      });
      if (content === null) return false;
      let sent;
      try {
        sent = await api.call('send_scheduler_message', { worker: task.worker_running, task: task.task_id, content });
      } catch (error) {
        notify(`Sending the message failed: ${error.message}`, 'error');
        return false;
      }
      if (!sent || !sent.message_id) {
        notify('The scheduler does not pass messages on ([scheduler] send_messages is off).', 'error');
        return false;
      }
      await awaitReply(api, task.task_id, sent.message_id);
      return true;
    },
  };
}

const LISTED = 8; // tasks named in the confirmation; the rest are counted
const FORGIVE_CHUNK = 200; // calls per /api/_batch request (luigid caps the size of a request's body)

function taskList(tasks) {
  const more = tasks.length - LISTED;
  return el('ul', { class: 'task-names' },
    tasks.slice(0, LISTED).map((t) => el('li', {}, el('code', { class: 'wrap', text: format.displayName(t, t.task_id) }))),
    more > 0 ? el('li', { class: 'muted', text: `…and ${format.count(more)} more` }) : null);
}

/** forgive_failures for each id, a chunk at a time (calls made together travel in one request);
 * resolves how many became PENDING. */
async function forgiveEach(api, taskIds) {
  let forgiven = 0;
  for (let i = 0; i < taskIds.length; i += FORGIVE_CHUNK) {
    const chunk = taskIds.slice(i, i + FORGIVE_CHUNK);
    const replies = await Promise.all(chunk.map((task_id) => api.call('forgive_failures', { task_id })));
    forgiven += replies.filter((r) => r && r.status === 'PENDING').length;
  }
  return forgiven;
}

/** Show a dialog that waits for the task's answer to a message, polling until it comes or times out. */
function awaitReply(api, taskId, messageId) {
  const state = el('p', { class: 'muted', text: 'Message sent. Waiting for the reply…' });
  const reply = el('pre', { class: 'reply', hidden: true });
  let open = true;
  const dialog = openForm({
    title: 'Reply from the task',
    body: [state, reply],
    submitLabel: 'Close',
    cancelLabel: null,
    onSubmit: () => true,
  }).finally(() => {
    open = false;
  });
  (async () => {
    const deadline = Date.now() + REPLY_TIMEOUT_MS;
    while (open && Date.now() < deadline) {
      try {
        const answer = await api.call('get_scheduler_message_response', { task_id: taskId, message_id: messageId });
        if (answer && answer.response !== null && answer.response !== undefined) {
          state.textContent = 'The task replied:';
          reply.textContent = format.text(answer.response);
          reply.hidden = false;
          return;
        }
      } catch (error) {
        state.textContent = `Could not fetch the reply: ${error.message}`;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, REPLY_POLL_MS));
    }
    if (open) state.textContent = `No reply within ${REPLY_TIMEOUT_MS / 1000} s.`;
  })();
  return dialog;
}
