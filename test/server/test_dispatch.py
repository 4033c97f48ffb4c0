"""Serving calls with no transport: ``luigi.server.dispatch`` answers what ``/api`` and the channel send."""

from __future__ import annotations

import json

import pytest
from helpers.scheduler import make_scheduler

from luigi.scheduler import Scheduler
from luigi.server.dispatch import BATCH_METHOD, decode_data, serve_json_call
from luigi.server.errors import ClientError


def test_a_call_and_a_batch_answer_their_response_json_without_any_transport():
    scheduler, _ = make_scheduler()
    added = serve_json_call(scheduler, "add_task", {"worker": "w", "task_id": "A", "family": "A"}, None)
    assert json.loads(added) is None
    batch = {"calls": [{"method": "task_list", "kwargs": {"status": "PENDING"}}, {"method": "nope"}]}
    first, second = json.loads(serve_json_call(scheduler, BATCH_METHOD, batch, "client"))
    assert list(first["response"]) == ["A"]
    assert second["status"] == 404 and "nope" in second["error"]


def test_bad_kwargs_are_refused_with_a_400_naming_the_problem():
    scheduler, _ = make_scheduler()
    with pytest.raises(ClientError) as refused:
        serve_json_call(scheduler, "add_task", {"worker": "w", "task_id": 3}, None)
    assert refused.value.status == 400 and "task_id" in refused.value.message
    with pytest.raises(ClientError, match="'data' is not valid JSON"):
        decode_data("{")


def test_data_is_strict_json_but_for_infinity():
    read = decode_data('{"max_batch_size": Infinity, "n": [1, 2.5]}')
    assert read == {"max_batch_size": float("inf"), "n": [1, 2.5]}
    for constant in ("NaN", "-Infinity"):
        with pytest.raises(ClientError, match=f"{constant} is not a JSON number"):
            decode_data('{"x": ' + constant + "}")
    with pytest.raises(ClientError, match="starts with a byte order mark"):
        decode_data('\ufeff{"x": 1}')
    with pytest.raises(ClientError, match="must be a JSON object of keyword arguments, got list"):
        decode_data("[1]")


class FullDisk(Scheduler):
    """A scheduler whose changes cannot be saved, as on a full disk."""

    def flush(self) -> None:
        raise OSError("No space left on device")


def test_a_ping_refused_while_the_state_cannot_be_saved_still_keeps_its_worker_alive():
    scheduler, clock = make_scheduler()
    scheduler = FullDisk(scheduler.config, clock=clock)
    with pytest.raises(ClientError) as refused:
        serve_json_call(scheduler, "add_task", {"worker": "w", "task_id": "A"}, None)
    assert refused.value.status == 503
    clock.advance(30)
    with pytest.raises(ClientError, match="cannot save its state"):
        serve_json_call(scheduler, "ping", {"worker": "w"}, None)
    assert scheduler._state.workers["w"].last_active == clock()
