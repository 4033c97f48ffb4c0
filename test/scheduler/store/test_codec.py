"""How records become rows: every persisted field has a column, and JSON keeps infinities."""

from __future__ import annotations

import dataclasses
import json
import math
import sys

import pytest

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig, TaskRecord, WorkerRecord
from luigi.scheduler.settings import TaskRetryPolicy
from luigi.scheduler.store import CorruptStateError, SqlStore, codec, schema


def test_every_persisted_record_field_has_a_column():
    task_fields = {f.name for f in dataclasses.fields(TaskRecord)} - codec.DERIVED_TASK_FIELDS
    worker_fields = {f.name for f in dataclasses.fields(WorkerRecord)} - codec.DERIVED_WORKER_FIELDS
    assert task_fields == {name for name, _ in codec.TASK_FIELDS}
    assert worker_fields == {name for name, _ in codec.WORKER_FIELDS}
    assert task_fields <= set(schema.tasks.c.keys())
    assert worker_fields <= set(schema.workers.c.keys())


@pytest.mark.parametrize(
    "value",
    [
        math.inf,
        -math.inf,
        {"sizes": [1, math.inf, {"deep": -math.inf}], "name": "x"},
        {"$float": "a user's own dict"},
        ["plain", 1, 2.5, None, True],
    ],
)
def test_json_round_trips_values_with_infinities(value):
    text = codec.dumps(value)
    assert "Infinity" not in text  # standard JSON, readable by any database's JSON functions
    assert codec.loads(text) == value


def test_json_is_compact_and_ascii_as_the_standard_encoder_writes_it():
    value = {"name": "Zürich \u2603", "sizes": [1, 2.5, None, True], "nested": {"x": 'a"b'}}
    assert codec.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_a_value_that_contains_itself_is_refused_by_name():
    looping: list = []
    looping.append(looping)
    with pytest.raises(ValueError, match="cannot store a list that contains itself"):
        codec.dumps(looping)


def test_json_keeps_nan_as_nan():
    assert math.isnan(codec.loads(codec.dumps(math.nan)))


def test_infinite_priorities_and_batch_sizes_survive_a_restart(tmp_path):
    clock = ManualClock(1000.0)
    before = Scheduler(SchedulerConfig(), clock=clock, store=SqlStore.for_file(tmp_path / "s.sqlite"))
    before.load()
    before.add_task(worker="w", task_id="A", priority=math.inf, params={"n": "1"})
    before.add_task_batcher(worker="w", task_family="F", batched_args=["n"], max_batch_size=math.inf)
    before.close()

    after = Scheduler(SchedulerConfig(), clock=clock, store=SqlStore.for_file(tmp_path / "s.sqlite"))
    after.load()
    assert after.task_list("")["A"]["priority"] == math.inf
    assert after._state.batchers == {"w": {"F": (["n"], math.inf)}}


def test_a_bad_value_names_the_table_row_and_column():
    row = codec.task_row(
        TaskRecord(
            id="T1", status="PENDING", created=1.0, updated=1.0, retry_policy=TaskRetryPolicy(3, 10, 100)
        )
    )
    row["deps"] = '{"not": "a list"}'
    with pytest.raises(CorruptStateError, match=r"tasks row 'T1' column deps: .*expected a list of strings"):
        codec.task_from_row(row)


def test_a_record_round_trips_through_its_row():
    task = TaskRecord(
        id="T1",
        status="FAILED",
        created=1.0,
        updated=2.0,
        retry_policy=SchedulerConfig().retry_policy(),
        deps={"D1", "D2"},
        priority=3,
        params={"a": "1"},
        stakeholders={"w1"},
        workers={"w2": None, "w1": None},
        failure_times=[1.5, 2.0],
        first_failure_time=1.5,
        expl='{"error": "boom"}',
    )
    restored = codec.task_from_row(codec.task_row(task))
    for field in dataclasses.fields(TaskRecord):
        if field.name not in codec.DERIVED_TASK_FIELDS:
            assert getattr(restored, field.name) == getattr(task, field.name), field.name
    assert list(restored.workers) == ["w2", "w1"]


# -- a restart's rows, a slice at a time ------------------------------------------------------------------


def _row_tuple(task: TaskRecord) -> tuple:
    """A task's row as a driver hands it over: the field columns in order."""
    row = codec.task_row(task)
    return tuple(row[name] for name, _ in codec.TASK_FIELDS)


def _persisted(task: TaskRecord) -> dict:
    return {name: getattr(task, name) for name, _ in codec.TASK_FIELDS}


