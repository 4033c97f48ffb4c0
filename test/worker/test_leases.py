"""The worker's side of leases: what its pings say it holds, and letting go of what was handed over."""

from __future__ import annotations

import contextlib
import threading
import time

from helpers.fake_luigid import FakeLuigid, Reply
from helpers.luigid import wait_until
from helpers.scheduler import make_scheduler

from luigi.local_target import LocalTarget
from luigi.rpc import RemoteScheduler, RPCError
from luigi.task import Task
from luigi.task_status import PENDING
from luigi.worker import Worker
from luigi.worker.leases import AHEAD, LeaseBook
from luigi.worker.lookahead import AheadAsker, Lookahead
from luigi.worker.work_source import AskAheadSource

# -- the book: only the run the ping was about is let go of --------------------------------------------


def test_a_run_handed_over_is_lost_and_its_result_disowned():
    book = LeaseBook(lambda: [])
    book.started("A")
    held = book.snapshot()
    book.handed_over(["A"], held, {"A": "w2"})
    [lost] = book.take_lost()
    assert (lost.task_id, lost.new_owner) == ("A", "w2")
    assert book.disowned("A")
    book.ended("A")
    assert not book.disowned("A")


def test_an_answer_about_a_run_that_ended_meanwhile_is_ignored():
    book = LeaseBook(lambda: [])
    book.started("A")
    held = book.snapshot()
    book.ended("A")  # its DONE was reported before the ping's answer came back
    book.handed_over(["A"], held, {})
    assert book.take_lost() == [] and not book.disowned("A")
    book.started("A")  # a new run of the same task: not the one the ping was about either
    book.handed_over(["A"], held, {})
    assert book.take_lost() == []


def test_a_grant_made_ahead_is_held_and_lost_only_while_it_has_not_started():
    queue = ["B", "C"]
    book = LeaseBook(lambda: list(queue))
    held = book.snapshot()
    assert held == {"B": AHEAD, "C": AHEAD}
    book.started("C")
    book.handed_over(["B", "C", "unsent"], held, None)
    assert [lost.task_id for lost in book.take_lost()] == ["B"]
    assert not book.disowned("B")  # nothing of it ran here


def test_a_grant_the_worker_dropped_itself_meanwhile_is_no_news():
    queue = ["B"]
    book = LeaseBook(lambda: list(queue))
    held = book.snapshot()
    queue.clear()  # its assumption did not finish DONE: the worker left it out, the scheduler put it back
    book.handed_over(["B"], held, {})
    assert book.take_lost() == []


# -- pings: ``held`` only to a scheduler that says it understands it ------------------------------------

PINGS = 0.05


@contextlib.contextmanager
def _running_one_task(tmp_path, url):
    """A worker pinging ``url`` runs a task that waits until the test creates ``release``."""
    release = tmp_path / "release"

    class Waits(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "out"))

        def run(self):
            wait_until(release.exists, timeout=20, what="the test to release the task")
            with self.output().open("w") as out:
                out.write("done")

    scheduler = RemoteScheduler(url)
    with Worker(scheduler=scheduler, ping_interval=PINGS) as worker:
        worker.add(Waits())
        runner = threading.Thread(target=worker.run)
        runner.start()
        try:
            yield Waits().task_id
        finally:
            release.touch()
            runner.join(timeout=20)


def _pings(fake):
    return [r.data for r in list(fake.requests) if r.api_name == "ping"]


def test_our_worker_tells_our_scheduler_what_it_runs(tmp_path):
    with FakeLuigid() as fake, _running_one_task(tmp_path, fake.url) as task_id:
        wait_until(lambda: any(ping.get("held") == [task_id] for ping in _pings(fake)), what="a held ping")
    assert (tmp_path / "out").read_text() == "done"


def _luigi_has_no_features(request):
    if request.api_name == "scheduler_features":
        return Reply(404, body=b"<html><title>404: Not Found</title></html>")
    return None


def test_a_luigi_luigid_gets_plain_pings(tmp_path):
    with FakeLuigid() as fake:
        fake.script.extend([_luigi_has_no_features] * 10_000)
        with _running_one_task(tmp_path, fake.url):
            wait_until(lambda: len(_pings(fake)) >= 5, what="pings while the task runs")
    assert "scheduler_features" in fake.api_names()
    assert all("held" not in ping for ping in _pings(fake))
    assert (tmp_path / "out").read_text() == "done"


