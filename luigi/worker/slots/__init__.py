"""Task slots: forked child processes that run the worker's tasks (the forked-slot ``TaskRunner``).

``runner`` is the runner the worker sees; ``pool`` forks, watches and kills the slots; ``child`` is the
code inside a slot; ``pipe`` the JSON lines they talk over.
"""

from __future__ import annotations

from luigi.worker.slots.runner import SlotRunner

__all__ = ["SlotRunner"]