def _varied_tasks() -> list[TaskRecord]:
    policy = SchedulerConfig().retry_policy()
    return [
        TaskRecord(id="Plain", status="PENDING", created=1.0, updated=2.0, retry_policy=policy),
        TaskRecord(
            id="Rich",
            status="FAILED",
            created=3,  # an integer time stays the integer it was
            updated=4.5,
            retry_policy=policy,
            deps=frozenset({"Plain"}),
            family="Rich",
            module="pipelines",
            params={"city": "Zürich \u2603", "nested": {"sizes": [1, 2.5]}, "quote": 'a"b', "inf": math.inf},
            param_visibilities={"city": 0},
            workers={"w2": None, "w1": None},
            retry=9.0,
            expl='{"error": "boom"}',
            failure_times=[3.5, 4.0],
            owners=["ops@example.com"],
            lost_lease={"worker": "w1", "ahead": False, "failed_at": 4.0},
            granted_ahead=True,
        ),
        TaskRecord(id="Empty", status="DONE", created=5.0, updated=5.0, retry_policy=policy, params={}),
    ]


def test_a_slice_of_rows_decodes_to_the_records_each_row_decodes_to():
    tasks = _varied_tasks()
    rows = [_row_tuple(task) for task in tasks]

    read = codec.RowReader("tasks")
    records = read.records(rows)

    assert [_persisted(record) for record in records] == [_persisted(task) for task in tasks]
    assert [_persisted(record) for record in records] == [_persisted(read(row)) for row in rows]
    assert type(records[1].created) is int
    for record in records:  # each task's parameters are a dict of its own, their names interned
        assert all(name is sys.intern(name) for name in record.params)
    records[2].params["added"] = "1"
    assert read.records(rows)[2].params == {}


def test_a_parameters_text_is_taken_only_when_it_is_one_json_object_alone():
    # Two rows damaged so that, run together, they would read as two objects: each is refused alone.
    rows = [list(_row_tuple(task)) for task in _varied_tasks()]
    params = [name for name, _ in codec.TASK_FIELDS].index("params")
    rows[0][params] = '{"a":"1"},{"b":"2"}'
    rows[2][params] = '{"c":["3"'
    read = codec.RowReader("tasks")

    with pytest.raises(ValueError):
        read.records(rows)
    with pytest.raises(CorruptStateError, match=r"tasks row 'Plain' column params"):
        read(rows[0])
    assert read(rows[1]).params["city"] == "Zürich \u2603"


def test_json_written_with_spaces_by_hand_or_an_older_version_still_loads():
    row = list(_row_tuple(_varied_tasks()[0]))
    names = [name for name, _ in codec.TASK_FIELDS]
    row[names.index("params")] = ' { "day": "2024-01-01" } '
    row[names.index("workers")] = '[ "w1" ]'
    read = codec.RowReader("tasks")

    for record in (
        read(row),
        read.records([row])[0],
        codec.task_from_row(dict(zip(names, row, strict=True))),
    ):
        assert record.params == {"day": "2024-01-01"}
        assert list(record.workers) == ["w1"]


@pytest.mark.parametrize(
    "column, value", [("created", "soon"), ("updated", True), ("id", 7), ("params", None)]
)
def test_a_column_of_the_wrong_type_refuses_the_slice_and_the_row_names_it(column, value):
    rows = [list(_row_tuple(task)) for task in _varied_tasks()]
    rows[1][[name for name, _ in codec.TASK_FIELDS].index(column)] = value
    read = codec.RowReader("tasks")

    with pytest.raises((ValueError, TypeError)):
        read.records(rows)
    with pytest.raises(CorruptStateError, match=f"column {column}"):
        read(rows[1])


def test_rows_holding_the_same_changeable_value_each_get_their_own():
    policy = SchedulerConfig().retry_policy()
    lease = {"worker": "w1", "ahead": False, "failed_at": 4.0}
    tasks = [
        TaskRecord(
            id=f"T{n}", status="FAILED", created=1.0, updated=1.0, retry_policy=policy, lost_lease=dict(lease)
        )
        for n in range(3)
    ]

    records = codec.RowReader("tasks").records([_row_tuple(task) for task in tasks])

    assert [_persisted(record) for record in records] == [_persisted(task) for task in tasks]
    records[0].lost_lease["worker"] = "w2"
    assert records[1].lost_lease == lease
    assert records[0].status is records[1].status  # what cannot change is decoded once
