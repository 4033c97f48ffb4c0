"""luigi.contrib.bigquery: load, query, view and extract tasks, done only when BigQuery says so.

Against the stand-in (helpers/bigquery_standin.py) through googleapiclient's own ``bigquery v2`` discovery
client over real HTTP, pointed at it with ``client_options`` as a user would point at another endpoint.
Polling and retry waits are ``[bigquery] ... = 0``; tests wait on conditions, not time.
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
from typing import Any

import pytest

import luigi
from luigi.contrib.bigquery import (
    BigQueryClient,
    BigQueryCreateViewTask,
    BigQueryExecutionError,
    BigQueryExtractTask,
    BigQueryLoadTask,
    BigQueryLocationError,
    BigQueryRunQueryTask,
    BigQueryTarget,
    BQDataset,
    BQTable,
    CreateDisposition,
    DestinationFormat,
    ExternalBigQueryTask,
    SourceFormat,
    WriteDisposition,
)
from luigi.tools.range import RangeDaily

pytest.importorskip("googleapiclient")

from google.auth.credentials import AnonymousCredentials  # noqa: E402
from helpers.bigquery_standin import BigQueryStandIn, StorageTarget, bigquery_standin  # noqa: E402, F401
from helpers.outcomes import build_failing, printed_without  # noqa: E402

CLICKS = [{"user": "ada", "clicks": 3}, {"user": "bob", "clicks": 5}]


@pytest.fixture
def bq(bigquery_standin: BigQueryStandIn) -> BigQueryStandIn:  # noqa: F811
    config = luigi.configuration.get_config()
    config.set("bigquery", "job_poll_interval", "0")
    config.set("bigquery", "retry_wait", "0")
    return bigquery_standin


def client_for(bq: BigQueryStandIn, credentials: Any = None) -> BigQueryClient:
    return BigQueryClient(
        oauth_credentials=credentials or AnonymousCredentials(), client_options=bq.client_options()
    )


class Source(luigi.ExternalTask):
    path = luigi.Parameter()

    def output(self) -> StorageTarget:
        return StorageTarget(self.path, STANDIN[0])


STANDIN: list[BigQueryStandIn] = []  # the test's stand-in, for the tasks' outputs


@pytest.fixture(autouse=True)
def _tasks_see_the_standin(request: pytest.FixtureRequest) -> Any:
    if "bq" in request.fixturenames:
        STANDIN[:] = [request.getfixturevalue("bq")]
    yield
    STANDIN.clear()


def target(table: str, dataset: str = "analytics") -> BigQueryTarget:
    return BigQueryTarget("proj", dataset, table, client=client_for(STANDIN[0]))


class LoadClicks(BigQueryLoadTask):
    day = luigi.Parameter(default="2026-01-01")

    def requires(self) -> Source:
        return Source(f"gs://bucket/clicks/{self.day}.json")

    def output(self) -> BigQueryTarget:
        return target(f"clicks_{self.day.replace('-', '')}")

    def configure_job(self, configuration: dict[str, Any]) -> dict[str, Any]:
        configuration["labels"] = {"team": "growth"}
        return configuration


def put_clicks(bq: BigQueryStandIn, day: str = "2026-01-01") -> None:
    bq.objects[f"gs://bucket/clicks/{day}.json"] = "".join(json.dumps(row) + "\n" for row in CLICKS).encode()


def the_job(bq: BigQueryStandIn) -> Any:
    [job] = bq.jobs.values()
    return job


def test_a_load_task_loads_its_cloud_storage_input_into_a_new_table_in_a_new_dataset(bq: BigQueryStandIn):
    put_clicks(bq)

    assert luigi.build([LoadClicks()], local_scheduler=True)

    assert bq.rows("proj", "analytics", "clicks_20260101") == CLICKS
    job = the_job(bq)
    assert job.body == {
        "configuration": {
            "load": {
                "destinationTable": {
                    "projectId": "proj",
                    "datasetId": "analytics",
                    "tableId": "clicks_20260101",
                },
                "encoding": "UTF-8",
                "sourceFormat": "NEWLINE_DELIMITED_JSON",
                "writeDisposition": "WRITE_EMPTY",
                "sourceUris": ["gs://bucket/clicks/2026-01-01.json"],
                "maxBadRecords": 0,
                "ignoreUnknownValues": False,
                "autodetect": True,
            },
            "labels": {"team": "growth"},
        }
    }
    assert job.step == 2  # read PENDING, RUNNING, then DONE
    assert LoadClicks().complete()


class OtherWriter(luigi.Task):
    """Someone else filling the table after the load task was found incomplete and before it ran."""

    table = luigi.Parameter()

    def output(self) -> BigQueryTarget:
        return target(self.table)

    def run(self) -> None:
        STANDIN[0].add_table("proj", "analytics", self.table, [{"user": "eve", "clicks": "1"}])


class LoadCsv(BigQueryLoadTask):
    source_format = SourceFormat.CSV
    field_delimiter = "|"
    skip_leading_rows = 1
    write_disposition = luigi.Parameter(default=WriteDisposition.WRITE_APPEND)
    schema = [{"name": "user", "type": "STRING"}, {"name": "clicks", "type": "STRING"}]

    def requires(self) -> list[luigi.Task]:
        return [Source("gs://bucket/clicks.csv"), OtherWriter("clicks_csv")]

    def source_uris(self) -> list[str]:
        return [self.input()[0].path]

    def output(self) -> BigQueryTarget:
        return target("clicks_csv")


def test_a_csv_load_sends_the_csv_options_and_schema_and_appends_with_write_append(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")
    bq.objects["gs://bucket/clicks.csv"] = b"user|clicks\nada|3\nbob|5\n"

    assert luigi.build([LoadCsv()], local_scheduler=True)

    load = the_job(bq).body["configuration"]["load"]
    csv_options = ("fieldDelimiter", "skipLeadingRows", "allowJaggedRows", "allowQuotedNewlines")
    assert [load[key] for key in csv_options] == ["|", 1, False, False]
    assert load["schema"] == {"fields": LoadCsv.schema} and "autodetect" not in load
    assert load["writeDisposition"] == "WRITE_APPEND"
    rows = bq.rows("proj", "analytics", "clicks_csv")
    assert rows == [
        {"user": "eve", "clicks": "1"},
        {"user": "ada", "clicks": "3"},
        {"user": "bob", "clicks": "5"},
    ]


def test_write_empty_into_a_table_that_filled_meanwhile_fails_with_bigquerys_duplicate_error(
    bq: BigQueryStandIn,
):
    bq.add_dataset("proj", "analytics")
    bq.objects["gs://bucket/clicks.csv"] = b"user|clicks\nada|3\n"

    error = build_failing(LoadCsv(write_disposition=WriteDisposition.WRITE_EMPTY))

    job_id = next(iter(bq.jobs))
    assert isinstance(error, BigQueryExecutionError) and error.job_id == job_id
    assert error.error_message == {
        "reason": "duplicate",
        "message": "Already Exists: Table proj:analytics.clicks_csv",
    }
    assert str(error).startswith(f"BigQuery job {job_id} failed: ")
    assert bq.rows("proj", "analytics", "clicks_csv") == [{"user": "eve", "clicks": "1"}]


class DailyTotals(BigQueryRunQueryTask):
    day = luigi.DateParameter(default=datetime.date(2026, 1, 1))
    create_disposition = luigi.Parameter(default=CreateDisposition.CREATE_IF_NEEDED)
    use_legacy_sql = False
    udf_resource_uris = ["gs://bucket/udf.js"]

    @property
    def query(self) -> str:
        return (
            f"SELECT user, SUM(clicks) AS total FROM analytics.clicks WHERE day = '{self.day}' GROUP BY user"
        )

    def output(self) -> BigQueryTarget:
        return target(f"totals_{self.day:%Y%m%d}", dataset="reports")


def test_a_query_task_writes_its_result_to_its_table_with_the_job_config_bigquery_documents(
    bq: BigQueryStandIn,
):
    task = DailyTotals()
    bq.query_rows[task.query] = [{"user": "ada", "total": 3}]

    assert luigi.build([task], local_scheduler=True)

    assert bq.rows("proj", "reports", "totals_20260101") == [{"user": "ada", "total": 3}]
    assert the_job(bq).body == {
        "configuration": {
            "query": {
                "query": task.query,
                "priority": "INTERACTIVE",
                "destinationTable": {
                    "projectId": "proj",
                    "datasetId": "reports",
                    "tableId": "totals_20260101",
                },
                "allowLargeResults": True,
                "createDisposition": "CREATE_IF_NEEDED",
                "writeDisposition": "WRITE_TRUNCATE",
                "flattenResults": True,
                "userDefinedFunctionResources": [{"resourceUri": "gs://bucket/udf.js"}],
                "useLegacySql": False,
            }
        }
    }


def test_create_never_into_a_missing_table_fails_with_bigquerys_not_found(bq: BigQueryStandIn):
    error = build_failing(DailyTotals(create_disposition=CreateDisposition.CREATE_NEVER))

    assert isinstance(error, BigQueryExecutionError)
    assert error.error_message == {
        "reason": "notFound",
        "message": "Not found: Table proj:reports.totals_20260101",
    }
    assert the_job(bq).body["configuration"]["query"]["createDisposition"] == "CREATE_NEVER"


def test_a_query_bigquery_rejects_fails_the_task_with_the_jobs_reason_and_message(bq: BigQueryStandIn):
    task = DailyTotals()
    bq.failing_queries[task.query] = ("invalidQuery", "Syntax error: Unexpected keyword GROUP at [1:70]")

    error = build_failing(task)

    assert isinstance(error, BigQueryExecutionError)
    assert "invalidQuery" in str(error) and "Syntax error: Unexpected keyword GROUP at [1:70]" in str(error)
    assert not task.complete()


class ActiveUsers(BigQueryCreateViewTask):
    query_text = luigi.Parameter(default="SELECT user FROM analytics.clicks WHERE clicks > 0")

    @property
    def view(self) -> str:
        return self.query_text

    def output(self) -> BigQueryTarget:
        return target("active_users")


def test_a_view_task_creates_the_view_and_replaces_it_when_its_query_changes(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")

    assert luigi.build([ActiveUsers()], local_scheduler=True)
    assert bq.tables[("proj", "analytics", "active_users")].resource["view"] == {"query": ActiveUsers().view}
    changed = ActiveUsers(query_text="SELECT user FROM analytics.clicks WHERE clicks > 1")
    assert ActiveUsers().complete() and not changed.complete()

    assert luigi.build([changed], local_scheduler=True)

    assert bq.tables[("proj", "analytics", "active_users")].resource["view"] == {"query": changed.view}
    assert changed.complete() and not ActiveUsers().complete()
    assert "PUT /bigquery/v2/projects/proj/datasets/analytics/tables/active_users" in bq.requests


class ExternalClicks(ExternalBigQueryTask):
    def output(self) -> BigQueryTarget:
        return target("clicks")


class ExportClicks(BigQueryExtractTask):
    destination_format = luigi.Parameter(default=DestinationFormat.CSV)

    def requires(self) -> ExternalClicks:
        return ExternalClicks()

    def output(self) -> StorageTarget:
        return StorageTarget(f"gs://bucket/export/clicks-*.{self.destination_format.lower()}", STANDIN[0])


def test_an_extract_task_exports_its_table_to_cloud_storage_as_csv_with_a_header(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")
    bq.add_table("proj", "analytics", "clicks", CLICKS)

    assert luigi.build([ExportClicks()], local_scheduler=True)

    assert bq.objects["gs://bucket/export/clicks-000000000000.csv"] == b"user,clicks\nada,3\nbob,5\n"
    assert the_job(bq).body == {
        "configuration": {
            "extract": {
                "sourceTable": {"projectId": "proj", "datasetId": "analytics", "tableId": "clicks"},
                "destinationUris": ["gs://bucket/export/clicks-*.csv"],
                "destinationFormat": "CSV",
                "compression": "NONE",
                "printHeader": True,
                "fieldDelimiter": ",",
            }
        }
    }


def test_an_avro_extract_sends_no_header_or_delimiter(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")
    bq.add_table("proj", "analytics", "clicks", CLICKS)

    assert luigi.build([ExportClicks(destination_format=DestinationFormat.AVRO)], local_scheduler=True)

    extract = the_job(bq).body["configuration"]["extract"]
    assert extract["destinationFormat"] == "AVRO" and not {"printHeader", "fieldDelimiter"} & set(extract)


def test_an_extract_of_a_table_that_is_missing_waits_for_it(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")

    result = luigi.build([ExportClicks()], local_scheduler=True, detailed_summary=True)

    assert result.status == luigi.LuigiStatusCode.MISSING_EXT and not bq.jobs


def test_a_bigquery_target_exists_when_its_dataset_and_table_do(bq: BigQueryStandIn):
    clicks = target("clicks")
    assert not clicks.exists()  # no dataset
    bq.add_dataset("proj", "analytics")
    assert not clicks.exists()  # no table
    bq.add_table("proj", "analytics", "clicks")
    assert clicks.exists()
    assert clicks.table == BQTable("proj", "analytics", "clicks", None)
    assert clicks.table.uri == "bq://proj/analytics/clicks"
    assert str(clicks) == str(BQTable("proj", "analytics", "clicks", None))


class DayTable(ExternalBigQueryTask):
    day = luigi.DateParameter()

    def output(self) -> BigQueryTarget:
        dataset = "y2025" if self.day.year == 2025 else "y2026"
        return target(f"events_{self.day:%Y%m%d}", dataset=dataset)


def test_bulk_complete_lists_each_dataset_once_and_keeps_the_days_whose_table_exists(bq: BigQueryStandIn):
    days = [datetime.date(2025, 12, 30) + datetime.timedelta(days=n) for n in range(6)]  # Dec 30 .. Jan 4
    bq.add_dataset("proj", "y2025")
    bq.add_dataset("proj", "y2026")
    for day in (days[0], days[2], days[3], days[5]):
        bq.add_table("proj", f"y{day.year}", f"events_{day:%Y%m%d}")
    bq.add_table("proj", "y2026", "unrelated")

    present = list(DayTable.bulk_complete(days))

    assert present == [days[0], days[2], days[3], days[5]]
    assert not any("/tables/" in request for request in bq.requests)  # no table read one by one
    listings = [r for r in bq.requests if r.endswith("/tables")]
    assert sorted(set(listings)) == [
        f"GET /bigquery/v2/projects/proj/datasets/{d}/tables" for d in ("y2025", "y2026")
    ]


class DailyEvents(BigQueryRunQueryTask):
    date = luigi.DateParameter()
    query = "SELECT * FROM raw.events"

    def output(self) -> BigQueryTarget:
        return target(f"events_{self.date:%Y%m%d}", dataset="y2026")


def test_a_daily_range_runs_only_the_days_whose_table_bulk_complete_did_not_find(bq: BigQueryStandIn):
    bq.add_dataset("proj", "y2026")
    for day in ("20260101", "20260103"):
        bq.add_table("proj", "y2026", f"events_{day}", [{"event": "old"}])
    bq.query_rows["SELECT * FROM raw.events"] = [{"event": "new"}]

    now = int(datetime.datetime(2026, 1, 6).timestamp())
    week = RangeDaily(
        of=DailyEvents, start=datetime.date(2026, 1, 1), stop=datetime.date(2026, 1, 5), now=now
    )
    assert luigi.build([week], local_scheduler=True)

    written = [job.body["configuration"]["query"]["destinationTable"]["tableId"] for job in bq.jobs.values()]
    assert sorted(written) == ["events_20260102", "events_20260104"]
    assert bq.rows("proj", "y2026", "events_20260101") == [{"event": "old"}]
    assert bq.rows("proj", "y2026", "events_20260104") == [{"event": "new"}]
    # the days present were found in the dataset's listing, never read one by one
    assert not [r for r in bq.requests if r.endswith(("/events_20260101", "/events_20260103"))]


def test_the_client_manages_datasets_tables_and_copies(bq: BigQueryStandIn):
    client = client_for(bq)
    for name in ("a", "b", "c"):
        client.make_dataset(BQDataset("proj", name, "EU"))
    with pytest.raises(luigi.target.FileAlreadyExists):
        client.make_dataset(BQDataset("proj", "a", None), raise_if_exists=True)
    client.make_dataset(BQDataset("proj", "a", None))  # already there: fine unless asked to raise
    assert list(client.list_datasets("proj")) == ["a", "b", "c"]  # over two pages of two
    with pytest.raises(BigQueryLocationError, match="regional location EU. Can't use US"):
        client.dataset_exists(BQDataset("proj", "a", "US"))

    bq.add_table("proj", "a", "src", CLICKS)
    assert client.copy(BQTable("proj", "a", "src", None), BQTable("proj", "d", "dst", None))
    assert bq.rows("proj", "d", "dst") == CLICKS and bq.datasets[("proj", "d")]["location"] == "US"
    assert sorted(client.list_tables(BQDataset("proj", "a", None))) == ["src"]

    client.delete_table(BQTable("proj", "a", "src", None))
    client.delete_table(BQTable("proj", "a", "src", None))  # gone already: nothing to do
    client.delete_dataset(BQDataset("proj", "d", None))
    assert not client.dataset_exists(BQDataset("proj", "d", None))
    assert list(client.list_datasets("proj")) == ["a", "b", "c"]


def test_a_5xx_answer_is_retried_on_a_fresh_client(bq: BigQueryStandIn):
    bq.add_dataset("proj", "analytics")
    client = client_for(bq)
    bq.failures_ahead = [503]
    first = client.client

    assert client.dataset_exists(BQDataset("proj", "analytics", None))

    assert bq.requests == ["GET /bigquery/v2/projects/proj/datasets/analytics"] * 2
    assert client.client is not first


def test_three_5xx_answers_give_up_with_googles_error(bq: BigQueryStandIn):
    from googleapiclient.errors import HttpError

    bq.failures_ahead = [500, 500, 500]
    with pytest.raises(HttpError, match="Backend error, retry"):
        client_for(bq).dataset_exists(BQDataset("proj", "analytics", None))
    assert len(bq.requests) == 3


def test_a_refused_connection_fails_the_task_naming_the_endpoint(caplog: pytest.LogCaptureFixture):
    luigi.configuration.get_config().set("bigquery", "retry_wait", "0")
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    class Nowhere(BigQueryRunQueryTask):
        query = "SELECT 1"

        def output(self) -> BigQueryTarget:
            options = {"api_endpoint": f"http://127.0.0.1:{port}/bigquery/v2/"}
            client = BigQueryClient(oauth_credentials=AnonymousCredentials(), client_options=options)
            return BigQueryTarget("proj", "analytics", "t", client=client)

    assert not luigi.build([Nowhere()], local_scheduler=True)

    expected = f"BigQueryUnreachableError: cannot reach BigQuery at http://127.0.0.1:{port}/bigquery/v2/projects/proj/"
    assert expected in caplog.text


def test_without_google_api_python_client_the_error_names_the_extra():
    code = (
        "from luigi.contrib.bigquery import BigQueryTarget\n"
        "try:\n    BigQueryTarget('p', 'd', 't').exists()\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)"
    )
    printed = printed_without("googleapiclient", code)
    assert printed.startswith(
        "MissingExtraError luigi.contrib.bigquery needs the 'googleapiclient.discovery'"
    )
    assert "pip install 'luigi[bigquery]' (or pip install google-api-python-client)" in printed


def test_credentials_reach_bigquery_but_never_the_logs_or_reprs(
    bq: BigQueryStandIn, caplog: pytest.LogCaptureFixture
):
    from google.oauth2.credentials import Credentials

    secret = "ya29.secret-token-for-the-test"
    client = client_for(bq, Credentials(token=secret))
    put_clicks(bq)

    class LoadWithToken(LoadClicks):
        def output(self) -> BigQueryTarget:
            return BigQueryTarget("proj", "analytics", "clicks", client=client)

    with caplog.at_level(logging.DEBUG):
        assert luigi.build([LoadWithToken()], local_scheduler=True)

    assert f"Bearer {secret}" in bq.authorizations
    assert secret not in caplog.text
    assert secret not in repr(client) + repr(LoadWithToken()) + str(LoadWithToken().output())


class LoadLocal(LoadClicks):
    def requires(self) -> Source:
        return Source("/data/clicks.json")


def test_a_load_from_a_path_outside_cloud_storage_fails_naming_it(bq: BigQueryStandIn):
    bq.objects["/data/clicks.json"] = b"{}"  # the input is there, but not where BigQuery can read it

    error = build_failing(LoadLocal())

    assert isinstance(error, ValueError)
    assert str(error) == (
        "LoadLocal(day=2026-01-01): BigQuery loads from Cloud Storage only, "
        "and '/data/clicks.json' is not a gs:// URI"
    )
    assert not bq.jobs


def test_an_extract_whose_input_is_not_one_bigquery_table_fails_naming_it(bq: BigQueryStandIn):
    class ExportFiles(ExportClicks):
        def requires(self) -> Source:
            return Source("gs://bucket/clicks.json")

    put_clicks(bq)
    bq.objects["gs://bucket/clicks.json"] = b"{}"

    error = build_failing(ExportFiles())

    assert isinstance(error, TypeError)
    assert str(error).startswith(
        "ExportFiles(destination_format=CSV) must require exactly one task outputting"
    )
