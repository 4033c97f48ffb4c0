"""AWS Batch for Luigi: `BatchTask` submits a job to a queue and waits until AWS Batch says it finished.

Needs the ``batch`` extra (boto3), imported when a client is made, not at import. The clients are
``boto3.client("batch")`` and ``boto3.client("logs")`` with boto3's own settings (region, credentials,
``AWS_ENDPOINT_URL_BATCH`` ...), looked up at each `BatchClient()`, so a test's ``mock.patch('boto3.client')``
hands it its mock. The job gets the task's `parameters` as plain strings: nothing of the task is pickled.
"""

from __future__ import annotations

import json
import logging
import random
import string
import time
from typing import Any

import luigi
from luigi.contrib.optional import require

__all__ = ["POLL_TIME", "BatchClient", "BatchJobException", "BatchTask"]

logger = logging.getLogger(__name__)

POLL_TIME = 10  # seconds between two status checks of a job, as in Luigi

LOG_GROUP = "/aws/batch/job"  # where AWS Batch sends a container's output by default
_SUCCEEDED = "SUCCEEDED"
_FAILED = "FAILED"
_HTTP_OK = 200


def __getattr__(name: str) -> Any:
    """``luigi.contrib.batch.boto3`` as in Luigi, which imported it on top (tests patch through it)."""
    if name == "boto3":
        return require("boto3", "batch", "luigi.contrib.batch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BatchJobException(Exception):
    """An AWS Batch job failed, was terminated, or is no longer known to AWS Batch."""


def _random_id() -> str:
    """A job name for a task that gives none: ``batch-job-`` and eight lowercase letters."""
    return "batch-job-" + "".join(random.choices(string.ascii_lowercase, k=8))


def _check_ok(response: dict[str, Any], what: str) -> None:
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status != _HTTP_OK:
        raise Exception(f"AWS Batch {what} answered HTTP {status}: {response}")


class BatchClient:
    """The AWS Batch calls a `BatchTask` makes: find a queue, submit, poll until done, fetch the logs."""

    def __init__(self, poll_time: float = POLL_TIME) -> None:
        boto3 = require("boto3", "batch", "luigi.contrib.batch")
        self.poll_time = poll_time
        self._client = boto3.client("batch")
        self._log_client = boto3.client("logs")
        self._queue = self.get_active_queue()

    def get_active_queue(self) -> str:
        """The name of the first job queue that is ENABLED and VALID; an error when there is none."""
        queues = self._client.describe_job_queues()["jobQueues"]
        for queue in queues:
            if queue["state"] == "ENABLED" and queue["status"] == "VALID":
                return str(queue["jobQueueName"])
        raise Exception(
            "No AWS Batch job queue is ENABLED and VALID in this account and region: "
            "create one or enable one, or pass job_queue"
        )

    def get_job_id_from_name(self, job_name: str) -> str | None:
        """The id of the RUNNING job called ``job_name`` in this client's queue, if there is one."""
        jobs = self._client.list_jobs(jobQueue=self._queue, jobStatus="RUNNING")["jobSummaryList"]
        matching = [job["jobId"] for job in jobs if job["jobName"] == job_name]
        return str(matching[0]) if matching else None

    def describe_job(self, job_id: str) -> dict[str, Any]:
        """AWS Batch's description of the job; BatchJobException when Batch no longer knows it."""
        response = self._client.describe_jobs(jobs=[job_id])
        _check_ok(response, "DescribeJobs")
        if not response["jobs"]:
            raise BatchJobException(
                f"Job {job_id} is no longer known to AWS Batch (lost: deleted, expired, or submitted "
                "in another account or region); it may not have finished"
            )
        return dict(response["jobs"][0])

    def get_job_status(self, job_id: str) -> str:
        """The job's status: SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING, SUCCEEDED or FAILED."""
        return str(self.describe_job(job_id)["status"])

    def get_logs(self, log_stream_name: str, get_last: int = 50) -> str:
        """The last ``get_last`` lines the job wrote to CloudWatch Logs, joined with newlines."""
        response = self._log_client.get_log_events(
            logGroupName=LOG_GROUP, logStreamName=log_stream_name, startFromHead=False
        )
        events = response["events"]
        return "\n".join(event["message"] for event in events[-get_last:])

    def submit_job(
        self,
        job_definition: str,
        parameters: dict[str, str],
        job_name: str | None = None,
        queue: str | None = None,
    ) -> str:
        """Submit a job and return its id; the queue defaults to the first active one."""
        _check_parameters(parameters)
        response = self._client.submit_job(
            jobName=job_name or _random_id(),
            jobQueue=queue or self.get_active_queue(),
            jobDefinition=job_definition,
            parameters=parameters,
        )
        return str(response["jobId"])

    def wait_on_job(self, job_id: str) -> bool:
        """Poll until the job SUCCEEDED (True); BatchJobException with Batch's reason and logs otherwise."""
        while True:
            job = self.describe_job(job_id)
            status = job["status"]
            if status == _SUCCEEDED:
                logger.info("AWS Batch job %s succeeded", job_id)
                return True
            if status == _FAILED:
                raise BatchJobException(f"Job {job_id} failed: {self._failure_report(job)}")
            logger.debug("AWS Batch job %s is %s", job_id, status)
            time.sleep(self.poll_time)

    def register_job_definition(self, json_fpath: str) -> Any:
        """Register the job definition in the JSON file ``json_fpath`` (RegisterJobDefinition's arguments)."""
        with open(json_fpath, encoding="utf-8") as source:
            definition = json.load(source)
        response = self._client.register_job_definition(**definition)
        _check_ok(response, "RegisterJobDefinition")
        return response

    def _failure_report(self, job: dict[str, Any]) -> str:
        """Why Batch says the job stopped, the container's exit code, then the job's last log lines."""
        container = job.get("container") or {}
        reasons = [job.get("statusReason"), container.get("reason")]
        if container.get("exitCode") is not None:
            reasons.append(f"exit code {container['exitCode']}")
        summary = "; ".join(str(reason) for reason in reasons if reason) or "no reason given by AWS Batch"
        return f"{summary}\n{self._logs_of(job)}"

    def _logs_of(self, job: dict[str, Any]) -> str:
        """The last attempt's log lines, or a line saying why there are none (a failure must still report)."""
        attempts = job.get("attempts") or [{}]
        stream = (attempts[-1].get("container") or {}).get("logStreamName")
        stream = stream or (job.get("container") or {}).get("logStreamName")
        if not stream:
            return "(no logs: the job never started a container)"
        botocore_exceptions = require("botocore.exceptions", "batch", "luigi.contrib.batch")
        try:
            return self.get_logs(stream)
        except botocore_exceptions.ClientError as exc:  # the stream may not exist (yet); the failure wins
            return f"(no logs from {LOG_GROUP}/{stream}: {exc})"


def _check_parameters(parameters: dict[str, str]) -> None:
    """AWS Batch takes parameters as a map of strings: say which value is not one, before submitting."""
    for key, value in parameters.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(
                f"AWS Batch job parameter {key!r} = {value!r} is not a string: "
                "return strings from BatchTask.parameters (str(...) or json.dumps(...))"
            )


class BatchTask(luigi.Task):
    """Run one AWS Batch job: submit ``job_definition`` with `parameters`, then wait for it to finish."""

    job_definition = luigi.Parameter()
    job_name = luigi.OptionalParameter(default=None)
    job_queue = luigi.OptionalParameter(default=None)
    poll_time = luigi.IntParameter(default=POLL_TIME)

    @property
    def parameters(self) -> dict[str, str]:
        """Override to pass values to the job definition's ``Ref::name`` placeholders (strings)."""
        return {}

    def run(self) -> None:
        client = BatchClient(self.poll_time)
        job_id = client.submit_job(
            self.job_definition, self.parameters, job_name=self.job_name, queue=self.job_queue
        )
        logger.info("Submitted AWS Batch job %s (%s)", job_id, self.job_definition)
        client.wait_on_job(job_id)
