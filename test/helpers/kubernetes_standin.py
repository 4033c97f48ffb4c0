"""A STAND-IN for the Kubernetes API server's Job and Pod calls (no cluster can run here).

It answers the documented REST calls pykube makes for ``batch/v1`` Jobs and ``v1`` Pods:
``POST /apis/batch/v1/namespaces/<ns>/jobs`` (create; 409 for a name taken, 422 for a name or a
restartPolicy Kubernetes refuses), ``GET .../jobs?labelSelector=`` (list), ``GET``, ``PATCH`` (merge patch)
and ``DELETE`` (DeleteOptions with a propagationPolicy) of ``.../jobs/<name>``,
``GET /api/v1/namespaces/<ns>/pods?labelSelector=job-name%3D<job>`` and
``GET /api/v1/namespaces/<ns>/pods/<pod>/log?container=<c>``. Every call needs the kubeconfig's Bearer
token; errors are Kubernetes' ``Status`` bodies. Each Job moves one step through a script the test sets
(`STEPS`) each time it is listed; a step sets its newest pod's phase and container states and the Job's
counts and conditions, as the Job controller and the kubelet would. It runs on a thread on a free
loopback port; `write_kubeconfig` points pykube at it.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from helpers.json_http import JsonHandler, serving
from helpers.scripted import Scripted, ScriptedJobs

__all__ = ["LOST", "STEPS", "KubeJob", "KubernetesStandIn", "kubernetes_standin"]

LOST = "Lost"  # a script step: from here on the cluster no longer has the Job (a TTL, someone's delete)
STEPS = frozenset(
    {
        "NoPod",  # the Job exists, its controller has not made a pod yet
        "Pending",  # a pod, not yet scheduled
        "ContainerCreating",
        "PodInitializing",  # init containers run, the containers wait
        "Running",
        "Succeeded",
        "Failed",  # the pod's containers exited non-zero; the Job starts another pod on the next step
        "ImagePullBackOff",
        "CrashLoopBackOff",
        LOST,
    }
)
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_JOBS = re.compile(r"/apis/batch/v1/namespaces/([^/]+)/jobs(?:/([^/]+))?")
_PODS = re.compile(r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)/log)?")


@dataclass
class KubeJob(Scripted):
    """One Job as the cluster holds it: its object (status included), its pods (newest last), and the
    DeleteOptions it was deleted with."""

    obj: dict[str, Any] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    applied: int = -1  # the script step the objects show
    deleted_with: dict[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


class KubernetesStandIn(ScriptedJobs):
    """The cluster's state: the token, the script and pod output for new Jobs, the Jobs by namespace/name."""

    def __init__(self) -> None:
        super().__init__()
        self.token = "tok-" + secrets.token_hex(16)
        self.script = ["NoPod", "Pending", "ContainerCreating", "Running", "Succeeded"]
        self.exit_code = 1
        self.termination_message = ""
        self.pod_output = "hello from the pod\n"
        self.jobs: dict[str, KubeJob] = {}
        self.deleted: list[KubeJob] = []
        self.url = ""

    def write_kubeconfig(self, path: Path, namespace: str | None = None) -> Path:
        """A kubeconfig whose current context is this stand-in with its token (JSON is YAML)."""
        context: dict[str, Any] = {"cluster": "standin", "user": "luigi"}
        if namespace is not None:
            context["namespace"] = namespace
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
                    "users": [{"name": "luigi", "user": {"token": self.token}}],
                    "contexts": [{"name": "standin", "context": context}],
                    "current-context": "standin",
                }
            )
        )
        return path

    def only_job(self) -> KubeJob:
        [job] = [*self.jobs.values(), *self.deleted]
        return job

    def wait_for_step(self, step: str, timeout: float = 30) -> KubeJob:
        """The first Job a listing has shown at ``step`` (the task under test is polling it)."""
        return self.jobs[self.wait_until_seen(self.jobs, step, "Kubernetes job", timeout)]

    def create(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        refused = _refusal(body)
        if refused:
            return _status(422, "Invalid", refused)
        name = body["metadata"]["name"]
        if f"{namespace}/{name}" in self.jobs:
            return _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
        body["metadata"].update(namespace=namespace, uid=secrets.token_hex(8), creationTimestamp=_NOW)
        body["spec"].setdefault("parallelism", 1)
        body["status"] = {}
        job = self.add(self.jobs, f"{namespace}/{name}", KubeJob(obj=body, script=list(self.script)))
        return 201, job.obj

    def list_jobs(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        """The Jobs of ``namespace`` whose labels match, each moved one step first."""
        items = []
        for key, job in list(self.jobs.items()):
            if job.namespace != namespace or not _matches(job.obj["metadata"].get("labels", {}), selector):
                continue
            if self.poll(self.jobs, key, LOST) is not None:
                with self.lock:
                    self._apply(job)
                    items.append(job.obj)
        return items

    def known_job(self, namespace: str, name: str) -> KubeJob | None:
        job = self.jobs.get(f"{namespace}/{name}")
        return None if job is None or job.current == LOST else job

    def patch(self, job: KubeJob, patch: dict[str, Any]) -> None:
        with self.lock:
            _merge(job.obj, patch)

    def delete(self, job: KubeJob, options: dict[str, Any]) -> None:
        with self.lock:
            job.deleted_with = options
            del self.jobs[f"{job.namespace}/{job.name}"]
            self.deleted.append(job)
            if options.get("propagationPolicy") != "Orphan":
                job.pods.clear()
            self.changed.notify_all()

    def pods(self, namespace: str, selector: dict[str, str]) -> list[dict[str, Any]]:
        with self.lock:
            return [
                pod
                for job in self.jobs.values()
                if job.namespace == namespace and job.current != LOST
                for pod in job.pods
                if _matches(pod["metadata"]["labels"], selector)
            ]

    def _apply(self, job: KubeJob) -> None:
        """Make the Job and its newest pod show the current step, once per step."""
        if job.applied == job.step:
            return
        job.applied = job.step
        step = job.current
        if step == "NoPod":
            return
        if not job.pods or job.pods[-1]["status"]["phase"] in _TERMINAL_PHASES:
            job.pods.append(_new_pod(job))
        _show(job.pods[-1], step, self)
        _count(job)


_NOW = "2026-01-01T00:00:00Z"


def _refusal(body: dict[str, Any]) -> str:
    """Kubernetes' reason to refuse this Job, or empty when it is valid (the checks the stand-in makes)."""
    name = str(body.get("metadata", {}).get("name", ""))
    if not _DNS_LABEL.fullmatch(name) or len(name) > 63:
        return (
            f'Job.batch "{name}" is invalid: metadata.name: Invalid value: "{name}": must be no more than '
            "63 characters and consist of lower case alphanumeric characters or '-'"
        )
    policy = body.get("spec", {}).get("template", {}).get("spec", {}).get("restartPolicy")
    if policy not in ("Never", "OnFailure"):
        return (
            f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
            f'"{policy}": supported values: "OnFailure", "Never"'
        )
    return ""


def _new_pod(job: KubeJob) -> dict[str, Any]:
    """A pod of the Job as its controller makes it: the template, plus the job-name label."""
    template = job.obj["spec"]["template"]
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    uid = job.obj["metadata"]["uid"]
    labels = {**template["metadata"].get("labels", {}), "job-name": job.name, "controller-uid": uid}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job.name}-{suffix}", "namespace": job.namespace, "labels": labels},
        "spec": json.loads(json.dumps(template["spec"])),
        "status": {"phase": "Pending"},
    }


