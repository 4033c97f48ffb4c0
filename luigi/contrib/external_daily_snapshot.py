"""``ExternalDailySnapshot``: the newest complete copy of a dataset that something outside dumps daily.

Subclass it with the dump's ``output()`` and ask ``MyDump.latest(...)`` in ``requires()``: it walks back
day by day from ``date`` (default today) for at most ``lookback`` days (default 14) and returns the first
complete instance, or the oldest one tried when none is, so the pipeline waits for that one. The answer
is remembered for the life of the process, so every task of a run depends on the same snapshot even if a
newer dump lands meanwhile.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, ClassVar, TypeVar

import luigi

__all__ = ["ExternalDailySnapshot"]

logger = logging.getLogger("luigi-interface")

DEFAULT_LOOKBACK = 14

Snapshot = TypeVar("Snapshot", bound="ExternalDailySnapshot")


class ExternalDailySnapshot(luigi.ExternalTask):
    """An external dataset dumped once a day; ``date`` says which day's dump."""

    date = luigi.DateParameter()

    # (key, snapshot) pairs shared by every subclass; a list, not a dict, since parameter values (lists,
    # dicts) need not be hashable: keys are compared by equality, so keyword order does not matter.
    __cache: ClassVar[list[tuple[Any, ExternalDailySnapshot]]] = []

    @classmethod
    def latest(cls: type[Snapshot], *args: Any, **kwargs: Any) -> Snapshot:
        """The newest complete snapshot within ``lookback`` days of ``date``, or the oldest one tried.

        ``args`` and other ``kwargs`` are the subclass's own parameters; the answer for the same arguments
        is computed once per process.
        """
        date = kwargs.pop("date", None) or datetime.date.today()
        lookback = kwargs.pop("lookback", DEFAULT_LOOKBACK)
        key = (cls, args, kwargs, lookback, date)
        for cached_key, snapshot in ExternalDailySnapshot.__cache:
            if cached_key == key:
                return snapshot  # type: ignore[return-value]  # the key holds cls, so it is a cls
        snapshot = cls._latest(date, lookback, *args, **kwargs)
        ExternalDailySnapshot.__cache.append((key, snapshot))
        return snapshot

    @classmethod
    def _latest(
        cls: type[Snapshot], date: datetime.date, lookback: int, *args: Any, **kwargs: Any
    ) -> Snapshot:
        if not isinstance(lookback, int) or lookback < 1:
            raise ValueError(
                f"{cls.__name__}.latest(lookback={lookback!r}): lookback must be a whole number >= 1"
            )
        for days_back in range(lookback):
            snapshot = cls(*args, date=date - datetime.timedelta(days=days_back), **kwargs)
            if snapshot.complete():
                return snapshot
        logger.debug(
            "No complete %s within %d days before %s; using the oldest one tried",
            cls.__name__,
            lookback,
            date,
        )
        return snapshot
