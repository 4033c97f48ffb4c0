"""Google BigQuery for Luigi: tables as targets, and load, query, view, extract and copy jobs.

Needs the ``bigquery`` extra (google-api-python-client, whose discovery document for ``bigquery v2``
ships inside it), imported when a client first calls BigQuery, not at import. `BigQueryClient` builds
``discovery.build("bigquery", "v2")`` with `luigi.contrib.gcp`'s credentials; keyword arguments it does
not know go to ``discovery.build`` (``client_options={"api_endpoint": ...}`` for another endpoint).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

import luigi
import luigi.target
from luigi.contrib.gcp import get_authenticate_kwargs
from luigi.contrib.optional import MissingExtraError, require
from luigi.task import flatten, task_from_parameters

__all__ = [
    "BQDataset",
    "BQTable",
    "BigQueryClient",
    "BigQueryCreateViewTask",
    "BigQueryExecutionError",
    "BigQueryExtractTask",
    "BigQueryLoadTask",
    "BigQueryLocationError",
    "BigQueryRunQueryTask",
    "BigQueryTarget",
    "BigQueryUnreachableError",
    "Compression",
    "CreateDisposition",
    "DestinationFormat",
    "Encoding",
    "ExternalBigQueryTask",
    "FieldDelimiter",
    "MixinBigQueryBulkComplete",
    "PrintHeader",
    "QueryMode",
    "SourceFormat",
    "WriteDisposition",
    "bigquery",
    "bq_retry",
]

logger = logging.getLogger("luigi-interface")

_FEATURE = "luigi.contrib.bigquery"
_PACKAGE = "google-api-python-client"
_NOT_FOUND = 404
_CONFLICT = 409
_RETRY_ATTEMPTS = 3  # Luigi's bq_retry: three attempts in all, then the last error
_RETRY_WAIT_MAX = 10.0
_POLL_RETRIES = 10  # googleapiclient's own retries of a job status read (5xx, 429, lost connections)


class CreateDisposition:
    CREATE_IF_NEEDED = "CREATE_IF_NEEDED"
    CREATE_NEVER = "CREATE_NEVER"


class WriteDisposition:
    WRITE_TRUNCATE = "WRITE_TRUNCATE"
    WRITE_APPEND = "WRITE_APPEND"
    WRITE_EMPTY = "WRITE_EMPTY"


class QueryMode:
    INTERACTIVE = "INTERACTIVE"
    BATCH = "BATCH"


class SourceFormat:
    AVRO = "AVRO"
    CSV = "CSV"
    DATASTORE_BACKUP = "DATASTORE_BACKUP"
    NEWLINE_DELIMITED_JSON = "NEWLINE_DELIMITED_JSON"
    PARQUET = "PARQUET"


class FieldDelimiter:
    COMMA = ","
    TAB = "\t"
    PIPE = "|"


class PrintHeader:
    TRUE = True
    FALSE = False


class DestinationFormat:
    AVRO = "AVRO"
    CSV = "CSV"
    NEWLINE_DELIMITED_JSON = "NEWLINE_DELIMITED_JSON"


class Compression:
    GZIP = "GZIP"
    NONE = "NONE"


class Encoding:
    UTF_8 = "UTF-8"
    ISO_8859_1 = "ISO-8859-1"


class BQDataset(NamedTuple):
    project_id: str
    dataset_id: str
    location: str | None


class BQTable(NamedTuple):
    project_id: str
    dataset_id: str
    table_id: str
    location: str | None

    @property
    def dataset(self) -> BQDataset:
        return BQDataset(self.project_id, self.dataset_id, self.location)

    @property
    def uri(self) -> str:
        return f"bq://{self.project_id}/{self.dataset_id}/{self.table_id}"


class bigquery(luigi.Config):  # noqa: N801  # the [bigquery] section
    """The ``[bigquery]`` section (ours; Luigi hard-codes these): seconds between two reads of a job's
    status, and before the second attempt of a retried call (doubled for each next one, at most 10)."""

    job_poll_interval = luigi.FloatParameter(default=5.0)
    retry_wait = luigi.FloatParameter(default=1.0)


class BigQueryExecutionError(Exception):
    """A BigQuery job ended DONE with an ``errorResult``: its reason and message are in the text."""

    def __init__(self, job_id: str, error_message: Any) -> None:
        super().__init__(f"BigQuery job {job_id} failed: {error_message}")
        self.job_id = job_id
        self.error_message = error_message


class BigQueryLocationError(Exception):
    """A dataset exists in another location than the one a `BQDataset` asks for."""


class BigQueryUnreachableError(ConnectionError):
    """BigQuery's endpoint did not answer (refused, reset, timed out): the message names the endpoint."""


