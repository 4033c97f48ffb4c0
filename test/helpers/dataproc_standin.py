"""A STAND-IN for Google Cloud Dataproc's REST API v1 (no Dataproc can run here).

It answers the calls googleapiclient's ``discovery.build("dataproc", "v1")`` client makes, at the paths
and with the bodies of that API's published discovery document: ``clusters`` create (POST
``.../regions/<r>/clusters``), get, delete, and ``jobs`` submit (POST ``.../jobs:submit``), get and cancel
(POST ``.../jobs/<id>:cancel``). Errors are Google's ``{"error": {"code", "message", "status"}}``.
Clusters and jobs move through status scripts the test sets, one step per get. No credentials are
checked. It runs on a thread on a free loopback port; `client` builds a discovery client pointed at it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from helpers.json_http import JsonHandler, MethodRouter, serving
from helpers.scripted import Scripted, ScriptedJobs

__all__ = ["GONE", "DataprocStandIn", "dataproc_standin"]

GONE = "GONE"  # a script step: from here on Dataproc no longer knows the cluster or job (404)
_PATH = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/(?P<kind>clusters|jobs)"
    r"(?:(?P<submit>:submit)|/(?P<name>[^/:]+)(?::(?P<verb>cancel))?)?$"
)


@dataclass
class Resource(Scripted):
    """A cluster or a job: its description as sent, its script, where it is in it (``ended``: a status
    the test or a cancel call imposed)."""

    body: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return self.current

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "stateStartTime": "2026-01-01T00:00:00Z", **self.ended}


class DataprocStandIn(ScriptedJobs):
    """The stand-in's state: scripts for new clusters and jobs, and every cluster and job by name or id."""

    def __init__(self) -> None:
        super().__init__()
        self.cluster_script = ["CREATING", "RUNNING"]
        self.delete_script = ["DELETING", GONE]
        self.job_script = ["PENDING", "SETUP_DONE", "RUNNING", "DONE"]
        self.clusters: dict[str, Resource] = {}
        self.jobs: dict[str, Resource] = {}
        self.url = ""

    def client(self) -> Any:
        """A ``dataproc v1`` discovery client on this stand-in, with anonymous credentials."""
        from google.auth.credentials import AnonymousCredentials
        from googleapiclient import discovery

        options = {"api_endpoint": self.url + "/"}
        return discovery.build(
            "dataproc",
            "v1",
            credentials=AnonymousCredentials(),
            client_options=options,
            static_discovery=True,
        )

    def add_cluster(self, name: str, *states: str) -> None:
        self.add(self.clusters, name, Resource(body={"clusterName": name}, script=list(states)))

    def wait_for_job_state(self, state: str, timeout: float = 30) -> str:
        """The id of the first job a get has seen in ``state`` (the task under test is polling it)."""
        return self.wait_until_seen(self.jobs, state, "Dataproc job", timeout)


def _error(code: int, status: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {"error": {"code": code, "message": message, "status": status}}


def _cluster(where: dict[str, str], name: str, cluster: Resource, fields: str) -> dict[str, Any]:
    if fields == "status":
        return {"status": cluster.status()}
    return {**cluster.body, "projectId": where["project"], "clusterName": name, "status": cluster.status()}


def _job(where: dict[str, str], job_id: str, job: Resource) -> dict[str, Any]:
    return {**job.body, "reference": {"projectId": where["project"], "jobId": job_id}, "status": job.status()}


def _clusters(state: DataprocStandIn, method: str, where: dict[str, str], body: dict[str, Any], fields: str):
    name = where["name"]
    if method == "POST" and not name:
        state.add(state.clusters, body["clusterName"], Resource(body=body, script=list(state.cluster_script)))
        return 200, {
            "name": f"projects/{where['project']}/regions/{where['region']}/operations/{uuid.uuid4()}"
        }
    cluster = state.poll(state.clusters, name, GONE) if method == "GET" else state.clusters.get(name)
    if cluster is None or cluster.state == GONE:
        return _error(
            404,
            "NOT_FOUND",
            f"Not found: Cluster projects/{where['project']}/regions/{where['region']}/clusters/{name}",
        )
    if method == "DELETE":
        with state.lock:
            cluster.script, cluster.step = list(state.delete_script), -1
        return 200, {
            "name": f"projects/{where['project']}/regions/{where['region']}/operations/{uuid.uuid4()}"
        }
    return 200, _cluster(where, name, cluster, fields)


def _jobs(state: DataprocStandIn, where: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if where["submit"]:
        job = body["job"]
        cluster = state.clusters.get(job["placement"]["clusterName"])
        if cluster is None or cluster.state != "RUNNING":
            return _error(404, "NOT_FOUND", f"Not found: Cluster {job['placement']['clusterName']}")
        job_id = (job.get("reference") or {}).get("jobId") or uuid.uuid4().hex
        state.add(state.jobs, job_id, Resource(body=job, script=list(state.job_script)))
        return 200, _job(where, job_id, state.jobs[job_id])
    job_id = where["name"]
    if where["verb"] == "cancel":
        if job_id not in state.jobs:
            return _error(404, "NOT_FOUND", f"Not found: Job projects/{where['project']}/jobs/{job_id}")
        state.end(state.jobs[job_id], state="CANCELLED")
        return 200, _job(where, job_id, state.jobs[job_id])
    found = state.poll(state.jobs, job_id, GONE)
    if found is None:
        return _error(404, "NOT_FOUND", f"Not found: Job projects/{where['project']}/jobs/{job_id}")
    return 200, _job(where, job_id, found)


def _handler(state: DataprocStandIn) -> type[JsonHandler]:
    class Handler(MethodRouter):
        def route(self, method: str) -> None:
            url = urlsplit(self.path)
            match = _PATH.match(url.path)
            if match is None:
                self.reply(*_error(404, "NOT_FOUND", f"the stand-in has no {method} {url.path}"))
                return
            where = {key: value or "" for key, value in match.groupdict().items()}
            body = self.read_json() if method == "POST" else {}
            fields = parse_qs(url.query).get("fields", [""])[0]
            if where["kind"] == "clusters":
                self.reply(*_clusters(state, method, where, body, fields))
            else:
                self.reply(*_jobs(state, where, body))

    return Handler


@pytest.fixture
def dataproc_standin() -> Iterator[DataprocStandIn]:
    """A fresh stand-in on a free 127.0.0.1 port, stopped after the test."""
    state = DataprocStandIn()
    with serving(_handler(state), "dataproc-standin") as url:
        state.url = url
        yield state