def _set(pod: dict[str, Any], phase: str, init: dict[str, Any] | None, main: dict[str, Any] | None) -> None:
    """Give the pod ``phase`` and every init container / container the state ``init`` / ``main``."""
    status: dict[str, Any] = {"phase": phase}
    spec = pod["spec"]
    if init is not None and spec.get("initContainers"):
        status["initContainerStatuses"] = [{"name": c["name"], "state": init} for c in spec["initContainers"]]
    if main is not None:
        status["containerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "state": main} for c in spec["containers"]
        ]
    pod["status"] = status


def _waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def _terminated(code: int, reason: str, message: str = "") -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason, **({"message": message} if message else {})}}


_DONE = _terminated(0, "Completed")
_RUNNING = {"running": {"startedAt": _NOW}}


def _show(pod: dict[str, Any], step: str, state: KubernetesStandIn) -> None:
    """Give the pod the phase and container states it has at ``step``, as the kubelet reports them."""
    name = pod["metadata"]["name"]
    image = pod["spec"]["containers"][0].get("image", "")
    match step:
        case "Pending":
            _set(pod, "Pending", None, None)
        case "ContainerCreating" | "PodInitializing":
            _set(pod, "Pending", _DONE if step == "ContainerCreating" else _RUNNING, _waiting(step))
        case "Running":
            _set(pod, "Running", _DONE, _RUNNING)
        case "Succeeded":
            _set(pod, "Succeeded", _DONE, _DONE)
        case "Failed":
            _set(pod, "Failed", _DONE, _terminated(state.exit_code, "Error", state.termination_message))
        case "ImagePullBackOff":
            _set(pod, "Pending", _DONE, _waiting(step, f'Back-off pulling image "{image}"'))
        case "CrashLoopBackOff":
            _set(
                pod, "Running", _DONE, _waiting(step, f"back-off 10s restarting failed container pod={name}")
            )
        case _:
            raise ValueError(
                f"kubernetes stand-in: {step!r} is not a step of a script; use one of {sorted(STEPS)}"
            )


