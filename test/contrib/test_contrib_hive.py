"""luigi.contrib.hive: the clients, targets and tasks against a stand-in ``hive`` command
(test/helpers/hive_standin.py) that answers as Hive documents; no Hive can run here."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import luigi
from luigi.contrib import hive

STANDIN = Path(__file__).parents[1] / "helpers" / "hive_standin.py"


@dataclass
class HiveStandIn:
    state_dir: Path

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.state_dir / "tables.json").read_text()))

    def set_release(self, release: str) -> None:
        state = self.state()
        state["release"] = release
        (self.state_dir / "tables.json").write_text(json.dumps(state))

    def calls(self) -> list[list[str]]:
        path = self.state_dir / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


SALES = {
    "columns": [["day", "string"], ["amount", "int"]], "partitions": ["ds=2024-01-01/region=eu"], "rows": 1
}


@pytest.fixture
def hive_cli(tmp_path: Path) -> Iterator[HiveStandIn]:
    state_dir = tmp_path / "hive"
    state_dir.mkdir()
    state = {"release": "cdh4", "calls_with_jobs": [], "tables": {"shop": {"sales": SALES}}}
    (state_dir / "tables.json").write_text(json.dumps(state))
    launcher = tmp_path / "hive-launcher"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "{state_dir}" "$@"\n')
    launcher.chmod(0o755)
    config = luigi.configuration.get_config()
    config.set("hive", "command", str(launcher))
    yield HiveStandIn(state_dir)
    config.remove_option("hive", "command")


def test_run_hive_cmd_passes_dash_e_and_returns_the_text(hive_cli: HiveStandIn) -> None:
    assert hive.run_hive_cmd('use shop; show tables like "sales";') == "sales\n"
    assert hive_cli.calls() == [["-e", 'use shop; show tables like "sales";']]


def test_a_failing_command_raises_with_hives_words_unless_unchecked(hive_cli: HiveStandIn) -> None:
    with pytest.raises(hive.HiveCommandError, match="failed with error code: 64") as raised:
        hive.run_hive_cmd("FROBNICATE everything")
    assert b"cannot recognize input near 'FROBNICATE'" in raised.value.err
    assert "cannot recognize input" in str(raised.value)
    assert hive.run_hive_cmd("FROBNICATE everything", check_return_code=False) == ""


def test_a_missing_script_is_named(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=f"Hive script: {tmp_path}/none.hql does not exist"):
        hive.run_hive_script(str(tmp_path / "none.hql"))


def test_the_command_client_finds_tables_partitions_locations_and_schemas(hive_cli: HiveStandIn) -> None:
    client = hive.HiveCommandClient()
    assert client.table_exists("sales", "shop")
    assert not client.table_exists("returns", "shop")
    assert client.table_exists("sales", "shop", {"ds": "2024-01-01", "region": "eu"})
    assert not client.table_exists("sales", "shop", {"ds": "2024-01-02", "region": "eu"})
    assert client.table_location("sales", "shop", {"region": "eu", "ds": "2024-01-01"}) == (
        f"{hive_standin_warehouse()}/shop.db/sales/ds=2024-01-01/region=eu"
    )
    assert client.table_schema("sales", "shop") == [("day", "string"), ("amount", "int")]
    assert client.table_schema("returns", "shop") is None
    assert client.partition_spec({"c": "d", "a": "b"}) == "`a`='b',`c`='d'"
    assert client.partition_spec({"a": "it's"}) == "`a`='it\\'s'"


def hive_standin_warehouse() -> str:
    return "hdfs://namenode:8020/user/hive/warehouse"


def test_the_apache_client_reads_table_not_found_as_no_schema(hive_cli: HiveStandIn) -> None:
    hive_cli.set_release("apache")
    assert hive.ApacheHiveCommandClient().table_schema("returns", "shop") is None
    with pytest.raises(hive.HiveCommandError):
        hive.HiveCommandClient().table_schema("returns", "shop")


def test_partition_targets_and_a_missing_table(hive_cli: HiveStandIn) -> None:
    present = hive.HivePartitionTarget("sales", {"ds": "2024-01-01", "region": "eu"}, "shop")
    assert present.exists()
    assert present.path.endswith("/shop.db/sales/ds=2024-01-01/region=eu")
    assert not hive.HivePartitionTarget("sales", {"ds": "2024-01-09", "region": "eu"}, "shop").exists()
    with pytest.raises(hive.HiveCommandError):
        hive.HivePartitionTarget("returns", {"ds": "2024-01-01"}, "shop").exists()
    assert not hive.HivePartitionTarget("returns", {"ds": "x"}, "shop", fail_missing_table=False).exists()
    assert hive.HiveTableTarget("sales", "shop").exists()
    assert not hive.HiveTableTarget("returns", "shop").exists()
    with pytest.raises(Exception, match="Couldn't find location for table"):
        _ = hive.HiveTableTarget("returns", "shop").path


class DailySales(hive.HiveQueryTask):
    ds = luigi.Parameter()
    n_reduce_tasks = 4

    def query(self) -> str:
        return (
            "use shop; INSERT OVERWRITE TABLE sales PARTITION (ds='${hivevar:day}', region='us') "
            "SELECT day, amount FROM staging"
        )

    def hivevars(self) -> dict[str, Any]:
        return {"day": self.ds}

    def output(self) -> hive.HivePartitionTarget:
        return hive.HivePartitionTarget("sales", {"ds": self.ds, "region": "us"}, "shop")


def test_a_query_task_runs_its_query_file_with_its_settings_and_its_partition_appears(
    hive_cli: HiveStandIn, tmp_path: Path
) -> None:
    rc = tmp_path / "init.hql"
    rc.write_text("use shop;")
    luigi.configuration.get_config().set("hive", "hiverc-location", str(rc))
    try:
        task = DailySales(ds="2024-02-02")
        assert not task.complete()
        assert luigi.build([task], local_scheduler=True)
    finally:
        luigi.configuration.get_config().remove_option("hive", "hiverc-location")
    assert task.complete()
    (run,) = [call for call in hive_cli.calls() if "-f" in call]
    assert run[0] == "-f" and run[2:4] == ["-i", str(rc)]
    assert run[4:] == [
        "--hiveconf", f"mapred.job.name='{task.task_id}'", "--hiveconf", "mapred.reduce.tasks=4",
        "--hivevar", "day=2024-02-02",
    ]


def test_a_failing_query_fails_the_task_with_hives_error(hive_cli: HiveStandIn) -> None:
    class Broken(DailySales):
        def query(self) -> str:
            return "use shop; INSERT OVERWRITE TABLE nowhere PARTITION (ds='x') SELECT 1"

    failures: list[BaseException] = []
    Broken.event_handler(luigi.Event.FAILURE)(lambda task, error: failures.append(error))
    assert not luigi.build([Broken(ds="2024-02-03")], local_scheduler=True)
    (error,) = failures
    assert "Table not found nowhere" in error.err  # and in the failure text the scheduler shows
    assert "Table not found nowhere" in Broken(ds="2024-02-03").on_failure(error)


def test_an_external_hive_task_is_complete_once_its_partition_exists(hive_cli: HiveStandIn) -> None:
    assert hive.ExternalHiveTask(database="shop", table="sales",
                                 partition={"ds": "2024-01-01", "region": "eu"}).complete()
    assert not hive.ExternalHiveTask(database="shop", table="sales",
                                     partition={"ds": "2030-01-01", "region": "eu"}).complete()
    assert hive.ExternalHiveTask(database="shop", table="sales").complete()


class _Field:
    def __init__(self, name: str, kind: str) -> None:
        self.name, self.type = name, kind


class NoSuchObjectException(Exception):
    """The metastore's own exception name, as its Thrift client raises it."""


