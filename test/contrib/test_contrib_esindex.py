"""luigi.contrib.esindex through luigi.build, with the current elasticsearch client against an in-memory
Elasticsearch-compatible server (osmem-server behind a media-type proxy: helpers/elasticsearch_server.py)."""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.elasticsearch_server import ElasticsearchStandIn, osmem_base, running_elasticsearch

import luigi
from luigi.contrib.esindex import ClientVersionMismatch, CopyToIndex, ElasticsearchTarget
from luigi.contrib.optional import MissingExtraError

elasticsearch = pytest.importorskip("elasticsearch")

SAMPLE = {"date": "today", "name": "sample"}


@pytest.fixture(scope="module")
def osmem() -> Iterator[Any]:
    with osmem_base() as base:
        yield base


@pytest.fixture
def server(osmem: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[ElasticsearchStandIn]:
    with running_elasticsearch(osmem) as standin:
        monkeypatch.setattr(LocalCopy, "host", standin.host)
        monkeypatch.setattr(LocalCopy, "port", standin.port)
        yield standin


@pytest.fixture
def es(server: ElasticsearchStandIn) -> Any:
    return elasticsearch.Elasticsearch(server.url)


class LocalCopy(CopyToIndex):
    """Copies into the test server (host and port set by the ``server`` fixture)."""

    index = "things"
    host = "unset"
    port = 0
    runs: list[str] = []

    def run(self) -> None:
        self.runs.append(self.task_id)
        super().run()


class JsonLines(luigi.ExternalTask):
    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)


class FromFile(LocalCopy):
    path = luigi.Parameter()

    def requires(self) -> JsonLines:
        return JsonLines(path=self.path)


class FromDicts(LocalCopy):
    batch = luigi.IntParameter(default=0)
    documents: list[dict[str, Any]] = [{"_id": 123, **SAMPLE}]

    def docs(self) -> list[dict[str, Any]]:
        return [{**doc, "_id": f"{doc['_id']}-{self.batch}"} if self.batch else doc for doc in self.documents]


def build(*tasks: luigi.Task) -> bool:
    return bool(luigi.build(list(tasks), local_scheduler=True))


def failures_of(task_class: type[luigi.Task]) -> list[BaseException]:
    caught: list[BaseException] = []
    task_class.event_handler(luigi.Event.FAILURE)(lambda task, exception: caught.append(exception))
    return caught


def markers(es: Any, index: str = "update_log") -> list[dict[str, Any]]:
    es.indices.refresh(index=index)
    hits = es.search(index=index, query={"match_all": {}}, size=100)["hits"]["hits"]
    return [hit["_source"] for hit in hits]


def test_a_file_of_json_lines_is_copied_one_document_per_line(es: Any, tmp_path: Path) -> None:
    lines = tmp_path / "docs.jsonl"
    lines.write_text('{"_id": 123, "date": "today", "name": "sample"}\n')
    task = FromFile(path=str(lines))

    assert build(task)

    assert es.count(index="things")["count"] == 1
    assert es.get(index="things", id="123")["_source"] == SAMPLE
    assert task.output().exists()


def test_dicts_are_copied_as_they_are_and_left_unchanged(es: Any) -> None:
    class Listed(FromDicts):
        documents = [{"_id": 1, "name": "one"}, {"_id": 2, "name": "two", "_type": "legacy"}]

    assert build(Listed())

    assert es.get(index="things", id="2")["_source"] == {"name": "two"}
    assert es.count(index="things")["count"] == 2
    assert Listed.documents[1] == {"_id": 2, "name": "two", "_type": "legacy"}


def test_the_marker_document_makes_the_task_complete_and_a_rerun_does_nothing(es: Any) -> None:
    LocalCopy.runs = []
    task = FromDicts()

    assert build(task) and build(FromDicts())

    assert LocalCopy.runs == [task.task_id]
    target = task.output()
    marker = es.get(index="update_log", id=target.marker_index_document_id())["_source"]
    assert marker["update_id"] == task.task_id and marker["target_index"] == "things"
    assert marker["target_doc_type"] == "default"
    expected_id = hashlib.sha1(f"things:default:{task.task_id}".encode()).hexdigest()
    assert target.marker_index_document_id() == expected_id


