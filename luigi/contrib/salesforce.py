"""Salesforce: query an object with the Bulk API into a file, and the API calls to do more.

``QuerySalesforce`` logs in with the ``[salesforce]`` credentials (SOAP login), runs its SOQL as a Bulk
API query job and writes the result (CSV by default) to its output. ``SalesforceAPI`` is the client:
login, REST queries, and Bulk API jobs and batches. Uses ``requests``: ``pip install 'luigi[salesforce]'``.
"""

from __future__ import annotations

import abc
import csv
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from typing import IO, Any
from urllib.parse import urlparse
from xml.sax.saxutils import escape

import luigi
from luigi.contrib.optional import require

__all__ = [
    "QuerySalesforce",
    "SalesforceAPI",
    "ensure_utf",
    "get_soql_fields",
    "parse_results",
    "salesforce",
]

logger = logging.getLogger("luigi-interface")

_FOREIGN_KEY_LIMIT = "foreign key relationships not supported"
_DONE_STATES = ("completed", "failed")


def _requests() -> Any:
    return require("requests", "salesforce", "luigi.contrib.salesforce")


def get_soql_fields(soql: str) -> list[str]:
    """The field names a SOQL query selects: the text between ``select`` and ``from``, split on commas and
    line breaks, with spaces and tabs removed."""
    found = re.search(r"select(.*)from", soql, re.IGNORECASE | re.DOTALL)
    if found is None:
        raise ValueError(f"not a SOQL query (no 'select ... from'): {soql!r}")
    text = found.group(1).replace(" ", "").replace("\t", "")
    return [name for name in re.split(r"[,\r\n]", text) if name]


def ensure_utf(value: Any) -> Any:
    """``value`` as UTF-8 bytes when it is text; anything else as it is."""
    return value.encode("utf-8") if isinstance(value, str) else value


