"""The one-node Grid Engine cell the sge tests submit to (``scripts/ensure-gridengine.sh`` sets it up).

Tests skip locally when the cell is missing or down, and fail when ``CI`` is set, as other services do.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from helpers.services import require_program, unavailable
from luigi.contrib.sge import UNKNOWN_STATE, _parse_qstat_state


def require_cell() -> None:
    """Skip (or fail under CI) unless qsub is installed and the cell's qmaster answers qstat."""
    require_program("qsub", "gridengine-client")
    answer = subprocess.run(["qstat"], capture_output=True, text=True)
    if answer.returncode != 0:
        why = answer.stderr.strip()
        unavailable(f"the Grid Engine cell does not answer ({why}): run scripts/ensure-gridengine.sh")


def jobs_writing_under(directory: Path) -> list[int]:
    """The ids of the jobs Grid Engine still lists whose stdout file lies under ``directory``."""
    details = subprocess.run(["qstat", "-j", "*"], capture_output=True, text=True).stdout
    found = []
    for block in re.split(r"^=+$", details, flags=re.MULTILINE):
        number = re.search(r"^job_number:\s+(\d+)$", block, re.MULTILINE)
        stdout = re.search(r"^stdout_path_list:\s+(.*)$", block, re.MULTILINE)
        if number and stdout and str(directory) in stdout.group(1):
            found.append(int(number.group(1)))
    return found


def state(job_id: int) -> str:
    """The job's qstat state, ``u`` once Grid Engine no longer lists it."""
    return _parse_qstat_state(subprocess.run(["qstat"], capture_output=True, text=True).stdout, job_id)


def gone(job_id: int) -> bool:
    return state(job_id) == UNKNOWN_STATE


def delete(job_ids: list[int]) -> None:
    if job_ids:
        subprocess.run(["qdel", *map(str, job_ids)], capture_output=True)
