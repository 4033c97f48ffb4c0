"""Jobs of a service stand-in that move through scripted states: one step each time the caller polls,
ended early by a test or by a stop call, and watched under one lock so that a test can wait until the
task under test has seen a state. The AWS Batch/ECS, OpenPAI and Dataproc stand-ins share it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

__all__ = ["Scripted", "ScriptedJobs"]


@dataclass
class Scripted:
    """A job's script, where it is in it (-1: never polled) and the fields of an end forced on it."""

    script: list[str]
    step: int = -1
    ended: dict[str, Any] = field(default_factory=dict)
    ended_state_field: ClassVar[str] = "state"  # the field of ``ended`` that names the forced state

    @property
    def current(self) -> str:
        """The forced end's state, else the script's state at the current step."""
        if self.ended_state_field in self.ended:
            return str(self.ended[self.ended_state_field])
        return self.script[max(self.step, 0)]


JobT = TypeVar("JobT", bound=Scripted)


class ScriptedJobs:
    """The lock and condition over a stand-in's jobs, and the moves every stand-in makes on them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def add(self, table: dict[str, JobT], key: str, job: JobT) -> JobT:
        with self.lock:
            table[key] = job
            self.changed.notify_all()
            return job

    def poll(self, table: Mapping[str, JobT], key: str, gone: str) -> JobT | None:
        """Move the job one step (the caller asked for its status) and return it; None when unknown or
        once its script reached ``gone`` (the service no longer knows it)."""
        with self.lock:
            job = table.get(key)
            if job is None:
                return None
            job.step = min(job.step + 1, len(job.script) - 1)
            self.changed.notify_all()
            return None if job.current == gone else job

    def end(self, job: Scripted, **fields: Any) -> None:
        """End the job now with ``fields`` (its state among them), as a stop call or the test decides."""
        with self.lock:
            job.ended = fields
            self.changed.notify_all()

    def wait_until_seen(self, table: Mapping[str, Scripted], state: str, what: str, timeout: float) -> str:
        """The key of the first job a poll has seen in ``state`` (the task under test is polling it)."""
        with self.lock:
            found = self.changed.wait_for(
                lambda: next((k for k, j in table.items() if j.step >= 0 and j.current == state), None),
                timeout,
            )
        if found is None:
            raise AssertionError(f"no {what} reached {state} within {timeout}s")
        return found
