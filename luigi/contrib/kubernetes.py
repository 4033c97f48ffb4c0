"""Kubernetes for Luigi: `KubernetesJobTask` runs a pod spec as a ``batch/v1`` Job and waits until it ended.

Needs the ``kubernetes`` extra (pykube-ng, imported as ``pykube``), imported when a task runs, not at import.
The cluster comes from the ``[kubernetes]`` section: a kubeconfig file or the pod's service account. Only
the Job's JSON reaches the cluster: nothing of the task is pickled.

Unlike Luigi 3.8, a pod still initializing (``PodInitializing``, ``ContainerCreating``) is waited for, not
taken as a failure, and a container that cannot start (an image that cannot be pulled, a crash loop, a
bad config) fails the task with Kubernetes' reason instead of leaving it waiting.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import time
import uuid
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

import luigi
from luigi.contrib.optional import require

__all__ = ["KubernetesJobError", "KubernetesJobTask", "kubernetes"]

logger = logging.getLogger(__name__)

# Waiting reasons of a container that will not start without someone changing the spec or the image. Any
# other reason (ContainerCreating, PodInitializing while init containers run ...) is waited out: a Job that
# must not wait forever sets active_deadline_seconds.
_CANNOT_START = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
# A Job is named "<name>-<UTC time>-<16 hex digits>" and carried in the pods' job-name label (63 at most).
_NAME_SUFFIX_LENGTH = len("-20260101000000-") + 16
_LABEL_LENGTH = 63
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DELETE_IN_BACKGROUND = "Background"


class JobStatus(str, Enum):
    """What the task makes of its Job; equal to Luigi's strings (``"RUNNING"`` ...)."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class KubernetesJobError(RuntimeError):
    """The task's Kubernetes Job failed, could not start its pods, or is gone from the cluster."""


class kubernetes(luigi.Config):  # noqa: N801  # the [kubernetes] section, Luigi's name
    """The ``[kubernetes]`` section: how to reach the cluster, where jobs go, how many failed pods to bear."""

    auth_method = luigi.Parameter(
        default="kubeconfig", description="'kubeconfig' (the file at kubeconfig_path) or 'service-account'"
    )
    kubeconfig_path = luigi.Parameter(default="~/.kube/config", description="the kubeconfig file to use")
    max_retrials = luigi.IntParameter(default=0, description="failed pods a job may have and still succeed")
    kubernetes_namespace = luigi.OptionalParameter(
        default=None, description="the namespace of the jobs; the kubeconfig context's namespace when unset"
    )


def _pykube() -> Any:
    return require("pykube", "kubernetes", "luigi.contrib.kubernetes", "pykube-ng")


