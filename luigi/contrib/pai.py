"""Microsoft OpenPAI for Luigi: `PaiTask` submits a job to an OpenPAI cluster and waits until it finished.

Needs the ``pai`` extra (requests), imported when a task talks to OpenPAI, not at import. The cluster and
the account come from the ``[OpenPai]`` config section. The job travels as OpenPAI's JSON job config:
nothing of the task is pickled. The token OpenPAI hands out is kept on the task, never logged.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import quote, urljoin

import luigi
from luigi.contrib.optional import require

__all__ = ["OpenPai", "PaiJob", "PaiTask", "Port", "TaskRole", "slot_to_dict"]

logger = logging.getLogger(__name__)

# The states OpenPAI reports for a job. Luigi 3.8 took SUCCEED as done; OpenPAI's documented name is
# SUCCEEDED, so both mean done here. Any other state (FAILED, STOPPED, ...) is an end that is not success.
_STILL_GOING = frozenset({"UNKNOWN", "WAITING", "RUNNING"})
_SUCCEEDED = frozenset({"SUCCEED", "SUCCEEDED"})
_HTTP_OK = 200
_HTTP_ACCEPTED = 202
_JSON = {"Content-Type": "application/json"}


def __getattr__(name: str) -> Any:
    """``luigi.contrib.pai.requests`` as in Luigi, which imported it on top (tests patch through it)."""
    if name == "requests":
        return _requests()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _requests() -> Any:
    return require("requests", "pai", "luigi.contrib.pai")


def slot_to_dict(o: Any) -> dict[str, Any]:
    """The set (non-None) ``__slots__`` values of ``o``, for ``json.dumps(default=slot_to_dict)``."""
    values = {}
    for name in o.__slots__:
        if name.startswith("__"):
            continue
        value = getattr(o, name, None)
        if value is not None:
            values[name] = value
    return values


class PaiJob:
    """An OpenPAI job config: a name, a Docker image and its task roles (the JSON OpenPAI takes)."""

    __slots__ = (
        "jobName",
        "image",
        "authFile",
        "dataDir",
        "outputDir",
        "codeDir",
        "virtualCluster",
        "taskRoles",
        "gpuType",
        "retryCount",
    )

    def __init__(self, jobName: str, image: str, tasks: list[TaskRole]) -> None:  # noqa: N803  # OpenPAI's
        if not isinstance(tasks, list) or not tasks:
            raise TypeError(f"PaiJob {jobName!r} needs tasks, a non-empty list of TaskRole, not {tasks!r}")
        self.jobName = jobName
        self.image = image
        self.taskRoles = tasks
        self.authFile: str | None = None
        self.dataDir: str | None = None
        self.outputDir: str | None = None
        self.codeDir: str | None = None
        self.virtualCluster: str | None = None
        self.gpuType: str | None = None
        self.retryCount: int | None = None


class Port:
    """A port range a task role asks for: ``portNumber`` ports labelled ``label`` from ``beginAt``."""

    __slots__ = ("label", "beginAt", "portNumber")

    def __init__(self, label: str, begin_at: int = 0, port_number: int = 1) -> None:
        self.label = label
        self.beginAt = begin_at
        self.portNumber = port_number


class TaskRole:
    """One role of a job: ``taskNumber`` containers running ``command`` with these resources."""

    __slots__ = ("name", "command", "taskNumber", "cpuNumber", "memoryMB", "shmMB", "gpuNumber", "portList")

    def __init__(
        self,
        name: str,
        command: str,
        taskNumber: int = 1,  # noqa: N803  # OpenPAI's field names, as in Luigi
        cpuNumber: int = 1,  # noqa: N803
        memoryMB: int = 2048,  # noqa: N803
        shmMB: int = 64,  # noqa: N803
        gpuNumber: int = 0,  # noqa: N803
        portList: list[Port] | None = None,  # noqa: N803
    ) -> None:
        self.name = name
        self.command = command
        self.taskNumber = taskNumber
        self.cpuNumber = cpuNumber
        self.memoryMB = memoryMB
        self.shmMB = shmMB
        self.gpuNumber = gpuNumber
        self.portList = [] if portList is None else portList


class OpenPai(luigi.Config):
    """The ``[OpenPai]`` section: the cluster's REST server, the account, and how often to poll a job."""

    pai_url = luigi.Parameter(default="http://127.0.0.1:9186", description="OpenPAI's REST server")
    username = luigi.Parameter(default="admin")
    password = luigi.OptionalParameter(default=None)
    expiration = luigi.IntParameter(default=3600, description="seconds the token is valid for")
    poll_interval = luigi.FloatParameter(default=5.0, description="seconds between two job status checks")


