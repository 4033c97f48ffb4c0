"""luigi.contrib.mongodb through luigi.build, on pymongo 4's API (mongomock's in-memory server: no
MongoDB server can be installed here), and against a real pymongo client whose server refuses."""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

import luigi
from luigi.contrib.mongodb import (
    MongoCellTarget,
    MongoCollectionTarget,
    MongoCountTarget,
    MongoRangeTarget,
    MongoTarget,
)
from luigi.contrib.optional import MissingExtraError

mongomock = pytest.importorskip("mongomock")
pymongo = pytest.importorskip("pymongo")

DB = "analytics"


@pytest.fixture
def client() -> Any:
    return mongomock.MongoClient()


class _ClientTask(luigi.Task):
    """A task given the user's client as a plain attribute (a client is not a parameter value)."""

    client: Any = None


class ScoreCell(_ClientTask):
    user = luigi.Parameter()

    def output(self) -> MongoCellTarget:
        return MongoCellTarget(self.client, DB, "users", self.user, "stats.score")

    def run(self) -> None:
        self.output().write(len(self.user) * 10)


class Scores(_ClientTask):
    users = luigi.ListParameter()

    def output(self) -> MongoRangeTarget:
        return MongoRangeTarget(self.client, DB, "users", self.users, "score")

    def run(self) -> None:
        # a value for an id outside the range is not written
        values = {user: len(user) for user in self.users} | {"stranger": 1}
        self.output().write(values)


class CreateCollection(_ClientTask):
    def output(self) -> MongoCollectionTarget:
        return MongoCollectionTarget(self.client, DB, "events")

    def run(self) -> None:
        self.output().get_collection().insert_one({"kind": "created"})


class LoadRows(_ClientTask):
    rows = luigi.IntParameter()

    def output(self) -> MongoCountTarget:
        return MongoCountTarget(self.client, DB, "rows", self.rows)

    def run(self) -> None:
        collection = self.output().get_collection()
        collection.insert_many([{"n": n} for n in range(self.rows)])


def _build(*tasks: luigi.Task) -> bool:
    return luigi.build(list(tasks), local_scheduler=True, workers=1)


def test_cell_target_is_written_by_its_task_and_then_exists(client: Any) -> None:
    ScoreCell.client = client
    task = ScoreCell(user="ada")
    assert not task.complete()

    assert _build(task)

    assert task.output().read() == 30
    assert client[DB]["users"].find_one({"_id": "ada"}) == {"_id": "ada", "stats": {"score": 30}}
    assert task.complete()


def test_cell_target_reads_none_for_a_missing_document_or_path(client: Any) -> None:
    client[DB]["users"].insert_one({"_id": "bob", "stats": {}})
    assert MongoCellTarget(client, DB, "users", "bob", "stats.score").read() is None
    assert MongoCellTarget(client, DB, "users", "nobody", "stats.score").read() is None


def test_range_target_writes_only_its_ids_in_one_bulk_write_on_pymongo_4(client: Any) -> None:
    client[DB]["users"].insert_one({"_id": "ada", "name": "Ada"})
    Scores.client = client
    task = Scores(users=["ada", "grace"])
    assert task.output().get_empty_ids() == {"ada", "grace"}

    assert _build(task)

    assert task.output().read() == {"ada": 3, "grace": 5}
    assert client[DB]["users"].find_one({"_id": "ada"}) == {"_id": "ada", "name": "Ada", "score": 3}
    assert client[DB]["users"].find_one({"_id": "stranger"}) is None
    assert task.complete()


def test_range_target_is_incomplete_while_one_id_lacks_the_field(client: Any) -> None:
    client[DB]["users"].insert_many([{"_id": "a", "score": 1}, {"_id": "b"}])
    target = MongoRangeTarget(client, DB, "users", ["a", "b"], "score")
    assert target.get_empty_ids() == {"b"}
    assert not target.exists()


def test_collection_target_uses_list_collection_names_on_pymongo_4(client: Any) -> None:
    CreateCollection.client = client
    task = CreateCollection()
    assert not task.complete()

    assert _build(task)

    assert "events" in client[DB].list_collection_names()
    assert task.complete()


def test_count_target_exists_at_exactly_its_count(client: Any) -> None:
    LoadRows.client = client
    task = LoadRows(rows=4)
    assert not task.complete()

    assert _build(task)

    assert task.output().read() == 4
    assert task.complete()
    assert not MongoCountTarget(client, DB, "rows", 5).exists()


def test_target_names_and_handles(client: Any) -> None:
    target: MongoTarget = MongoCollectionTarget(client, DB, "users")
    assert str(target) == "analytics/users"
    assert target.get_index().name == DB
    assert target.get_collection().name == "users"


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_server_stops_the_task_with_the_address_and_runs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = _refused_port()
    real = pymongo.MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=300, connectTimeoutMS=300)
    ran: list[luigi.Task] = []
    try:
        ScoreCell.client = real

        @ScoreCell.event_handler(luigi.Event.START)
        def _started(task: luigi.Task) -> None:
            ran.append(task)

        with caplog.at_level("WARNING", logger="luigi-interface"):
            result = luigi.build([ScoreCell(user="ada")], local_scheduler=True, detailed_summary=True)
    finally:
        real.close()
    # complete() cannot reach the server: the task is not run, and the log names the server
    assert not result.scheduling_succeeded
    assert ran == []
    (record,) = [r for r in caplog.records if "error in complete() method" in r.getMessage()]
    assert f"127.0.0.1:{port}: [Errno 111] Connection refused" in record.getMessage()


def test_range_write_without_pymongo_names_the_extra(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymongo", None)
    target = MongoRangeTarget(client, DB, "users", ["a"], "score")
    with pytest.raises(MissingExtraError, match=r"luigi\[mongodb\]"):
        target.write({"a": 1})
