"""A scheduler that persists and restarts behaves exactly like one that never stopped (property test).

Two schedulers share a manual clock and receive the same random RPC calls: ``plain`` keeps its state in
memory only; ``durable`` writes to a SQLite file, is flushed after every call and is replaced, at random
moments, by a fresh scheduler loaded from that file. Every reply must be equal, and at each restart
every task's and worker's persisted fields, the task list, the graph and the worker list must be equal.
A change the scheduler forgets to mark dirty shows up here as a difference after a restart.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from helpers.postgres import fresh_schema, require_postgres
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.store import SqlStore
from luigi.scheduler.store.codec import DERIVED_TASK_FIELDS, DERIVED_WORKER_FIELDS

WORKERS = ["w1", "w2", "w3"]
TASKS = [f"T{i}" for i in range(7)]
FAMILIES = ["A", "B"]
START = 1_000_000.0
UNTRACKED = frozenset({"last_active"})

CONFIG = dict(
    retry_delay=100.0,
    remove_delay=100.0,
    worker_disconnect_delay=60.0,
    disable_window=1000,
    retry_count=3,
    disable_persist=2000,
    stable_done_cooldown_secs=10,
    resources={"r1": 1, "r2": 2},
)

task_ref = st.integers(0, 40)  # an index into the ids seen so far, resolved when the call is made
worker = st.sampled_from(WORKERS)
some_tasks = st.lists(st.sampled_from(TASKS), max_size=3, unique=True)
resources = st.dictionaries(st.sampled_from(["r1", "r2", "r3"]), st.integers(1, 2), max_size=2)

add_task = st.fixed_dictionaries(
    {
        "worker": worker,
        "task_id": st.sampled_from(TASKS),
        "status": st.sampled_from(["PENDING"] * 8 + ["DONE", "FAILED", "RUNNING", "DISABLED", "UNKNOWN"]),
        "runnable": st.sampled_from([True, True, True, False]),
        "deps": st.sampled_from([None, None, []]) | some_tasks,
        "resources": st.none() | st.none() | resources,
        "batchable": st.booleans(),
        "priority": st.sampled_from([0, 1, 5, 2.5]),
        "family": st.sampled_from(FAMILIES),
        "params": st.fixed_dictionaries({"p": st.sampled_from(["1", "2", "3"])}),
    },
    optional={
        "new_deps": some_tasks,
        "expl": st.sampled_from(["boom", '{"e": 1}']),
        "assistant": st.booleans(),
        "retry_policy_dict": st.just({"retry_count": 2}),
        "tracking_url": st.just("http://tracker/1"),
        "owners": st.just(["ops@example.com"]),
        "accepts_messages": st.booleans(),
        "param_visibilities": st.just({"p": 0}),
    },
)

batcher = st.tuples(
    st.just("add_task_batcher"),
    st.fixed_dictionaries(
        {
            "worker": worker,
            "task_family": st.sampled_from(FAMILIES),
            "batched_args": st.just(["p"]),
            "max_batch_size": st.sampled_from([2, math.inf]),
        }
    ),
)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each drawn about as often as its weight says."""
    slots = [n for n, (weight, _) in enumerate(choices) for _ in range(weight)]
    return st.sampled_from(slots).flatmap(lambda n: choices[n][1])