class MetastoreStandIn:
    """The calls MetastoreClient makes of ThriftHiveMetastore.Client, answering as the metastore does."""

    def get_partition_names(self, db: str, table: str, limit: int) -> list[str]:
        return ["region=eu/ds=2024-01-01", "region=us/ds=2024-01-01"]

    def get_partition_by_name(self, db: str, table: str, name: str) -> Any:
        if name != "ds=2024-01-01/region=eu":
            raise NoSuchObjectException(name)
        return type("P", (), {"sd": type("S", (), {"location": f"/wh/{db}.db/{table}/{name}"})()})()

    def get_table(self, db: str, table: str) -> Any:
        return type("T", (), {"sd": type("S", (), {"location": f"/wh/{db}.db/{table}"})()})()

    def get_all_tables(self, db: str) -> list[str]:
        return ["sales"]

    def get_schema(self, db: str, table: str) -> list[_Field]:
        return [_Field("day", "string"), _Field("amount", "int")]


def test_the_metastore_client_over_its_thrift_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hive.HiveThriftContext, "__enter__", lambda self: MetastoreStandIn())
    monkeypatch.setattr(hive.HiveThriftContext, "__exit__", lambda self, *exc: None)
    client = hive.MetastoreClient()
    assert client.table_exists("sales", "shop", {"ds": "2024-01-01", "region": "eu"})  # any key order
    assert not client.table_exists("sales", "shop", {"ds": "2024-01-02", "region": "eu"})
    assert client.table_exists("sales", "shop") and not client.table_exists("returns", "shop")
    assert client.table_location("sales", "shop", {"region": "eu", "ds": "2024-01-01"}).endswith(
        "ds=2024-01-01/region=eu"
    )
    assert client.table_location("sales", "shop", {"ds": "2030-01-01", "region": "eu"}) == ""
    assert client.table_location("sales", "shop") == "/wh/shop.db/sales"
    assert client.table_schema("sales", "shop") == [("day", "string"), ("amount", "int")]


