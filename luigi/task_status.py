"""Task status names shared by the worker, the scheduler and the visualiser (as on the wire)."""

PENDING = "PENDING"
FAILED = "FAILED"
DONE = "DONE"
RUNNING = "RUNNING"
BATCH_RUNNING = "BATCH_RUNNING"
SUSPENDED = "SUSPENDED"  # legacy: mapped to PENDING when a task is added
UNKNOWN = "UNKNOWN"
DISABLED = "DISABLED"

ALL_STATUSES = (PENDING, FAILED, DONE, RUNNING, BATCH_RUNNING, SUSPENDED, UNKNOWN, DISABLED)