def _http_error() -> type[Exception]:
    return require("googleapiclient.errors", "bigquery", _FEATURE, _PACKAGE).HttpError


def _status(exc: BaseException) -> int | None:
    """The HTTP status of a googleapiclient ``HttpError``; None for any other error."""
    return int(exc.resp.status) if isinstance(exc, _http_error()) else None  # type: ignore[attr-defined]


def _is_retryable(exc: BaseException) -> bool:
    """A 5xx answer, or the connection failing (Luigi's httplib2, I/O, timeout and broken pipe errors)."""
    if isinstance(exc, MissingExtraError):  # nothing to retry, and no library to ask about the error
        return False
    if isinstance(exc, OSError):  # IOError, TimeoutError, BrokenPipeError, BigQueryUnreachableError
        return True
    if isinstance(exc, require("httplib2", "bigquery", _FEATURE, _PACKAGE).HttpLib2Error):
        return True
    status = _status(exc)
    return status is not None and status >= 500


_Method = TypeVar("_Method", bound=Callable[..., Any])


def bq_retry(method: _Method) -> _Method:
    """Retry a `BigQueryClient` method on 5xx answers and connection errors: three attempts, waiting
    ``[bigquery] retry_wait`` seconds and then double, and a fresh API client after each failure."""

    @functools.wraps(method)
    def retried(client: BigQueryClient, *args: Any, **kwargs: Any) -> Any:
        attempt = 1
        while True:
            try:
                return method(client, *args, **kwargs)
            except Exception as exc:  # _is_retryable decides; anything else re-raises at once
                if attempt >= _RETRY_ATTEMPTS or not _is_retryable(exc):
                    raise
                logger.warning("BigQuery call %s failed (attempt %d): %s", method.__name__, attempt, exc)
                client._initialise_client()
                time.sleep(min(bigquery().retry_wait * 2 ** (attempt - 1), _RETRY_WAIT_MAX))
                attempt += 1

    return retried  # type: ignore[return-value]


def _table_reference(table: BQTable) -> dict[str, str]:
    return {"projectId": table.project_id, "datasetId": table.dataset_id, "tableId": table.table_id}


