"""Tasks run in forked child processes: parallelism, resources, timeouts and children that die.

A child leads its own process group and talks to the worker through a pipe; a timeout kills the whole tree
of processes a task started, and a child that dies without a word is reported FAILED with its exit code.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import time

import psutil
import pytest

from luigi import interface
from luigi.event import Event
from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter, Parameter
from luigi.scheduler import Scheduler
from luigi.task import Task, WrapperTask
from luigi.task_status import DONE, FAILED
from luigi.worker import Worker


def wait_for(condition, timeout=10.0, interval=0.01):
    """Poll ``condition`` until it is true or ``timeout`` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def make_marker_task(tmp_path):
    class Marker(Task):
        """Writes ``<name>.done``; records the pid it ran in and its start and end times."""

        name = Parameter()

        def output(self):
            return LocalTarget(str(tmp_path / f"{self.name}.done"))

        def run(self):
            started = time.time()
            self.work()
            with self.output().open("w") as out:
                out.write(f"{os.getpid()} {started} {time.time()}")

        def work(self):
            pass

    return Marker


def recorded(tmp_path, name):
    pid, started, ended = (tmp_path / f"{name}.done").read_text().split()
    return int(pid), float(started), float(ended)


def test_tasks_run_in_child_processes_with_several_workers(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Root(WrapperTask):
        def requires(self):
            return [Marker(name=str(i)) for i in range(4)]

    assert interface.build([Root()], local_scheduler=True, workers=2) is True
    pids = {recorded(tmp_path, str(i))[0] for i in range(4)}
    assert os.getpid() not in pids
    assert len(pids) <= 2  # one task slot per worker process, each running tasks one after another


def test_two_workers_run_two_tasks_at_the_same_time(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Rendezvous(Marker):
        """Announces itself, then waits for its partner: only possible if both run at once."""

        def work(self):
            (tmp_path / f"{self.name}.started").touch()
            partner = tmp_path / ("b" if self.name == "a" else "a")
            if not wait_for(lambda: partner.with_suffix(".started").exists()):
                raise RuntimeError("the other task never started")

    class Root(WrapperTask):
        def requires(self):
            return [Rendezvous(name="a"), Rendezvous(name="b")]

    assert interface.build([Root()], local_scheduler=True, workers=2) is True


def test_tasks_sharing_a_resource_of_capacity_one_never_overlap(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Exclusive(Marker):
        resources = {"database": 1}

        def work(self):
            time.sleep(0.05)  # hold the resource a little while, so an overlap would show

    class Root(WrapperTask):
        def requires(self):
            return [Exclusive(name=str(i)) for i in range(4)]

    assert interface.build([Root()], local_scheduler=True, workers=2) is True
    spans = sorted(recorded(tmp_path, str(i))[1:] for i in range(4))
    for (_, first_end), (second_start, _) in zip(spans, spans[1:], strict=False):
        assert first_end <= second_start


def test_force_multiprocessing_runs_a_single_worker_in_a_child(tmp_path):
    Marker = make_marker_task(tmp_path)
    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, force_multiprocessing=True)
    worker.add(Marker(name="x"))
    assert worker.run() is True
    assert recorded(tmp_path, "x")[0] != os.getpid()


def test_timeout_kills_the_task_and_every_process_it_started(tmp_path, events):
    seen, listen = events
    listen(Event.TIMEOUT)

    class Hangs(Task):
        worker_timeout = 1

        def complete(self):
            return False

        def run(self):
            sleeper = subprocess.Popen(["sleep", "60"])
            (tmp_path / "grandchild.pid").write_text(str(sleeper.pid))
            time.sleep(60)

    scheduler = Scheduler()
    with Worker(scheduler=scheduler) as worker:
        worker.add(Hangs())
        started = time.monotonic()
        assert worker.run() is False
    assert time.monotonic() - started < 30
    task = scheduler.task_list("", "")[Hangs().task_id]
    assert task["status"] == FAILED
    error = scheduler.fetch_error(Hangs().task_id)["error"]
    assert "timed out after 1 seconds" in error
    assert [(name, args[0]) for name, args in seen] == [(Event.TIMEOUT, Hangs())]
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert wait_for(lambda: _is_gone(grandchild), timeout=5)


def test_config_timeout_applies_when_the_task_sets_none(tmp_path):
    class Slow(Task):
        def complete(self):
            return False

        def run(self):
            time.sleep(60)

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, timeout=1)
    worker.add(Slow())
    assert worker.run() is False
    assert "timed out" in scheduler.fetch_error(Slow().task_id)["error"]


def _is_gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # dead, waiting for init to reap it
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize(
    ("how", "expected"),
    [("exit", "exit code 3"), ("oom-kill", "exit code -9 (killed by SIGKILL)")],
)
def test_child_that_dies_is_failed_with_its_exit_code(how, expected, events):
    seen, listen = events
    listen(Event.PROCESS_FAILURE)

    class Dies(Task):
        def complete(self):
            return False

        def run(self):
            if how == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, worker_processes=2)
    worker.add(Dies())
    assert worker.run() is False
    error = scheduler.fetch_error(Dies().task_id)["error"]
    assert expected in error and Dies().task_id in error
    [(name, (task, message))] = seen
    assert (name, task) == (Event.PROCESS_FAILURE, Dies()) and expected in message


