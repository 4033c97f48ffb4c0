"""luigi.contrib.bigquery_avro: Avro files loaded into BigQuery, the writer schema's doc on the table.

Against the BigQuery stand-in (helpers/bigquery_standin.py), whose ``objects`` stand for Cloud Storage;
the files are real Avro written with fastavro.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

import luigi
from luigi.contrib.bigquery import BigQueryClient, BigQueryTarget
from luigi.contrib.bigquery_avro import BigQueryLoadAvro

pytest.importorskip("googleapiclient")
fastavro = pytest.importorskip("fastavro")

from google.auth.credentials import AnonymousCredentials  # noqa: E402
from helpers.bigquery_standin import BigQueryStandIn, StorageTarget, bigquery_standin  # noqa: E402, F401

SCHEMA = {
    "type": "record",
    "name": "Click",
    "namespace": "example",
    "doc": "Clicks per user and day, from the web logs",
    "fields": [{"name": "user", "type": "string"}, {"name": "clicks", "type": "long"}],
}
STANDIN: list[BigQueryStandIn] = []


@pytest.fixture
def bq(bigquery_standin: BigQueryStandIn) -> Any:  # noqa: F811
    config = luigi.configuration.get_config()
    config.set("bigquery", "job_poll_interval", "0")
    config.set("bigquery", "retry_wait", "0")
    STANDIN[:] = [bigquery_standin]
    yield bigquery_standin
    STANDIN.clear()


def avro_file(records: list[dict[str, Any]], schema: dict[str, Any] = SCHEMA) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records)
    return out.getvalue()


class Files(luigi.ExternalTask):
    path = luigi.Parameter()

    def output(self) -> StorageTarget:
        return StorageTarget(self.path, STANDIN[0])


class LoadClicks(BigQueryLoadAvro):
    path = luigi.Parameter(default="gs://bucket/clicks/")

    def requires(self) -> Files:
        return Files(self.path)

    def output(self) -> BigQueryTarget:
        client = BigQueryClient(
            oauth_credentials=AnonymousCredentials(), client_options=STANDIN[0].client_options()
        )
        return BigQueryTarget("proj", "web", "clicks", client=client)


def test_a_directory_of_avro_files_is_loaded_and_the_schema_doc_becomes_the_description(bq: BigQueryStandIn):
    many = [{"user": f"user{n}", "clicks": n} for n in range(20000)]  # well past the 64 KiB head read
    bq.objects["gs://bucket/clicks/part-0.avro"] = avro_file(many)
    bq.objects["gs://bucket/clicks/part-1.avro"] = avro_file([{"user": "ada", "clicks": 3}])
    bq.objects["gs://bucket/clicks/_SUCCESS"] = b""

    assert luigi.build([LoadClicks()], local_scheduler=True)

    [job] = bq.jobs.values()
    load = job.body["configuration"]["load"]
    assert load["sourceFormat"] == "AVRO" and load["sourceUris"] == ["gs://bucket/clicks/*.avro"]
    assert bq.rows("proj", "web", "clicks") == [*many, {"user": "ada", "clicks": 3}]
    table = bq.tables[("proj", "web", "clicks")].resource
    assert table["description"] == "Clicks per user and day, from the web logs"
    assert "PATCH /bigquery/v2/projects/proj/datasets/web/tables/clicks" in bq.requests
    [(path, fetched)] = bq.downloads
    assert path == "gs://bucket/clicks/part-0.avro"
    assert fetched == 64 * 1024 < len(bq.objects[path])  # the schema came from the file's head only


def test_one_avro_file_is_loaded_as_named(bq: BigQueryStandIn):
    bq.objects["gs://bucket/one.avro"] = avro_file([{"user": "ada", "clicks": 3}])

    assert luigi.build([LoadClicks(path="gs://bucket/one.avro")], local_scheduler=True)

    [job] = bq.jobs.values()
    assert job.body["configuration"]["load"]["sourceUris"] == ["gs://bucket/one.avro"]
    assert bq.tables[("proj", "web", "clicks")].resource["description"] == SCHEMA["doc"]


def test_a_schema_without_doc_leaves_the_description_alone(bq: BigQueryStandIn):
    undocumented = {key: value for key, value in SCHEMA.items() if key != "doc"}
    bq.objects["gs://bucket/one.avro"] = avro_file([{"user": "ada", "clicks": 3}], undocumented)

    assert luigi.build([LoadClicks(path="gs://bucket/one.avro")], local_scheduler=True)

    assert "description" not in bq.tables[("proj", "web", "clicks")].resource
    assert not [request for request in bq.requests if request.startswith("PATCH")]


def test_a_schema_that_cannot_be_read_is_a_warning_and_the_load_stands(
    bq: BigQueryStandIn, caplog: pytest.LogCaptureFixture
):
    bq.objects["gs://bucket/one.avro"] = avro_file([{"user": "ada", "clicks": 3}])

    class Unreadable(LoadClicks):
        def _get_input_schema(self) -> Any:
            raise ValueError("cannot read header - is it an avro file?")

    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        assert luigi.build([Unreadable(path="gs://bucket/one.avro")], local_scheduler=True)

    assert bq.rows("proj", "web", "clicks") == [{"user": "ada", "clicks": 3}]
    assert "Could not propagate the Avro doc to BigQuery table" in caplog.text
    assert "cannot read header - is it an avro file?" in caplog.text


def test_reading_the_schema_of_a_pattern_nothing_matches_says_so(bq: BigQueryStandIn):
    with pytest.raises(RuntimeError, match=r"No match for gs://bucket/empty/\*\.avro"):
        LoadClicks(path="gs://bucket/empty/")._get_input_schema()


def test_a_file_that_is_not_avro_is_named(bq: BigQueryStandIn):
    bq.objects["gs://bucket/not.avro"] = b"user,clicks\nada,3\n"

    with pytest.raises(ValueError, match="^gs://bucket/not.avro holds no Avro header fastavro can read: "):
        LoadClicks(path="gs://bucket/not.avro")._get_input_schema()


def test_the_writer_schema_is_the_one_the_file_was_written_with():
    reader = fastavro.reader(io.BytesIO(avro_file([{"user": "ada", "clicks": 3}])))

    schema = BigQueryLoadAvro._get_writer_schema(reader)

    assert schema["doc"] == SCHEMA["doc"] and [f["name"] for f in schema["fields"]] == ["user", "clicks"]
