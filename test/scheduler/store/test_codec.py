"""How records become rows: every persisted field has a column, and JSON keeps infinities."""

from __future__ import annotations

import dataclasses
import json
import math

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