def test_failure_in_child_reports_the_traceback(tmp_path):
    class Raises(Task):
        def complete(self):
            return False

        def run(self):
            raise ValueError("bad row 17")

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, worker_processes=2)
    worker.add(Raises())
    assert worker.run() is False
    error = scheduler.fetch_error(Raises().task_id)["error"]
    assert "Runtime error:" in error and "ValueError: bad row 17" in error


def test_dynamic_dependencies_from_a_child_are_scheduled_and_run(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Parent(Marker):
        n = IntParameter(default=3)

        def work(self):
            pass

        def run(self):
            outputs = yield [Marker(name=f"dyn{i}") for i in range(self.n)]
            with self.output().open("w") as out:
                out.write(f"{os.getpid()} 0 0 " + ",".join(target.path for target in outputs))

    assert interface.build([Parent(name="parent")], local_scheduler=True, workers=2) is True
    for i in range(3):
        assert Marker(name=f"dyn{i}").complete()
    assert (tmp_path / "parent.done").read_text().endswith(str(tmp_path / "dyn2.done"))


def test_progress_reports_from_a_child_reach_the_scheduler(tmp_path):
    class Reporting(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "reported"))

        def run(self):
            self.set_tracking_url("http://tracker/job/1")
            self.set_status_message("halfway")
            self.set_progress_percentage(50)
            self.output().open("w").close()

    scheduler = Scheduler()
    worker = Worker(scheduler=scheduler, worker_processes=2)
    worker.add(Reporting())
    assert worker.run() is True
    task_id = Reporting().task_id
    assert scheduler.get_task_status_message(task_id)["statusMessage"] == "halfway"
    assert scheduler.get_task_progress_percentage(task_id)["progressPercentage"] == 50
    assert scheduler.task_list("", "")[task_id]["tracking_url"] == "http://tracker/job/1"
    assert scheduler.task_list("", "")[task_id]["status"] == DONE


class RecordingContext:
    """A ``[worker] task_process_context``: notes entering and leaving around each run."""

    def __init__(self, task_process):
        self.log = task_process.task.output().path + ".context"

    def __enter__(self):
        with open(self.log, "a") as log:
            log.write(f"enter {os.getpid()}\n")

    def __exit__(self, *exc_info):
        with open(self.log, "a") as log:
            log.write("exit\n")


@pytest.mark.parametrize("processes", [1, 2])
def test_task_process_context_wraps_each_run(tmp_path, processes):
    Marker = make_marker_task(tmp_path)
    worker = Worker(
        scheduler=Scheduler(), worker_processes=processes, task_process_context=f"{__name__}.RecordingContext"
    )
    worker.add(Marker(name="ctx"))
    assert worker.run() is True
    pid = recorded(tmp_path, "ctx")[0]
    assert (tmp_path / "ctx.done.context").read_text() == f"enter {pid}\nexit\n"


def test_a_task_slot_runs_later_tasks_in_the_directory_and_environment_it_started_with(tmp_path):
    class Wanderer(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "wanderer"))

        def run(self):
            os.chdir(tmp_path)
            os.environ["LUIGI_TEST_LEFTOVER"] = "1"
            self.output().open("w").close()

    class Observer(Task):
        def requires(self):
            return Wanderer()

        def output(self):
            return LocalTarget(str(tmp_path / "observer"))

        def run(self):
            with self.output().open("w") as out:
                out.write(f"{os.getcwd()}|{os.environ.get('LUIGI_TEST_LEFTOVER')}")

    worker = Worker(scheduler=Scheduler(), force_multiprocessing=True)
    worker.add(Observer())
    assert worker.run() is True
    assert (tmp_path / "observer").read_text() == f"{os.getcwd()}|None"