def test_without_thrift_the_metastore_client_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hive_metastore", None)
    with pytest.raises(Exception, match="Could not import Hive thrift library"):
        hive.MetastoreClient().table_exists("sales")


class _Listing:
    def __init__(self, entries: dict[str, list[str]]) -> None:
        self.entries = entries
        self.asked: list[tuple[str, str]] = []

    def exists(self, path: str) -> bool:
        self.asked.append(("exists", path))
        return path in self.entries

    def listdir(self, path: str) -> list[str]:
        self.asked.append(("listdir", path))
        return self.entries[path]


def test_the_warehouse_client_reads_the_warehouse_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    base = "/apps/hive/warehouse/some_db.db/table_name"
    files = _Listing({f"{base}/a=1/b=2": [f"{base}/a=1/b=2/part-0"], f"{base}/": [f"{base}/.tmp"]})
    client = hive.WarehouseHiveClient(files, "/apps/hive/warehouse")
    assert client.table_exists("table_name", "some_db", {"a": 1, "b": 2})
    assert client.table_exists("table_name", "some_db")
    luigi.configuration.get_config().set("hive", "ignored_file_masks", r"(\.tmp.*)")
    try:
        assert not client.table_exists("table_name", "some_db")
    finally:
        luigi.configuration.get_config().remove_option("hive", "ignored_file_masks")
    assert ("exists", f"{base}/a=1/b=2") in files.asked and ("listdir", f"{base}/") in files.asked
    with pytest.raises(ValueError, match="several keys"):
        client.partition_spec([("a", 1), ("b", 2)])


def test_the_release_setting_picks_the_client() -> None:
    config = luigi.configuration.get_config()
    try:
        for release, kind in [("apache", hive.ApacheHiveCommandClient), ("metastore", hive.MetastoreClient),
                              ("cdh4", hive.HiveCommandClient)]:
            config.set("hive", "release", release)
            assert type(hive.get_default_client()) is kind
    finally:
        config.remove_option("hive", "release")
    config.set("hive", "command", "hive --service cli")
    try:
        assert hive.load_hive_cmd() == ["hive", "--service", "cli"]
    finally:
        config.remove_option("hive", "command")
