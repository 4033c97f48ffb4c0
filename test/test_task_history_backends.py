"""One suite for every task-history backend: no-op, SQLite and PostgreSQL.

Each test drives a real ``Scheduler`` the way workers do (add_task, get_work, add_task DONE/FAILED)
with the history under test and one manual clock, then reads the history back through its query
API. The no-op history must accept everything and find nothing; the databases must find it all.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.postgres import fresh_schema, require_postgres

from luigi.scheduler import Scheduler
from luigi.scheduler.model.clock import ManualClock
from luigi.task_history import NopHistory, TaskHistory
from luigi.task_status import DONE, FAILED, PENDING, RUNNING

START = 1_700_000_000.0
TRACEBACK = (
    "Runtime error:\nTraceback (most recent call last):\n"
    '  File "pipeline.py", line 12, in run\n    raise ValueError("bad <input> & more")\n'
    "ValueError: bad <input> & more"
)


@dataclass
class Backend:
    """A way to open histories on one database (each call opens the same database again)."""

    name: str
    open: Callable[..., TaskHistory]
    opened: list[TaskHistory] = field(default_factory=list)

    @property
    def records(self) -> bool:
        return self.name != "nop"

    def history(self, **options: Any) -> TaskHistory:
        history = self.open(**options)
        self.opened.append(history)
        return history


def _db_opener(url: str, clock: ManualClock) -> Callable[..., TaskHistory]:
    from luigi.db_task_history import DbTaskHistory

    def open_history(**options: Any) -> TaskHistory:
        options.setdefault("flush_interval", 0.05)
        return DbTaskHistory(url, clock=clock, **options)

    return open_history


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(params=["nop", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Backend]:
    if request.param == "nop":
        chosen = Backend("nop", lambda **options: NopHistory())
        yield chosen
    elif request.param == "sqlite":
        chosen = Backend("sqlite", _db_opener(f"sqlite:///{tmp_path / 'history.sqlite'}", clock))
        yield chosen
    else:
        with fresh_schema(require_postgres()) as url:
            chosen = Backend("postgres", _db_opener(url, clock))
            yield chosen
            for history in chosen.opened:
                history.close()
    for history in chosen.opened:
        history.close()


class Pipeline:
    """Workers reporting to a scheduler that records into ``history``."""

    def __init__(self, history: TaskHistory, clock: ManualClock) -> None:
        self.history = history
        self.clock = clock
        self.scheduler = Scheduler(clock=clock, task_history=history)

    def schedule(
        self, task_id: str, family: str = "Fetch", params: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        self.scheduler.add_task(
            worker=kw.pop("worker", "worker-1"),
            task_id=task_id,
            family=family,
            params=params or {},
            status=PENDING,
            **kw,
        )

    def run(
        self,
        task_id: str,
        family: str = "Fetch",
        params: dict[str, Any] | None = None,
        outcome: str = DONE,
        took: float = 10.0,
        host: str = "host-a",
        worker: str = "worker-1",
        error: str | None = None,
        **kw: Any,
    ) -> None:
        """Schedule the task, grant it to ``worker`` on ``host``, report ``outcome`` ``took`` s later."""
        self.schedule(task_id, family, params, worker=worker, **kw)
        self.clock.advance(1)
        granted = self.scheduler.get_work(worker=worker, host=host)
        assert granted["task_id"] == task_id
        self.clock.advance(took)
        expl = json.dumps(error) if error is not None else None
        self.scheduler.add_task(worker=worker, task_id=task_id, status=outcome, expl=expl)
        self.clock.advance(1)

    def written(self) -> TaskHistory:
        assert self.history.flush(timeout=30), "the history did not write its events in time"
        return self.history


def local(at: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(at)


def test_a_run_is_recorded_with_its_duration_host_and_worker(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Fetch_1", params={"day": "2024-01-01"}, took=12.5, host="build-7", worker="w-42")

    history = pipeline.written()
    runs = history.find_runs_by_name("Fetch")
    if not backend.records:
        assert runs == [] and history.status().recording is False
        return
    [run] = runs
    assert (run.status, run.duration, run.host, run.worker, run.retry) == (DONE, 12.5, "build-7", "w-42", 0)
    assert run.started == local(START + 1) and run.finished == local(START + 13.5)
    assert run.error is None and run.exception_type is None
    record = history.find_task_by_task_id("Fetch_1")
    assert (record.name, record.host) == ("Fetch", "build-7")
    assert history.status().written == 3 and history.status().lost == 0


def test_a_failed_run_keeps_its_error_text_and_exception_type(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Fetch_2", outcome=FAILED, error=TRACEBACK, took=3.0)

    runs = pipeline.written().find_runs_by_name("Fetch")
    if not backend.records:
        assert runs == []
        return
    [run] = runs
    assert (run.status, run.duration, run.exception_type) == (FAILED, 3.0, "ValueError")
    assert run.error == TRACEBACK


def test_each_retry_is_a_numbered_run_of_the_same_record(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Load_1", family="Load", outcome=FAILED, error=TRACEBACK)
    pipeline.run("Load_1", family="Load", outcome=FAILED, error=TRACEBACK)
    pipeline.run("Load_1", family="Load", outcome=DONE)

    history = pipeline.written()
    records = history.find_all_by_name("Load")
    if not backend.records:
        assert records == [] and history.find_runs_by_name("Load") == []
        return
    [record] = records
    assert [(run.status, run.retry) for run in history.find_runs_by_name("Load")] == [
        (FAILED, 0),
        (FAILED, 1),
        (DONE, 2),
    ]
    newest_first = [event.event_name for event in record.events]
    assert newest_first == [DONE, RUNNING, PENDING, FAILED, RUNNING, PENDING, FAILED, RUNNING, PENDING]


def test_find_all_by_parameters_matches_every_given_parameter(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Sum_a1", family="Sum", params={"region": "eu", "year": "2023"})
    pipeline.run("Sum_a2", family="Sum", params={"region": "eu", "year": "2024"})
    pipeline.run("Sum_a3", family="Sum", params={"region": "us", "year": "2024"})

    history = pipeline.written()
    eu = history.find_all_by_parameters("Sum", region="eu")
    eu_2024 = history.find_all_by_parameters("Sum", region="eu", year="2024")
    if not backend.records:
        assert eu == [] and eu_2024 == []
        return
    assert [record.task_id for record in eu] == ["Sum_a2", "Sum_a1"]
    assert [record.task_id for record in eu_2024] == ["Sum_a2"]
    assert history.find_all_by_parameters("Sum", region="mars") == []
    assert {name: p.value for name, p in eu_2024[0].parameters.items()} == {"region": "eu", "year": "2024"}


def test_a_record_is_found_by_its_id_and_by_its_task_id(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Fetch_9", params={"n": "9"})

    history = pipeline.written()
    by_task_id = history.find_task_by_task_id("Fetch_9")
    if not backend.records:
        assert by_task_id is None and history.find_task_by_id(1) is None
        return
    by_id = history.find_task_by_id(by_task_id.id)
    assert by_id.task_id == "Fetch_9" and by_id.parameters["n"].value == "9"
    assert [event.event_name for event in by_id.events] == [DONE, RUNNING, PENDING]
    assert history.find_task_by_task_id("Fetch_404") is None
    assert history.find_task_by_id(by_task_id.id + 1000) is None


def test_latest_runs_are_the_tasks_active_in_the_last_day(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("Old_1", family="Old")
    clock.advance(2 * 86400)
    pipeline.run("New_1", family="New")
    pipeline.run("New_2", family="New")

    latest = pipeline.written().find_latest_runs()
    if not backend.records:
        assert latest == []
        return
    assert [record.task_id for record in latest] == ["New_2", "New_1"]
    assert len(pipeline.history.find_all_runs()) == 3


def test_every_event_is_listed_oldest_first(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.run("A_1", family="A")
    pipeline.run("B_1", family="B", outcome=FAILED, error="boom")

    events = pipeline.written().find_all_events()
    if not backend.records:
        assert events == []
        return
    assert [event.event_name for event in events] == [PENDING, RUNNING, DONE, PENDING, RUNNING, FAILED]
    assert [event.ts for event in events] == sorted(event.ts for event in events)


def test_hidden_parameters_are_never_recorded(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    params = {"user": "ann", "password": "hunter2"}
    pipeline.run("Login_1", family="Login", params=params, param_visibilities={"user": 0, "password": 1})

    record = pipeline.written().find_task_by_task_id("Login_1")
    if not backend.records:
        assert record is None
        return
    assert {name: p.value for name, p in record.parameters.items()} == {"user": "ann"}


def test_oversized_values_and_nul_characters_are_stored_cut_to_fit(
    backend: Backend, clock: ManualClock
) -> None:
    pipeline = Pipeline(backend.history(), clock)
    family = "F" * 300
    task_id = f"{family}_{'x' * 300}"
    pipeline.run(task_id, family=family, params={"p" * 200: "nul\x00here"}, host="h" * 300)

    history = pipeline.written()
    if not backend.records:
        assert history.find_all_runs() == []
        return
    [record] = history.find_all_runs()
    assert len(record.task_id) == 200 and record.task_id.startswith(task_id[:150])
    assert record.task_id.endswith(task_id[-10:])  # the hash at the end of an id is kept
    assert history.find_task_by_task_id(task_id).id == record.id
    assert len(record.name) == 128 and len(record.host) == 128
    [(name, param)] = record.parameters.items()
    assert len(name) == 128 and param.value == "nul\ufffdhere"
    assert history.status().lost == 0


def test_a_failure_reported_before_the_task_ran_is_a_run_without_duration(
    backend: Backend, clock: ManualClock
) -> None:
    pipeline = Pipeline(backend.history(), clock)
    pipeline.schedule("Check_1", family="Check")
    pipeline.scheduler.add_task(
        worker="worker-1", task_id="Check_1", status=FAILED, expl=json.dumps(TRACEBACK)
    )

    runs = pipeline.written().find_runs_by_name("Check")
    if not backend.records:
        assert runs == []
        return
    [run] = runs
    assert (run.status, run.started, run.duration, run.exception_type) == (FAILED, None, None, "ValueError")
    assert run.finished == local(START)


def test_a_reopened_history_appends_to_the_record_and_ends_the_open_run(
    backend: Backend, clock: ManualClock
) -> None:
    first = Pipeline(backend.history(), clock)
    first.schedule("Long_1", family="Long")
    assert first.scheduler.get_work(worker="worker-1", host="host-a")["task_id"] == "Long_1"
    first.written().close()

    clock.advance(60)  # the scheduler restarted while the task ran; the same worker reports it done
    second = Pipeline(backend.history(), clock)
    second.scheduler.add_task(worker="worker-1", task_id="Long_1", family="Long", status=RUNNING)
    clock.advance(30)
    second.scheduler.add_task(worker="worker-1", task_id="Long_1", status=DONE)

    history = second.written()
    records = history.find_all_by_name("Long")
    if not backend.records:
        assert records == []
        return
    [record] = records
    assert [(run.status, run.retry) for run in history.find_runs_by_name("Long")] == [(FAILED, 0), (DONE, 1)]
    lost, done = history.find_runs_by_name("Long")
    assert "No result was reported" in lost.error and done.duration == 30.0


def test_runs_older_than_keep_days_are_pruned_on_a_timer(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(keep_days=7, prune_interval=60), clock)
    pipeline.run("Old_1", family="Old", params={"k": "v"})
    clock.advance(6 * 86400)
    pipeline.run("Recent_1", family="Recent")
    history = pipeline.written()

    clock.advance(2 * 86400)  # Old_1 is now 8 days old, Recent_1 2 days
    pipeline.run("Today_1", family="Today")  # wakes the writer, whose timer is due
    history.flush(timeout=30)
    if not backend.records:
        assert history.find_task_names() == []
        return
    names = _wait_for(lambda: [name for name, _ in history.find_task_names()], ["Recent", "Today"])
    assert names == ["Recent", "Today"]
    assert history.find_runs_by_name("Old") == [] and history.find_task_by_task_id("Old_1") is None


def test_the_chart_data_is_the_last_runs_oldest_first(backend: Backend, clock: ManualClock) -> None:
    pipeline = Pipeline(backend.history(), clock)
    for n in range(5):
        pipeline.run(f"Report_{n}", family="Report", params={"n": str(n)}, took=float(n + 1))

    runs = pipeline.written().find_runs_by_name("Report", limit=3)
    if not backend.records:
        assert runs == []
        return
    assert [run.duration for run in runs] == [3.0, 4.0, 5.0]
    assert [run.task.parameters["n"].value for run in runs] == ["2", "3", "4"]


def _wait_for(read: Callable[[], Any], expected: Any, timeout: float = 30.0) -> Any:
    """``read()`` once it equals ``expected`` (or its last value past the deadline)."""
    import time

    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.02)
        value = read()
    return value
