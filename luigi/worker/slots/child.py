"""Inside a task slot: the forked child process that runs the worker's tasks one at a time.

A slot is forked from the worker, so it already holds every task object the worker had scheduled; a job
names a task by id. Reports and the outcome go back as JSON lines; scheduler messages for the running task
arrive on the job pipe. Between jobs the slot puts back what a task may have changed in the process (random
state, working directory, environment) and retires, rather than carry it on, when a task left threads
running or grew the process's memory a lot. Nothing here ever returns into the worker's own code.

A slot never outlives its worker: the kernel sends it SIGTERM when the worker dies (``prctl``), and a
thread watches the worker's pid as well (a signal handler cannot run while the task is stuck in C code);
either kills the running task's whole tree (``luigi.worker.process_tree``) and exits.
"""

from __future__ import annotations

import ctypes.util  # noqa: F401 - imported before the fork, so no slot imports it (set_parent_death_signal)
import gc
import os
import queue
import random
import resource
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from multiprocessing import process as mp_process
from multiprocessing import util as mp_util
from typing import Any, NoReturn

from luigi.worker import process_tree
from luigi.worker.output_capture import CAPTURE_THREAD_NAME, OutputCapture, captured_output
from luigi.worker.slots.pipe import ClaimPipe, JsonLineReader, JsonLineWriter
from luigi.worker.task_process import (
    OutcomeBox,
    SchedulerMessage,
    TaskOutcome,
    TaskRunOptions,
    make_task_process,
)

# A slot whose peak memory grew by more than this since it started is replaced by a fresh fork, so one
# heavy task does not leave every later task in that slot with its high-water mark.
RETIRE_AFTER_GROWTH_BYTES = 256 * 1024 * 1024

WATCH_THREAD_NAME = "luigi-slot-parent-watch"
# Without a pidfd, how often the watch thread looks whether the worker is still the slot's parent.
_PARENT_POLL_SECONDS = 0.2
# Exit code of a slot that lost its worker (128 + SIGTERM, as if the signal had killed it).
_ORPHANED_EXIT_CODE = 128 + signal.SIGTERM


class _RunningJob:
    """The tag of the task this slot runs now, for the handlers that kill its tree (None between jobs)."""

    tag: str | None = None


class ForwardingStatusReporter:
    """The status reporter inside a slot: each report becomes a message for the worker to apply."""

    def __init__(self, writer: JsonLineWriter, task_id: str, message_reader: JsonLineReader | None) -> None:
        self._writer = writer
        self._lock = threading.Lock()  # the output capture's thread reports too
        self.scheduler_messages = (
            PipeMessageQueue(message_reader, self, task_id) if message_reader is not None else None
        )

    def _forward(self, name: str, *args: Any) -> None:
        with self._lock:
            self._writer.send({"report": name, "args": list(args)})

    def update_tracking_url(self, tracking_url: str) -> None:
        self._forward("update_tracking_url", tracking_url)

    def update_status_message(self, message: str) -> None:
        self._forward("update_status_message", message)

    def update_progress_percentage(self, percentage: float) -> None:
        self._forward("update_progress_percentage", percentage)

    def decrease_running_resources(self, decrease_resources: dict[str, int]) -> None:
        self._forward("decrease_running_resources", decrease_resources)

    def report_task_statistics(self, statistics: Any) -> None:
        self._forward("report_task_statistics", statistics)

    def add_scheduler_message_response(self, task_id: str, message_id: str, response: Any) -> None:
        self._forward("add_scheduler_message_response", task_id, message_id, response)

    def append_task_log(self, run: str, offset: int, chunk: str, ended: bool) -> None:
        self._forward("append_task_log", run, offset, chunk, ended)


