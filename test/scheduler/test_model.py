"""The incremental indexes agree with a naive recomputation from the task records (model-based test).

Random reports, grants, completions and retries are applied; after each grant the chosen task must be
the one a full scan (Luigi's algorithm) would choose, and ``count_pending`` must match a full count.
"""

from __future__ import annotations

import pytest
from helpers.scheduler import make_scheduler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luigi.scheduler.model.ready import ReadyQueues
from luigi.scheduler.views.upstream import UPSTREAM_DISABLED, upstream_status

WORKERS = ["w1", "w2"]
TASKS = [f"T{i}" for i in range(12)]


def expected_grant(sch, worker):
    """Luigi's choice: the best PENDING task listing the worker whose deps all exist and are DONE."""
    tasks = sch._state.tasks
    ready = [
        t
        for t in tasks.values()
        if t.status == "PENDING"
        and worker in t.workers
        and all(d in tasks and tasks[d].status == "DONE" for d in t.deps)
    ]
    return min(ready, key=lambda t: (-t.priority, t.created, t.id)).id if ready else None


def expected_counts(sch, worker):
    state = sch._state
    table: dict[str, str] = {}
    n = unique = last = 0
    for t in state.tasks.values():
        if worker not in t.workers or t.status not in ("PENDING", "FAILED"):
            continue
        if upstream_status(state, t.id, table) == UPSTREAM_DISABLED:
            continue
        n += 1
        unique += len(t.workers) == 1
        last += list(t.workers)[-1] == worker
    return n, unique, last


operation = st.one_of(
    st.tuples(
        st.just("add"),
        st.sampled_from(WORKERS),
        st.sampled_from(TASKS),
        st.lists(st.sampled_from(TASKS), max_size=3),
        st.integers(0, 3),
        st.sampled_from(["PENDING", "PENDING", "PENDING", "DONE", "FAILED", "DISABLED"]),
        st.booleans(),
    ),
    st.tuples(st.just("grant"), st.sampled_from(WORKERS)),
    st.tuples(st.just("finish"), st.sampled_from(["DONE", "FAILED"])),
    st.tuples(st.just("wait"), st.integers(1, 30)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=60))
def test_grants_and_counts_match_a_full_scan(operations):
    sch, clock = make_scheduler(retry_delay=10, stable_done_cooldown_secs=0, worker_disconnect_delay=10**6)
    running: list[tuple[str, str]] = []
    for op in operations:
        if op[0] == "add":
            _, worker, task_id, deps, priority, status, runnable = op
            sch.add_task(
                worker=worker, task_id=task_id, deps=deps, priority=priority, status=status, runnable=runnable
            )
        elif op[0] == "grant":
            worker = op[1]
            expected = expected_grant(sch, worker)
            counts = expected_counts(sch, worker)
            reply = sch.get_work(worker=worker)
            assert reply["task_id"] == expected
            assert (
                reply["n_pending_tasks"],
                reply["n_unique_pending"],
                reply["n_pending_last_scheduled"],
            ) == counts
            if expected is not None:
                running.append((worker, expected))
        elif op[0] == "finish" and running:
            worker, task_id = running.pop(0)
            sch.add_task(worker=worker, task_id=task_id, status=op[1])
        elif op[0] == "wait":
            clock.advance(op[1])
            sch.prune()
        clock.advance(0.001)


RESOURCE_NEEDS = st.sampled_from(
    [None, {}, {"db": 1}, {"db": 2}, {"gpu": 1}, {"db": 1, "gpu": 1}, {"disk": 1}]
)

resource_operation = st.one_of(
    st.tuples(
        st.just("add"), st.sampled_from(TASKS), st.lists(st.sampled_from(TASKS), max_size=2), RESOURCE_NEEDS
    ),
    st.tuples(st.just("grant")),
    st.tuples(st.just("finish"), st.sampled_from(["DONE", "FAILED"])),
)


def used_units(sch):
    used: dict[str, int] = {}
    for t in sch._state.tasks.values():
        if t.status == "RUNNING":
            for name, amount in (t.resources_running or {}).items():
                used[name] = used.get(name, 0) + amount
    return used


