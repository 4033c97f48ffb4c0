"""A STAND-IN for Google BigQuery's REST API v2 (BigQuery cannot run here; see doc/contrib.md).

It answers exactly the calls ``luigi.contrib.bigquery`` makes through googleapiclient's ``bigquery v2``
discovery client, at that document's paths under ``/bigquery/v2/``: datasets get, insert, list (paged)
and delete; tables get, insert, list (paged), delete, patch and update; jobs insert and get. Jobs move
PENDING, RUNNING, DONE, one step per get; at DONE a job takes effect (load, query, extract, copy) or
ends with ``status.errorResult`` and ``errors`` as BigQuery reports them (missing tables and sources,
the create and write dispositions, a query the test marks failing). Errors are Google's
``{"error": {"code", "message", "errors": [{"reason", ...}], "status"}}``. SQL is not run: a query's
rows are those the test gives for its text. ``objects`` stands for the Cloud Storage that load jobs
read and extract jobs write (``gs://bucket/name`` to bytes); `StorageTarget` is a target on it.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import re
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import luigi
import luigi.target
from helpers.json_http import JsonHandler, MethodRouter, serving
from helpers.scripted import Scripted, ScriptedJobs

__all__ = ["BigQueryStandIn", "StorageTarget", "bigquery_standin"]

_PATH = re.compile(r"^/bigquery/v2/projects/(?P<project>[^/]+)/(?P<rest>.+)$")
_STATUS = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class JobFailed(Exception):
    """A job ends DONE with this ``errorResult`` reason and message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Job(Scripted):
    project: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    applied: bool = False


@dataclass
class Table:
    resource: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)


class BigQueryStandIn(ScriptedJobs):
    """Datasets, tables with their rows, jobs, the Cloud Storage objects jobs use, and every request."""

    def __init__(self) -> None:
        super().__init__()
        self.url = ""
        self.job_script = ["PENDING", "RUNNING", "DONE"]
        self.page_size = 2  # small, so that listings take several pages
        self.datasets: dict[tuple[str, str], dict[str, Any]] = {}
        self.tables: dict[tuple[str, str, str], Table] = {}
        self.jobs: dict[str, Job] = {}
        self.objects: dict[str, bytes] = {}
        self.query_rows: dict[str, list[dict[str, Any]]] = {}
        self.failing_queries: dict[str, tuple[str, str]] = {}
        self.authorizations: list[str] = []
        self.requests: list[str] = []  # "METHOD /path" of every request, in order
        self.downloads: list[tuple[str, int]] = []  # (path, bytes fetched) of each StorageFileSystem.download
        self.failures_ahead: list[int] = []  # the next requests get these 5xx answers (backendError)

    @property
    def api_endpoint(self) -> str:
        return self.url + "/bigquery/v2/"

    def client_options(self) -> dict[str, str]:
        return {"api_endpoint": self.api_endpoint}

    def add_dataset(self, project: str, dataset: str, location: str = "US") -> None:
        self.datasets[(project, dataset)] = _dataset_resource(project, dataset, location)

    def add_table(
        self, project: str, dataset: str, table: str, rows: list[dict[str, Any]] | None = None
    ) -> None:
        self.tables[(project, dataset, table)] = Table(
            _table_resource(project, dataset, table), list(rows or [])
        )

    def rows(self, project: str, dataset: str, table: str) -> list[dict[str, Any]]:
        return self.tables[(project, dataset, table)].rows

    def wait_for_job_state(self, state: str, timeout: float = 30) -> str:
        return self.wait_until_seen(self.jobs, state, "BigQuery job", timeout)