def _count(job: KubeJob) -> None:
    """The Job's status from its pods, as the Job controller keeps it (counts, then conditions)."""
    phases = [pod["status"]["phase"] for pod in job.pods]
    status: dict[str, Any] = {"startTime": _NOW}
    for key, count in (
        ("active", sum(p not in _TERMINAL_PHASES for p in phases)),
        ("succeeded", phases.count("Succeeded")),
        ("failed", phases.count("Failed")),
    ):
        if count:
            status[key] = count
    if status.get("succeeded"):
        status["conditions"] = [{"type": "Complete", "status": "True"}]
    elif status.get("failed", 0) > job.obj["spec"].get("backoffLimit", 6):
        status["conditions"] = [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"},
        ]  # fmt: skip
    job.obj["status"] = status


def _has_run(pod: dict[str, Any]) -> bool:
    """Whether a container of the pod has started (Kubernetes has output to show for it)."""
    states = [c["state"] for c in pod["status"].get("containerStatuses", [])]
    return any("running" in state or "terminated" in state for state in states)


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _selector(query: str) -> dict[str, str]:
    """An equality-based labelSelector (``a=b,c=d``), the only kind pykube's dict selectors make."""
    raw = parse_qs(query).get("labelSelector", [""])[0]
    return dict(term.split("=", 1) for term in raw.split(",") if term)


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """A JSON merge patch (RFC 7386): null deletes, objects merge, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    """Kubernetes' error body."""
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": message, "reason": reason, "code": code}  # fmt: skip


def _handler(state: KubernetesStandIn) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def _route(self) -> tuple[re.Match[str] | None, re.Match[str] | None, str] | None:
            if self.headers.get("Authorization") != f"Bearer {state.token}":
                self.reply(*_status(401, "Unauthorized", "Unauthorized"))
                return None
            parts = urlsplit(self.path)
            return _JOBS.fullmatch(parts.path), _PODS.fullmatch(parts.path), parts.query

        def _missing(self, what: str, name: str) -> None:
            self.reply(*_status(404, "NotFound", f'{what} "{name}" not found'))

        def do_GET(self) -> None:  # noqa: N802  # http.server's names
            route = self._route()
            if route is None:
                return
            jobs, pods, query = route
            if jobs and jobs[2] is None:
                items = state.list_jobs(jobs[1], _selector(query))
                self.reply(200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": items})
            elif jobs:
                job = state.known_job(jobs[1], jobs[2])
                if job is None:
                    self._missing("jobs.batch", jobs[2])
                else:
                    self.reply(200, job.obj)
            elif pods and pods[2] is None:
                items = state.pods(pods[1], _selector(query))
                self.reply(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
            elif pods:
                self._log(pods[1], pods[2])
            else:
                self._missing("path", self.path)

        def _log(self, namespace: str, name: str) -> None:
            pod = next((p for p in state.pods(namespace, {}) if p["metadata"]["name"] == name), None)
            if pod is None:
                self._missing("pods", name)
                return
            if not _has_run(pod):
                message = f'container in pod "{name}" is waiting to start'
                self.reply(*_status(400, "BadRequest", message))
                return
            data = state.pod_output.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            jobs, _pods, _query = route
            if jobs and jobs[2] is None:
                self.reply(*state.create(jobs[1], self.read_json()))
            else:
                self._missing("path", self.path)

        def _job(self) -> KubeJob | None:
            route = self._route()
            if route is None:
                return None
            jobs = route[0]
            job = state.known_job(jobs[1], jobs[2]) if jobs and jobs[2] else None
            if job is None:
                self._missing("jobs.batch", self.path.rsplit("/", 1)[-1])
            return job

        def do_PATCH(self) -> None:  # noqa: N802
            job = self._job()
            if job is not None:
                state.patch(job, self.read_json())
                self.reply(200, job.obj)

        def do_DELETE(self) -> None:  # noqa: N802
            job = self._job()
            if job is not None:
                state.delete(job, self.read_json())
                self.reply(200, job.obj)

    return Handler


@pytest.fixture
def kubernetes_standin() -> Iterator[KubernetesStandIn]:
    """A fresh stand-in on a free 127.0.0.1 port, stopped after the test."""
    state = KubernetesStandIn()
    with serving(_handler(state), "kubernetes-standin") as url:
        state.url = url
        yield state