class BigQueryClient:
    """BigQuery's REST API v2 through googleapiclient: datasets, tables, views and jobs.

    Args:
        oauth_credentials: google-auth credentials; else ``http_``; else Google's default credentials.
        descriptor: a discovery document (JSON) to build from instead of the one googleapiclient ships.
        discovery_build_kwargs: more arguments for ``discovery.build`` (``client_options``, ...).
    """

    def __init__(
        self,
        oauth_credentials: Any = None,
        descriptor: str = "",
        http_: Any = None,
        **discovery_build_kwargs: Any,
    ) -> None:
        self.oauth_credentials = oauth_credentials
        self.descriptor = descriptor
        self.http_ = http_
        self.discovery_build_kwargs = discovery_build_kwargs
        self._client: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"  # never the credentials

    @property
    def client(self) -> Any:
        """The ``bigquery v2`` discovery resource, built (credentials looked for) on first use."""
        if self._client is None:
            self._initialise_client()
        return self._client

    @client.setter
    def client(self, resource: Any) -> None:
        self._client = resource

    def _initialise_client(self) -> None:
        discovery = require("googleapiclient.discovery", "bigquery", _FEATURE, _PACKAGE)
        authenticate = get_authenticate_kwargs(self.oauth_credentials, self.http_)
        if self.descriptor:
            self._client = discovery.build_from_document(
                self.descriptor, **authenticate, **self.discovery_build_kwargs
            )
            return
        options = {"cache_discovery": False, **self.discovery_build_kwargs}
        self._client = discovery.build("bigquery", "v2", **authenticate, **options)

    def _execute(self, request: Any, **kwargs: Any) -> Any:
        """Send ``request``; a connection that fails becomes BigQueryUnreachableError naming the endpoint."""
        httplib2 = require("httplib2", "bigquery", _FEATURE, _PACKAGE)
        try:
            return request.execute(**kwargs)
        except (OSError, httplib2.HttpLib2Error) as exc:
            url = urlsplit(request.uri)  # the query may carry an API key: never shown
            raise BigQueryUnreachableError(
                f"cannot reach BigQuery at {url.scheme}://{url.netloc}{url.path}: {exc} "
                "(check the network, or the api_endpoint given in client_options)"
            ) from exc

    @bq_retry
    def dataset_exists(self, dataset: BQDataset) -> bool:
        """Whether the dataset exists; BigQueryLocationError when it does in another location."""
        request = self.client.datasets().get(projectId=dataset.project_id, datasetId=dataset.dataset_id)
        try:
            response = self._execute(request)
        except _http_error() as exc:
            if _status(exc) == _NOT_FOUND:
                return False
            raise
        fetched = response.get("location")
        if dataset.location is not None and fetched is not None and fetched != dataset.location:
            raise BigQueryLocationError(
                f"Dataset already exists with regional location {fetched}. Can't use {dataset.location}."
            )
        return True

    @bq_retry
    def table_exists(self, table: BQTable) -> bool:
        """Whether the table (or view) exists, its dataset first."""
        if not self.dataset_exists(table.dataset):
            return False
        try:
            self._execute(self.client.tables().get(**_table_reference(table)))
        except _http_error() as exc:
            if _status(exc) == _NOT_FOUND:
                return False
            raise
        return True

    def make_dataset(
        self, dataset: BQDataset, raise_if_exists: bool = False, body: dict[str, Any] | None = None
    ) -> None:
        """Create the dataset (in its location, if it names one) with ``body``'s other fields."""
        body = dict(body or {})
        body["datasetReference"] = {"projectId": dataset.project_id, "datasetId": dataset.dataset_id}
        if dataset.location is not None:
            body["location"] = dataset.location
        try:
            self._execute(self.client.datasets().insert(projectId=dataset.project_id, body=body))
        except _http_error() as exc:
            if _status(exc) != _CONFLICT:
                raise
            if raise_if_exists:
                raise luigi.target.FileAlreadyExists(f"BigQuery dataset {dataset} already exists") from exc

    def delete_dataset(self, dataset: BQDataset, delete_nonempty: bool = True) -> None:
        """Delete the dataset if it exists, with its tables unless ``delete_nonempty`` is False."""
        if not self.dataset_exists(dataset):
            return
        datasets = self.client.datasets()
        self._execute(
            datasets.delete(
                projectId=dataset.project_id, datasetId=dataset.dataset_id, deleteContents=delete_nonempty
            )
        )

    def delete_table(self, table: BQTable) -> None:
        """Delete the table if it exists."""
        if not self.table_exists(table):
            return
        self._execute(self.client.tables().delete(**_table_reference(table)))

    def _pages(self, collection: Any, request: Any, items: str) -> Iterator[dict[str, Any]]:
        """Every item of a listing, following its pages."""
        while request is not None:
            response = self._execute(request)
            yield from response.get(items, [])
            request = collection.list_next(request, response)

    def list_datasets(self, project_id: str) -> Iterator[str]:
        """The ids of the project's datasets."""
        datasets = self.client.datasets()
        for found in self._pages(datasets, datasets.list(projectId=project_id, maxResults=1000), "datasets"):
            yield found["datasetReference"]["datasetId"]

    def list_tables(self, dataset: BQDataset) -> Iterator[str]:
        """The ids of the dataset's tables and views."""
        tables = self.client.tables()
        request = tables.list(projectId=dataset.project_id, datasetId=dataset.dataset_id, maxResults=1000)
        for found in self._pages(tables, request, "tables"):
            yield found["tableReference"]["tableId"]

    def get_view(self, table: BQTable) -> str | None:
        """The query of the view, or None when there is no such table or it is not a view."""
        try:
            response = self._execute(self.client.tables().get(**_table_reference(table)))
        except _http_error() as exc:
            if _status(exc) == _NOT_FOUND:
                return None
            raise
        return response["view"]["query"] if "view" in response else None

    def update_view(self, table: BQTable, view: str) -> None:
        """Make the table a view of the query ``view``: its definition replaced, or a new view."""
        body = {"tableReference": _table_reference(table), "view": {"query": view}}
        tables = self.client.tables()
        if self.table_exists(table):
            self._execute(tables.update(**_table_reference(table), body=body))
        else:
            self._execute(tables.insert(projectId=table.project_id, datasetId=table.dataset_id, body=body))

    def run_job(self, project_id: str, body: dict[str, Any], dataset: BQDataset | None = None) -> str:
        """Start the job ``body`` in the project (creating ``dataset`` first if missing), wait until it is
        DONE and return its id; BigQueryExecutionError when it ended with an error."""
        if dataset is not None and not self.dataset_exists(dataset):
            self.make_dataset(dataset)
        started = self._execute(self.client.jobs().insert(projectId=project_id, body=body))
        reference = started["jobReference"]
        job_id = str(reference["jobId"])
        logger.info("Started BigQuery job %s:%s", project_id, job_id)
        # Outside the US and EU multi-regions BigQuery finds a job only with its location.
        where = {"location": reference["location"]} if reference.get("location") else {}
        while True:
            request = self.client.jobs().get(projectId=project_id, jobId=job_id, **where)
            status = self._execute(request, num_retries=_POLL_RETRIES)["status"]
            if status["state"] == "DONE":
                if status.get("errorResult"):
                    raise BigQueryExecutionError(job_id, status["errorResult"])
                return job_id
            logger.info("Waiting for BigQuery job %s:%s (%s)", project_id, job_id, status["state"])
            time.sleep(bigquery().job_poll_interval)

    def copy(
        self,
        source_table: BQTable,
        dest_table: BQTable,
        create_disposition: str = CreateDisposition.CREATE_IF_NEEDED,
        write_disposition: str = WriteDisposition.WRITE_TRUNCATE,
    ) -> str:
        """Copy one table into another with a copy job; returns the job's id."""
        job = {
            "configuration": {
                "copy": {
                    "sourceTable": _table_reference(source_table),
                    "destinationTable": _table_reference(dest_table),
                    "createDisposition": create_disposition,
                    "writeDisposition": write_disposition,
                }
            }
        }
        return self.run_job(dest_table.project_id, job, dataset=dest_table.dataset)


