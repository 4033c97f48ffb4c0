"""``[task_history]`` settings: the database, retention, and how events are buffered and written."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import URL

from luigi.db_task_history import engine
from luigi.db_task_history.errors import TaskHistoryError

_DAY_S = 86400.0


@dataclass(frozen=True)
class HistorySettings:
    """Every ``[task_history]`` option with its default.

    Attributes:
        db_connection: the SQLAlchemy URL (default: a SQLite file beside ``[scheduler] state_path``).
        keep_days: runs older than this are pruned (0 keeps everything).
        prune_interval: seconds between two prunings.
        buffer_size: events kept in memory while the database is away; past it they are counted as dropped.
        batch_size: events written in one transaction at most.
        flush_interval: seconds an event may wait before it is written.
        retry_max_delay: the longest wait between two attempts while the database is away (seconds).
        cache_size: tasks whose record the writer remembers (a bounded LRU; misses read the database).
    """

    db_connection: URL | None = None
    keep_days: float = 90.0
    prune_interval: float = 3600.0
    buffer_size: int = 100_000
    batch_size: int = 1000
    flush_interval: float = 0.5
    retry_max_delay: float = 10.0
    cache_size: int = 20_000

    def __post_init__(self) -> None:
        for name in ("keep_days",):
            _check(name, getattr(self, name), minimum=0.0)
        for name in ("prune_interval", "flush_interval", "retry_max_delay"):
            _check(name, getattr(self, name), minimum=0.001)
        for name in ("buffer_size", "batch_size", "cache_size"):
            _check(name, getattr(self, name), minimum=1, integer=True)

    @property
    def keep_seconds(self) -> float | None:
        """How long runs are kept, or None to keep them forever."""
        return self.keep_days * _DAY_S if self.keep_days > 0 else None

    @property
    def url(self) -> URL:
        """The database URL, the default resolved from the configuration when none was given."""
        return self.db_connection if self.db_connection is not None else engine.configured_url()

    @classmethod
    def from_config(cls, **overrides: Any) -> HistorySettings:
        """Read ``[task_history]``; keyword overrides (any option above) win."""
        from luigi import configuration

        config = configuration.get_config()
        values: dict[str, Any] = {}
        for option in dataclasses.fields(cls):
            if option.name == "db_connection":
                continue
            kind = int if isinstance(option.default, int) else float
            raw = config.get(engine.SECTION, option.name, None)
            if raw is not None:
                values[option.name] = _parse(option.name, raw, kind)
        url = overrides.pop("db_connection", None)
        values["db_connection"] = engine.parse_url(url) if url is not None else engine.configured_url()
        values.update(overrides)
        return cls(**values)


def _parse(name: str, raw: Any, kind: type) -> Any:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return kind(raw)
    try:
        return kind(str(raw).strip())
    except ValueError:
        expected = "an integer" if kind is int else "a number"
        raise TaskHistoryError(f"[task_history] {name} = {raw!r} is not {expected}") from None


def _check(name: str, value: Any, minimum: float, integer: bool = False) -> None:
    wrong_type = isinstance(value, bool) or not isinstance(value, int if integer else (int, float))
    if wrong_type or value < minimum:
        expected = f"{'an integer' if integer else 'a number'} >= {minimum:g}"
        raise TaskHistoryError(f"[task_history] {name} = {value!r} is not valid (expected {expected})")
