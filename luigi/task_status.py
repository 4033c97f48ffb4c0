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

# A worker's state as ``get_work`` reports it (``worker_state``); Luigi names them in ``luigi.scheduler``.
WORKER_STATE_ACTIVE = "active"
WORKER_STATE_DISABLED = "disabled"