class BigQueryTarget(luigi.target.Target):
    """A BigQuery table (or view): it exists when BigQuery has it."""

    def __init__(
        self,
        project_id: str,
        dataset_id: str,
        table_id: str,
        client: BigQueryClient | None = None,
        location: str | None = None,
    ) -> None:
        self.table = BQTable(project_id, dataset_id, table_id, location)
        self.client = client or BigQueryClient()

    @classmethod
    def from_bqtable(cls, table: BQTable, client: BigQueryClient | None = None) -> BigQueryTarget:
        """A target for ``table`` (as in Luigi, without its location)."""
        return cls(table.project_id, table.dataset_id, table.table_id, client=client)

    def exists(self) -> bool:
        return self.client.table_exists(self.table)

    def __str__(self) -> str:
        return str(self.table)


def _bigquery_output(task: luigi.Task) -> BigQueryTarget:
    output = task.output()
    if not isinstance(output, BigQueryTarget):
        raise TypeError(f"{task} must output a luigi.contrib.bigquery.BigQueryTarget, not {output!r}")
    return output


def _cloud_storage_uris(task: luigi.Task, uris: list[str], what: str) -> list[str]:
    """``uris`` when all of them are ``gs://`` URIs, as BigQuery needs; else a ValueError naming one."""
    for uri in uris:
        if not uri.startswith("gs://"):
            raise ValueError(f"{task}: BigQuery {what} Cloud Storage only, and {uri!r} is not a gs:// URI")
    return uris