class KubernetesJobTask(luigi.Task):
    """Run `spec_schema` (a pod spec) as a Kubernetes Job named after `name`; done when one pod succeeded."""

    __DEFAULT_POLL_INTERVAL = 5
    __DEFAULT_POD_CREATION_INTERVAL = 5

    @functools.cached_property
    def kubernetes_config(self) -> kubernetes:
        """The ``[kubernetes]`` section, read when first asked for."""
        return kubernetes()

    @property
    def auth_method(self) -> str:
        return str(self.kubernetes_config.auth_method)

    @property
    def kubeconfig_path(self) -> str:
        return str(self.kubernetes_config.kubeconfig_path)

    @property
    def kubernetes_namespace(self) -> str | None:
        namespace = self.kubernetes_config.kubernetes_namespace
        return None if namespace is None else str(namespace)

    @property
    def max_retrials(self) -> int:
        """Failed pods the Job may have and still succeed; one more fails the task."""
        return int(self.kubernetes_config.max_retrials)

    @property
    def name(self) -> str:
        """The start of the Job's name: at most 31 lowercase letters, digits and '-'."""
        raise NotImplementedError(
            "a KubernetesJobTask must define name, the start of its Kubernetes job's name"
        )

    @property
    def labels(self) -> dict[str, str]:
        """Labels for the Job and its pods."""
        return {}

    @property
    def spec_schema(self) -> dict[str, Any]:
        """The pod spec the Job runs (``containers`` ...); ``restartPolicy`` defaults to ``Never``."""
        raise NotImplementedError("a KubernetesJobTask must define spec_schema, the pod spec its job runs")

    @property
    def backoff_limit(self) -> int:
        """How many times Kubernetes starts a new pod after one failed (the Job's ``backoffLimit``)."""
        return 6

    @property
    def delete_on_success(self) -> bool:
        """Delete the Job and its pods once it succeeded."""
        return True

    @property
    def print_pod_logs_on_exit(self) -> bool:
        """Log the pods' output when the Job ended, successfully or not."""
        return False

    @property
    def active_deadline_seconds(self) -> int | None:
        """Seconds the Job may run before Kubernetes ends it (``activeDeadlineSeconds``); None: no limit."""
        return None

    @property
    def poll_interval(self) -> float:
        """Seconds between two status checks of a Job whose pods run."""
        return self.__DEFAULT_POLL_INTERVAL

    @property
    def pod_creation_wait_interal(self) -> float:  # sic: Luigi's name
        """Seconds between two status checks while no pod of the Job runs yet."""
        return self.__DEFAULT_POD_CREATION_INTERVAL

    def signal_complete(self) -> None:
        """Called once the Job succeeded: override to write a marker that `output` names."""

    def output(self) -> Any:
        """None, as in Luigi: the task runs each time unless `output` and `signal_complete` are overridden."""
        return None

    def _init_kubernetes(self) -> None:
        """Connect to the cluster and name this run's Job (a new name each run)."""
        self.__logger = logger
        self.__kube_api = self.__connect()
        self.job_uuid = uuid.uuid4().hex
        now = datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S")
        self.uu_name = f"{self.__checked_name()}-{now}-{self.job_uuid[:16]}"

    def __connect(self) -> Any:
        pykube = _pykube()
        if self.auth_method == "kubeconfig":
            if not Path(self.kubeconfig_path).expanduser().is_file():
                raise FileNotFoundError(
                    f"[kubernetes] kubeconfig_path {self.kubeconfig_path!r} is not a file: point it at your "
                    "cluster's kubeconfig, or set auth_method = service-account inside the cluster"
                )
            return pykube.HTTPClient(pykube.KubeConfig.from_file(self.kubeconfig_path))
        if self.auth_method == "service-account":
            try:
                return pykube.HTTPClient(pykube.KubeConfig.from_service_account())
            except (FileNotFoundError, KeyError) as exc:  # no token file, or no KUBERNETES_SERVICE_HOST/PORT
                raise RuntimeError(
                    f"[kubernetes] auth_method = service-account found no service account ({exc}): run the "
                    "worker in a pod of the cluster, or set auth_method = kubeconfig"
                ) from exc
        choices = "'kubeconfig' or 'service-account'"
        raise ValueError(f"[kubernetes] auth_method {self.auth_method!r} is not known: use {choices}")

    def __checked_name(self) -> str:
        name = self.name
        if not _DNS_LABEL.fullmatch(name) or len(name) > _LABEL_LENGTH - _NAME_SUFFIX_LENGTH:
            raise ValueError(
                f"{self.task_id}: name {name!r} cannot start a Kubernetes job name: use at most "
                f"{_LABEL_LENGTH - _NAME_SUFFIX_LENGTH} lowercase letters, digits and '-', starting and "
                "ending with a letter or digit"
            )
        return name

    def run(self) -> None:
        self._init_kubernetes()
        job = _pykube().Job(self.__kube_api, self.__job_json())
        job.create()
        self.__logger.info("Started Kubernetes job %s in namespace %s", self.uu_name, job.namespace)
        self.__track_job()

    def __job_json(self) -> dict[str, Any]:
        """The ``batch/v1`` Job that runs `spec_schema`, labelled so that this run finds it again."""
        pod_spec = copy.deepcopy(self.spec_schema)
        pod_spec.setdefault("restartPolicy", "Never")
        job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": self.uu_name,
                "labels": {"spawned_by": "luigi", "luigi_task_id": self.job_uuid, **self.labels},
            },
            "spec": {
                "backoffLimit": self.backoff_limit,
                "template": {"metadata": {"name": self.uu_name, "labels": {**self.labels}}, "spec": pod_spec},
            },
        }
        if self.kubernetes_namespace is not None:
            job["metadata"]["namespace"] = self.kubernetes_namespace
        if self.active_deadline_seconds is not None:
            job["spec"]["activeDeadlineSeconds"] = self.active_deadline_seconds
        return job

    def __track_job(self) -> None:
        """Poll the Job until it ended; raise KubernetesJobError unless it succeeded, then signal_complete."""
        self.__pods_seen: set[str] = set()
        self.__started = False
        self.__failure = ""
        status = self.__get_job_status()
        while status == JobStatus.RUNNING:
            time.sleep(self.poll_interval if self.__started else self.pod_creation_wait_interal)
            status = self.__get_job_status()
        if status == JobStatus.FAILED:
            raise KubernetesJobError(self.__failure or f"Kubernetes job {self.uu_name} failed")
        self.__logger.info("Kubernetes job %s succeeded", self.uu_name)
        self.signal_complete()

    def __get_job_status(self) -> str:
        """The Job's status now (a JobStatus); once it ended, stop it, log and delete as configured."""
        job = self.__find_job()
        if job is None:
            self.__failure = (
                f"Kubernetes job {self.uu_name} is gone from namespace {self.__namespace()} "
                "(deleted while the task ran?)"
            )
            return JobStatus.FAILED
        pods = [pod.obj for pod in self.__find_pods()]
        self.__note_pods(pods)
        status, reason = _judge(job.obj, pods, self.max_retrials)
        if status != JobStatus.RUNNING:
            self.__end(job, status, reason)
        return status

    def __end(self, job: Any, status: JobStatus, reason: str) -> None:
        """Stop the Job starting pods, log their output if asked, delete it on success if asked."""
        job.scale(replicas=0)
        if self.print_pod_logs_on_exit:
            self.__log_pod_output()
        if status == JobStatus.FAILED:
            self.__failure = f"Kubernetes job {self.uu_name} failed: {reason}"
        elif self.delete_on_success:
            job.delete(propagation_policy=_DELETE_IN_BACKGROUND)

    def __namespace(self) -> str:
        return self.kubernetes_namespace or str(self.__kube_api.config.namespace)

    def __find_job(self) -> Any:
        query = _pykube().Job.objects(self.__kube_api, namespace=self.__namespace())
        jobs = list(query.filter(selector={"luigi_task_id": self.job_uuid}))
        return jobs[0] if jobs else None

    def __find_pods(self) -> list[Any]:
        query = _pykube().Pod.objects(self.__kube_api, namespace=self.__namespace())
        return list(query.filter(selector={"job-name": self.uu_name}))

    def __note_pods(self, pods: list[dict[str, Any]]) -> None:
        """Say how to follow each new pod's output; note when the first one got past Pending."""
        for pod in pods:
            name = pod["metadata"]["name"]
            if name not in self.__pods_seen:
                self.__pods_seen.add(name)
                self.__logger.info(
                    "To follow its output: kubectl logs -f pod/%s -n %s", name, self.__namespace()
                )
            if pod.get("status", {}).get("phase", "Pending") != "Pending":
                self.__started = True

    def __log_pod_output(self) -> None:
        requests = require("requests", "kubernetes", "luigi.contrib.kubernetes", "pykube-ng")
        for pod in self.__find_pods():
            for container in pod.obj["spec"].get("containers", []):
                try:
                    text = pod.logs(container=container["name"])
                except requests.exceptions.HTTPError as exc:  # a container that never started has none
                    text = f"(no output: {exc})"
                self.__logger.info("Output of pod %s, container %s:\n%s", pod.name, container["name"], text)