def fits(needs, used, capacities):
    return all(amount + used.get(name, 0) <= capacities.get(name, 1) for name, amount in needs.items())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(resource_operation, min_size=1, max_size=60))
def test_a_lone_worker_gets_the_best_ready_task_that_fits_and_capacities_hold(operations):
    capacities = {"db": 2, "gpu": 1}
    sch, clock = make_scheduler(resources=capacities, stable_done_cooldown_secs=0)
    sch.add_worker(worker="w1", info={"workers": 4})
    running: list[str] = []
    for op in operations:
        if op[0] == "add":
            _, task_id, deps, needs = op
            sch.add_task(worker="w1", task_id=task_id, deps=deps, resources=needs)
        elif op[0] == "grant":
            used = used_units(sch)
            tasks = sch._state.tasks
            fitting = [
                t
                for t in tasks.values()
                if t.status == "PENDING"
                and "w1" in t.workers
                and all(d in tasks and tasks[d].status == "DONE" for d in t.deps)
                and fits(t.resources, used, capacities)
            ]
            expected = min(fitting, key=lambda t: (-t.priority, t.created, t.id)).id if fitting else None
            assert sch.get_work(worker="w1")["task_id"] == expected
            if expected is not None:
                running.append(expected)
            assert all(used_units(sch).get(name, 0) <= capacities.get(name, 1) for name in used_units(sch))
        elif running:
            sch.add_task(worker="w1", task_id=running.pop(0), status=op[1])
        clock.advance(0.001)


def test_a_state_rebuilt_from_its_records_makes_the_same_decisions():
    import copy

    sch, clock = make_scheduler(retry_delay=10)
    sch.add_worker(worker="w1", info={"workers": 2})
    for i in range(30):
        deps = [f"T{i - 1}"] if i % 3 else []
        sch.add_task(
            worker="w1", task_id=f"T{i}", deps=deps, priority=i % 4, resources={"r": 1} if i % 5 else None
        )
    for _ in range(3):
        task_id = sch.get_work(worker="w1")["task_id"]
        sch.add_task(worker="w1", task_id=task_id, status="FAILED" if task_id == "T0" else "DONE")
    twin, twin_clock = make_scheduler(retry_delay=10)
    twin._state.tasks = copy.deepcopy(sch._state.tasks)
    twin._state.workers = copy.deepcopy(sch._state.workers)
    twin._state.rebuild_indexes()
    twin_clock.set(clock())
    for _ in range(40):
        clock.advance(1)
        twin_clock.advance(1)
        mine, theirs = sch.get_work(worker="w1"), twin.get_work(worker="w1")
        assert mine == theirs
        if mine["task_id"] is not None:
            sch.add_task(worker="w1", task_id=mine["task_id"], status="DONE")
            twin.add_task(worker="w1", task_id=mine["task_id"], status="DONE")
    assert sch.task_list() == twin.task_list()


class Granting:
    """Ready queues whose entries stay valid until their task is taken."""

    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.queues = ReadyQueues(lambda _owner, key, _rkey: key[2] not in self.taken)

    def drain(self, owner: str) -> list[str]:
        """Every task id the owner's queue grants, best first, taking each as it comes."""
        order = []
        while (head := self.queues.head(owner)) is not None:
            self.taken.add(head[0][2])
            order.append(head[0][2])
        return order


def test_a_ready_queue_filled_at_once_grants_as_one_offered_an_entry_at_a_time():
    entries = [((-(i % 3), float(i % 5), f"T{i}"), (("r", 1),) if i % 4 else ()) for i in range(40)]
    offered, filled = Granting(), Granting()
    for key, rkey in entries:
        offered.queues.offer("w1", key, rkey, live_bound=len(entries))
    filled.queues.fill("w1", reversed(entries))

    assert filled.drain("w1") == offered.drain("w1") == [key[2] for key, _ in sorted(entries)]


def test_filling_a_ready_queue_that_holds_entries_is_refused():
    queues = ReadyQueues(lambda *_: True)
    queues.offer("w1", (0, 1.0, "T1"), (), live_bound=1)
    with pytest.raises(ValueError, match="not empty"):
        queues.fill("w1", [((0, 2.0, "T2"), ())])