def test_an_incremental_copy_adds_to_the_index(es: Any) -> None:
    assert build(FromDicts(batch=1))
    assert build(FromDicts(batch=2))

    assert es.count(index="things")["count"] == 2
    assert len(markers(es)) == 2


def test_marker_index_hist_size_keeps_only_the_newest_markers_of_the_index(es: Any) -> None:
    class Trimmed(FromDicts):
        marker_index_hist_size = 1

    class Elsewhere(FromDicts):
        index = "other"

    assert build(Elsewhere())
    for batch in (1, 2, 3):
        assert build(Trimmed(batch=batch))

    kept = [m for m in markers(es) if m["target_index"] == "things"]
    assert [m["update_id"] for m in kept] == [Trimmed(batch=3).task_id]
    assert [m["target_index"] for m in markers(es) if m["target_index"] != "things"] == ["other"]
    assert es.count(index="things")["count"] == 3
    assert not Trimmed(batch=1).complete()


def test_purge_existing_index_deletes_what_was_there_first(es: Any) -> None:
    es.index(index="things", id="stale", document={"name": "old"}, refresh=True)

    class Purged(FromDicts):
        purge_existing_index = True

    assert build(Purged())

    es.indices.refresh(index="things")
    assert not es.exists(index="things", id="stale")
    assert es.count(index="things")["count"] == 1


def test_without_purge_existing_documents_stay(es: Any) -> None:
    es.index(index="things", id="stale", document={"name": "old"}, refresh=True)

    assert build(FromDicts())

    assert es.count(index="things")["count"] == 2


def test_the_mapping_and_settings_are_applied_a_typed_mapping_without_its_type(es: Any) -> None:
    class Mapped(FromDicts):
        settings = {"settings": {"number_of_shards": 2}}
        mapping = {"default": {"properties": {"name": {"type": "keyword"}, "n": {"type": "integer"}}}}

    assert build(Mapped())

    properties = es.indices.get_mapping(index="things")["things"]["mappings"]["properties"]
    assert properties["name"] == {"type": "keyword"} and properties["n"] == {"type": "integer"}
    index_settings = es.indices.get_settings(index="things")["things"]["settings"]["index"]
    assert index_settings["number_of_shards"] == "2"
    assert index_settings["refresh_interval"] == "1s"


def test_a_rejected_document_fails_the_task_with_the_servers_reason_and_no_marker(es: Any) -> None:
    class Strict(FromDicts):
        mapping = {"properties": {"n": {"type": "integer"}}}
        documents = [{"_id": 1, "n": 1}, {"_id": 2, "n": "abc"}]

    caught = failures_of(Strict)

    assert not build(Strict())

    [error] = caught
    assert isinstance(error, elasticsearch.helpers.BulkIndexError)
    assert "1 document(s) failed to index into 'things'; the first, id '2'" in str(error)
    assert "failed to parse field [n] of type [integer]" in str(error)
    assert not Strict().output().exists()
    assert not es.indices.exists(index="update_log") or markers(es) == []


def test_with_raise_on_error_off_the_good_documents_are_copied_and_the_task_completes(es: Any) -> None:
    class Lenient(FromDicts):
        raise_on_error = False
        mapping = {"properties": {"n": {"type": "integer"}}}
        documents = [{"_id": 1, "n": 1}, {"_id": 2, "n": "abc"}]

    assert build(Lenient())

    assert es.count(index="things")["count"] == 1
    assert Lenient().complete()


def test_the_marker_index_comes_from_config_or_the_instance(es: Any) -> None:
    luigi.configuration.get_config().set("elasticsearch", "marker_index", "copies")
    task = FromDicts()
    assert build(task)
    assert [m["update_id"] for m in markers(es, "copies")] == [task.task_id]

    target = FromDicts(batch=1).output()
    target.marker_index = "by_hand"
    target.marker_doc_type = "row"
    target.touch()
    assert target.exists() and [m["update_id"] for m in markers(es, "by_hand")] == [target.update_id]
    assert ElasticsearchTarget.marker_doc_type == "entry"


def test_luigis_dashed_config_keys_still_name_the_marker_index() -> None:
    luigi.configuration.get_config().set("elasticsearch", "marker-index", "dashed_log")

    with pytest.warns(DeprecationWarning, match="marker-index"):
        assert ElasticsearchTarget.marker_index == "dashed_log"


