"""A worker rides out a scheduler that is briefly unreachable instead of exiting (issue 4).

The scheduler here is the in-process one behind a wrapper that fails some calls the way ``RemoteScheduler``
does when ``luigid`` is down; the backoff sleep and the clock are replaced, so nothing waits for real.
"""

from __future__ import annotations

from typing import Any

import pytest

from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter
from luigi.rpc import RPCError, SchedulerHTTPError
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.worker import Worker, reconnect


def unreachable() -> RPCError:
    return RPCError("Errors (3 attempts) when connecting", ConnectionRefusedError(111, "Connection refused"))


class FlakyScheduler:
    """The in-process scheduler, except that the first ``failures[name]`` calls of ``name`` raise."""

    def __init__(self, failures: dict[str, int], error: Any = unreachable) -> None:
        self.scheduler = Scheduler(prune_on_get_work=True, record_task_history=False)
        self.failures = dict(failures)
        self.error = error
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.scheduler, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if self.failures.get(name, 0) > 0:
                self.failures[name] -= 1
                raise self.error()
            return method(*args, **kwargs)

        return call


class FakeClock:
    """``sleep`` advances ``now``; both replace the real ones in ``luigi.worker.reconnect``."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(reconnect, "sleep", fake.sleep)
    monkeypatch.setattr(reconnect, "monotonic", fake.monotonic)
    return fake


class ReconnectMarker(Task):
    """Writes its output file; ``runs`` counts how often run() was called."""

    runs = 0
    root_dir = ""
    n = IntParameter()

    def output(self) -> LocalTarget:
        return LocalTarget(f"{ReconnectMarker.root_dir}/marker-{self.n}")

    def run(self) -> None:
        type(self).runs += 1
        with self.output().open("w") as out:
            out.write("done")


def run_worker(scheduler: FlakyScheduler, tmp_path, **config: Any) -> tuple[bool, Worker]:
    ReconnectMarker.root_dir = str(tmp_path)
    ReconnectMarker.runs = 0
    with Worker(scheduler=scheduler, **config) as worker:
        assert worker.add(ReconnectMarker(n=1))
        succeeded = worker.run()
    return succeeded, worker


def test_get_work_that_fails_a_few_times_is_retried_and_the_task_runs_once(tmp_path, clock):
    scheduler = FlakyScheduler({"get_work": 4})
    succeeded, _ = run_worker(scheduler, tmp_path)
    assert succeeded
    assert ReconnectMarker.runs == 1
    assert (tmp_path / "marker-1").read_text() == "done"
    assert len(clock.sleeps) == 4
    assert scheduler.calls.count("get_work") >= 5


def test_the_backoff_grows_and_stays_capped_with_jitter(tmp_path, clock):
    run_worker(FlakyScheduler({"get_work": 12}), tmp_path)
    assert clock.sleeps[0] <= 1.0
    assert clock.sleeps[3] >= 4.0  # doubled three times, drawn from the upper half
    assert max(clock.sleeps) <= reconnect.MAX_BACKOFF
    assert len(set(clock.sleeps)) > 1


def test_add_task_and_add_worker_failures_are_retried_too(tmp_path, clock):
    succeeded, _ = run_worker(FlakyScheduler({"add_task": 2, "add_worker": 3}), tmp_path)
    assert succeeded
    assert ReconnectMarker.runs == 1
    assert len(clock.sleeps) == 5


def test_the_worker_gives_up_once_scheduler_unreachable_timeout_has_passed(tmp_path, clock):
    scheduler = FlakyScheduler({"get_work": 10_000})
    with pytest.raises(RPCError, match="when connecting"):
        run_worker(scheduler, tmp_path, scheduler_unreachable_timeout=60)
    assert 60 <= sum(clock.sleeps) <= 60 + reconnect.MAX_BACKOFF
    assert ReconnectMarker.runs == 0


def test_a_timeout_of_zero_gives_up_at_once_like_luigi(tmp_path, clock):
    with pytest.raises(RPCError):
        run_worker(FlakyScheduler({"get_work": 1}), tmp_path, scheduler_unreachable_timeout=0)
    assert clock.sleeps == []


def test_a_refused_call_is_not_retried(tmp_path, clock):
    def refused() -> RPCError:
        return RPCError("refused", SchedulerHTTPError(400, "bad", "/api/get_work"), status=400)

    with pytest.raises(RPCError, match="refused"):
        run_worker(FlakyScheduler({"get_work": 1}, error=refused), tmp_path)
    assert clock.sleeps == []


def test_a_5xx_answer_counts_as_unreachable():
    error = RPCError("down", SchedulerHTTPError(503, "restarting", "/api/get_work"), status=503)
    assert reconnect.is_unreachable(error)
    assert not reconnect.is_unreachable(RPCError("Received null response from remote scheduler"))
    assert not reconnect.is_unreachable(ValueError("not an rpc error"))


def test_a_negative_timeout_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="scheduler_unreachable_timeout must be 0 or more seconds, got -1"):
        reconnect.SchedulerRetrier(-1)
