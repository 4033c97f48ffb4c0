"""A client given several luigid URLs follows the active one (issue 42, section 3).

The active luigid is a stand-in serving a real scheduler; a standby is one whose every answer is the
standby's 503 (``{"standby": true, "active": ...}``); a luigid that is gone is a port nobody listens on.
The real two-luigid takeover, on PostgreSQL, is ``test/faults/test_standby_takeover.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.fake_luigid import FakeLuigid, RecordedRequest, Reply
from helpers.luigid import free_port

from luigi.rpc import RemoteScheduler, RPCError
from luigi.rpc.failover import SchedulerAddresses


class StandbyLuigid(FakeLuigid):
    """A standby luigid: every API call answered 503, naming the active one."""

    def __init__(self, active: str | None = None) -> None:
        super().__init__(batch=True)
        self.active = active

    def answer(self, request: RecordedRequest) -> Any:
        self._record(request)
        return Reply(503, {"error": "This luigid is a standby", "standby": True, "active": self.active})


def client(*urls: str, **options: Any) -> RemoteScheduler:
    options.setdefault("retry_wait", 0)
    return RemoteScheduler(",".join(urls), **options)


def test_a_client_given_a_standby_first_sends_to_the_active_one_and_keeps_following_it():
    with FakeLuigid(batch=True) as active, StandbyLuigid(active.url) as standby:
        sch = client(standby.url, active.url)
        sch.add_task(worker="w", task_id="A", status="PENDING")
        sch.flush()
        asked_standby = len(standby.requests)
        assert sch.task_list("PENDING", "")["A"]["status"] == "PENDING"
        sch.ping(worker="w")
        sch.close()
    assert asked_standby == 1  # the first request learnt which one is active
    assert len(standby.requests) == 1  # and every later one went there directly
    assert active.scheduler.task_list("PENDING", "").keys() == {"A"}


def test_a_client_moves_on_from_a_luigid_that_refuses_connections():
    gone = f"http://127.0.0.1:{free_port()}/"
    with FakeLuigid(batch=True) as active:
        sch = client(gone, active.url, retry_attempts=1)
        sch.add_task(worker="w", task_id="A", status="PENDING")
        sch.close()
        assert active.scheduler.task_list("PENDING", "").keys() == {"A"}


def test_a_client_follows_the_standby_that_took_over_when_the_active_one_turns_standby():
    with FakeLuigid(batch=True) as first, FakeLuigid(batch=True) as second:
        sch = client(first.url, second.url)
        sch.ping(worker="w")
        first.script.extend([lambda request: Reply(503, {"error": "standby", "standby": True})] * 10)
        sch.add_task(worker="w", task_id="B", status="PENDING")
        sch.close()
        assert second.scheduler.task_list("PENDING", "").keys() == {"B"}
        assert first.scheduler.task_list("PENDING", "") == {}


def test_with_one_url_a_standby_is_retried_and_then_refused_as_any_503_is():
    with StandbyLuigid() as standby:
        sch = client(standby.url, retry_attempts=2)
        with pytest.raises(RPCError) as raised:
            sch.ping(worker="w")
        sch.close()
    assert raised.value.status == 503
    assert len(standby.requests) == 2  # the two attempts, to the one URL: no failover with one


def test_when_every_luigid_is_a_standby_the_attempt_fails_and_is_retried_as_an_outage():
    with StandbyLuigid() as first, StandbyLuigid() as second:
        sch = client(first.url, second.url, retry_attempts=2)
        with pytest.raises(RPCError, match="standby") as raised:
            sch.ping(worker="w")
        sch.close()
    assert raised.value.status == 503
    assert len(first.requests) + len(second.requests) == 4  # each attempt asked both


def test_a_scheduler_url_list_with_an_empty_entry_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="empty entry; separate the luigid URLs with single commas"):
        RemoteScheduler("http://a:8082/,,http://b:8082/")


def test_each_url_of_the_list_is_checked_like_a_single_one():
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        SchedulerAddresses.parse("http://a:8082/, ftp://b/")
    assert [a.port for a in SchedulerAddresses.parse(" http://a:8082/ , http://b:8083/").all] == [8082, 8083]