class PipeMessageQueue:
    """``scheduler_messages`` of a task running in a child: SchedulerMessages read from the parent's pipe.

    Offers the Queue methods tasks use: ``get(block, timeout)``, ``get_nowait()``, ``empty()``, ``qsize()``.
    """

    def __init__(self, reader: JsonLineReader, responder: ForwardingStatusReporter, task_id: str) -> None:
        self._reader = reader
        self._responder = responder
        self._task_id = task_id

    def _message(self, raw: dict[str, Any]) -> SchedulerMessage:
        reserved = ("kind", "message_id", "content", "task_id")
        payload = {key: value for key, value in raw.items() if key not in reserved}
        return SchedulerMessage(
            self._responder, self._task_id, str(raw.get("message_id")), raw.get("content"), **payload
        )

    def _is_for_this_task(self, raw: Any) -> bool:
        return isinstance(raw, dict) and raw.get("kind") == "message" and raw.get("task_id") == self._task_id

    def get(self, block: bool = True, timeout: float | None = None) -> SchedulerMessage:
        """The oldest message for this task; the other lines (jobs queued behind it, messages left over
        from an earlier task) stay for the slot's loop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._reader.pump()
            raw = self._reader.take_first(self._is_for_this_task)
            if raw is not None:
                return self._message(raw)
            remaining = 0.0 if deadline is None and not block else None
            if deadline is not None:
                remaining = max(0.0, deadline - time.monotonic()) if block else 0.0
            if self._reader.at_eof or (remaining is not None and remaining <= 0):
                raise queue.Empty
            self._reader.wait_for_more(remaining)

    def get_nowait(self) -> SchedulerMessage:
        return self.get(block=False)

    def empty(self) -> bool:
        return self.qsize() == 0

    def qsize(self) -> int:
        self._reader.pump()
        return sum(1 for raw in self._reader.peek_all() if self._is_for_this_task(raw))


def slot_main(
    job_fd: int,
    result_fd: int,
    claim_fd: int,
    tasks: Mapping[str, Any],
    completion_cache: dict[str, bool] | None,
    fds_to_close: list[int],
    worker_pid: int,
) -> NoReturn:
    """Body of a freshly forked slot: serve jobs until the worker closes the job pipe, then exit.

    ``claim_fd`` reads the tokens of the jobs queued in the slot: a job runs only if its token is still
    there (``ClaimPipe``), the worker having taken back the others."""
    exit_code = 1
    try:
        try:
            os.setpgid(0, 0)  # the slot leads a process group holding everything its tasks start
        except OSError:
            pass
        _follow_worker(worker_pid)
        for fd in fds_to_close:
            _close_quietly(fd)
        _reset_interpreter_after_fork()
        claims = ClaimPipe(claim_fd, None)
        _serve_jobs(JsonLineReader(job_fd), JsonLineWriter(result_fd), claims, tasks, completion_cache)
        exit_code = 0
    except BaseException:  # nothing may escape into the worker's code; report and exit
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        _flush_stdio()
        os._exit(exit_code)


def _serve_jobs(
    reader: JsonLineReader,
    writer: JsonLineWriter,
    claims: ClaimPipe,
    tasks: Mapping[str, Any],
    cache: dict[str, bool] | None,
) -> None:
    home = os.getcwd()
    environment = _environment()
    baseline = _peak_rss()
    options: dict[str, Any] = {}  # the run options of the jobs, as the last job line that had them said
    while True:
        if not reader.wait(None):
            if reader.at_eof:
                return
            continue
        job = reader.take_one()
        if not isinstance(job, dict) or job.get("kind") != "job":
            continue  # a scheduler message that arrived after its task had finished
        options = job.get("options", options)  # also from a job taken back: later lines leave them out
        if not claims.claim(int(job["number"])):
            continue  # the worker took it back for another slot
        outcome = _run_job(job, options, reader, writer, tasks, cache)
        _flush_stdio()
        # Said with the outcome, so the worker never hands another task to a slot about to exit.
        retiring = _threads_left_behind() or _peak_rss() - baseline > RETIRE_AFTER_GROWTH_BYTES
        writer.send({"outcome": outcome.to_message(), "retiring": retiring})
        if retiring:
            return
        _restore_process_state(home, environment)


def _run_job(
    job: dict[str, Any],
    options_fields: dict[str, Any],
    reader: JsonLineReader,
    writer: JsonLineWriter,
    tasks: Mapping[str, Any],
    cache: dict[str, bool] | None,
) -> TaskOutcome:
    task = tasks[str(job["task_id"])]
    random.seed()  # tasks in a fresh process would each get their own random state
    reporter = ForwardingStatusReporter(writer, task.task_id, reader if task.accepts_messages else None)
    options = TaskRunOptions(**options_fields, completion_cache=cache, in_child_process=True)
    tag = str(job.get("tag") or "")
    if tag:
        os.environ[process_tree.TAG_VARIABLE] = tag  # every program the task starts inherits it
    _RunningJob.tag = tag or None
    results = OutcomeBox()
    if options.task_log_max_bytes > 0:
        _hold_console()
    try:
        limit, redact = options.task_log_max_bytes, options.task_log_redact
        with captured_output(reporter.append_task_log, limit, task, redact) as log:
            make_task_process(task, reporter, options, job.get("timeout"), results).run()
        outcome = results.take(task.task_id)
        outcome.log_tail = log.tail if log is not None else None
        return outcome
    finally:
        _RunningJob.tag = None
        if tag:  # the slot's own environment never carries a run's tag, so it compares equal between runs
            os.environ.pop(process_tree.TAG_VARIABLE, None)


def _hold_console() -> None:
    """A slot runs task after task until it exits: the console's copies are made once, at its first
    captured run, and kept (``OutputCapture.hold_console``)."""
    capture = OutputCapture.current()
    if not capture.holds_console:
        capture.hold_console()


# -- never outliving the worker ----------------------------------------------------------------------


def _follow_worker(worker_pid: int) -> None:
    """Die with the worker: a parent-death SIGTERM, and a thread that watches the worker's pid."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides what a Ctrl-C means for its tasks
    process_tree.set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != worker_pid:  # it died before the kernel was asked to tell us
        _abandon()
    threading.Thread(target=_watch_parent, args=(worker_pid,), name=WATCH_THREAD_NAME, daemon=True).start()


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM (the worker died, or someone stops the slot): the running task's tree goes with it."""
    _abandon()


