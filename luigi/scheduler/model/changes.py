"""What changed since the last flush: the keys of the records a durable store must write or delete.

The scheduler marks a key whenever it changes a persisted field of that record (or removes it); the
store writes the record's current fields, or deletes its row when the record no longer exists. Keys
are kept in marking order (dicts as ordered sets), so records created together are stored in the
order they were created.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ChangeSet:
    """Dirty keys by kind; ``paused`` says whether the pause flag changed."""

    tasks: dict[str, None] = field(default_factory=dict)
    workers: dict[str, None] = field(default_factory=dict)
    resources: dict[str, None] = field(default_factory=dict)  # names of capacities set at run time
    batchers: dict[str, None] = field(default_factory=dict)  # worker ids whose batchers changed
    paused: bool = False

    def __bool__(self) -> bool:
        return bool(self.tasks or self.workers or self.resources or self.batchers or self.paused)

    def clear(self) -> None:
        """Forget every mark (after the changes were committed)."""
        self.tasks.clear()
        self.workers.clear()
        self.resources.clear()
        self.batchers.clear()
        self.paused = False