class MixinBigQueryBulkComplete:
    """``bulk_complete`` for tasks outputting one BigQueryTarget: one table listing per dataset, not one
    ``tables.get`` per task (what range tasks ask)."""

    @classmethod
    def bulk_complete(cls, parameter_tuples: Iterable[Any]) -> Iterator[Any]:
        candidates = [(task_from_parameters(cls, parameters), parameters) for parameters in parameter_tuples]
        if not candidates:
            return
        targets = [(_bigquery_output(task), parameters) for task, parameters in candidates]
        client = targets[0][0].client
        datasets = {target.table.dataset for target, _ in targets}
        logger.info("Checking BigQuery datasets %s for the tables present", sorted(map(str, datasets)))
        present = {
            dataset: set(client.list_tables(dataset))
            for dataset in datasets
            if client.dataset_exists(dataset)
        }
        for target, parameters in targets:
            if target.table.table_id in present.get(target.table.dataset, ()):
                yield parameters


class _BigQueryJob:
    """What every job task shares: the hook that sees the job's configuration last, and the run."""

    def configure_job(self, configuration: dict[str, Any]) -> dict[str, Any]:
        """The job's ``configuration`` (``{"load": {...}}`` and so on) as sent: override to add fields the
        task's properties do not cover (``labels``, ``clustering``, ...)."""
        return configuration

    def _run_job(self, client: BigQueryClient, table: BQTable, configuration: dict[str, Any]) -> str:
        job = {"configuration": self.configure_job(configuration)}
        return client.run_job(table.project_id, job, dataset=table.dataset)


class BigQueryLoadTask(MixinBigQueryBulkComplete, _BigQueryJob, luigi.Task):
    """Load the Cloud Storage files that are this task's input into its output table."""

    @property
    def source_format(self) -> str:
        return SourceFormat.NEWLINE_DELIMITED_JSON

    @property
    def encoding(self) -> str:
        return Encoding.UTF_8

    @property
    def write_disposition(self) -> str:
        return WriteDisposition.WRITE_EMPTY

    @property
    def schema(self) -> list[dict[str, Any]]:
        """The table's fields (``[{"name": ..., "type": ...}]``); empty: BigQuery detects them."""
        return []

    @property
    def max_bad_records(self) -> int:
        return 0

    @property
    def field_delimiter(self) -> str:
        return FieldDelimiter.COMMA

    @property
    def skip_leading_rows(self) -> int:
        return 0

    @property
    def allow_jagged_rows(self) -> bool:
        return False

    @property
    def ignore_unknown_values(self) -> bool:
        return False

    @property
    def allow_quoted_new_lines(self) -> bool:
        return False

    def source_uris(self) -> list[str]:
        """The ``gs://`` paths of the input targets."""
        return [target.path for target in flatten(self.input())]

    def _load_configuration(self, output: BigQueryTarget) -> dict[str, Any]:
        load: dict[str, Any] = {
            "destinationTable": _table_reference(output.table),
            "encoding": self.encoding,
            "sourceFormat": self.source_format,
            "writeDisposition": self.write_disposition,
            "sourceUris": _cloud_storage_uris(self, self.source_uris(), "loads from"),
            "maxBadRecords": self.max_bad_records,
            "ignoreUnknownValues": self.ignore_unknown_values,
        }
        if self.source_format == SourceFormat.CSV:
            load["fieldDelimiter"] = self.field_delimiter
            load["skipLeadingRows"] = self.skip_leading_rows
            load["allowJaggedRows"] = self.allow_jagged_rows
            load["allowQuotedNewlines"] = self.allow_quoted_new_lines
        if self.schema:
            load["schema"] = {"fields": self.schema}
        else:
            load["autodetect"] = True
        return {"load": load}

    def run(self) -> None:
        output = _bigquery_output(self)
        self._run_job(output.client, output.table, self._load_configuration(output))


