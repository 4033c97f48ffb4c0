"""A standby luigid takes over (issue 42, section 3), under the fault harness, on a real PostgreSQL.

Two luigid processes share one PostgreSQL state; worker processes are given both URLs. Mid-run the active
luigid is killed with ``kill -9``: the standby answers as the active one within 15 s, the pipeline
completes with nothing lost and no task run twice (every run appends its task id to the markers file),
and the killed luigid, started again, comes back as a standby.
"""

from __future__ import annotations

import pytest
from helpers.postgres import fresh_schema, require_postgres

from faults import injectors
from faults.runner import run_faults

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.postgres]

TASKS = 300
DEADLINE = 100.0  # under pytest-timeout's 120 s, so that a run that never completes reports what it lost


def test_the_active_luigid_killed_mid_run_a_standby_takes_over_and_nothing_is_lost_or_run_twice(tmp_path):
    with fresh_schema(require_postgres()) as url:
        result = run_faults(
            tmp_path, 4, TASKS, 2, (injectors.TAKEOVER,), faults=1, deadline=DEADLINE, state_url=url
        )
    notes = [fault.note for fault in result.faults]
    assert [fault.kind for fault in result.faults] == [injectors.TAKEOVER], (result.skipped, notes)
    assert result.defects() == [], "\n".join(result.defects())
    assert result.verdict.reruns == 0, result.verdict
    runs_by_task = {}
    for line in (tmp_path / "markers.log").read_text().splitlines():
        task_id = line.split()[0]
        runs_by_task[task_id] = runs_by_task.get(task_id, 0) + 1
    assert len(runs_by_task) == TASKS and set(runs_by_task.values()) == {1}
    assert len(result.takeovers) == 1 and result.takeovers[0] < 15.0, notes
    assert "answering as standby" in notes[0], notes