def named(name: str, args: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.tuples(st.just(name), args)


call = weighted(
    (6, named("add_task", add_task)),
    (
        5,
        named(
            "get_work",
            st.fixed_dictionaries(
                {"worker": worker},
                optional={"assistant": st.booleans(), "current_tasks": st.just([]), "host": st.just("h")},
            ),
        ),
    ),
    (
        4,
        named(
            "report",
            st.tuples(
                worker,
                task_ref,
                st.sampled_from(["DONE", "DONE", "FAILED", "PENDING", "RUNNING"]),
                st.fixed_dictionaries(
                    {}, optional={"expl": st.just("oops"), "tracking_url": st.just("http://t/2")}
                ),
            ),
        ),
    ),
    (1, named("offer_batch", st.tuples(worker, st.sampled_from([2, math.inf])))),
    (4, named("advance", st.sampled_from([1, 11, 61, 101, 301, 1001, 2001]))),
    (2, named("ping", st.fixed_dictionaries({"worker": worker}))),
    # our worker's ping: what it holds; a lost run's lease (TaskRecord.lost_lease) may be renewed
    (2, named("ping", st.fixed_dictionaries({"worker": worker, "held": some_tasks}))),
    (3, named("comes_back", st.tuples(worker, some_tasks))),
    (3, named("prune", st.just({}))),
    (2, batcher),
    (2, named("restart", st.booleans())),
    (1, named("add_worker", st.fixed_dictionaries({"worker": worker, "info": st.just({"workers": 2})}))),
    (1, named("set_worker_processes", st.fixed_dictionaries({"worker": worker, "n": st.just(3)}))),
    (
        1,
        named(
            "update_resource",
            st.fixed_dictionaries({"resource": st.sampled_from(["r1", "r3"]), "amount": st.integers(0, 3)}),
        ),
    ),
    (1, named("update_resources", st.fixed_dictionaries({"r2": st.integers(0, 3)}))),
    (1, named("pause", st.just({}))),
    (2, named("unpause", st.just({}))),
    (1, named("disable_worker", st.fixed_dictionaries({"worker": worker}))),
    (2, named("on_task", st.tuples(st.sampled_from(["forgive_failures", "mark_as_done"]), task_ref))),
    (1, named("on_task", st.tuples(st.just("re_enable_task"), task_ref))),
    (
        2,
        named(
            "task_extras",
            st.tuples(
                st.sampled_from(["status_message", "progress", "decrease", "respond", "fetch_response"]),
                task_ref,
                st.integers(0, 100),
            ),
        ),
    ),
)


def no_mail(subject: str, message: str, owners: list[str]) -> None:
    """Disable notices are not part of what is compared."""


class Twins:
    """Applies each call to both schedulers and checks that they answer alike."""

    def __init__(self, location: Path | str, prune_on_get_work: bool) -> None:
        self.location = location
        self.options = dict(CONFIG, prune_on_get_work=prune_on_get_work)
        self.clock = ManualClock(START)
        self.plain = Scheduler(SchedulerConfig(**self.options), clock=self.clock, notifier=no_mail)
        self.durable = self._open_durable()
        self.reader = store_at(location)
        self.known_ids: list[str] = list(TASKS)
        self.restarts = 0

    def _open_durable(self) -> Scheduler:
        store = store_at(self.location)
        sch = Scheduler(SchedulerConfig(**self.options), clock=self.clock, notifier=no_mail, store=store)
        sch.load()
        return sch

    def both(self, method: str, **kwargs: Any) -> Any:
        outcomes = []
        for sch in (self.plain, self.durable):
            try:
                outcomes.append(("ok", comparable(getattr(sch, method)(**kwargs))))
            except (ValueError, TypeError) as exc:
                outcomes.append(("error", type(exc).__name__))
        self.durable.flush()
        assert outcomes[0] == outcomes[1], f"{method}({kwargs}) answered differently"
        self.assert_stored(f"after {method}({kwargs})")
        return outcomes[0][1]

    def assert_stored(self, when: str) -> None:
        """The file holds every persisted field of the live state (read through a second connection)."""
        stored = SchedulerState(self.plain.config, self.clock)
        self.reader.load(stored)
        # last_active is left unmarked on purpose: loading replaces it.
        assert records(stored, UNTRACKED) == records(self.plain._state, UNTRACKED), when

    def apply(self, name: str, args: Any) -> None:
        if name == "advance":
            self.clock.advance(args)
        elif name == "restart":
            self.restart(clean=args)
        elif name == "report":
            worker_id, ref, status, details = args
            task_id = self.task(ref)
            self.both("add_task", worker=worker_id, task_id=task_id, status=status, runnable=None, **details)
        elif name == "offer_batch":
            self.offer_batch(*args)
        elif name == "on_task":
            method, ref = args
            self.both(method, task_id=self.task(ref))
        elif name == "task_extras":
            self.task_extras(*args)
        elif name == "comes_back":
            self.comes_back(*args)
        else:
            reply = self.both(name, **args)
            if name == "get_work" and reply.get("batch_id"):
                self.start_batch(args["worker"], reply)

    def task(self, ref: int) -> str:
        """Mostly a task the scheduler knows (calls about unknown ids are no-ops)."""
        existing = [task_id for task_id in self.known_ids if task_id in self.plain._state.tasks]
        ids = existing if existing and ref % 5 else self.known_ids
        return ids[ref % len(ids)]

    def offer_batch(self, worker_id: str, max_batch_size: float) -> None:
        """A worker that batches family A adds three batchable A tasks."""
        self.both(
            "add_task_batcher",
            worker=worker_id,
            task_family="A",
            batched_args=["p"],
            max_batch_size=max_batch_size,
        )
        for n in (4, 5, 6):
            self.both(
                "add_task",
                worker=worker_id,
                task_id=f"T{n}",
                family="A",
                params={"p": str(n)},
                batchable=True,
            )

    def start_batch(self, worker_id: str, reply: dict[str, Any]) -> str:
        """What a worker does after a batch grant: report the combined task RUNNING under the batch id."""
        batch_id = reply["batch_id"]
        combined = f"Combined_{batch_id[:8]}"
        if combined not in self.known_ids:
            self.known_ids.append(combined)
        self.both(
            "add_task",
            worker=worker_id,
            task_id=combined,
            status="RUNNING",
            batch_id=batch_id,
            family=reply["task_family"],
            params=reply["task_params"],
        )
        return combined

    def comes_back(self, worker_id: str, others: list[str]) -> None:
        """A worker of ours pings with what it holds: the runs it lost or still has, and ``others``."""
        tasks = self.plain._state.tasks.values()
        lost = [t.id for t in tasks if (t.lost_lease or {}).get("worker") == worker_id]
        running = [t.id for t in tasks if t.worker_running == worker_id]
        self.both("ping", worker=worker_id, held=sorted({*lost, *running, *others}))

    def task_extras(self, extra: str, ref: int, n: int) -> None:
        """Calls a running task makes about itself (mostly about a RUNNING one)."""
        running = sorted(self.plain._state.by_status["RUNNING"])
        task_id = running[ref % len(running)] if running and ref % 4 else self.task(ref)
        if extra == "status_message":
            self.both("set_task_status_message", task_id=task_id, status_message=f"at {n}")
        elif extra == "progress":
            self.both("set_task_progress_percentage", task_id=task_id, progress_percentage=n)
        elif extra == "decrease":
            self.both("decrease_running_task_resources", task_id=task_id, decrease_resources={"r1": 1})
        elif extra == "respond":
            self.both("add_scheduler_message_response", task_id=task_id, message_id=f"m{n % 3}", response=n)
        else:
            self.both("get_scheduler_message_response", task_id=task_id, message_id=f"m{n % 3}")

    def restart(self, clean: bool) -> None:
        """Every live worker pings, then the durable scheduler is replaced by one loaded from its file.

        The pings make both schedulers agree on when each worker was last seen, which loading resets.
        """
        names = sorted(entry["name"] for entry in self.plain.worker_list())
        self.durable.worker_list()  # the same pruning on both
        self.durable.flush()
        for name in names:
            self.both("ping", worker=name)
        if clean:
            self.durable.close()  # otherwise left open, as after kill -9
        self.durable = self._open_durable()
        self.restarts += 1
        self.assert_same_state()

    def assert_same_state(self) -> None:
        plain, durable = self.plain, self.durable
        assert records(plain._state) == records(durable._state)
        for method in ("task_list", "graph", "resource_list", "is_paused"):
            assert getattr(plain, method)() == getattr(durable, method)(), method
        # Workers started at the same moment are listed by name after a restart, not by arrival.
        assert by_name(plain.worker_list()) == by_name(durable.worker_list())
        for worker_id in WORKERS:
            assert comparable(plain.count_pending(worker_id)) == comparable(durable.count_pending(worker_id))

    def run_down(self) -> None:
        """Grant and finish work on both until neither hands anything out: the same decisions each time."""
        for _ in range(3 * len(self.known_ids)):
            granted = False
            for worker_id in WORKERS:
                reply = self.both("get_work", worker=worker_id)
                task_id = self.start_batch(worker_id, reply) if reply.get("batch_id") else reply["task_id"]
                if task_id is not None:
                    granted = True
                    self.both("add_task", worker=worker_id, task_id=task_id, status="DONE")
            if not granted:
                return


def comparable(reply: Any) -> Any:
    """The reply with ``running_tasks`` sorted: that list follows the order tasks started running,
    which a restart does not keep (it carries no meaning for the worker)."""
    if isinstance(reply, dict) and "running_tasks" in reply:
        return dict(reply, running_tasks=sorted(reply["running_tasks"], key=lambda t: t["task_id"]))
    return reply


def by_name(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda entry: entry["name"])


def records(state: SchedulerState, unstored: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every persisted field of a scheduler's state (what the store must keep), minus ``unstored``."""
    worker_skips = DERIVED_WORKER_FIELDS | unstored
    return {
        "tasks": {task_id: persisted(task, DERIVED_TASK_FIELDS) for task_id, task in state.tasks.items()},
        "workers": {wid: persisted(w, worker_skips) for wid, w in state.workers.items()},
        "resources": state.resources,
        "batchers": state.batchers,
        "paused": state.paused,
    }


def persisted(record: Any, derived: frozenset[str]) -> dict[str, Any]:
    fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in derived}
    if isinstance(fields.get("workers"), dict):
        fields["workers"] = list(fields["workers"])  # an ordered set: the order matters
    return fields


def store_at(location: Path | str) -> SqlStore:
    return SqlStore.for_file(location) if isinstance(location, Path) else SqlStore(location)


def replay(location: Path | str, calls: list[tuple[str, Any]], prune_on_get_work: bool) -> None:
    """Apply the calls to both schedulers, restart, run everything down on both, restart again."""
    twins = Twins(location, prune_on_get_work)
    try:
        for name, args in calls:
            twins.apply(name, args)
        twins.restart(clean=False)
        twins.run_down()
        twins.restart(clean=True)
    finally:
        twins.reader.close()
        twins.durable.close()


_files = itertools.count()
calls = st.lists(call, min_size=10, max_size=60)
PROPERTY_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# One test per pruning mode, 50 examples each, rather than one of 100 drawing the mode: the work is the
# same, and each half stays well inside the per-test timeout on a loaded 2-core CI runner (one test of
# 100 examples took a fifth of that timeout on an idle machine and ran past it under load).
@pytest.mark.slow
@pytest.mark.parametrize("prune_on_get_work", [False, True], ids=["kept-until-listed", "pruned-on-get-work"])
@settings(PROPERTY_SETTINGS, max_examples=50)
@given(calls=calls)
def test_a_restarted_scheduler_answers_like_one_that_never_stopped(tmp_path, calls, prune_on_get_work):
    replay(tmp_path / f"state-{next(_files)}.sqlite", calls, prune_on_get_work)


@pytest.fixture
def postgres_url() -> str:
    return require_postgres()


@pytest.mark.slow
@pytest.mark.postgres
@settings(PROPERTY_SETTINGS, max_examples=15)
@given(calls=calls, prune_on_get_work=st.booleans())
def test_the_same_holds_with_the_state_in_postgresql(postgres_url, calls, prune_on_get_work):
    with fresh_schema(postgres_url) as url:
        replay(url, calls, prune_on_get_work)
