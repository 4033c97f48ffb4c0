"""A STAND-IN for Microsoft OpenPAI's REST server (no OpenPAI cluster can run here).

It speaks OpenPAI's documented v1 REST calls that `luigi.contrib.pai` and an operator make:
``POST /api/v1/token`` (JSON ``username``, ``password``, ``expiration`` -> ``{"token": ...}``),
``POST /api/v1/jobs`` (a job config, Bearer token required -> 202), ``GET /api/v1/jobs/<name>``
(``{"name", "jobStatus": {"state", ...}}`` or 404 ``NoJobError``) and
``PUT /api/v1/jobs/<name>/executionType`` (``{"value": "STOP"}``: the job ends STOPPED). Errors are
OpenPAI's ``{"code", "message"}`` bodies. Each job moves through a status script the test sets, one step
per status GET; it runs on a thread on a free loopback port.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pytest

from helpers.json_http import JsonHandler, serving
from helpers.scripted import Scripted, ScriptedJobs

__all__ = ["LOST", "PaiJobRecord", "PaiStandIn", "pai_standin"]

LOST = "LOST"  # a script step: from here on OpenPAI no longer knows the job (404)
USERNAME = "luigi"
PASSWORD = "s3cret-pw"
_JOBS = "/api/v1/jobs/"


@dataclass
class PaiJobRecord(Scripted):
    """One submitted job: the config the caller sent, its script and where it is in it (``ended``: the
    jobStatus fields of an end forced by the test or a stop)."""

    config: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return self.current


class PaiStandIn(ScriptedJobs):
    """The stand-in's state: the account, the token it issued, the script for new jobs, the jobs by name."""

    def __init__(self) -> None:
        super().__init__()
        self.token = "tok-" + secrets.token_hex(16)
        self.script = ["WAITING", "RUNNING", "SUCCEEDED"]
        self.jobs: dict[str, PaiJobRecord] = {}
        self.token_requests: list[dict[str, Any]] = []
        self.url = ""

    def submit(self, config: dict[str, Any]) -> bool:
        """Record a new job; False when one of that name exists (OpenPAI's ConflictJobError)."""
        if config["jobName"] in self.jobs:
            return False
        self.add(self.jobs, config["jobName"], PaiJobRecord(config=config, script=list(self.script)))
        return True

    def status(self, name: str) -> PaiJobRecord | None:
        """Advance the job one step (a status GET) and return it, or None when unknown or lost."""
        return self.poll(self.jobs, name, LOST)

    def wait_for_state(self, state: str, timeout: float = 30) -> PaiJobRecord:
        """The first job a status GET has seen in ``state`` (the task under test is polling it)."""
        return self.jobs[self.wait_until_seen(self.jobs, state, "OpenPAI job", timeout)]


def _job_status(name: str, job: PaiJobRecord) -> dict[str, Any]:
    """OpenPAI's v1 job status body; exit fields once the job has ended."""
    status: dict[str, Any] = {
        "username": USERNAME,
        "state": job.state,
        "executionType": "START",
        "retries": 0,
    }
    if job.state == "SUCCEEDED":
        status.update(appExitType="SUCCEEDED", appExitCode=0, appExitDiagnostics="")
    status.update(job.ended)
    return {"name": name, "jobStatus": status, "taskRoles": {}}


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"code": code, "message": message}


def _token(state: PaiStandIn, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    state.token_requests.append(body)
    if body.get("username") != USERNAME or body.get("password") != PASSWORD:
        return _error(400, "InvalidCredentialError", "Invalid user name or password.")
    return 200, {"user": USERNAME, "token": state.token, "admin": False}


def _submit(state: PaiStandIn, headers: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if headers.get("Authorization") != f"Bearer {state.token}":
        return _error(401, "UnauthorizedUserError", "Guest is not allowed to do this operation.")
    if not state.submit(body):
        return _error(409, "ConflictJobError", f"Job name {body['jobName']} already exists.")
    return 202, {"message": f"update job {body['jobName']} successfully"}


def _stop(state: PaiStandIn, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if name not in state.jobs:
        return _error(404, "NoJobError", f"Job {name} is not found.")
    if body.get("value") == "STOP":
        state.end(
            state.jobs[name],
            state="STOPPED",
            appExitType="USER_STOP",
            appExitDiagnostics="UserApplicationKill",
        )
    return 202, {"message": f"execute job {name} successfully"}


def _handler(state: PaiStandIn) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802  # http.server's names
            body = self.read_json()
            if self.path == "/api/v1/token":
                self.reply(*_token(state, body))
            elif self.path == "/api/v1/jobs":
                self.reply(*_submit(state, self.headers, body))
            else:
                self.reply(*_error(404, "NotFoundError", f"{self.path} is not found."))

        def do_GET(self) -> None:  # noqa: N802
            name = unquote(self.path[len(_JOBS) :]) if self.path.startswith(_JOBS) else ""
            job = state.status(name) if name else None
            if job is None:
                self.reply(*_error(404, "NoJobError", f"Job {name} is not found."))
            else:
                self.reply(200, _job_status(name, job))

        def do_PUT(self) -> None:  # noqa: N802
            name, _, action = unquote(self.path[len(_JOBS) :]).rpartition("/")
            if not self.path.startswith(_JOBS) or action != "executionType":
                self.reply(*_error(404, "NotFoundError", f"{self.path} is not found."))
            else:
                self.reply(*_stop(state, name, self.read_json()))

    return Handler


@pytest.fixture
def pai_standin() -> Iterator[PaiStandIn]:
    """A fresh stand-in on a free 127.0.0.1 port, stopped after the test."""
    state = PaiStandIn()
    with serving(_handler(state), "pai-standin") as url:
        state.url = url
        yield state