def _watch_parent(worker_pid: int) -> None:
    pidfd = _open_pidfd(worker_pid)
    while os.getppid() == worker_pid:
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            time.sleep(_PARENT_POLL_SECONDS)
    _abandon()


def _abandon() -> None:
    """Kill the running task's tree and this slot's process group, then exit at once.

    Entered once: the parent-death SIGTERM, a second SIGTERM and the watch thread can all arrive together,
    and a handler re-entered while the first one imports psutil would see a half-made module. A second
    entry in the same thread returns to the first; one in another thread waits for the exit."""
    if not _Abandoning.lock.acquire(blocking=False):
        if _Abandoning.owner == threading.get_ident():
            return
        while True:
            time.sleep(3600)
    _Abandoning.owner = threading.get_ident()
    try:
        process_tree.kill_tree(None, _RunningJob.tag)
    except BaseException:  # whatever went wrong, the group kill and the exit below still happen
        pass
    try:
        os.killpg(0, signal.SIGKILL)  # ourselves included, with whatever else stayed in the group
    finally:
        os._exit(_ORPHANED_EXIT_CODE)


class _Abandoning:
    """Who is killing the slot's tree (``_abandon`` runs once)."""

    lock = threading.Lock()
    owner: int | None = None


def _open_pidfd(pid: int) -> int | None:
    pidfd_open = getattr(os, "pidfd_open", None)
    try:
        return int(pidfd_open(pid)) if pidfd_open is not None else None
    except OSError:
        return None


def _threads_left_behind() -> bool:
    """Whether the task left threads running (besides the main thread, the parent watch and the copying
    thread of the output capture)."""
    main = threading.main_thread()
    ours = (WATCH_THREAD_NAME, CAPTURE_THREAD_NAME)
    return any(t is not main and t.name not in ours for t in threading.enumerate())


def _environment() -> dict[bytes, bytes]:
    """A copy of the process's environment as ``os.environ`` keeps it (encoded): copied and compared as a
    plain dict, where ``dict(os.environ)`` decodes every name and value (tens of µs a job)."""
    return dict(os.environ._data)  # type: ignore[attr-defined]


def _restore_process_state(home: str, environment: dict[bytes, bytes]) -> None:
    if os.getcwd() != home:
        os.chdir(home)
    if os.environ._data != environment:  # type: ignore[attr-defined]
        os.environ.clear()
        os.environ.update({os.fsdecode(name): os.fsdecode(value) for name, value in environment.items()})


def _peak_rss() -> int:
    """The slot's peak resident memory in bytes: one system call (``psutil.Process()`` reads ``/proc`` files,
    which cost more than a no-op task on a busy machine). Asked of the calling thread: on Linux the peak is
    the whole process's all the same, and ``RUSAGE_SELF`` sums the CPU times of every thread as well, which
    took hundreds of µs a call in a slot (its parent-watch thread)."""
    return resource.getrusage(_RUSAGE_THREAD).ru_maxrss * 1024  # KiB on Linux


# RUSAGE_THREAD is Linux's; elsewhere the whole process is asked.
_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _reset_interpreter_after_fork() -> None:
    """Make the slot independent: fresh random state, own proxies, no copy-on-write churn from the gc."""
    random.seed()
    gc.freeze()  # the inherited heap is never collected here, so the gc need not touch (and copy) its pages
    run_after_forkers = getattr(mp_util, "_run_after_forkers", None)
    if run_after_forkers is not None:
        run_after_forkers()  # reconnects multiprocessing Manager proxies (e.g. MockFileSystem) in the slot
    if hasattr(mp_process, "_children"):
        mp_process._children = set()  # the worker's multiprocessing children are not ours to join


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # a closed or broken stream must not stop the slot
            pass


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