def _judge(job: dict[str, Any], pods: list[dict[str, Any]], max_retrials: int) -> tuple[JobStatus, str]:
    """The status of a Job from its counts, its conditions and its pods' containers, and why it failed."""
    status = job.get("status", {})
    if status.get("succeeded", 0) > 0:
        return JobStatus.SUCCEEDED, ""
    failed_condition = next(
        (c for c in status.get("conditions", []) if c.get("type") == "Failed" and c.get("status") == "True"),
        None,
    )
    failed = status.get("failed", 0)
    if failed > max_retrials or failed_condition is not None:
        exits = [_exit_of(pod, c) for pod in pods for c in _containers(pod) if _exited_badly(c)]
        if failed_condition is not None:
            exits.append(_condition_of(failed_condition))
        counted = f"{failed} failed pod{'s' if failed != 1 else ''}, max_retrials {max_retrials}"
        return JobStatus.FAILED, "; ".join([counted, *exits])
    stuck = [_stuck_of(pod, c) for pod in pods for c in _containers(pod) if _cannot_start(c)]
    if stuck:
        return JobStatus.FAILED, "; ".join(stuck)
    return JobStatus.RUNNING, ""


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The statuses of a pod's init containers and containers."""
    status = pod.get("status", {})
    return [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]


def _exited_badly(container: dict[str, Any]) -> bool:
    terminated = container.get("state", {}).get("terminated")
    return terminated is not None and terminated.get("exitCode", 0) != 0


def _exit_of(pod: dict[str, Any], container: dict[str, Any]) -> str:
    terminated = container["state"]["terminated"]
    message = (terminated.get("message") or "").strip()
    return (
        f"pod {pod['metadata']['name']} container {container['name']} exited {terminated['exitCode']} "
        f"({terminated.get('reason', 'no reason')})" + (f": {message}" if message else "")
    )


def _cannot_start(container: dict[str, Any]) -> bool:
    waiting = container.get("state", {}).get("waiting") or {}
    return waiting.get("reason") in _CANNOT_START


def _stuck_of(pod: dict[str, Any], container: dict[str, Any]) -> str:
    waiting = container["state"]["waiting"]
    message = (waiting.get("message") or "").strip()
    return (
        f"pod {pod['metadata']['name']} container {container['name']} cannot start: {waiting['reason']}"
        + (f": {message}" if message else "")
    )


def _condition_of(condition: dict[str, Any]) -> str:
    return f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".strip(": ")
