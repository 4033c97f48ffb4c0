"""A serial worker asks our luigid for its next task while a short one runs (``[worker] lookahead``)."""

from __future__ import annotations

import collections
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.luigid import serving_in_thread

import luigi
from luigi.interface import build
from luigi.rpc import RemoteScheduler
from luigi.scheduler import Scheduler
from luigi.task_status import RUNNING
from luigi.worker import lookahead as lookahead_module
from luigi.worker.lookahead import AHEAD_TASKS

RUNS: collections.Counter[str] = collections.Counter()
# What the scheduler said about the task before each Step when that Step ran (see the long-task test).
STATUS_BEFORE: dict[int, str] = {}


class WatchedScheduler(Scheduler):
    """Records, for each get_work, the tasks its worker was running and what it was granted (the first
    grant's id; ``grants`` has every id)."""

    def __init__(self) -> None:
        super().__init__()
        self.asks: list[tuple[list[str], str | None]] = []
        self.grants: list[list[str]] = []
        self.reports: collections.Counter[str] = collections.Counter()

    def add_task(self, *args: Any, **kwargs: Any) -> None:
        self.reports[kwargs.get("task_id", "")] += 1
        super().add_task(*args, **kwargs)

    def get_work(self, worker: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        running = [t.id for t in self._state.by_status[RUNNING].values() if t.worker_running == worker]
        reply = super().get_work(worker, *args, **kwargs)
        self.asks.append((running, reply["task_id"]))
        more = [grant["task_id"] for grant in reply.get("more_tasks", [])]
        self.grants.append([reply["task_id"], *more] if reply["task_id"] else [])
        return reply

    def asked_ahead(self) -> list[tuple[list[str], str | None]]:
        """The get_work calls made while a task of the same worker was running."""
        return [ask for ask in self.asks if ask[0]]

    def granted_ahead(self) -> list[tuple[list[str], list[str]]]:
        """Those calls' running tasks, with every task each granted."""
        return [(ask[0], grants) for ask, grants in zip(self.asks, self.grants, strict=True) if ask[0]]


class Marked(luigi.Task):
    """Counts its runs in RUNS and writes a marker file named by its task id under ``root``."""

    root = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(f"{self.root}/{self.task_id}")

    def run(self) -> None:
        RUNS[self.task_id] += 1
        self.write_marker()

    def write_marker(self) -> None:
        with self.output().open("w") as out:
            out.write("x")


class Step(Marked):
    """Writes its marker; sleeps ``seconds`` first (a long task, for the lookahead's guard)."""

    n = luigi.IntParameter()
    seconds = luigi.FloatParameter(default=0.0, significant=False)

    def run(self) -> None:
        if WATCHED and self.n:
            before = Step(root=self.root, n=self.n - 1).task_id
            STATUS_BEFORE[self.n] = WATCHED[0]._state.tasks[before].status
        if self.seconds:
            time.sleep(self.seconds)  # the task's own work, not synchronisation
        super().run()


class Steps(luigi.WrapperTask):
    """Steps 0..count-1, run in that order (earlier ones have a higher priority)."""

    root = luigi.Parameter()
    count = luigi.IntParameter()
    long_step = luigi.IntParameter(default=-1)

    def requires(self) -> list[Step]:
        return [self._step(n) for n in range(self.count)]

    def _step(self, n: int) -> Step:
        long_run = 3 * lookahead_module.SHORT_TASK
        step = Step(root=self.root, n=n, seconds=long_run if n == self.long_step else 0.0)
        step.priority = self.count - n
        return step


class Link(Marked):
    n = luigi.IntParameter()

    def requires(self) -> list[Link]:
        return [Link(root=self.root, n=self.n - 1)] if self.n else []


WATCHED: list[WatchedScheduler] = []


@pytest.fixture
def watched(monkeypatch):
    # Short tasks here take a few ms; a generous bound keeps a loaded machine's hiccups from making one
    # of them count as long (the long step is made longer to match).
    monkeypatch.setattr(lookahead_module, "SHORT_TASK", 0.25)
    RUNS.clear()
    STATUS_BEFORE.clear()
    scheduler = WatchedScheduler()
    WATCHED[:] = [scheduler]
    with serving_in_thread(scheduler) as server:
        yield scheduler, server.base_url() + "/"
    WATCHED.clear()


def test_a_serial_worker_asks_for_each_next_task_while_the_current_one_runs(watched, tmp_path):
    scheduler, url = watched
    assert build([Steps(root=str(tmp_path), count=40)], scheduler_url=url, no_lock=True) is True

    assert len(RUNS) == 40 and set(RUNS.values()) == {1}
    ahead = [grants for _, grants in scheduler.granted_ahead()]
    assert sum(len(grants) == AHEAD_TASKS for grants in ahead) >= 3  # an ask brings several
    per_ask = AHEAD_TASKS - lookahead_module.ASK_WHILE_QUEUED  # the next ask goes out before they all ran
    assert len(scheduler.asks) <= 40 // per_ask + 4  # a request per few tasks, not per task


class Stops(Marked):
    """Step ``n`` of a run whose step ``at`` asks its worker to stop taking work (SIGUSR1)."""

    n = luigi.IntParameter()
    at = luigi.IntParameter()

    def run(self) -> None:
        if self.n == self.at:
            os.kill(os.getpid(), signal.SIGUSR1)
        super().run()


class AllStops(luigi.WrapperTask):
    root = luigi.Parameter()
    count = luigi.IntParameter()
    at = luigi.IntParameter()

    def requires(self) -> list[Stops]:
        steps = [Stops(root=self.root, n=n, at=self.at) for n in range(self.count)]
        for step in steps:
            step.priority = self.count - step.n
        return steps


def test_a_worker_told_to_stop_runs_what_it_was_granted_but_asks_ahead_no_more(watched, tmp_path):
    scheduler, url = watched
    build([AllStops(root=str(tmp_path), count=60, at=10)], scheduler_url=url, no_lock=True)

    assert set(RUNS.values()) == {1}
    granted_at_most = AHEAD_TASKS + lookahead_module.ASK_WHILE_QUEUED  # queued, and again in an answer
    assert 11 <= len(RUNS) <= 11 + 2 * granted_at_most  # the stop, then only what was already granted
    running = [t for t in scheduler._state.tasks.values() if t.status == RUNNING]
    assert running == []  # nothing granted was left behind


def test_lookahead_is_off_when_the_worker_section_says_so(watched, tmp_path):
    scheduler, url = watched
    luigi.configuration.get_config().set("worker", "lookahead", "false")
    assert build([Steps(root=str(tmp_path), count=10)], scheduler_url=url, no_lock=True) is True
    assert len(RUNS) == 10
    assert scheduler.asked_ahead() == []


def test_after_a_long_task_the_next_is_not_asked_ahead_and_the_long_ones_result_is_sent_first(
    watched, tmp_path
):
    scheduler, url = watched
    steps = Steps(root=str(tmp_path), count=8, long_step=4)
    assert build([steps], scheduler_url=url, no_lock=True) is True

    step = {n: Step(root=str(tmp_path), n=n).task_id for n in range(8)}
    running_when_asked = [running[0] for running, _ in scheduler.asked_ahead()]
    granted_ahead = {task_id for grants in scheduler.grants for task_id in grants[1:]}
    assert step[5] in granted_ahead  # step 5 was granted before the long step 4 ran...
    assert step[5] not in running_when_asked  # ...but nothing was asked ahead while step 5 ran
    assert {step[6], step[7]} & set(running_when_asked)  # and after a short step it asks ahead again
    assert STATUS_BEFORE[5] == "DONE"  # step 5, granted ahead, did not hold back step 4's result


def test_a_chains_next_link_is_granted_ahead_of_the_link_it_needs_while_that_one_runs(watched, tmp_path):
    scheduler, url = watched
    assert build([Link(root=str(tmp_path), n=19)], scheduler_url=url, no_lock=True) is True

    assert len(RUNS) == 20 and set(RUNS.values()) == {1}
    link = {n: Link(root=str(tmp_path), n=n).task_id for n in range(20)}
    ahead = scheduler.granted_ahead()
    assert len(ahead) >= 3
    for running, grants in ahead:
        n = max(n for n, task_id in link.items() if task_id in running)  # (one may wait behind another)
        # the next links, though each needs the one before it, still RUNNING or not even started
        assert grants == [link[i] for i in range(n + 1, min(n + 1 + AHEAD_TASKS, 20))]


class Breaks(Marked):
    """A link that fails while the link after it is granted ahead of it."""

    def requires(self) -> Link:
        return Link(root=self.root, n=2)

    def run(self) -> None:
        RUNS[self.task_id] += 1
        raise RuntimeError("this link breaks")


class AfterBreak(Marked):
    def requires(self) -> Breaks:
        return Breaks(root=self.root)


def test_a_task_granted_ahead_of_a_link_that_fails_is_not_run_and_goes_back_to_pending(watched, tmp_path):
    scheduler, url = watched
    after = AfterBreak(root=str(tmp_path))
    assert build([after], scheduler_url=url, no_lock=True) is False

    breaks = Breaks(root=str(tmp_path)).task_id
    assert any(grants[-2:] == [breaks, after.task_id] for grants in scheduler.grants)  # granted ahead
    assert RUNS[breaks] == 1 and RUNS[after.task_id] == 0
    assert scheduler._state.tasks[breaks].status == "FAILED"
    put_back = scheduler._state.tasks[after.task_id]
    assert (put_back.status, put_back.worker_running) == ("PENDING", None)


class CancellingWorker(luigi.worker.Worker):
    """Cancels the last grant made ahead that waits in its queue, once, as the keep-alive thread would on
    the scheduler's ``cancel_task`` message."""

    cancelled: str | None = None

    def _get_work(self) -> Any:
        grant = super()._get_work()
        waiting = self._source.unstarted()
        if self.cancelled is None and waiting:
            self.cancelled = waiting[-1]
            self.cancel_task(waiting[-1], "Cancelled from the visualiser")
        return grant


def test_a_task_cancelled_while_its_grant_made_ahead_waits_fails_without_running(watched, tmp_path):
    scheduler, url = watched
    with CancellingWorker(scheduler=RemoteScheduler(url)) as worker:
        worker.add(Steps(root=str(tmp_path), count=20))
        assert worker.run() is False

    cancelled = worker.cancelled
    assert cancelled is not None and RUNS[cancelled] == 0
    record = scheduler._state.tasks[cancelled]
    assert record.status == "FAILED"
    assert sum(RUNS.values()) == 19  # every other step ran


# -- the client's half: ask_ahead / take_ahead ---------------------------------------------------------------


def test_a_get_work_asked_ahead_carries_the_held_reports_and_waits_for_take_ahead_past_other_calls(
    watched,
):
    scheduler, url = watched
    client = RemoteScheduler(url)
    client.add_task(worker="w", task_id="A", family="A", status="PENDING")
    client.flush()  # the server answered a batch: it is one of ours
    client.add_task(worker="w", task_id="B", family="B", status="PENDING")  # held

    assert client.ask_ahead(worker="w", current_tasks=[]) is True
    assert client.ping(worker="w") == {"rpc_messages": []}  # a call in between reads the answer first
    reply = client.take_ahead()
    assert reply["task_id"] in ("A", "B") and reply["n_pending_tasks"] == 2
    assert set(scheduler.task_list("", "")) == {"A", "B"}  # B went with the ask
    assert client.take_ahead() is None  # taken once


def test_ask_ahead_sends_nothing_to_a_server_not_known_to_be_ours(watched):
    _, url = watched
    client = RemoteScheduler(url)
    assert client.ask_ahead(worker="w", current_tasks=[]) is False
    assert client.take_ahead() is None


def test_a_lost_answer_to_an_ask_ahead_holds_its_reports_again_and_the_grant_comes_back_when_asked(
    watched, monkeypatch
):
    scheduler, url = watched
    client = RemoteScheduler(url)
    client.add_task(worker="w", task_id="A", family="A", status="PENDING")
    client.flush()
    client.add_task(worker="w", task_id="B", family="B", status="PENDING")
    assert client.ask_ahead(worker="w", current_tasks=[]) is True
    connection = client._own_pipeline().connection
    monkeypatch.setattr(connection, "receive", lambda: (_ for _ in ()).throw(ConnectionResetError("gone")))

    assert client.take_ahead() is None
    monkeypatch.undo()
    connection.close()
    granted = client.get_work(worker="w", current_tasks=[])  # sends B's report again, with this call
    assert granted["task_id"] == scheduler.asks[0][1]  # the task granted to the lost ask, sent again
    assert scheduler.reports["B"] == 2  # no answer said it arrived: sent again (reports are idempotent)


class Extra(Marked):
    """A dynamic dependency, yielded by a link while it runs."""


class Yields(Marked):
    """A link that yields Extra the first time it runs, so it does not finish DONE then."""

    def requires(self) -> Link:
        return Link(root=self.root, n=2)

    def run(self) -> Iterator[Extra]:  # type: ignore[override]  # a generator: it yields a dependency
        RUNS[self.task_id] += 1
        yield Extra(root=self.root)
        self.write_marker()


class AfterYields(Marked):
    def requires(self) -> Yields:
        return Yields(root=self.root)


def test_a_task_granted_ahead_of_a_link_that_yields_a_dependency_waits_for_that_link_to_finish(
    watched, tmp_path
):
    scheduler, url = watched
    after = AfterYields(root=str(tmp_path))
    assert build([after], scheduler_url=url, no_lock=True) is True

    yields = Yields(root=str(tmp_path)).task_id
    assert any(grants[-2:] == [yields, after.task_id] for grants in scheduler.grants)  # granted ahead
    assert RUNS[yields] == 2 and RUNS[after.task_id] == 1  # once more after Extra, and then After
    assert RUNS[Extra(root=str(tmp_path)).task_id] == 1
