"""The worker's work source: grants asked in turn (``DirectSource``), or ahead with leases kept."""

from __future__ import annotations

from typing import Any

import pytest

from luigi.local_target import LocalTarget
from luigi.parameter import Parameter
from luigi.rpc import RemoteScheduler
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.worker import Worker
from luigi.worker.work_source import AskAheadSource, DirectSource


class Written(Task):
    """Writes its output file under ``root``."""

    root = Parameter()
    name = Parameter()

    def output(self) -> LocalTarget:
        return LocalTarget(f"{self.root}/{self.name}")

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write(self.name)


# -- chosen once, where the worker is built ---------------------------------------------------------------


class NotOurClient:
    """A scheduler stand-in that is not our RPC client (as a Luigi-protocol client of a user's would be)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


@pytest.mark.parametrize(
    ("scheduler", "source"),
    [
        (Scheduler, DirectSource),
        (NotOurClient, DirectSource),
        (lambda: RemoteScheduler("http://127.0.0.1:9"), AskAheadSource),
    ],
    ids=["in-process scheduler", "another client", "our client"],
)
def test_the_work_source_is_chosen_by_the_scheduler_the_worker_is_built_with(scheduler, source):
    worker = Worker(scheduler=scheduler(), no_install_shutdown_handler=True)
    assert type(worker._source) is source
    worker.stop()


def test_a_local_run_asks_the_scheduler_in_turn_and_pings_say_nothing_held(tmp_path):
    """The in-process scheduler is never asked ahead, nor asked whether it tracks leases."""

    class Watched(Scheduler):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def scheduler_features(self) -> dict[str, Any]:
            self.calls.append("scheduler_features")
            return super().scheduler_features()

        def get_work(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.calls.append("get_work" + ("(ahead)" if "assume_done" in kwargs else ""))
            return super().get_work(*args, **kwargs)

    scheduler = Watched()
    with Worker(scheduler=scheduler) as worker:
        for name in "abc":
            worker.add(Written(root=str(tmp_path), name=name))
        assert worker.run() is True
        assert worker._source.held_for_ping() is None  # a plain ping
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b", "c"]
    assert scheduler.calls.count("scheduler_features") == 1  # for task logs only, not for leases
    assert scheduler.calls.count("get_work") == 4 and "get_work(ahead)" not in scheduler.calls