class BigQueryRunQueryTask(MixinBigQueryBulkComplete, _BigQueryJob, luigi.Task):
    """Run ``query`` and write its result to the output table."""

    @property
    def write_disposition(self) -> str:
        return WriteDisposition.WRITE_TRUNCATE

    @property
    def create_disposition(self) -> str:
        return CreateDisposition.CREATE_IF_NEEDED

    @property
    def flatten_results(self) -> bool:
        return True

    @property
    def query(self) -> str:
        """The SQL to run (legacy SQL unless ``use_legacy_sql`` is False)."""
        raise NotImplementedError(f"{type(self).__name__} must define the query it runs")

    @property
    def query_mode(self) -> str:
        return QueryMode.INTERACTIVE

    @property
    def udf_resource_uris(self) -> list[str]:
        return []

    @property
    def use_legacy_sql(self) -> bool:
        return True

    def run(self) -> None:
        output = _bigquery_output(self)
        query = self.query
        if not query:
            raise ValueError(f"{self}: the query is empty; give the SQL to run in its query property")
        logger.info("Running BigQuery query into %s (%s): %s", output, self.write_disposition, query)
        configuration = {
            "query": {
                "query": query,
                "priority": self.query_mode,
                "destinationTable": _table_reference(output.table),
                "allowLargeResults": True,
                "createDisposition": self.create_disposition,
                "writeDisposition": self.write_disposition,
                "flattenResults": self.flatten_results,
                "userDefinedFunctionResources": [{"resourceUri": uri} for uri in self.udf_resource_uris],
                "useLegacySql": self.use_legacy_sql,
            }
        }
        self._run_job(output.client, output.table, configuration)


class BigQueryCreateViewTask(luigi.Task):
    """Make the output table a view of ``view``: done when the view exists with exactly that query."""

    @property
    def view(self) -> str:
        """The view's SQL."""
        raise NotImplementedError(f"{type(self).__name__} must define the view's query")

    def complete(self) -> bool:
        output = _bigquery_output(self)
        return output.exists() and output.client.get_view(output.table) == self.view

    def run(self) -> None:
        output = _bigquery_output(self)
        if not self.view:
            raise ValueError(f"{self}: the view is empty; give its SQL in the view property")
        output.client.update_view(output.table, self.view)


class ExternalBigQueryTask(MixinBigQueryBulkComplete, luigi.ExternalTask):
    """A BigQuery table made outside Luigi: done when it exists."""


class BigQueryExtractTask(_BigQueryJob, luigi.Task):
    """Export the input table (one BigQueryTarget) to the Cloud Storage files that are this task's output."""

    @property
    def destination_uris(self) -> list[str]:
        """The ``gs://`` paths of the output targets (a ``*`` in one lets BigQuery shard the export)."""
        return [target.path for target in flatten(self.output())]

    @property
    def print_header(self) -> bool:
        return PrintHeader.TRUE

    @property
    def field_delimiter(self) -> str:
        return FieldDelimiter.COMMA

    @property
    def destination_format(self) -> str:
        return DestinationFormat.CSV

    @property
    def compression(self) -> str:
        return Compression.NONE

    def _source(self) -> BigQueryTarget:
        inputs = flatten(self.input())
        if len(inputs) != 1 or not isinstance(inputs[0], BigQueryTarget):
            raise TypeError(
                f"{self} must require exactly one task outputting a BigQueryTarget, not {inputs!r}"
            )
        source: BigQueryTarget = inputs[0]
        return source

    def run(self) -> None:
        source = self._source()
        extract: dict[str, Any] = {
            "sourceTable": _table_reference(source.table),
            "destinationUris": _cloud_storage_uris(self, self.destination_uris, "extracts to"),
            "destinationFormat": self.destination_format,
            "compression": self.compression,
        }
        if self.destination_format == DestinationFormat.CSV:
            extract["printHeader"] = self.print_header
            extract["fieldDelimiter"] = self.field_delimiter
        self._run_job(source.client, source.table, {"extract": extract})


# Luigi's older spellings, still importable.
BigqueryClient = BigQueryClient
BigqueryTarget = BigQueryTarget
MixinBigqueryBulkComplete = MixinBigQueryBulkComplete
BigqueryLoadTask = BigQueryLoadTask
BigqueryRunQueryTask = BigQueryRunQueryTask
BigqueryCreateViewTask = BigQueryCreateViewTask
ExternalBigqueryTask = ExternalBigQueryTask
