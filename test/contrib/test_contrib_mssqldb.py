"""luigi.contrib.mssqldb through luigi.build, against a stand-in of pymssql's ``_mssql`` driver that
answers the statements SQL Server would (test/helpers/mssql_standin.py; no SQL Server runs here)."""

from __future__ import annotations

import pytest
from helpers.mssql_standin import MssqlDatabaseException, MssqlStandIn

import luigi
from luigi.contrib import mssqldb
from luigi.contrib.optional import MissingExtraError

SECRET = "pa55-w0rd-secret"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> MssqlStandIn:
    standin = MssqlStandIn()
    monkeypatch.setattr(mssqldb, "_mssql", standin)
    return standin


class LoadSales(luigi.Task):
    """Writes its rows elsewhere, then marks the update done in SQL Server's marker table."""

    day = luigi.Parameter()

    def output(self) -> mssqldb.MSSqlTarget:
        return mssqldb.MSSqlTarget("sql.local:14330", "shop", "etl", SECRET, "sales", self.task_id)

    def run(self) -> None:
        self.output().touch()


def test_a_task_marks_its_update_and_is_then_complete(server: MssqlStandIn) -> None:
    task = LoadSales(day="2024-01-01")
    assert not task.complete()  # error 208: no marker table yet, so no marker

    assert luigi.build([task], local_scheduler=True)

    assert server.tables == {"table_updates": {task.task_id: "sales"}}
    assert task.complete()
    assert server.connects[0] == {
        "user": "etl", "password": SECRET, "server": "sql.local", "port": 14330, "database": "shop"
    }


def test_touch_again_refreshes_the_marker_and_keeps_one_table(server: MssqlStandIn) -> None:
    target = mssqldb.MSSqlTarget("sql.local", "shop", "etl", SECRET, "sales", "run-1")
    target.touch()
    target.touch()  # the second CREATE TABLE meets error 2714, which is ignored
    assert server.tables == {"table_updates": {"run-1": "sales"}}
    assert target.port == 1433
    upserts = [params for kind, _, params in server.calls if kind == "execute_non_query" and params]
    assert upserts == [{"update_id": "run-1", "table": "sales"}] * 2


@pytest.mark.parametrize("key", ["marker_table", "marker-table"])
def test_the_marker_table_name_comes_from_the_config(server: MssqlStandIn, key: str) -> None:
    luigi.configuration.get_config().set("mssql", key, "luigi_markers")
    try:
        mssqldb.MSSqlTarget("sql.local", "shop", "etl", SECRET, "sales", "run-2").touch()
    finally:
        luigi.configuration.get_config().remove_option("mssql", key)
    assert list(server.tables) == ["luigi_markers"]


def test_a_server_error_other_than_a_missing_table_is_raised(
    server: MssqlStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = mssqldb.MSSqlTarget("sql.local", "shop", "etl", SECRET, "sales", "run-3")
    monkeypatch.setattr(mssqldb.MSSqlTarget, "marker_table", "bad name")
    with pytest.raises(MssqlDatabaseException, match="Incorrect syntax"):
        target.exists()


def test_a_refused_connection_stops_the_task_and_writes_no_marker(
    server: MssqlStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    server.refuse = True
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert not luigi.build([LoadSales(day="2024-01-02")], local_scheduler=True)
    assert server.tables == {}
    (record,) = [r for r in caplog.records if "error in complete() method" in r.getMessage()]
    assert "Adaptive Server is unavailable or does not exist (sql.local)" in record.getMessage()


def test_the_password_stays_out_of_the_targets_text(server: MssqlStandIn) -> None:
    target = mssqldb.MSSqlTarget("sql.local", "shop", "etl", SECRET, "sales", "run-4")
    assert SECRET not in repr(target) and SECRET not in str(target)


def test_without_pymssql_connecting_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mssqldb, "_mssql", None)
    with pytest.raises(MissingExtraError, match=r"luigi\[mssql\]"):
        mssqldb.MSSqlTarget("sql.local", "shop", "etl", SECRET, "sales", "x").connect()


def test_with_pymssql_installed_the_real_driver_is_the_default() -> None:
    _mssql = pytest.importorskip("pymssql._mssql")
    assert mssqldb._mssql is _mssql