def _error(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    detail = {"message": message, "domain": "global", "reason": reason}
    return code, {"error": {"code": code, "message": message, "errors": [detail], "status": _STATUS[code]}}


def _dataset_resource(project: str, dataset: str, location: str) -> dict[str, Any]:
    reference = {"projectId": project, "datasetId": dataset}
    return {"kind": "bigquery#dataset", "id": f"{project}:{dataset}", "datasetReference": reference,
            "location": location}  # fmt: skip


def _table_resource(project: str, dataset: str, table: str, **fields: Any) -> dict[str, Any]:
    reference = {"projectId": project, "datasetId": dataset, "tableId": table}
    resource = {"kind": "bigquery#table", "id": f"{project}:{dataset}.{table}", "tableReference": reference,
                "type": "TABLE", **fields}  # fmt: skip
    if "view" in resource:
        resource["type"] = "VIEW"
    return resource


def _page(items: list[dict[str, Any]], query: dict[str, list[str]], size: int, key: str) -> dict[str, Any]:
    start = int(query.get("pageToken", ["0"])[0])
    size = min(size, int(query.get("maxResults", [str(size)])[0]))
    page: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        page["nextPageToken"] = str(start + size)
    return page


# ---- what a job does when it reaches DONE -----------------------------------------------------------


def _key(reference: dict[str, str]) -> tuple[str, str, str]:
    return reference["projectId"], reference["datasetId"], reference["tableId"]


def _named(key: tuple[str, ...]) -> str:
    return f"{key[0]}:{'.'.join(key[1:])}"


def _write(
    state: BigQueryStandIn, reference: dict[str, str], rows: list[dict[str, Any]], config: dict[str, Any]
):
    """Write ``rows`` to the table under the job's create and write dispositions, as BigQuery does."""
    key = _key(reference)
    if key[:2] not in state.datasets:
        raise JobFailed("notFound", f"Not found: Dataset {_named(key[:2])}")
    table = state.tables.get(key)
    if table is None:
        if config.get("createDisposition", "CREATE_IF_NEEDED") == "CREATE_NEVER":
            raise JobFailed("notFound", f"Not found: Table {_named(key)}")
        table = state.tables[key] = Table(_table_resource(*key))
    disposition = config.get("writeDisposition", "WRITE_EMPTY")
    if disposition == "WRITE_EMPTY" and table.rows:
        raise JobFailed("duplicate", f"Already Exists: Table {_named(key)}")
    table.rows = list(rows) if disposition != "WRITE_APPEND" else table.rows + list(rows)
    if "schema" in config:
        table.resource["schema"] = config["schema"]
    table.resource["numRows"] = str(len(table.rows))


def _read_sources(state: BigQueryStandIn, load: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for uri in load["sourceUris"]:
        matched = sorted(name for name in state.objects if fnmatch.fnmatchcase(name, uri))
        if not matched:
            raise JobFailed("notFound", f"Not found: Uris {uri}")
        for name in matched:
            rows.extend(_parse(state.objects[name], load))
    return rows


def _parse(data: bytes, load: dict[str, Any]) -> list[dict[str, Any]]:
    source_format = load.get("sourceFormat", "CSV")
    if source_format == "NEWLINE_DELIMITED_JSON":
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    if source_format == "CSV":
        lines = data.decode().splitlines()[int(load.get("skipLeadingRows", 0)) :]
        names = [column["name"] for column in load.get("schema", {}).get("fields", [])]
        return [
            dict(zip(names, row, strict=True))
            for row in csv.reader(lines, delimiter=load.get("fieldDelimiter", ","))
        ]
    if source_format == "AVRO":
        import fastavro

        return [dict(record) for record in fastavro.reader(io.BytesIO(data))]
    raise NotImplementedError(f"the stand-in reads no {source_format} files")


def _extract(state: BigQueryStandIn, extract: dict[str, Any]) -> None:
    key = _key(extract["sourceTable"])
    if key not in state.tables:
        raise JobFailed("notFound", f"Not found: Table {_named(key)}")
    rows = state.tables[key].rows
    if extract.get("destinationFormat", "CSV") == "CSV":
        out = io.StringIO()
        writer = csv.writer(out, delimiter=extract.get("fieldDelimiter", ","), lineterminator="\n")
        columns = list(rows[0]) if rows else []
        if extract.get("printHeader", True):
            writer.writerow(columns)
        writer.writerows([row[column] for column in columns] for row in rows)
        data = out.getvalue().encode()
    else:
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    for uri in extract["destinationUris"]:
        state.objects[uri.replace("*", "000000000000")] = data


def _take_effect(state: BigQueryStandIn, job: Job) -> None:
    config = job.body["configuration"]
    try:
        if "load" in config:
            _write(
                state,
                config["load"]["destinationTable"],
                _read_sources(state, config["load"]),
                config["load"],
            )
        elif "query" in config:
            query = config["query"]
            if query["query"] in state.failing_queries:
                raise JobFailed(*state.failing_queries[query["query"]])
            _write(state, query["destinationTable"], state.query_rows.get(query["query"], []), query)
        elif "extract" in config:
            _extract(state, config["extract"])
        else:
            copy = config["copy"]
            source = state.tables.get(_key(copy["sourceTable"]))
            if source is None:
                raise JobFailed("notFound", f"Not found: Table {_named(_key(copy['sourceTable']))}")
            _write(state, copy["destinationTable"], source.rows, copy)
    except JobFailed as failed:
        job.error = {"reason": failed.reason, "message": str(failed)}


def _job_resource(job_id: str, job: Job) -> dict[str, Any]:
    status: dict[str, Any] = {"state": job.current}
    if job.current == "DONE" and job.error:
        status["errorResult"] = job.error
        status["errors"] = [job.error]
    reference = {"projectId": job.project, "jobId": job_id, "location": "US"}
    return {"kind": "bigquery#job", "id": f"{job.project}:US.{job_id}", "jobReference": reference,
            "configuration": job.body["configuration"], "status": status}  # fmt: skip


def _jobs(state: BigQueryStandIn, method: str, where: dict[str, str], body: dict[str, Any]):
    if method == "POST":
        config = body.get("configuration", {})
        if not {"load", "query", "extract", "copy"} & set(config):
            return _error(
                400, "invalid", "Job configuration must contain exactly one job-specific configuration"
            )
        job_id = body.get("jobReference", {}).get("jobId") or f"job_{uuid.uuid4().hex}"
        job = state.add(
            state.jobs, job_id, Job(script=list(state.job_script), project=where["project"], body=body)
        )
        return 200, _job_resource(job_id, job)
    with state.lock:
        job = state.jobs.get(where["job"])
        if job is None:
            return _error(404, "notFound", f"Not found: Job {where['project']}:US.{where['job']}")
        job.step = min(job.step + 1, len(job.script) - 1)
        if job.current == "DONE" and not job.applied:
            job.applied = True
            _take_effect(state, job)
        state.changed.notify_all()
        return 200, _job_resource(where["job"], job)


# ---- datasets and tables ----------------------------------------------------------------------------


def _datasets(state: BigQueryStandIn, method: str, where: dict[str, str], body: dict[str, Any], query):
    project, name = where["project"], where["dataset"]
    if not name and method == "GET":
        found = [ds for (p, _), ds in sorted(state.datasets.items()) if p == project]
        return 200, _page(found, query, state.page_size, "datasets")
    if method == "POST":
        name = body["datasetReference"]["datasetId"]
        if (project, name) in state.datasets:
            return _error(409, "duplicate", f"Already Exists: Dataset {project}:{name}")
        state.add_dataset(project, name, body.get("location", "US"))
        return 200, state.datasets[(project, name)]
    if (project, name) not in state.datasets:
        return _error(404, "notFound", f"Not found: Dataset {project}:{name}")
    if method == "DELETE":
        inside = [key for key in state.tables if key[:2] == (project, name)]
        if inside and query.get("deleteContents", ["false"])[0] != "true":
            return _error(400, "resourceInUse", f"Dataset {project}:{name} is still in use")
        for key in inside:
            del state.tables[key]
        del state.datasets[(project, name)]
        return 204, {}
    return 200, state.datasets[(project, name)]


def _tables(state: BigQueryStandIn, method: str, where: dict[str, str], body: dict[str, Any], query):
    project, dataset, name = where["project"], where["dataset"], where["table"]
    if (project, dataset) not in state.datasets:
        return _error(404, "notFound", f"Not found: Dataset {project}:{dataset}")
    if not name and method == "GET":
        found = [t.resource for key, t in sorted(state.tables.items()) if key[:2] == (project, dataset)]
        return 200, _page(found, query, state.page_size, "tables")
    if method == "POST":
        name = body["tableReference"]["tableId"]
        if (project, dataset, name) in state.tables:
            return _error(409, "duplicate", f"Already Exists: Table {project}:{dataset}.{name}")
        fields = {k: v for k, v in body.items() if k != "tableReference"}
        state.tables[(project, dataset, name)] = Table(_table_resource(project, dataset, name, **fields))
        return 200, state.tables[(project, dataset, name)].resource
    table = state.tables.get((project, dataset, name))
    if table is None:
        return _error(404, "notFound", f"Not found: Table {project}:{dataset}.{name}")
    if method == "DELETE":
        del state.tables[(project, dataset, name)]
        return 204, {}
    if method in ("PATCH", "PUT"):
        kept = table.resource if method == "PATCH" else {}
        fields = {**kept, **{k: v for k, v in body.items() if k != "tableReference"}}
        fields = {k: v for k, v in fields.items() if k not in ("kind", "id", "tableReference", "type")}
        table.resource = _table_resource(project, dataset, name, **fields)
    return 200, table.resource


def _handler(state: BigQueryStandIn) -> type[JsonHandler]:
    class Handler(MethodRouter):
        def route(self, method: str) -> None:
            state.authorizations.append(self.headers.get("Authorization", ""))
            url = urlsplit(self.path)
            state.requests.append(f"{method} {url.path}")
            match = _PATH.match(url.path)
            body = self.read_json() if method in ("POST", "PATCH", "PUT") else {}
            if state.failures_ahead:
                self.reply(*_error(state.failures_ahead.pop(0), "backendError", "Backend error, retry"))
                return
            if match is None:
                self.reply(*_error(404, "notFound", f"the stand-in has no {method} {url.path}"))
                return
            parts = match["rest"].split("/")
            where = {"project": match["project"]}
            if parts[0] == "jobs" and len(parts) <= 2:
                where["job"] = parts[1] if len(parts) == 2 else ""
                status, answer = _jobs(state, method, where, body)
            elif parts[0] == "datasets" and len(parts) <= 2:
                where["dataset"] = parts[1] if len(parts) == 2 else ""
                status, answer = _datasets(state, method, where, body, parse_qs(url.query))
            elif parts[0] == "datasets" and parts[2:3] == ["tables"] and len(parts) <= 4:
                where.update(dataset=parts[1], table=parts[3] if len(parts) == 4 else "")
                status, answer = _tables(state, method, where, body, parse_qs(url.query))
            else:
                status, answer = _error(404, "notFound", f"the stand-in has no {method} {url.path}")
            if status == 204:
                self.send_response(204)
                self.end_headers()
            else:
                self.reply(status, answer)

    return Handler


@pytest.fixture
def bigquery_standin() -> Iterator[BigQueryStandIn]:
    """A fresh stand-in on a free 127.0.0.1 port, stopped after the test."""
    state = BigQueryStandIn()
    with serving(_handler(state), "bigquery-standin") as url:
        state.url = url
        yield state


# ---- Cloud Storage as the tasks see it --------------------------------------------------------------


class StorageFileSystem(luigi.target.FileSystem):
    """The stand-in's ``objects`` as a file system: what a GCS client offers ``bigquery_avro``."""

    def __init__(self, state: BigQueryStandIn) -> None:
        self.state = state

    def exists(self, path: str) -> bool:
        return path in self.state.objects or any(
            name.startswith(path.rstrip("/") + "/") for name in self.state.objects
        )

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        self.state.objects.pop(path, None)

    def list_wildcard(self, wildcard_path: str) -> Iterator[str]:
        yield from sorted(name for name in self.state.objects if fnmatch.fnmatchcase(name, wildcard_path))

    def download(self, path: str, chunksize: int, chunk_callback: Callable[[Any], bool]) -> Any:
        """The object in a temporary file, written ``chunksize`` bytes at a time until the callback says
        it has seen enough (as GCSClient.download does)."""
        data = self.state.objects[path]
        fp = tempfile.TemporaryFile()
        for start in range(0, max(len(data), 1), chunksize):
            fp.write(data[start : start + chunksize])
            if chunk_callback(fp):
                break
        self.state.downloads.append((path, fp.tell()))
        fp.seek(0)
        return fp


class StorageTarget(luigi.target.FileSystemTarget):
    """A ``gs://`` path among the stand-in's objects."""

    def __init__(self, path: str, state: BigQueryStandIn) -> None:
        super().__init__(path)
        self._fs = StorageFileSystem(state)

    @property
    def fs(self) -> StorageFileSystem:
        return self._fs

    def exists(self) -> bool:
        """A path with a ``*`` (an extract's shards) exists when an object matches it."""
        return (
            any(True for _ in self.fs.list_wildcard(self.path))
            if "*" in self.path
            else self.fs.exists(self.path)
        )

    def open(self, mode: str = "r") -> Any:
        raise NotImplementedError("the stand-in's objects are read through its file system")
