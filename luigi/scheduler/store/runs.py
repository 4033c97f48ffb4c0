"""Runs of equal task rows: tasks whose stored values differ only in their id and their place (``seq``).

A wrapper naming a million dependencies makes a million UNKNOWN stubs in one call
(``SchedulerState.create_stubs``), equal but for their ids. A flush that large journals them as runs
(their values once, then their ids), a few bytes a task instead of a row each, so the call is answered
in seconds; the folds write their rows later, a slice at a time, leaving out every task that a later
change superseded (most stubs: each becomes a task of its own when its worker reports it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from luigi.scheduler.store.base import CorruptStateError
from luigi.scheduler.store.codec import TASK_FIELDS

Values = Sequence[Any]  # a task's field values (``codec.task_values``) followed by its ``seq``
# A task's values but its id: equal for every member of a run.
_shared_values: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*(name for name, _ in TASK_FIELDS[1:]))
MIN_RUN = 64  # shorter runs of equal tasks are kept as single rows: the saving would not pay for itself


@dataclass
class TaskRun:
    """Tasks whose values are ``values`` but for their ids and seqs (``values`` has the first member's)."""

    values: Values
    ids: list[str]
    seqs: range | list[int]

    def __len__(self) -> int:
        return len(self.ids)

    def members(self) -> Iterator[tuple[str, int]]:
        """Each member's id and seq, in order."""
        return zip(self.ids, self.seqs, strict=True)

    def member_values(self, task_id: str, seq: int) -> Values:
        """The values of one member."""
        return (task_id, *self.values[1:-1], seq)

    def split_off(self, count: int) -> TaskRun:
        """Remove the last ``count`` members (at least one is left) and return them as a run of their own:
        in time proportional to ``count``, since a fold takes a slice of a million at a time."""
        ids, seqs = self.ids[-count:], self.seqs[-count:]
        del self.ids[-count:]
        if isinstance(self.seqs, range):
            self.seqs = self.seqs[:-count]
        else:
            del self.seqs[-count:]
        return TaskRun(self.member_values(ids[0], seqs[0]), ids, seqs)

    def without(self, newer: Container[str]) -> TaskRun | None:
        """This run less the members in ``newer`` (later changes of those tasks win); None if none is left."""
        if not any(task_id in newer for task_id in self.ids):
            return self
        kept = [(task_id, seq) for task_id, seq in self.members() if task_id not in newer]
        if not kept:
            return None
        ids, seqs = (list(column) for column in zip(*kept, strict=True))
        return TaskRun(self.member_values(ids[0], seqs[0]), ids, seqs)

    def to_json_value(self) -> dict[str, Any]:
        """What a journal line holds: the values, the ids, and the seqs (the first one when consecutive)."""
        if isinstance(self.seqs, range) and self.seqs.step == 1:
            return {"values": list(self.values), "ids": self.ids, "first_seq": self.seqs.start}
        return {"values": list(self.values), "ids": self.ids, "seqs": list(self.seqs)}

    @classmethod
    def from_json_value(cls, value: Any) -> TaskRun:
        """The run ``to_json_value`` wrote; CorruptStateError naming what is wrong (values are checked by
        the caller, which knows the table)."""
        if not isinstance(value, dict) or not {"values", "ids"} <= value.keys():
            raise CorruptStateError(f"a run is {value!r:.80}, expected an object of values and ids")
        ids, values = value["ids"], value["values"]
        if not isinstance(ids, list) or not ids or not all(type(task_id) is str for task_id in ids):
            raise CorruptStateError(f"a run's ids are {ids!r:.80}, expected a list of task ids")
        if not isinstance(values, list) or not values:
            raise CorruptStateError(f"a run's values are {values!r:.80}, expected a list")
        seqs: range | list[int]
        if "first_seq" in value and type(value["first_seq"]) is int:
            seqs = range(value["first_seq"], value["first_seq"] + len(ids))
        elif isinstance(value.get("seqs"), list) and all(type(seq) is int for seq in value["seqs"]):
            seqs = value["seqs"]
        else:
            raise CorruptStateError(f"run of {ids[0]!r:.80}: expected first_seq or a list of seqs")
        if len(seqs) != len(ids):
            raise CorruptStateError(f"run of {ids[0]!r:.80} has {len(ids)} ids and {len(seqs)} seqs")
        return cls([ids[0], *values[1:-1], seqs[0]], ids, seqs)


def group_runs(
    records: Mapping[str, Any],
    keys: Iterable[str],
    place: Callable[[str], int],
    forget: Callable[[str], None],
    max_loose: int,
) -> tuple[dict[str, Values | None], list[TaskRun]] | None:
    """The changed tasks' values (None: removed) with runs of at least ``MIN_RUN`` equal ones taken out;
    None once more than ``max_loose`` tasks are not in a run (the caller writes those another way).

    ``place`` gives a key's seq, ``forget`` drops a removed one. Members of a run are consecutive keys
    with consecutive seqs: what ``create_stubs`` makes.
    """
    loose: dict[str, Values | None] = {}
    runs: list[TaskRun] = []
    shared: tuple[Any, ...] = ()  # the values but the id of the run being gathered in ``ids``
    ids: list[str] = []
    first_seq = 0

    def close() -> None:
        if len(ids) >= MIN_RUN:
            runs.append(
                TaskRun((ids[0], *shared, first_seq), list(ids), range(first_seq, first_seq + len(ids)))
            )
        else:
            for offset, task_id in enumerate(ids):
                loose[task_id] = (task_id, *shared, first_seq + offset)
        ids.clear()

    for key in keys:
        record = records.get(key)
        if record is None:
            forget(key)
            loose[key] = None
            continue
        values, seq = _shared_values(record), place(key)
        if ids and seq == first_seq + len(ids) and values == shared:
            ids.append(key)
            continue
        close()
        if len(loose) > max_loose:
            return None
        shared, first_seq = values, seq
        ids.append(key)
    if ids:
        close()
    return (loose, runs) if len(loose) <= max_loose else None
