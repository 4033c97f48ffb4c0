"""Scale sanity: grants cost O(log n) amortised, not a scan of every pending task (not timed)."""

from __future__ import annotations

from helpers.scheduler import WORKER, granted, make_scheduler

N = 20_000


def inspected(sch) -> int:
    """Ready-queue entries looked at so far (the scheduler counts them for exactly this check)."""
    return sch._state.ready.inspected


def test_twenty_thousand_ready_tasks_are_granted_and_completed_with_constant_work_each():
    # prune_on_get_work: each get_work prunes too, so a prune that walked every task would be quadratic
    sch, _ = make_scheduler(prune_on_get_work=True)
    for i in range(N):
        sch.add_task(worker=WORKER, task_id=f"T{i:05d}", priority=i % 3)
    order = []
    while (task_id := granted(sch)) is not None:
        order.append(task_id)
        sch.add_task(worker=WORKER, task_id=task_id, status="DONE")
    assert len(order) == N
    assert order[:2] == ["T00002", "T00005"]  # priority 2 first, then by age and id
    assert inspected(sch) <= 5 * N  # a few entries per grant, never the whole queue


def test_a_long_chain_releases_one_task_per_completion():
    sch, _ = make_scheduler(prune_on_get_work=True)
    for i in range(N):
        sch.add_task(worker=WORKER, task_id=f"C{i:05d}", deps=[f"C{i - 1:05d}"] if i else None)
    for i in range(N):
        assert granted(sch) == f"C{i:05d}"
        assert granted(sch) is None  # the next link waits for this one
        sch.add_task(worker=WORKER, task_id=f"C{i:05d}", status="DONE")
    assert inspected(sch) <= 5 * N


def test_tasks_blocked_on_a_busy_resource_are_skipped_as_a_group():
    sch, _ = make_scheduler(resources={"db": 1})
    for i in range(N // 4):
        sch.add_task(worker=WORKER, task_id=f"Db{i:05d}", resources={"db": 1}, priority=5)
        sch.add_task(worker=WORKER, task_id=f"Free{i:05d}")
    assert granted(sch) == "Db00000"
    before = inspected(sch)
    for i in range(N // 4):
        assert granted(sch) == f"Free{i:05d}"
        sch.add_task(worker=WORKER, task_id=f"Free{i:05d}", status="DONE")
    assert inspected(sch) - before <= 5 * (N // 4)


def test_holding_resources_back_costs_the_competing_processes_not_the_tasks_queued():
    sch, _ = make_scheduler(resources={"db": 2})
    sch.add_worker(worker="other", info={"workers": 2})
    for i in range(N // 4):
        sch.add_task(worker="other", task_id=f"High{i:05d}", resources={"db": 1}, priority=10)
        sch.add_task(worker=WORKER, task_id=f"Low{i:05d}", resources={"db": 1}, priority=1)
    assert granted(sch, "other") == "High00000"
    before = inspected(sch)
    for _ in range(N // 4):
        assert granted(sch) is None  # other runs one High and will run the next: both units are held
    assert inspected(sch) - before <= 10 * (N // 4)