class PaiTask(luigi.Task):
    """Run one OpenPAI job: override `name`, `image` and `tasks`; the task is done when the job SUCCEEDED."""

    @property
    def name(self) -> str:
        """The job's name on OpenPAI, unique on the cluster (OpenPAI refuses a second job of that name)."""
        raise NotImplementedError("a PaiTask must define name, the OpenPAI job name")

    @property
    def image(self) -> str:
        """The Docker image the job's containers run."""
        raise NotImplementedError("a PaiTask must define image, the job's Docker image")

    @property
    def tasks(self) -> list[TaskRole]:
        """The job's task roles (a non-empty list of `TaskRole`)."""
        raise NotImplementedError("a PaiTask must define tasks, a list of TaskRole")

    @property
    def auth_file_path(self) -> str | None:
        """The Docker registry authentication file, if the image needs one."""
        return None

    @property
    def data_dir(self) -> str | None:
        return None

    @property
    def code_dir(self) -> str | None:
        return None

    @property
    def output_dir(self) -> str:
        return f"$PAI_DEFAULT_FS_URI/{self.name}/output"

    @property
    def virtual_cluster(self) -> str:
        return "default"

    @property
    def gpu_type(self) -> str | None:
        return None

    @property
    def retry_count(self) -> int:
        return 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__token = self._fetch_token()

    def _fetch_token(self) -> str:
        """Ask OpenPAI for a token for the configured account (as Luigi does, when the task is made)."""
        config = OpenPai()
        body = {"username": config.username, "password": config.password, "expiration": config.expiration}
        response = _requests().post(_url("/api/v1/token"), headers=_JSON, data=json.dumps(body))
        if response.status_code != _HTTP_OK:
            raise Exception(
                f"OpenPAI at {config.pai_url} gave no token to user {config.username!r} "
                f"(HTTP {response.status_code}: {_reason(response)}): check [OpenPai] username and password"
            )
        return str(response.json()["token"])

    def _job(self) -> PaiJob:
        job = PaiJob(self.name, self.image, self.tasks)
        job.authFile = self.auth_file_path
        job.dataDir = self.data_dir
        job.outputDir = self.output_dir
        job.codeDir = self.code_dir
        job.virtualCluster = self.virtual_cluster
        job.gpuType = self.gpu_type
        job.retryCount = self.retry_count
        return job

    def run(self) -> None:
        self._submit()
        poll_interval = OpenPai().poll_interval
        while not self._job_succeeded():
            time.sleep(poll_interval)
        logger.info("OpenPAI job %s succeeded", self.name)

    def _submit(self) -> None:
        """POST the job config; OpenPAI answers 202 Accepted, anything else is an HTTPError with why."""
        body = json.dumps(self._job(), default=slot_to_dict)
        response = _requests().post(_url("/api/v1/jobs"), headers=self._auth_headers(), data=body)
        if response.status_code != _HTTP_ACCEPTED:
            self._raise_http_error(response, f"refused job {self.name!r}")
        logger.info("Submitted OpenPAI job %s", self.name)

    def _job_succeeded(self) -> bool:
        """True once the job SUCCEEDED, False while it waits or runs; an error for any other end."""
        response = _requests().get(_url(f"/api/v1/jobs/{quote(self.name, safe='')}"), headers=_JSON)
        if response.status_code != _HTTP_OK:
            self._raise_http_error(response, f"has no status for job {self.name!r} (unknown or lost)")
        status = response.json().get("jobStatus") or {}
        state = status.get("state")
        if state in _STILL_GOING:
            logger.debug("OpenPAI job %s is %s", self.name, state)
            return False
        if state in _SUCCEEDED:
            return True
        raise RuntimeError(f"OpenPAI job {self.name} ended {state}: {_exit_report(status)}")

    def complete(self) -> bool:
        """Done when OpenPAI says the job SUCCEEDED; not yet run, unknown, running or failed is not done."""
        requests = _requests()
        try:
            return self._job_succeeded()
        except (requests.exceptions.HTTPError, RuntimeError):
            return False

    def _auth_headers(self) -> dict[str, str]:
        return {**_JSON, "Authorization": f"Bearer {self.__token}"}

    def _raise_http_error(self, response: Any, what: str) -> None:
        raise _requests().exceptions.HTTPError(
            f"OpenPAI {what}: HTTP {response.status_code}: {_reason(response)}", response=response
        )


def _url(path: str) -> str:
    return urljoin(OpenPai().pai_url, path)


def _reason(response: Any) -> str:
    """OpenPAI's error message (its JSON ``message``), else the body as text."""
    try:
        return str(response.json()["message"])
    except (ValueError, KeyError, TypeError):
        return str(response.text).strip() or "no message"


def _exit_report(status: dict[str, Any]) -> str:
    """Why the job ended, from OpenPAI's job status: exit type, exit code and diagnostics when given."""
    parts = [
        f"{label} {status[key]}"
        for key, label in (("appExitType", "exit type"), ("appExitCode", "exit code"))
        if status.get(key) not in (None, "")
    ]
    if status.get("appExitDiagnostics"):
        parts.append(str(status["appExitDiagnostics"]).strip())
    return "; ".join(parts) or "no reason given by OpenPAI"
