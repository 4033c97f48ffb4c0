"""A STAND-IN for the AWS Batch and Amazon ECS job-status APIs, for what moto cannot do without Docker.

moto's server runs Batch jobs in Docker (absent here) or, with ``use_docker: false``, finishes them inside
SubmitJob; its ECS StopTask leaves no ``stopCode`` and exit code 0. So no moto job is ever seen RUNNING,
terminated, or lost. This server speaks the documented wire protocols (Batch: REST-JSON ``POST /v1/...``;
ECS: JSON 1.1 with ``X-Amz-Target: AmazonEC2ContainerServiceV20141113.*``) for the calls the modules make,
and moves each job or task through a status script the test sets, one step per Describe. TerminateJob and
StopTask end them as AWS documents (Batch: FAILED with the reason; ECS: STOPPED, ``stopCode`` UserInitiated,
containers exit 143). It runs on a thread on a free loopback port and checks no signatures.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from helpers.json_http import JsonHandler, serving
from helpers.scripted import Scripted, ScriptedJobs

__all__ = ["LOST", "AwsComputeStandIn", "aws_compute_standin"]

LOST = "LOST"  # a script step: from here on the service no longer knows the job or task
_ECS_TARGET = "AmazonEC2ContainerServiceV20141113."
QUEUE = "standin-queue"


@dataclass
class Run(Scripted):
    """One Batch job or ECS task: its script, where it is in it, and what the caller sent."""

    arn: str = ""
    request: dict[str, Any] = field(default_factory=dict)
    ended_state_field: ClassVar[str] = "status"

    @property
    def status(self) -> str:
        return self.current


class AwsComputeStandIn(ScriptedJobs):
    """The stand-in's state: the script for new runs, and every job and task by id or ARN."""

    def __init__(self) -> None:
        super().__init__()
        self.script = ["RUNNING", "SUCCEEDED"]
        self.run_task_failure: str | None = None  # when set, RunTask places nothing and reports this reason
        self.runs: dict[str, Run] = {}
        self.endpoint_url = ""

    def start(self, request: dict[str, Any], arn: str) -> Run:
        return self.add(self.runs, arn, Run(arn=arn, request=request, script=list(self.script)))

    def describe(self, arn: str) -> Run | None:
        """Advance the run one step (a Describe call) and return it, or None once it is lost."""
        return self.poll(self.runs, arn, LOST)

    def end_run(self, arn: str, **fields: Any) -> None:
        self.end(self.runs[arn], **fields)

    def wait_for_status(self, status: str, timeout: float = 30) -> Run:
        """The first run seen in ``status`` by a Describe (the task under test is polling it)."""
        return self.runs[self.wait_until_seen(self.runs, status, "job or task", timeout)]


def _batch_job(run: Run) -> dict[str, Any]:
    job = {
        "jobId": run.arn,
        "jobName": run.request["jobName"],
        "jobQueue": run.request["jobQueue"],
        "jobDefinition": run.request["jobDefinition"],
        "parameters": run.request.get("parameters", {}),
        "status": run.status,
        "createdAt": 0,
    }
    if run.status in ("RUNNING", "SUCCEEDED", "FAILED"):
        stream = f"{run.request['jobDefinition']}/default/{run.arn}"
        container = {"logStreamName": stream, **run.ended.get("container", {})}
        job["container"] = container
        job["attempts"] = [{"container": container}]
    if "statusReason" in run.ended:
        job["statusReason"] = run.ended["statusReason"]
    return job


def _ecs_task(run: Run) -> dict[str, Any]:
    task = {"taskArn": run.arn, "clusterArn": run.request.get("cluster", "default"), "lastStatus": run.status}
    containers = [{"name": "main", "lastStatus": run.status}]
    if run.status == "STOPPED":
        containers[0]["exitCode"] = 0
        task.update(stopCode="EssentialContainerExited", stoppedReason="Essential container in task exited")
    task["containers"] = containers
    task["overrides"] = run.request.get("overrides", {})
    task.update((name, value) for name, value in run.ended.items() if name != "status")
    return task


def _handle_batch(state: AwsComputeStandIn, action: str, body: dict[str, Any]) -> dict[str, Any]:
    if action == "describejobqueues":
        return {
            "jobQueues": [
                {"jobQueueName": QUEUE, "jobQueueArn": QUEUE, "state": "ENABLED", "status": "VALID"}
            ]
        }
    if action == "submitjob":
        run = state.start(body, arn=str(uuid.uuid4()))
        return {"jobId": run.arn, "jobName": body["jobName"], "jobArn": run.arn}
    if action == "describejobs":
        runs = [state.describe(job_id) for job_id in body["jobs"]]
        return {"jobs": [_batch_job(run) for run in runs if run is not None]}
    if action == "terminatejob":
        state.end_run(body["jobId"], status="FAILED", statusReason=body["reason"])
        return {}
    raise LookupError(f"the stand-in does not implement Batch {action}")


def _handle_ecs(state: AwsComputeStandIn, action: str, body: dict[str, Any]) -> dict[str, Any]:
    if action == "RunTask" and state.run_task_failure:
        return {
            "tasks": [],
            "failures": [{"arn": "arn:aws:ecs:container-instance/1", "reason": state.run_task_failure}],
        }
    if action == "RunTask":
        run = state.start(body, arn=f"arn:aws:ecs:us-east-1:123456789012:task/{uuid.uuid4()}")
        return {"tasks": [_ecs_task(run)], "failures": []}
    if action == "DescribeTasks":
        runs = {arn: state.describe(arn) for arn in body["tasks"]}
        return {
            "tasks": [_ecs_task(run) for run in runs.values() if run is not None],
            "failures": [{"arn": arn, "reason": "MISSING"} for arn, run in runs.items() if run is None],
        }
    if action == "StopTask":
        stopped = {
            "status": "STOPPED",
            "stopCode": "UserInitiated",
            "stoppedReason": body.get("reason", "Task stopped by user"),
            "containers": [{"name": "main", "lastStatus": "STOPPED", "exitCode": 143}],
        }
        state.end_run(body["task"], **stopped)
        return {"task": {"taskArn": body["task"], "lastStatus": "STOPPED"}}
    raise LookupError(f"the stand-in does not implement ECS {action}")


def _handler(state: AwsComputeStandIn) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802  # http.server's name
            body = self.read_json()
            target = self.headers.get("X-Amz-Target", "")
            try:
                if target.startswith(_ECS_TARGET):
                    answer = _handle_ecs(state, target[len(_ECS_TARGET) :], body)
                else:
                    answer = _handle_batch(state, self.path.rsplit("/", 1)[-1], body)
                self.reply(200, answer)
            except LookupError as exc:
                self.reply(400, {"__type": "UnknownOperationException", "message": str(exc)})

    return Handler


@pytest.fixture
def aws_compute_standin() -> Iterator[AwsComputeStandIn]:
    """A fresh stand-in on a free 127.0.0.1 port, stopped after the test."""
    state = AwsComputeStandIn()
    with serving(_handler(state), "aws-compute-standin") as url:
        state.endpoint_url = url
        yield state