# -- grants made ahead: one handed over meanwhile is not started ----------------------------------------


class Asked:
    """The scheduler's side of one ask ahead: it granted ``reply``."""

    def __init__(self, reply):
        self.reply = reply

    def ask_ahead(self, **kwargs):
        return True

    def take_ahead(self):
        return self.reply


def cut_off_source(scheduler, reply):
    """Worker w1's work source, holding ``reply``'s grants made ahead, its pings unanswered for an hour."""
    policy = Lookahead(True)
    policy.ran(0.0)
    ahead = AheadAsker(Asked(reply), policy, lambda: None)
    ahead.before_start("X", True, lambda: {"worker": "w1"})  # X: the task the grants assume DONE
    ahead.finished("X", True)
    source = AskAheadSource(
        scheduler, "w1", 1.0, ahead, lambda timeout: True, lambda: True, dict, lambda t: False, lambda t: None
    )
    source.begin_run(pinged=True)
    source._book.confirmed_at = time.monotonic() - 3600  # its pings went unanswered for an hour
    return source


def test_after_a_long_silence_a_grant_made_ahead_that_was_handed_over_is_dropped():
    sch, clock = make_scheduler(worker_disconnect_delay=60, retry_delay=0)
    for task_id in ("A", "B"):
        sch.add_task(worker="w1", task_id=task_id, status=PENDING, runnable=True)
    reply = sch.get_work(worker="w1", current_tasks=[], assume_done=["X"], max_tasks=2)
    for task_id in ("A", "B"):
        sch.add_task(worker="w2", task_id=task_id, status=PENDING, runnable=True)
    clock.advance(61)  # w1 is cut off; its grants go back to PENDING and w2 takes one of them
    sch.ping(worker="w2")
    sch.prune()
    taken = sch.get_work(worker="w2")["task_id"]
    source = cut_off_source(sch, reply)
    kept = source.next_grant()
    assert kept is not None and kept["task_id"] != taken
    assert sch._state.tasks[kept["task_id"]].worker_running == "w1"  # given back: nobody took it
    assert source.release_handed_over() == {taken: "w2"}  # dropped unstarted, filed as run by w2
    assert source.unstarted() == []


def test_the_ahead_asker_forgets_a_queued_grant():
    class Grants:
        def ask_ahead(self, **kwargs):
            return True

        def take_ahead(self):
            return {"task_id": "B", "more_tasks": [{"task_id": "C"}]}

    policy = Lookahead(True)
    policy.ran(0.0)
    asker = AheadAsker(Grants(), policy, lambda: None)
    asker.before_start("A", True, lambda: {"worker": "w1"})
    asker.finished("A", True)
    assert asker.take()["task_id"] == "B"
    assert asker.forget("C") is True and asker.forget("C") is False
    assert asker.take() is None


class ComesBack:
    """The scheduler as a cut-off worker sees it: no answer until ``back`` is set, then ``scheduler``'s."""

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.back = False

    def scheduler_features(self):
        return self.scheduler.scheduler_features()

    def ping(self, **kwargs):
        if not self.back:
            raise RPCError("Errors (3 attempts) when connecting to remote scheduler: timed out")
        return self.scheduler.ping(**kwargs)


def test_after_a_long_silence_a_grant_made_ahead_waits_until_the_scheduler_answers_again():
    sch, _ = make_scheduler(worker_disconnect_delay=60)
    for task_id in ("A", "B"):
        sch.add_task(worker="w1", task_id=task_id, status=PENDING, runnable=True)
    reply = sch.get_work(worker="w1", current_tasks=[], assume_done=["X"], max_tasks=2)
    scheduler = ComesBack(sch)
    source = cut_off_source(scheduler, reply)
    assert source.next_grant() is None  # its lease may have run out: nothing starts
    assert source.unstarted() == [reply["task_id"], reply["more_tasks"][0]["task_id"]]  # both wait
    scheduler.back = True
    assert source.next_grant()["task_id"] == reply["task_id"]  # confirmed: it starts now