def test_a_task_that_leaves_threads_behind_gets_a_fresh_process_after_it(tmp_path):
    import threading

    Marker = make_marker_task(tmp_path)

    class LeavesThread(Marker):
        def work(self):
            threading.Thread(target=threading.Event().wait, daemon=True).start()

    class After(Marker):
        def requires(self):
            return LeavesThread(name="first")

    worker = Worker(scheduler=Scheduler(), force_multiprocessing=True)
    worker.add(After(name="second"))
    assert worker.run() is True
    assert recorded(tmp_path, "first")[0] != recorded(tmp_path, "second")[0]


def test_a_batch_whose_combined_task_is_new_runs_in_a_child(tmp_path):
    class Tagged(Task):
        tag = Parameter(batch_method=",".join)

        def output(self):
            return LocalTarget(str(tmp_path / f"tag-{self.tag}"))

        def run(self):
            for tag in self.tag.split(","):
                LocalTarget(str(tmp_path / f"tag-{tag}")).open("w").close()

    class All(WrapperTask):
        def requires(self):
            return [Tagged(tag=tag) for tag in "abc"]

    assert interface.build([All()], local_scheduler=True, workers=2) is True
    assert {path.name for path in tmp_path.glob("tag-*")} >= {"tag-a", "tag-b", "tag-c"}


# -- short tasks queued in slots -----------------------------------------------------------------------


