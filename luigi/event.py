"""Names of the events a task fires; callbacks are registered with ``Task.event_handler``."""


class Event:
    """String constants for every core event (the values are part of the public API)."""

    DEPENDENCY_DISCOVERED = "event.core.dependency.discovered"  # (task, dependency)
    DEPENDENCY_MISSING = "event.core.dependency.missing"  # (task)
    DEPENDENCY_PRESENT = "event.core.dependency.present"  # (task)
    BROKEN_TASK = "event.core.task.broken"  # (task, exception)
    START = "event.core.start"  # (task)
    PROGRESS = "event.core.progress"  # user-defined arguments
    FAILURE = "event.core.failure"  # (task, exception)
    SUCCESS = "event.core.success"  # (task)
    PROCESSING_TIME = "event.core.processing_time"  # (task, seconds)
    TIMEOUT = "event.core.timeout"  # (task, error message)
    PROCESS_FAILURE = "event.core.process_failure"  # (task, error message)
