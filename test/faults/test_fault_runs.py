"""The seeded fault runs (issue 16): real luigid, real worker processes, real kills, stops and cut-offs.

Each run builds a small pipeline on three worker processes of two slots each while every built kind of
fault is injected once at a seeded moment. Afterwards every task is complete, every task that ran twice
was cut off from its first run by a logged fault, no task's process outlived its worker, and luigid's
memory is near its baseline. ``python -m bench.faults --seeds 1-50`` is the long version of the same.
"""

from __future__ import annotations

import collections
import os

import pytest

from faults import injectors
from faults.runner import run_faults

pytestmark = [pytest.mark.faults, pytest.mark.slow]

CI_TASKS = 60
CI_DEADLINE = 90.0  # under pytest-timeout's 120 s, so that a run that never completes reports what it lost


def _report(result) -> str:
    kinds = collections.Counter(fault.kind for fault in result.faults)
    return f"faults {dict(kinds)}, skipped {result.skipped}, defects:\n" + "\n".join(result.defects())


@pytest.mark.parametrize("seed", [1, 2])
def test_under_every_built_fault_nothing_is_lost_and_no_task_runs_twice_without_cause(tmp_path, seed):
    kinds = injectors.BUILT_KINDS
    result = run_faults(tmp_path, seed, CI_TASKS, 3, kinds, faults=len(kinds), deadline=CI_DEADLINE)
    assert result.defects() == [], _report(result)
    # a fault that finds no victim at its moment (no busy slot, no live worker) is skipped, rarely
    assert len(result.faults) >= len(kinds) - 2, _report(result)
    assert result.verdict.runs >= CI_TASKS


def _tmpfs_or_skip() -> None:
    why_not = injectors.can_mount_tmpfs()
    if why_not and os.environ.get("CI"):
        pytest.fail(f"the full-disk fault must run in CI, but {why_not}")
    if why_not:
        pytest.skip(why_not)


def test_a_state_disk_that_fills_up_loses_nothing(tmp_path):
    _tmpfs_or_skip()
    kinds = (injectors.DISK_FULL, injectors.KILL_WORKER)
    result = run_faults(tmp_path, 3, CI_TASKS, 2, kinds, faults=3, disk=True, deadline=CI_DEADLINE)
    disk_full = [fault.kind for fault in result.faults].count(injectors.DISK_FULL)
    assert disk_full >= 1, _report(result)
    assert result.defects() == [], _report(result)
    # point 5: the cause logged once per outage, in one line, not a traceback for every refused write
    logs = "".join(path.read_text() for path in tmp_path.glob("luigid-*.log"))
    assert "Traceback" not in logs
    saves = [line for line in logs.splitlines() if "cannot save its state" in line]
    assert 1 <= len(saves) <= disk_full and all("No space left on device" in line for line in saves)
    assert logs.count("Task logs are not kept") <= disk_full  # the logs' store says so once per outage too