def test_short_tasks_are_queued_in_the_slots_yet_never_more_than_two_run_at_once(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Root(WrapperTask):
        def requires(self):
            return [Marker(name=str(i)) for i in range(60)]

    class CountingWorker(Worker):
        most_held = 0

        def _run_task(self, task_id):
            super()._run_task(task_id)
            self.most_held = max(self.most_held, len(self._running_tasks))

    worker = CountingWorker(scheduler=Scheduler(), worker_processes=2)
    worker.add(Root())
    assert worker.run() is True
    spans = sorted(recorded(tmp_path, str(i))[1:] for i in range(60))
    for index, (started, _) in enumerate(spans):
        assert sum(1 for _, ended in spans[:index] if ended > started) < 2  # at most one other still runs
    assert worker.most_held > 2  # after short runs, granted tasks wait in the slots behind the running ones


def test_a_task_queued_behind_one_that_runs_long_is_taken_back_for_a_free_slot(tmp_path):
    Marker = make_marker_task(tmp_path)

    class Slow(Marker):
        """Keeps one slot busy a while (its slot takes no queued tasks: nothing short ran there)."""

        priority = 100

        def work(self):
            time.sleep(0.5)

    class Quick(Marker):
        """Short (the second in a fresh slot is): after it, its slot takes tasks queued behind the one it
        runs."""

        priority = IntParameter()

    class Waiter(Marker):
        """Runs in the slot Quick freed until Freer has run, which can only be in the other slot."""

        priority = 90

        def work(self):
            if not wait_for(lambda: (tmp_path / "freer.done").exists(), timeout=30):
                raise RuntimeError("Freer never ran beside this task")

    class Freer(Marker):
        """Granted while both slots are busy: queued behind Waiter, then taken back once Slow ends."""

        priority = 70

    class Root(WrapperTask):
        def requires(self):
            quick = [Quick(name="quick1", priority=99), Quick(name="quick2", priority=98)]
            return [Slow(name="slow"), *quick, Waiter(name="waiter"), Freer(name="freer")]

    started = time.monotonic()
    assert interface.build([Root()], local_scheduler=True, workers=2) is True
    assert time.monotonic() - started < 25
    assert recorded(tmp_path, "freer")[0] == recorded(tmp_path, "slow")[0]


def test_an_idle_slot_whose_last_task_ran_short_takes_the_next_tasks_in_one_write(tmp_path, monkeypatch):
    from luigi.worker.slots import pool as slot_pool

    Marker = make_marker_task(tmp_path)
    first, *rest = tasks = [Marker(name=str(i)) for i in range(4)]
    # one slot; every task counts as short however busy the machine
    pool, _, start, collect = _pool_of(tasks, 1, monkeypatch, 1, 30.0, 30.0)
    hands = []
    real_hand = slot_pool.TaskSlot.hand

    def counted_hand(slot, jobs, now):
        hands.append(len(jobs))  # one write to the slot
        return real_hand(slot, jobs, now)

    monkeypatch.setattr(slot_pool.TaskSlot, "hand", counted_hand)
    try:
        start(first)  # a fresh slot: handed at once
        assert [outcome.status for outcome in collect(1)] == [DONE]
        for task in rest:  # the slot is idle and its task ran short: these wait to go together
            start(task)
        assert hands == [1]
        assert sorted(outcome.task_id for outcome in collect(3)) == sorted(task.task_id for task in rest)
    finally:
        pool.shut_down()
    assert hands == [1, 3]
    assert all((tmp_path / f"{i}.done").exists() for i in range(4))


def _pool_of(tasks, processes, monkeypatch, processors, short_run, first_run_grace):
    """A SlotPool over ``tasks`` on a machine of ``processors`` processors, counting its forks; and a
    function that starts a task in it and one that collects ``count`` outcomes."""
    from luigi.worker.slots import pool as slot_pool
    from luigi.worker.task_process import TaskRunOptions, TaskStatusReporter, make_task_process

    monkeypatch.setattr(slot_pool, "_PROCESSORS", processors)
    monkeypatch.setattr(slot_pool, "SHORT_RUN", short_run)
    monkeypatch.setattr(slot_pool, "FIRST_RUN_GRACE", first_run_grace)
    forks = []
    real_spawn = slot_pool.TaskSlot.spawn.__func__

    def counted_spawn(cls, *args):
        forks.append(1)
        return real_spawn(cls, *args)

    monkeypatch.setattr(slot_pool.TaskSlot, "spawn", classmethod(counted_spawn))
    pool = slot_pool.SlotPool({task.task_id: task for task in tasks}, None, lambda: processes)
    scheduler, options = Scheduler(), TaskRunOptions(worker_id="w")

    def start(task):
        reporter = TaskStatusReporter(scheduler, task.task_id, "w")
        pool.start(make_task_process(task, reporter, options, None, None))

    def collect(count):
        outcomes = []
        deadline = time.monotonic() + 30
        while len(outcomes) < count and time.monotonic() < deadline:
            pool.wait(1.0, time.time())
            outcomes.extend(pool.collect(time.time()))
        return outcomes

    return pool, forks, start, collect


def test_with_every_processor_busy_short_tasks_queue_in_the_busy_slots_instead_of_forking_more(
    tmp_path, monkeypatch
):
    Marker = make_marker_task(tmp_path)
    tasks = [Marker(name=str(i)) for i in range(6)]
    # one processor, four slots wanted; every task counts as short however busy the machine
    pool, forks, start, collect = _pool_of(tasks, 4, monkeypatch, 1, 30.0, 30.0)
    try:
        for task in tasks:
            start(task)
        outcomes = collect(6)
    finally:
        pool.shut_down()
    assert sorted(outcome.status for outcome in outcomes) == [DONE] * 6
    assert len(forks) == 1
    assert len({recorded(tmp_path, str(i))[0] for i in range(6)}) == 1


def test_with_every_processor_busy_a_task_still_gets_a_slot_of_its_own_once_the_running_one_runs_long(
    tmp_path, monkeypatch
):
    Marker = make_marker_task(tmp_path)

    class Waiter(Marker):
        def work(self):
            if not wait_for(lambda: (tmp_path / "other.done").exists(), timeout=30):
                raise RuntimeError("the other task never ran beside this one")

    waiter, other = Waiter(name="waiter"), Marker(name="other")
    pool, forks, start, collect = _pool_of([waiter, other], 2, monkeypatch, 1, 0.05, 0.05)
    try:
        start(waiter)
        start(other)
        outcomes = collect(2)
    finally:
        pool.shut_down()
    assert sorted(outcome.task_id for outcome in outcomes if outcome.status == DONE) == sorted(
        [waiter.task_id, other.task_id]
    )
    assert len(forks) == 2


def test_a_task_waiting_for_scheduler_messages_leaves_the_tasks_queued_behind_it_to_run(
    tmp_path, monkeypatch
):
    Marker = make_marker_task(tmp_path)

    class Listener(Marker):
        accepts_messages = True

        def work(self):
            try:  # none comes: the wait reads past the line of the task queued behind this one
                self.scheduler_messages.get(timeout=0.3)
            except queue.Empty:
                pass

    first, listener, behind = Marker(name="first"), Listener(name="listener"), Marker(name="behind")
    # one slot; every task counts as short however busy the machine, so the last two go to it together
    pool, _, start, collect = _pool_of([first, listener, behind], 1, monkeypatch, 1, 30.0, 30.0)
    try:
        start(first)
        assert [outcome.status for outcome in collect(1)] == [DONE]
        start(listener)
        start(behind)
        outcomes = collect(2)
    finally:
        pool.shut_down()
    assert {outcome.task_id: outcome.status for outcome in outcomes} == {
        listener.task_id: DONE,
        behind.task_id: DONE,
    }
