"""Amazon ECS for Luigi: `ECSTask` runs a task definition on a cluster and waits until its tasks stop.

Needs the ``ecs`` extra (boto3). Luigi made the module's ``client`` with ``boto3.client("ecs")`` at
import; here ``client`` stands for that client and makes it on first use (so importing needs no boto3
and no AWS region), again whenever ``boto3.client`` or the ``AWS_*`` environment changes. A test's
``mock.patch('boto3.client')`` or ``mock.patch('luigi.contrib.ecs.client')`` is therefore seen. The
task's command and overrides go to ECS as plain JSON: nothing of the task is pickled.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from typing import Any

import luigi
from luigi.contrib.optional import require

__all__ = ["POLL_TIME", "ECSTask", "client"]

logger = logging.getLogger("luigi-interface")

POLL_TIME = 2  # seconds between two status checks of the tasks, as in Luigi; read at each check

_STOPPED = "STOPPED"
_HTTP_OK = 200
# ECS's stopCode values that mean the task was ended from outside or never ran, not that it finished.
_NOT_FINISHED_STOP_CODES = frozenset(
    {
        "TaskFailedToStart",
        "UserInitiated",
        "ServiceSchedulerInitiated",
        "SpotInterruption",
        "TerminationNotice",
    }
)


def __getattr__(name: str) -> Any:
    """``luigi.contrib.ecs.boto3`` as in Luigi, which imported it on top (tests patch through it)."""
    if name == "boto3":
        return require("boto3", "ecs", "luigi.contrib.ecs")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _EcsClientOnFirstUse:
    """``boto3.client("ecs")``, made when first called and again when boto3.client or AWS_* env changes."""

    def __init__(self) -> None:
        self._made_for: tuple[Any, ...] | None = None
        self._client: Any = None

    def _current(self) -> Any:
        boto3 = require("boto3", "ecs", "luigi.contrib.ecs")
        settings = (boto3.client, *sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_")))
        if settings != self._made_for:
            self._client = boto3.client("ecs")
            self._made_for = settings
        return self._client

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and mock probe dunders: answer for this object, not boto3's
            raise AttributeError(name)
        return getattr(self._current(), name)


client: Any = _EcsClientOnFirstUse()


def _check_ok(response: dict[str, Any], what: str) -> None:
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status != _HTTP_OK:
        raise Exception(f"ECS {what} answered HTTP {status}: {response}")


def _describe_tasks(task_ids: list[str], cluster: str) -> list[dict[str, Any]]:
    """ECS's description of every task in ``task_ids``; an error when ECS reports or omits any of them."""
    response = client.describe_tasks(tasks=task_ids, cluster=cluster)
    _check_ok(response, "DescribeTasks")
    if response.get("failures"):
        raise Exception(f"ECS could not describe the tasks on cluster {cluster!r}: {response['failures']}")
    tasks = list(response["tasks"])
    missing = set(task_ids) - {task["taskArn"] for task in tasks}
    if missing:
        raise Exception(
            f"ECS no longer knows tasks {sorted(missing)} on cluster {cluster!r} (lost); "
            "they may not have finished"
        )
    return tasks


def _get_task_statuses(task_ids: list[str], cluster: str) -> list[str]:
    """The ``lastStatus`` of each task (PROVISIONING ... RUNNING ... STOPPED)."""
    return [str(task["lastStatus"]) for task in _describe_tasks(task_ids, cluster)]


def _track_tasks(task_ids: list[str], cluster: str) -> None:
    """Poll until every task is STOPPED; then an error unless each one finished with exit code 0."""
    while True:
        tasks = _describe_tasks(task_ids, cluster)
        statuses = [task["lastStatus"] for task in tasks]
        if all(status == _STOPPED for status in statuses):
            _raise_unless_finished(tasks)
            logger.info("ECS tasks %s finished", task_ids)
            return
        logger.debug("ECS task statuses: %s", statuses)
        time.sleep(POLL_TIME)


def _raise_unless_finished(tasks: list[dict[str, Any]]) -> None:
    """Stopped is not done: a task stopped from outside, or a container that exited non-zero, failed."""
    problems = []
    for task in tasks:
        stop_code = task.get("stopCode")
        failed_containers = [
            f"container {c.get('name')!r} exited {c['exitCode']}"
            for c in task.get("containers", [])
            if c.get("exitCode") not in (None, 0)
        ]
        if stop_code in _NOT_FINISHED_STOP_CODES or failed_containers:
            details = ", ".join(
                [*failed_containers, f"stopCode {stop_code}", f"reason {task.get('stoppedReason')!r}"]
            )
            problems.append(f"task {task['taskArn']} did not finish: {details}")
    if problems:
        raise Exception("; ".join(problems))