def _traverse_results(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A record with its nested records flattened into dotted names (``Owner.Name``), without the
    ``attributes`` Salesforce adds to each."""
    flat: dict[str, Any] = {}
    for name, value in record.items():
        if name == "attributes":
            continue
        if isinstance(value, Mapping):
            flat.update(_traverse_results(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def parse_results(fields: Iterable[str], data: Mapping[str, Any]) -> list[list[Any]]:
    """The rows of a REST query answer (``data['records']``), one value per field in ``fields`` order
    (names matched without regard to case, as SOQL does)."""
    wanted = list(fields)
    rows = []
    for record in data.get("records", []):
        flat = {name.lower(): value for name, value in _traverse_results(record).items()}
        rows.append([flat.get(name.lower()) for name in wanted])
    return rows


class salesforce(luigi.Config):  # noqa: N801  # Luigi's section name is the class name
    """The ``[salesforce]`` section: the login of the account the queries run as."""

    username = luigi.Parameter(default="", description="Salesforce user name")
    password = luigi.Parameter(default="", description="its password")
    security_token = luigi.Parameter(default="", description="its security token")
    sb_security_token = luigi.Parameter(default="", description="its security token in the sandbox")


class SalesforceAPI:
    """A Salesforce session: SOAP login, REST queries and Bulk API jobs."""

    API_VERSION = 34.0
    SOAP_NS = "{urn:partner.soap.sforce.com}"
    API_NS = "{http://www.force.com/2009/06/asyncapi/dataload}"

    def __init__(
        self,
        username: str,
        password: str,
        security_token: str,
        sb_token: str | None = None,
        sandbox_name: str | None = None,
    ) -> None:
        self.username = f"{username}.{sandbox_name}" if sandbox_name else username
        self.password = password
        self.security_token = sb_token if sandbox_name else security_token
        self.sandbox_name = sandbox_name
        self.session_id: str | None = None
        self.server_url: str | None = None
        self.hostname: str | None = None

    def __repr__(self) -> str:  # the password, token and session stay out of logs
        return f"SalesforceAPI(username={self.username!r}, hostname={self.hostname!r})"

    # -- the session -------------------------------------------------------------------------------------
    def start_session(self) -> None:
        """Log in (SOAP ``login``) and keep the session id and the instance's host name."""
        domain = "test" if self.sandbox_name else "login"
        url = f"https://{domain}.salesforce.com/services/Soap/u/{self.API_VERSION}"
        secret = escape(f"{self.password}{self.security_token or ''}")
        body = (
            '<?xml version="1.0" encoding="utf-8" ?>'
            '<env:Envelope xmlns:xsd="http://www.w3.org/2001/XMLSchema" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
            'xmlns:env="http://schemas.xmlsoap.org/soap/envelope/">'
            '<env:Body><n1:login xmlns:n1="urn:partner.soap.sforce.com">'
            f"<n1:username>{escape(self.username)}</n1:username><n1:password>{secret}</n1:password>"
            "</n1:login></env:Body></env:Envelope>"
        )
        headers = {"Content-Type": "text/xml; charset=UTF-8", "SOAPAction": "login"}
        response = _requests().post(url, body, headers=headers)
        if response.status_code != 200:
            raise Exception(f"Salesforce login as {self.username} failed: {_soap_fault(response.text)}")
        root = ElementTree.fromstring(response.text)
        self.session_id = root.findtext(f".//{self.SOAP_NS}sessionId")
        self.server_url = root.findtext(f".//{self.SOAP_NS}serverUrl")
        self.hostname = urlparse(self.server_url or "").netloc

    def has_active_session(self) -> bool:
        return bool(self.session_id)

    def _session(self) -> None:
        if not self.has_active_session():
            self.start_session()

    def _rest_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.session_id}", "Content-Type": "application/json"}

    def _bulk_headers(self, content_type: str = "application/xml; charset=UTF-8") -> dict[str, str]:
        return {"X-SFDC-Session": str(self.session_id), "Content-Type": content_type}

    # -- REST ----------------------------------------------------------------------------------------------
    def query(self, query: str, **kwargs: Any) -> Any:
        """The REST API's answer to a SOQL query (its first page of ``records``)."""
        self._session()
        url = f"https://{self.hostname}/services/data/v{self.API_VERSION}/query"
        return self._json(_requests().get(url, headers=self._rest_headers(), params={"q": query}, **kwargs))

    def query_more(self, next_records_identifier: str, identifier_is_url: bool = False, **kwargs: Any) -> Any:
        """The next page of a REST query: by its ``nextRecordsUrl``, or by the identifier at its end."""
        self._session()
        if identifier_is_url:
            url = f"https://{self.hostname}{next_records_identifier}"
        else:
            url = f"https://{self.hostname}/services/data/v{self.API_VERSION}/query/{next_records_identifier}"
        return self._json(_requests().get(url, headers=self._rest_headers(), **kwargs))

    def query_all(self, query: str, **kwargs: Any) -> IO[str]:
        """Every record of a SOQL query, following ``nextRecordsUrl``, as an open CSV file (header first)."""
        fields = get_soql_fields(query)
        tmp_dir = luigi.configuration.get_config().get("salesforce", "local-tmp-dir", None)
        out = tempfile.TemporaryFile("w+", newline="", dir=tmp_dir)
        writer = csv.writer(out)
        writer.writerow(fields)
        page = self.query(query, **kwargs)
        writer.writerows(parse_results(fields, page))
        while not page.get("done", True):
            page = self.query_more(page["nextRecordsUrl"], identifier_is_url=True, **kwargs)
            writer.writerows(parse_results(fields, page))
        out.seek(0)
        return out

    def restful(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET ``/services/data/v34.0/<path>`` and its JSON answer."""
        self._session()
        url = f"https://{self.hostname}/services/data/v{self.API_VERSION}/{path}"
        return self._json(_requests().get(url, headers=self._rest_headers(), params=params))

    @staticmethod
    def _json(response: Any) -> Any:
        if response.status_code != 200:
            raise Exception(f"Salesforce answered {response.status_code}: {response.text[:500]}")
        return response.json()

    # -- Bulk API: jobs ------------------------------------------------------------------------------------
    def _job_url(self, *parts: str) -> str:
        return "/".join([f"https://{self.hostname}/services/async/{self.API_VERSION}/job", *parts])

    def create_operation_job(
        self,
        operation: str,
        obj: str,
        external_id_field_name: str | None = None,
        content_type: str | None = None,
    ) -> str:
        """Open a Bulk API job (``query``, ``insert``, ``upsert``...) on object ``obj``; its id."""
        self._session()
        fields = [("operation", operation), ("object", obj)]
        if external_id_field_name:
            fields.append(("externalIdFieldName", external_id_field_name))
        if content_type:
            fields.append(("contentType", content_type))
        response = _requests().post(self._job_url(), _job_info(fields), headers=self._bulk_headers())
        return _bulk_text(response, "id")

    def get_job_details(self, job_id: str) -> Any:
        """The job's ``jobInfo`` (the response)."""
        self._session()
        response = _requests().get(self._job_url(job_id), headers=self._bulk_headers())
        _bulk_text(response, "id")  # raises with Salesforce's message on an error
        return response

    def abort_job(self, job_id: str) -> Any:
        """Abort the job: its unprocessed batches are not run."""
        return self._set_job_state(job_id, "Aborted")

    def close_job(self, job_id: str) -> Any:
        """Close the job: no more batches; the ones added still run."""
        if not job_id or not self.has_active_session():
            raise Exception("Can not close job without a job id and an active Salesforce session")
        return self._set_job_state(job_id, "Closed")

    def _set_job_state(self, job_id: str, state: str) -> Any:
        self._session()
        response = _requests().post(
            self._job_url(job_id), _job_info([("state", state)]), headers=self._bulk_headers()
        )
        _bulk_text(response, "state")
        return response

    # -- Bulk API: batches ---------------------------------------------------------------------------------
    def create_batch(self, job_id: str, data: Any, file_type: str) -> str:
        """Add a batch (a query's SOQL, or the records: CSV or XML) to the job; its id."""
        self._session()
        body = ensure_utf(data)
        kind = "text/csv" if file_type.upper() == "CSV" else "application/xml"
        headers = self._bulk_headers(f"{kind}; charset=UTF-8")
        headers["Content-Length"] = str(len(body))
        response = _requests().post(self._job_url(job_id, "batch"), body, headers=headers)
        return _bulk_text(response, "id")

    def block_on_batch(
        self,
        job_id: str,
        batch_id: str,
        sleep_time_seconds: float = 5,
        max_wait_time_seconds: float = -1,
    ) -> dict[str, Any]:
        """Wait until the batch completed or failed; its state. Raises past ``max_wait_time_seconds``."""
        if not job_id or not batch_id:
            raise Exception("Can not block on a batch without a job id and a batch id")
        started = time.monotonic()
        while True:
            status = self._get_batch_info(job_id, batch_id)
            if status["state"].lower() in _DONE_STATES:
                return status
            waited = time.monotonic() - started
            if 0 <= max_wait_time_seconds < waited:
                raise Exception(
                    f"Batch {batch_id} of job {job_id} is still {status['state']} after {waited:.0f} s"
                )
            time.sleep(sleep_time_seconds)

    def _get_batch_info(self, job_id: str, batch_id: str) -> dict[str, Any]:
        self._session()
        response = _requests().get(self._job_url(job_id, "batch", batch_id), headers=self._bulk_headers())
        root = _bulk_root(response)
        status = {
            "state": root.findtext(f"{self.API_NS}state") or "",
            "num_processed": root.findtext(f"{self.API_NS}numberRecordsProcessed"),
            "num_failed": root.findtext(f"{self.API_NS}numberRecordsFailed"),
        }
        message = root.findtext(f"{self.API_NS}stateMessage")
        if message is not None:
            status["state_message"] = message
        return status

    def get_batch_results(self, job_id: str, batch_id: str) -> str:
        """Deprecated: the first result id of the batch only."""
        warnings.warn(
            "get_batch_results is deprecated and only returns one batch result. "
            "Please use get_batch_result_ids",
            UserWarning,
            stacklevel=2,
        )
        return self.get_batch_result_ids(job_id, batch_id)[0]

    def get_batch_result_ids(self, job_id: str, batch_id: str) -> list[str]:
        """The ids of the batch's result files (a large query gives several)."""
        self._session()
        response = _requests().get(
            self._job_url(job_id, "batch", batch_id, "result"), headers=self._bulk_headers()
        )
        root = _bulk_root(response)
        return [element.text or "" for element in root.iter(f"{self.API_NS}result")]

    def get_batch_result(self, job_id: str, batch_id: str, result_id: str) -> bytes:
        """The content of one result file of the batch."""
        self._session()
        url = self._job_url(job_id, "batch", batch_id, "result", result_id)
        response = _requests().get(url, headers=self._bulk_headers())
        if response.status_code != 200:
            raise Exception(f"Salesforce answered {response.status_code}: {_bulk_error(response.text)}")
        return bytes(response.content)


def _job_info(fields: Iterable[tuple[str, str]]) -> str:
    inner = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in fields)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<jobInfo xmlns="{SalesforceAPI.API_NS[1:-1]}">{inner}</jobInfo>'
    )


