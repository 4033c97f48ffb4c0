"""``get_work`` holds resources back for higher-priority work as Luigi's scheduler does (LUIGI_COMPAT f.4
steps 4-9, j.2 "get_work reservation"): walking tasks by priority, a waiting task reserves its resources
for the first of its active workers with a free process, and a running one uses up its runner's process."""

from __future__ import annotations

import random

import pytest
from helpers.scheduler import granted, make_scheduler

from luigi.scheduler.model.state import rank_key

X = "worker-x"
Y = "worker-y"


def start(sch, worker, task_id, **task):
    """``worker`` adds the task and is granted it (so it is RUNNING, and the worker has asked for work)."""
    sch.add_task(worker=worker, task_id=task_id, **task)
    assert granted(sch, worker) == task_id


@pytest.mark.parametrize("owner_of_c", [X, Y])
def test_a_free_unit_is_held_for_a_higher_priority_task_waiting_for_more_units(owner_of_c):
    sch, _ = make_scheduler(resources={"r": 2})
    start(sch, X, "A", resources={"r": 1})
    sch.add_task(worker=X, task_id="B", resources={"r": 2}, priority=10)
    sch.add_task(worker=owner_of_c, task_id="C", resources={"r": 1})
    assert granted(sch, owner_of_c) is None  # one unit is free, but B waits for both
    sch.add_task(worker=X, task_id="A", status="DONE")
    assert granted(sch, X) == "B"


def test_a_busy_worker_holds_a_resource_for_its_next_task_that_outranks_what_it_runs():
    sch, _ = make_scheduler(resources={"R": 1})
    sch.add_worker(worker=X, info={"workers": 1})
    start(sch, X, "A", priority=4)
    sch.add_task(worker=X, task_id="B", resources={"R": 1}, priority=5)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    assert granted(sch, Y) is None  # X runs B next: it outranks A, which X runs now