class ECSTask(luigi.Task):
    """Run a task definition on an ECS cluster and wait until all its tasks have stopped.

    Give exactly one of ``task_def_arn`` (a registered definition) and ``task_def`` (a dict of
    RegisterTaskDefinition's arguments, registered by `run`).
    """

    task_def_arn = luigi.OptionalParameter(default=None)
    task_def = luigi.OptionalParameter(default=None)
    cluster = luigi.Parameter(default="default")

    _task_ids: list[str] | None = None

    @property
    def ecs_task_ids(self) -> list[str] | None:
        """The ARNs of the tasks `run` started, once it has started them."""
        return self._task_ids

    @property
    def command(self) -> list[dict[str, Any]] | None:
        """Override to replace containers' commands: ``[{"name": container, "command": [...]}]``."""
        return None

    @staticmethod
    def update_container_overrides_command(
        container_overrides: list[dict[str, Any]], command: dict[str, Any]
    ) -> None:
        """Give the override of ``command["name"]`` that command, adding an override when there is none."""
        for override in container_overrides:
            if override.get("name") == command["name"]:
                override["command"] = command["command"]
                return
        container_overrides.append(command)

    @property
    def combined_overrides(self) -> dict[str, Any]:
        """`run_task_kwargs`' ``overrides`` with `command` merged in; `command` wins for a named container."""
        overrides = copy.deepcopy(self.run_task_kwargs.get("overrides", {}))
        if not self.command:
            return dict(overrides)
        container_overrides = overrides.setdefault("containerOverrides", [])
        for command in self.command:
            self.update_container_overrides_command(container_overrides, copy.deepcopy(command))
        return dict(overrides)

    @property
    def run_task_kwargs(self) -> dict[str, Any]:
        """Override to pass more RunTask arguments (``launchType``, ``networkConfiguration``, ...)."""
        return {}

    def run(self) -> None:
        task_def_arn = self._registered_task_definition()
        response = client.run_task(**self._run_task_arguments(task_def_arn))
        if response.get("failures") or not response.get("tasks"):
            reasons = ", ".join(
                f"fail to run task {f.get('arn')} reason: {f.get('reason')}"
                for f in response.get("failures", [])
            )
            raise Exception(reasons or f"ECS started no task for {task_def_arn}: {response}")
        self._task_ids = [task["taskArn"] for task in response["tasks"]]
        logger.info("Started ECS tasks %s on cluster %s", self._task_ids, self.cluster)
        _track_tasks(self._task_ids, self.cluster)

    def _registered_task_definition(self) -> str:
        if (self.task_def is None) == (self.task_def_arn is None):
            raise ValueError(
                f"{self.task_id}: give exactly one of task_def (a definition to register) and task_def_arn"
            )
        if self.task_def_arn is not None:
            return str(self.task_def_arn)
        response = client.register_task_definition(**self._task_definition())
        return str(response["taskDefinition"]["taskDefinitionArn"])

    def _task_definition(self) -> dict[str, Any]:
        """``task_def`` as a dict; JSON text (from the command line or a config file) is parsed."""
        definition: Any = self.task_def
        if isinstance(definition, str):
            try:
                definition = json.loads(definition)
            except ValueError as exc:
                raise ValueError(f"{self.task_id}: task_def is not a JSON object: {exc}") from exc
        if not isinstance(definition, dict):
            raise ValueError(f"{self.task_id}: task_def must be a dict of RegisterTaskDefinition's arguments")
        return definition

    def _run_task_arguments(self, task_def_arn: str) -> dict[str, Any]:
        arguments = dict(self.run_task_kwargs)
        clashing = sorted({"taskDefinition", "cluster"} & arguments.keys())
        if clashing:
            raise ValueError(
                f"{self.task_id}: run_task_kwargs must not set {clashing}: use the task_def_arn/task_def "
                "and cluster parameters"
            )
        arguments.update(taskDefinition=task_def_arn, cluster=self.cluster, overrides=self.combined_overrides)
        return arguments