def _bulk_root(response: Any) -> ElementTree.Element:
    if response.status_code not in (200, 201):
        raise Exception(f"Salesforce answered {response.status_code}: {_bulk_error(response.text)}")
    return ElementTree.fromstring(response.text)


def _bulk_text(response: Any, field: str) -> str:
    return _bulk_root(response).findtext(f"{SalesforceAPI.API_NS}{field}") or ""


def _bulk_error(text: str) -> str:
    """``exceptionCode: exceptionMessage`` of a Bulk API error body, else the body's start."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError:
        return text[:500]
    code = root.findtext(f"{SalesforceAPI.API_NS}exceptionCode")
    message = root.findtext(f"{SalesforceAPI.API_NS}exceptionMessage")
    return f"{code}: {message}" if code else text[:500]


def _soap_fault(text: str) -> str:
    try:
        return ElementTree.fromstring(text).findtext(".//faultstring") or text[:500]
    except ElementTree.ParseError:
        return text[:500]


class QuerySalesforce(luigi.Task):
    """Run ``soql`` on ``object_name`` as a Bulk API query and write the result to ``output()``."""

    @property
    @abc.abstractmethod
    def object_name(self) -> str:
        """The Salesforce object queried (``Account``, ``Contact``...)."""

    @property
    @abc.abstractmethod
    def soql(self) -> str:
        """The SOQL query, or the path of a file holding it when ``is_soql_file``."""

    @property
    def use_sandbox(self) -> bool:
        return False

    @property
    def sandbox_name(self) -> str | None:
        return None

    @property
    def is_soql_file(self) -> bool:
        return False

    @property
    def content_type(self) -> str:
        return "CSV"

    def run(self) -> None:
        if self.use_sandbox and not self.sandbox_name:
            raise Exception("Parameter sandbox_name must be provided when querying a Salesforce sandbox")
        settings = salesforce()
        api = SalesforceAPI(
            settings.username,
            settings.password,
            settings.security_token,
            settings.sb_security_token,
            self.sandbox_name if self.use_sandbox else None,
        )
        job_id = api.create_operation_job("query", self.object_name, content_type=self.content_type)
        logger.info("Started Salesforce query job %s", job_id)
        try:
            soql = self._read_soql()
            batch_id = api.create_batch(job_id, soql, self.content_type)
            status = api.block_on_batch(job_id, batch_id)
            if status["state"].lower() == "failed":
                self._after_failed_batch(api, soql, status.get("state_message") or "")
                return
            result_ids = api.get_batch_result_ids(job_id, batch_id)
            self._write_results(api, job_id, batch_id, result_ids)
        finally:
            api.close_job(job_id)

    def _output(self) -> Any:
        """The file target the result goes to (a ``LocalTarget`` or any target with a ``path``)."""
        return self.output()

    def _read_soql(self) -> str:
        if not self.is_soql_file:
            return self.soql
        with open(self.soql) as file:
            return file.read()

    def _after_failed_batch(self, api: SalesforceAPI, soql: str, message: str) -> None:
        """A batch fails for relations the Bulk API cannot follow: then the REST API answers instead."""
        if _FOREIGN_KEY_LIMIT not in message.lower():
            raise Exception(f"Salesforce batch failed: {message}")
        logger.info("The Bulk API cannot follow this query's relations; asking the REST API")
        with api.query_all(soql) as rows, self._output().open("w") as out:
            shutil.copyfileobj(rows, out)

    def _write_results(
        self, api: SalesforceAPI, job_id: str, batch_id: str, result_ids: list[str]
    ) -> None:
        if len(result_ids) == 1:
            with self._output().open("w") as out:
                out.write(api.get_batch_result(job_id, batch_id, result_ids[0]).decode("utf-8"))
            return
        path = self._output().path
        for number, result_id in enumerate(result_ids):
            with open(f"{path}.{number}", "wb") as part:
                part.write(api.get_batch_result(job_id, batch_id, result_id))
        self.merge_batch_results(result_ids)

    def merge_batch_results(self, result_ids: list[str]) -> None:
        """Join the result files ``<output>.<i>`` into the output (CSV: one header line), then delete them."""
        if self.content_type.lower() != "csv":
            raise Exception(f"Batch result merging not implemented for {self.content_type}")
        path = self._output().path
        parts = [f"{path}.{number}" for number in range(len(result_ids))]
        with self._output().open("w") as out:
            for number, part in enumerate(parts):
                with open(part, encoding="utf-8") as lines:
                    header = lines.readline()
                    if number == 0:
                        out.write(header)
                    shutil.copyfileobj(lines, out)
        for part in parts:
            os.remove(part)
