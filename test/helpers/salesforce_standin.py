"""A stand-in Salesforce for luigi.contrib.salesforce's tests (no Salesforce org can be reached here).

It answers, through ``responses`` (which serves requests' calls in process, so the module's fixed
``https://login.salesforce.com`` address needs no network), the documented calls the module makes: the
SOAP ``login`` (``sessionId``, ``serverUrl``; an ``INVALID_LOGIN`` fault for a wrong password), the REST
``query`` with ``nextRecordsUrl`` paging, and the Bulk API's job (``jobInfo``), batch (``batchInfo``
moving from Queued through InProgress to Completed or Failed, one step per look), result list and result
files, with its XML error bodies. Queries are ``SELECT fields FROM Object`` over records the test gives.
Not shipped in the package.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
import secrets
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import responses

__all__ = ["INSTANCE", "SalesforceStandIn", "salesforce_standin"]

INSTANCE = "standin.my.salesforce.com"
API = "http://www.force.com/2009/06/asyncapi/dataload"
_SOAP = "urn:partner.soap.sforce.com"
_QUERY = re.compile(r"^\s*select\s+(.*?)\s+from\s+(\w+)", re.IGNORECASE | re.DOTALL)
_BATCH_STEPS = ("Queued", "InProgress")


@dataclass
class _Batch:
    soql: str
    looks: int = 0
    failure: str | None = None
    results: list[bytes] = field(default_factory=list)


@dataclass
class SalesforceStandIn:
    """An org: its login, its records by object, and the jobs, batches and calls seen."""

    username: str = "etl@example.com"
    password: str = "pw-secret"
    token: str = "TOKEN123"
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rows_per_result: int = 1000  # a query's result is split into files of this many rows, as Bulk API does
    rows_per_page: int = 2000  # REST query page size
    bulk_cannot_follow: set[str] = field(default_factory=set)  # objects whose relations Bulk API refuses
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, _Batch] = field(default_factory=dict)
    logins: list[str] = field(default_factory=list)
    session: str = ""
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _queries: list[str] = field(default_factory=list)  # the SOQL behind each nextRecordsUrl handed out

    # -- login -------------------------------------------------------------------------------------------
    def login(self, request: Any) -> tuple[int, dict[str, str], str]:
        root = ElementTree.fromstring(request.body)
        user = root.findtext(f".//{{{_SOAP}}}username") or ""
        secret = root.findtext(f".//{{{_SOAP}}}password") or ""
        self.logins.append(user)
        if request.headers.get("SOAPAction") != "login" or (user, secret) != (
            self.username, self.password + self.token
        ):
            fault = "INVALID_LOGIN: Invalid username, password, security token; or user locked out."
            body = (
                '<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>'
                f"<soapenv:Fault><faultcode>INVALID_LOGIN</faultcode><faultstring>{fault}</faultstring>"
                "</soapenv:Fault></soapenv:Body></soapenv:Envelope>"
            )
            return 500, {"Content-Type": "text/xml"}, body
        self.session = secrets.token_hex(12)
        server_url = f"https://{INSTANCE}/services/Soap/u/34.0/00D000000000001"
        body = (
            '<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>'
            f'<loginResponse xmlns="{_SOAP}"><result><serverUrl>{server_url}</serverUrl>'
            f"<sessionId>{self.session}</sessionId><userName>{user}</userName></result></loginResponse>"
            "</soapenv:Body></soapenv:Envelope>"
        )
        return 200, {"Content-Type": "text/xml"}, body

    # -- REST ----------------------------------------------------------------------------------------------
    def rest_query(self, request: Any) -> tuple[int, dict[str, str], str]:
        if request.headers.get("Authorization") != f"Bearer {self.session}":
            return 401, {}, json.dumps([{"errorCode": "INVALID_SESSION_ID", "message": "Session expired"}])
        url = urlparse(request.url)
        if url.path.endswith("/query"):
            soql = parse_qs(url.query)["q"][0]
            offset = 0
        else:  # /query/<soql index>-<offset>, the nextRecordsUrl handed out below
            soql_index, offset_text = url.path.rsplit("/", 1)[1].split("-")
            soql, offset = self._queries[int(soql_index)], int(offset_text)
        records = [dict(r, attributes={"type": "x"}) for r in self._select(soql)[1]]
        page = records[offset : offset + self.rows_per_page]
        answer: dict[str, Any] = {"totalSize": len(records), "records": page}
        answer["done"] = offset + self.rows_per_page >= len(records)
        if not answer["done"]:
            self._queries.append(soql)
            next_offset = offset + self.rows_per_page
            answer["nextRecordsUrl"] = f"/services/data/v34.0/query/{len(self._queries) - 1}-{next_offset}"
        return 200, {"Content-Type": "application/json"}, json.dumps(answer)

    def _select(self, soql: str) -> tuple[list[str], list[dict[str, Any]]]:
        found = _QUERY.match(soql)
        if found is None:
            raise ValueError(f"MALFORMED_QUERY: {soql}")
        fields = [name.strip() for name in found.group(1).split(",")]
        return fields, list(self.records.get(found.group(2), []))

    # -- Bulk API ------------------------------------------------------------------------------------------
    def bulk(self, request: Any) -> tuple[int, dict[str, str], str | bytes]:
        if request.headers.get("X-SFDC-Session") != self.session:
            return _error(400, "InvalidSessionId", "Invalid session id")
        parts = urlparse(request.url).path.split("/job", 1)[1].strip("/").split("/")
        if parts == [""]:
            return self._new_job(request)
        job_id, rest = parts[0], parts[1:]
        if job_id not in self.jobs:
            return _error(400, "InvalidJob", f"Invalid job id: {job_id}")
        if not rest:
            return self._job(job_id, request)
        if rest == ["batch"]:
            return self._new_batch(job_id, request)
        batch = self.batches.get(rest[1])
        if batch is None:
            return _error(400, "InvalidBatch", f"Invalid batch id: {rest[1]}")
        if len(rest) == 2:
            return self._batch_info(rest[1], batch)
        if len(rest) == 3:
            results = "".join(f"<result>{rest[1]}-r{i}</result>" for i in range(len(batch.results)))
            return 200, {}, f'<result-list xmlns="{API}">{results}</result-list>'
        number = int(rest[3].rsplit("-r", 1)[1])
        return 200, {"Content-Type": "text/csv"}, batch.results[number]

    def _new_job(self, request: Any) -> tuple[int, dict[str, str], str]:
        info = ElementTree.fromstring(request.body)
        job_id = f"750{next(self._ids):012d}"
        self.jobs[job_id] = {
            child.tag.split("}")[1]: child.text for child in info
        } | {"state": "Open", "id": job_id}
        return 201, {}, _info("jobInfo", self.jobs[job_id])

    def _job(self, job_id: str, request: Any) -> tuple[int, dict[str, str], str]:
        if request.method == "POST":
            self.jobs[job_id]["state"] = ElementTree.fromstring(request.body).findtext(f"{{{API}}}state")
        return 200, {}, _info("jobInfo", self.jobs[job_id])

    def _new_batch(self, job_id: str, request: Any) -> tuple[int, dict[str, str], str]:
        if self.jobs[job_id]["state"] != "Open":
            return _error(400, "InvalidJobState", f"Job {job_id} is {self.jobs[job_id]['state']}")
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        batch_id = f"751{next(self._ids):012d}"
        batch = self.batches[batch_id] = _Batch(soql=body)
        fields, records = self._select(body)
        obj = self.jobs[job_id]["object"]
        missing = [f for f in fields if "." not in f and records and f not in records[0]]
        if missing:
            batch.failure = f"InvalidBatch : No such column '{missing[0]}' on entity '{obj}'"
        elif obj in self.bulk_cannot_follow and any("." in f for f in fields):
            batch.failure = "FeatureNotEnabled : Foreign Key Relationships not supported in Bulk Query"
        else:
            batch.results = _csv_files(fields, records, self.rows_per_result)
        return 201, {}, _info("batchInfo", {"id": batch_id, "jobId": job_id, "state": "Queued"})

    def _batch_info(self, batch_id: str, batch: _Batch) -> tuple[int, dict[str, str], str]:
        batch.looks += 1
        info: dict[str, Any] = {"id": batch_id}
        if batch.looks <= len(_BATCH_STEPS):
            info["state"] = _BATCH_STEPS[batch.looks - 1]
        elif batch.failure:
            info |= {"state": "Failed", "stateMessage": batch.failure}
        else:
            info["state"] = "Completed"
        info |= {"numberRecordsProcessed": "0", "numberRecordsFailed": "0"}
        return 200, {}, _info("batchInfo", info)


def _flat(record: dict[str, Any], name: str) -> Any:
    value: Any = record
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _csv_files(fields: list[str], records: list[dict[str, Any]], per_file: int) -> list[bytes]:
    files = []
    for start in range(0, max(len(records), 1), per_file):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        writer.writerows([_flat(r, f) for f in fields] for r in records[start : start + per_file])
        files.append(out.getvalue().encode())
    return files


def _info(kind: str, fields: dict[str, Any]) -> str:
    inner = "".join(f"<{k}>{v}</{k}>" for k, v in fields.items() if v is not None)
    return f'<?xml version="1.0" encoding="UTF-8"?><{kind} xmlns="{API}">{inner}</{kind}>'


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], str]:
    return status, {}, (
        f'<?xml version="1.0" encoding="UTF-8"?><error xmlns="{API}">'
        f"<exceptionCode>{code}</exceptionCode><exceptionMessage>{message}</exceptionMessage></error>"
    )


@contextmanager
def salesforce_standin(**settings: Any) -> Iterator[SalesforceStandIn]:
    """The stand-in org, answering every request to Salesforce's addresses while the block runs."""
    org = SalesforceStandIn(**settings)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for domain in ("login", "test"):
            mock.add_callback(
                responses.POST, f"https://{domain}.salesforce.com/services/Soap/u/34.0", callback=org.login
            )
        rest = re.compile(rf"https://{re.escape(INSTANCE)}/services/data/v34\.0/query.*")
        mock.add_callback(responses.GET, rest, callback=org.rest_query)
        bulk = re.compile(rf"https://{re.escape(INSTANCE)}/services/async/34\.0/job.*")
        for method in (responses.GET, responses.POST):
            mock.add_callback(method, bulk, callback=org.bulk)
        yield org