def test_docs_of_another_kind_fail_the_task_naming_the_kinds_it_takes(server: ElasticsearchStandIn) -> None:
    class Numbers(LocalCopy):
        def docs(self) -> list[int]:
            return [1, 2]

    caught = failures_of(Numbers)

    assert not build(Numbers())

    [error] = caught
    assert isinstance(error, RuntimeError)
    assert str(error) == "Numbers.docs() must yield JSON strings or dicts, not int"


@pytest.mark.parametrize("credentials", [("etl", "s3cret-pw"), "etl:s3cret-pw"], ids=["pair", "string"])
def test_credentials_are_sent_but_never_logged_nor_shown(
    server: ElasticsearchStandIn, caplog: pytest.LogCaptureFixture, credentials: Any
) -> None:
    class Secured(FromDicts):
        http_auth = credentials

    task = Secured()
    with caplog.at_level(logging.DEBUG):
        assert build(task)

    sent = "Basic " + base64.b64encode(b"etl:s3cret-pw").decode()
    assert server.authorizations and set(server.authorizations) == {sent}
    shown = [caplog.text, repr(task), str(task), repr(task.output()), str(task.output())]
    assert not [text for text in shown if "s3cret-pw" in text or sent in text]


def test_a_refused_connection_fails_the_task_naming_host_and_port(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    class Nowhere(FromDicts):
        host = "127.0.0.1"

    Nowhere.port = port
    caught = failures_of(Nowhere)

    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        assert not build(Nowhere())

    [error] = caught
    assert isinstance(error, ConnectionError)
    assert str(error).startswith(f"cannot reach Elasticsearch at http://127.0.0.1:{port} (")
    assert f"Elasticsearch at http://127.0.0.1:{port}: cannot read marker" in caplog.text


def test_a_server_refusing_the_clients_media_type_fails_the_task_naming_the_client_to_install(
    osmem: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Mismatched(FromDicts):
        pass

    caught = failures_of(Mismatched)
    with osmem.clone() as clone:  # no proxy: it refuses compatible-with=N, as OpenSearch does
        host, port = clone.url.removeprefix("http://").split(":")
        monkeypatch.setattr(Mismatched, "host", host)
        monkeypatch.setattr(Mismatched, "port", int(port))

        assert not build(Mismatched())

    [error] = caught
    assert isinstance(error, ClientVersionMismatch)
    major = int(elasticsearch.__versionstr__.split(".")[0])
    assert str(error) == (
        f"Elasticsearch at http://{host}:{port} refused the requests of elasticsearch client "
        f"{elasticsearch.__versionstr__}: install the client of the server's major version (for a server "
        f"of version {major - 1}: pip install 'elasticsearch>={major - 1},<{major}'); "
        "OpenSearch needs its own client"
    )


def test_without_the_client_the_target_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "elasticsearch", None)

    with pytest.raises(MissingExtraError, match=r"pip install 'luigi\[elasticsearch\]'"):
        ElasticsearchTarget("localhost", 9200, "things", "default", "u1")


def test_extra_arguments_the_client_does_not_take_are_named() -> None:
    with pytest.raises(TypeError, match=r"extra_elasticsearch_args \['bogus'\] are not all accepted"):
        ElasticsearchTarget("localhost", 9200, "t", "default", "u1", extra_elasticsearch_args={"bogus": 1})


def test_luigi_era_node_arguments_describe_the_node() -> None:
    target = ElasticsearchTarget(
        "es.internal",
        9243,
        "t",
        "default",
        "u1",
        extra_elasticsearch_args={"use_ssl": True, "url_prefix": "/search"},
    )

    [node] = target.es.transport.node_pool.all()
    assert (node.config.scheme, node.config.host, node.config.port) == ("https", "es.internal", 9243)
    assert node.config.path_prefix == "/search"
    assert repr(target) == "ElasticsearchTarget(https://es.internal:9243, index='t', update_id='u1')"


def test_credentials_in_the_host_are_refused_pointing_to_http_auth() -> None:
    with pytest.raises(ValueError, match="must not hold credentials: give them as http_auth"):
        ElasticsearchTarget("https://etl:pw@es.internal", 9243, "t", "default", "u1")