def test_a_held_resource_blocks_only_tasks_that_need_it():
    sch, _ = make_scheduler(resources={"R": 1})
    start(sch, X, "A")
    sch.add_task(worker=X, task_id="B", resources={"R": 1}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    assert granted(sch, Y) is None
    sch.add_task(worker=Y, task_id="D", priority=0)
    assert granted(sch, Y) == "D"
    assert granted(sch, Y) is None


@pytest.mark.parametrize("owner_of_big", [X, Y])
def test_a_task_needing_more_than_the_whole_capacity_holds_nothing_back(owner_of_big):
    sch, _ = make_scheduler(resources={"R": 2})
    start(sch, X, "A")
    sch.add_task(worker=owner_of_big, task_id="Big", resources={"R": 3}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    assert granted(sch, Y) == "C"


@pytest.mark.parametrize(("processes", "c_granted"), [(1, True), (2, False)])
def test_a_worker_busy_with_higher_priority_work_holds_nothing_back(processes, c_granted):
    sch, _ = make_scheduler(resources={"R": 1})
    sch.add_worker(worker=X, info={"workers": processes})
    start(sch, X, "A", priority=20)
    sch.add_task(worker=X, task_id="B", resources={"R": 1}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    # with one process, X is busy with A, which outranks B; with two, B is X's next task
    assert granted(sch, Y) == ("C" if c_granted else None)


def test_the_pinging_worker_counts_as_a_competitor_only_while_it_asks_for_work():
    sch, clock = make_scheduler(resources={"R": 1})
    sch.add_task(worker=X, task_id="B", resources={"R": 1}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    assert granted(sch, X) == "B"
    sch.add_task(worker=X, task_id="B", status="DONE")
    sch.add_task(worker=X, task_id="B2", resources={"R": 1}, priority=10)
    assert granted(sch, Y) is None  # X asked for work a moment ago: B2 is held for it
    clock.advance(sch.config.worker_disconnect_delay + 1)
    sch.ping(worker=X)  # alive, but it has not asked for work within worker_disconnect_delay
    sch.ping(worker=Y)
    assert granted(sch, Y) == "C"


def test_a_worker_with_free_processes_holds_one_unit_per_process():
    sch, _ = make_scheduler(resources={"R": 3})
    sch.add_worker(worker=X, info={"workers": 2})
    start(sch, X, "Prep", priority=30)
    for i in range(3):
        sch.add_task(worker=X, task_id=f"B{i}", resources={"R": 1}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1}, priority=1)
    # Prep takes one of X's two processes; the other will run B0, so one unit is held, two are free
    assert granted(sch, Y) == "C"
    sch.add_task(worker=Y, task_id="C2", resources={"R": 1}, priority=1)
    assert granted(sch, Y) == "C2"
    sch.add_task(worker=Y, task_id="C3", resources={"R": 1}, priority=1)
    assert granted(sch, Y) is None


def test_an_assistant_is_held_back_like_any_worker():
    sch, _ = make_scheduler(resources={"R": 2})
    start(sch, X, "A", resources={"R": 1})
    sch.add_task(worker=X, task_id="B", resources={"R": 2}, priority=10)
    sch.add_task(worker=Y, task_id="C", resources={"R": 1})
    assert granted(sch, "assistant", assistant=True) is None  # the free unit is held for B
    sch.add_task(worker=X, task_id="A", status="DONE")
    assert granted(sch, "assistant", assistant=True) == "B"


def test_a_task_granted_ahead_is_held_back_like_a_ready_one():
    sch, _ = make_scheduler(resources={"R": 1})
    sch.add_task(worker=Y, task_id="P")
    sch.add_task(worker=Y, task_id="Q", deps=["P"], resources={"R": 1}, priority=1)
    start(sch, X, "A")
    sch.add_task(worker=X, task_id="B", resources={"R": 1}, priority=10)
    assert granted(sch, Y) == "P"
    assert granted(sch, Y, current_tasks=["P"], assume_done=["P"]) is None  # R is held for B
    sch.add_task(worker=X, task_id="B", status="DONE")
    assert granted(sch, Y, current_tasks=["P"], assume_done=["P"]) == "Q"


def luigis_choice(state, caller, assistant):
    """What LUIGI_COMPAT j.2 says Luigi's get_work grants ``caller``, walking every task (the reference)."""
    live = sorted((t for t in state.tasks.values() if t.status in ("PENDING", "RUNNING")), key=rank_key)

    def schedulable(task):
        return task.status == "PENDING" and all(state.is_done(dep) for dep in task.deps)

    def fits(needs, counted):
        return all(n + counted.get(name, 0) <= state.resources.get(name, 1) for name, n in needs.items())

    def add(counted, amounts):
        for name, n in amounts.items():
            counted[name] = counted.get(name, 0) + n

    mine = [t for t in live if caller in t.workers]
    if not assistant and not any(t.resources for t in mine if t.status == "PENDING"):
        return next((t.id for t in mine if schedulable(t)), None)  # a "trivial" worker
    used, tally = {}, {}
    for task in live:
        if task.status == "RUNNING":
            add(used, task.resources_running if task.resources_running is not None else task.resources)
    budget = {w.id: int(w.info.get("workers", 1)) for w in state.workers.values() if w.last_get_work}
    caller_info = state.workers[caller].info if caller in state.workers else {}
    budget.setdefault(caller, int(caller_info.get("workers", 1)))  # it asks now, so it is active
    for task in live:
        if task.status == "RUNNING" and task.worker_running in budget:
            budget[task.worker_running] -= 1
            add(tally, task.resources_running if task.resources_running is not None else task.resources)
        if not (schedulable(task) and fits(task.resources, tally)):
            continue
        if ((assistant and task.runnable) or caller in task.workers) and fits(task.resources, used):
            return task.id
        for worker in [*task.workers, caller] if assistant else task.workers:
            if budget.get(worker, 0) > 0:
                budget[worker] -= 1
                add(tally, task.resources)
                break
    return None


NEEDS = [{}, {}, {"r": 1}, {"r": 2}, {"s": 1}, {"r": 1, "s": 1}, {"r": 4}]


@pytest.mark.parametrize("seed", range(100))
def test_get_work_grants_what_luigis_reservation_walk_grants(seed):
    rng = random.Random(seed)
    sch, _ = make_scheduler(resources={"r": rng.randint(1, 3)})  # "s" is not configured: capacity 1
    workers = ["w1", "w2", "w3"]
    for worker in workers:
        sch.add_worker(worker=worker, info={"workers": rng.randint(1, 2)})
    state = sch._state  # the reference reads the records; every change goes through the RPC methods
    for step in range(80):
        action = rng.random()
        running = [t.id for t in state.tasks.values() if t.status == "RUNNING"]
        if action < 0.4:
            task_id = f"T{step}" if rng.random() < 0.8 or not state.tasks else rng.choice(sorted(state.tasks))
            deps = rng.sample(sorted(state.tasks), k=min(len(state.tasks), rng.choice([0, 0, 1])))
            sch.add_task(
                worker=rng.choice(workers),
                task_id=task_id,
                deps=deps,
                priority=rng.randint(0, 3),
                resources=rng.choice(NEEDS),
            )
        elif action < 0.55 and running:
            done = rng.choice(running)
            sch.add_task(worker=state.tasks[done].worker_running, task_id=done, status="DONE")
        elif action < 0.6 and running:
            sch.decrease_running_task_resources(task_id=rng.choice(running), decrease_resources={"r": 1})
        else:
            caller, assistant = rng.choice([(w, False) for w in workers] + [("helper", True)])
            expected = luigis_choice(state, caller, assistant)
            assert granted(sch, caller, assistant=assistant) == expected, f"step {step}"
