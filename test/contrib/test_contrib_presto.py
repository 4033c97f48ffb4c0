"""luigi.contrib.presto through luigi.build, with PyHive's client against a stand-in coordinator that
speaks Presto's HTTP statement protocol (test/helpers/presto_standin.py; no Presto server runs here)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.presto_standin import PrestoStandIn, running_presto

import luigi
from luigi.contrib import presto
from luigi.contrib.optional import MissingExtraError
from luigi.scheduler import Scheduler
from luigi.task_status import DONE, FAILED

pytest.importorskip("pyhive.presto")


@pytest.fixture
def coordinator() -> Iterator[PrestoStandIn]:
    with running_presto() as server:
        server.sql("CREATE TABLE hive.db1.daily (ds TEXT, n INTEGER)")
        yield server


def _configure(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    config = luigi.configuration.get_config()
    for key, value in {
        "host": host, "port": port, "user": "etl", "protocol": "http", "poll_interval": "0.01"
    }.items():
        config.set("presto", key, value)


@pytest.fixture
def configured(coordinator: PrestoStandIn) -> PrestoStandIn:
    _configure(coordinator.url)
    return coordinator


class DailyLoad(presto.PrestoTask):
    """Loads one day of counts into hive.db1.daily."""

    ds = luigi.Parameter()
    database = "db1"
    table = "daily"

    @property
    def partition(self) -> dict[str, str]:
        return {"ds": self.ds}

    @property
    def query(self) -> str:
        return f"INSERT INTO hive.db1.daily VALUES ('{self.ds}', 3)"


class BrokenLoad(DailyLoad):
    @property
    def query(self) -> str:
        return "INSERT INTO hive.db1.nowhere VALUES (1)"


class _KeepingFactory(luigi.interface._WorkerSchedulerFactory):
    scheduler: Scheduler

    def create_local_scheduler(self) -> Scheduler:
        self.scheduler = super().create_local_scheduler()
        return self.scheduler


def _build(task: luigi.Task) -> dict[str, Any]:
    factory = _KeepingFactory()
    luigi.build([task], local_scheduler=True, worker_scheduler_factory=factory)
    return dict(factory.scheduler.task_list("", "")[task.task_id])


def test_a_query_task_runs_once_and_its_partition_then_exists(configured: PrestoStandIn) -> None:
    task = DailyLoad(ds="2024-01-01")
    assert not task.complete()

    shown = _build(task)

    assert shown["status"] == DONE
    assert configured.sql("SELECT ds, n FROM hive.db1.daily") == [("2024-01-01", 3)]
    assert DailyLoad(ds="2024-01-01").complete()
    assert not DailyLoad(ds="2024-01-02").complete()
    # the coordinator's page of the query became the tracking URL; the last progress was reported
    assert shown["tracking_url"].startswith(f"{configured.url}/ui/query.html?")
    assert shown["progress_percentage"] == 100.0
    inserts = [(sql, headers) for sql, headers in configured.statements if sql.startswith("INSERT")]
    assert inserts == [
        (
            "INSERT INTO hive.db1.daily VALUES ('2024-01-01', 3)",
            {"X-Presto-User": "etl", "X-Presto-Catalog": "hive", "X-Presto-Schema": "db1",
             "X-Presto-Source": "pyhive"},
        )
    ]


def test_the_partition_count_query_is_luigis(configured: PrestoStandIn) -> None:
    target = DailyLoad(ds="2024-01-01").output()
    assert target._count_query == (
        "SELECT COUNT(*) AS cnt FROM hive.db1.daily WHERE ds = %s LIMIT 1", ["2024-01-01"]
    )
    whole = presto.PrestoTarget(target._client, "hive", "db1", "daily")
    assert whole._count_query == ("SELECT COUNT(*) AS cnt FROM hive.db1.daily WHERE 1 = %s LIMIT 1", [1])
    assert whole.exists() is False
    configured.sql("INSERT INTO hive.db1.daily VALUES ('2024-01-05', 1)")
    assert presto.PrestoTarget(target._client, "hive", "db1", "daily").count() == 1


def test_a_failing_query_fails_the_task_with_prestos_message(configured: PrestoStandIn) -> None:
    task = BrokenLoad(ds="2024-01-01")
    factory = _KeepingFactory()
    luigi.build([task], local_scheduler=True, worker_scheduler_factory=factory)
    shown = factory.scheduler.task_list("", "")[task.task_id]
    assert shown["status"] == FAILED
    assert "no such table: db1.nowhere" in factory.scheduler.fetch_error(task.task_id)["error"]
    assert configured.sql("SELECT COUNT(*) FROM hive.db1.daily") == [(0,)]


def test_a_missing_table_is_not_there_yet(configured: PrestoStandIn) -> None:
    target = presto.PrestoTarget(DailyLoad(ds="x")._client, "hive", "db1", "absent")
    assert not target.exists()


def test_the_connection_takes_every_cursor_argument_the_task_gives(configured: PrestoStandIn) -> None:
    host, port = configured.url.removeprefix("http://").split(":")
    connection = DailyLoad(ds="2024-01-01")._client._connection
    assert connection._args == ()
    assert connection._kwargs == {
        "host": host, "port": int(port), "username": "etl", "catalog": "hive", "protocol": "http",
        "source": "pyhive", "poll_interval": 0.01, "schema": "db1", "requests_kwargs": {"verify": False},
    }


def test_a_password_switches_to_https(configured: PrestoStandIn) -> None:
    luigi.configuration.get_config().set("presto", "password", "s3cret")
    try:
        task = DailyLoad(ds="2024-01-01")
        assert task.protocol == "https"
        assert "s3cret" not in task.task_id
    finally:
        luigi.configuration.get_config().remove_option("presto", "password")


def test_watch_mode_yields_each_status_and_sleeps_between_polls(
    configured: PrestoStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    naps: list[float] = []
    monkeypatch.setattr(presto, "sleep", naps.append)
    client = DailyLoad(ds="x")._client
    states = [status["stats"]["state"] for status in client.execute("SELECT 1")]
    assert states == ["RUNNING", "RUNNING", "FINISHED"]
    assert naps == [0.01] * 4
    assert client.percentage_progress == 100.0
    assert list(client.execute("SELECT 7", mode="fetch")) == [(7,)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_coordinator_stops_the_task_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()
    _configure(f"http://127.0.0.1:{port}")
    ran: list[luigi.Task] = []

    class RefusedLoad(DailyLoad):
        pass

    @RefusedLoad.event_handler(luigi.Event.START)
    def _started(task: luigi.Task) -> None:
        ran.append(task)

    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert not luigi.build([RefusedLoad(ds="2024-01-01")], local_scheduler=True)
    assert ran == []
    (record,) = [r for r in caplog.records if "error in complete() method" in r.getMessage()]
    assert f"port={port}" in record.getMessage() and "Connection refused" in record.getMessage()


def test_without_pyhive_the_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(presto, "Connection", None)
    with pytest.raises(MissingExtraError, match=r"luigi\[presto\]"):
        _ = DailyLoad(ds="2024-01-01")._client
    assert "pyhive" in sys.modules  # (installed here: the test removes it from the module's view only)
