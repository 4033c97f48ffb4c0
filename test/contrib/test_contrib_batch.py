"""luigi.contrib.batch: BatchTask submits an AWS Batch job and succeeds only when Batch says the job did.

Against moto's server (real HTTP): job definitions, queues, submission, a job that moto finishes (its
``use_docker: false`` mode) and one it cannot run (no Docker here: FAILED), and CloudWatch Logs. Jobs seen
RUNNING, failing with a reason and log lines, terminated or lost are driven by the stand-in
(helpers/aws_compute_standin.py), since moto never shows a job in those states without Docker.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import luigi
from luigi.contrib.batch import BatchClient, BatchJobException, BatchTask

boto3 = pytest.importorskip("boto3")

from helpers.aws_compute_standin import LOST, QUEUE, AwsComputeStandIn, aws_compute_standin  # noqa: E402, F401
from helpers.moto_compute import MotoAws, aws, s3_server  # noqa: E402, F401
from helpers.outcomes import build_failing, meanwhile, printed_without  # noqa: E402

NOW_MS = int(time.time() * 1000)  # CloudWatch Logs refuses events older than 14 days
FAILING_COMMAND = ["sh", "-c", "exit 3"]  # fails in Docker too, should moto ever find a Docker daemon


class Greet(BatchTask):
    """A user's task: the job definition's ``Ref::greeting`` gets the task's parameter."""

    greeting = luigi.Parameter(default="hello")

    @property
    def parameters(self) -> dict[str, str]:
        return {"greeting": self.greeting}


def register_definition(aws: MotoAws, tmp_path: Path, command: list[str]) -> str:  # noqa: F811
    """Register a job definition from a JSON file as a user would: BatchClient.register_job_definition."""
    name = f"greet-{uuid.uuid4().hex[:8]}"
    definition = {
        "jobDefinitionName": name,
        "type": "container",
        "containerProperties": {"image": "busybox", "vcpus": 1, "memory": 128, "command": command},
    }
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(definition))
    response = BatchClient(poll_time=0).register_job_definition(str(path))
    assert response["jobDefinitionName"] == name
    return name


def jobs_named(aws: MotoAws, queue: str, name: str, status: str) -> list[dict[str, Any]]:  # noqa: F811
    summaries = aws.client("batch").list_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]
    ids = [job["jobId"] for job in summaries if job["jobName"] == name]
    return aws.client("batch").describe_jobs(jobs=ids)["jobs"] if ids else []


# -- against moto's server ------------------------------------------------------------------------------


def test_a_job_batch_finishes_makes_the_task_done_and_got_the_tasks_parameters(aws: MotoAws, tmp_path):  # noqa: F811
    queue = aws.batch_queue("work")
    definition = register_definition(aws, tmp_path, ["echo", "Ref::greeting"])
    aws.configure_moto("config", {"batch": {"use_docker": False}})  # moto finishes jobs without running them

    task = Greet(
        job_definition=definition, job_name="greet-1", job_queue=queue, greeting="bonjour", poll_time=0
    )
    assert luigi.build([task], local_scheduler=True)

    [job] = jobs_named(aws, queue, "greet-1", "SUCCEEDED")
    assert job["parameters"] == {"greeting": "bonjour"}  # plain strings: nothing of the task is pickled
    assert job["jobDefinition"].endswith(f"job-definition/{definition}:1")


def test_without_a_queue_the_first_enabled_and_valid_queue_takes_the_job(aws: MotoAws, tmp_path):  # noqa: F811
    aws.batch_queue("switched-off", state="DISABLED")
    queue = aws.batch_queue("open")
    definition = register_definition(aws, tmp_path, ["true"])
    aws.configure_moto("config", {"batch": {"use_docker": False}})

    assert luigi.build(
        [Greet(job_definition=definition, job_name="anywhere", poll_time=0)], local_scheduler=True
    )

    assert len(jobs_named(aws, queue, "anywhere", "SUCCEEDED")) == 1


def test_a_task_without_a_job_name_submits_a_batch_job_name_of_its_own(aws: MotoAws, tmp_path):  # noqa: F811
    queue = aws.batch_queue("unnamed")
    definition = register_definition(aws, tmp_path, ["true"])
    aws.configure_moto("config", {"batch": {"use_docker": False}})

    assert luigi.build([Greet(job_definition=definition, poll_time=0)], local_scheduler=True)

    [summary] = aws.client("batch").list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
    assert summary["jobName"].startswith("batch-job-") and len(summary["jobName"]) == len("batch-job-") + 8


def test_with_no_active_queue_the_client_says_so_in_one_line(aws: MotoAws):  # noqa: F811
    aws.batch_queue("closed", state="DISABLED")
    with pytest.raises(Exception, match=r"No AWS Batch job queue is ENABLED and VALID .*pass job_queue$"):
        BatchClient(poll_time=0)


def test_a_job_batch_could_not_run_fails_the_task_with_batchs_report(aws: MotoAws, tmp_path):  # noqa: F811
    queue = aws.batch_queue("no-docker")
    definition = register_definition(aws, tmp_path, FAILING_COMMAND)
    aws.configure_moto("config", {"batch": {"use_docker": True}})  # moto runs jobs in Docker: none here

    error = build_failing(Greet(job_definition=definition, job_name="doomed", job_queue=queue, poll_time=0))

    [job] = jobs_named(aws, queue, "doomed", "FAILED")
    assert isinstance(error, BatchJobException)
    # moto marks the job FAILED before any container, with no reason: the report says both, in one place
    assert str(error) == (
        f"Job {job['jobId']} failed: no reason given by AWS Batch\n"
        "(no logs: the job never started a container)"
    )


def test_get_logs_returns_the_last_lines_of_the_jobs_cloudwatch_stream(aws: MotoAws):  # noqa: F811
    aws.batch_queue("logs")
    logs = aws.client("logs")
    logs.create_log_group(logGroupName="/aws/batch/job")
    logs.create_log_stream(logGroupName="/aws/batch/job", logStreamName="greet/default/1")
    events = [{"timestamp": NOW_MS + n, "message": f"line {n}"} for n in range(5)]
    logs.put_log_events(logGroupName="/aws/batch/job", logStreamName="greet/default/1", logEvents=events)

    assert BatchClient(poll_time=0).get_logs("greet/default/1", get_last=2) == "line 3\nline 4"


# -- job states moto cannot show without Docker: the stand-in ------------------------------------------


@pytest.fixture
def standin(aws: MotoAws, aws_compute_standin: AwsComputeStandIn) -> AwsComputeStandIn:  # noqa: F811
    aws.point_at(aws_compute_standin.endpoint_url, "batch")  # CloudWatch Logs stays on moto
    return aws_compute_standin


def test_the_task_polls_through_batchs_states_until_the_job_succeeded(standin: AwsComputeStandIn):
    standin.script = ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED"]

    assert luigi.build([Greet(job_definition="greet", greeting="hi", poll_time=0)], local_scheduler=True)

    [run] = standin.runs.values()
    assert run.step == 5  # one DescribeJobs per state
    assert run.request["parameters"] == {"greeting": "hi"} and run.request["jobQueue"] == QUEUE


def test_a_failed_job_fails_the_task_with_its_reason_exit_code_and_cloudwatch_lines(
    aws: MotoAws,  # noqa: F811
    standin: AwsComputeStandIn,
):
    standin.script = ["RUNNING"]

    def fail_after_logging() -> None:
        run = standin.wait_for_status("RUNNING")
        stream = f"greet/default/{run.arn}"
        logs = aws.client("logs")
        logs.create_log_group(logGroupName="/aws/batch/job")
        logs.create_log_stream(logGroupName="/aws/batch/job", logStreamName=stream)
        lines = [{"timestamp": NOW_MS + n, "message": text} for n, text in enumerate(["start", "boom"])]
        logs.put_log_events(logGroupName="/aws/batch/job", logStreamName=stream, logEvents=lines)
        reason = "Essential container in task exited"
        standin.end_run(run.arn, status="FAILED", statusReason=reason, container={"exitCode": 3})

    with meanwhile(fail_after_logging):
        error = build_failing(Greet(job_definition="greet", poll_time=0))

    [run] = standin.runs.values()
    assert isinstance(error, BatchJobException)
    assert str(error) == f"Job {run.arn} failed: Essential container in task exited; exit code 3\nstart\nboom"


def test_a_job_terminated_while_running_fails_the_task_with_the_termination_reason(
    standin: AwsComputeStandIn,
):
    standin.script = ["RUNNABLE", "RUNNING"]

    def terminate() -> None:
        run = standin.wait_for_status("RUNNING")
        operator = boto3.client("batch")  # the operator's own client, on the task's endpoint
        operator.terminate_job(jobId=run.arn, reason="Terminated by the on-call operator")

    with meanwhile(terminate):
        error = build_failing(Greet(job_definition="greet", poll_time=0))

    assert isinstance(error, BatchJobException)
    assert "failed: Terminated by the on-call operator\n" in str(error)
    assert "(no logs from /aws/batch/job/greet/default/" in str(error)  # the stream never got a line


def test_a_job_batch_no_longer_knows_fails_the_task_as_lost(standin: AwsComputeStandIn):
    standin.script = ["RUNNING", LOST]

    error = build_failing(Greet(job_definition="greet", poll_time=0))

    assert isinstance(error, BatchJobException)
    assert "is no longer known to AWS Batch (lost" in str(error)


# -- how users' tests and installs meet the module ------------------------------------------------------


def test_batch_is_reached_through_boto3_client_so_a_patched_boto3_client_is_used():
    fake = mock.Mock()
    fake.describe_job_queues.return_value = {
        "jobQueues": [{"jobQueueName": "q", "state": "ENABLED", "status": "VALID"}]
    }
    fake.submit_job.return_value = {"jobId": "abcd"}
    ok = {"ResponseMetadata": {"HTTPStatusCode": 200}}
    fake.describe_jobs.side_effect = [{**ok, "jobs": [{"status": s}]} for s in ("RUNNING", "SUCCEEDED")]

    with mock.patch("boto3.client", return_value=fake) as client:
        assert luigi.build([Greet(job_definition="def", job_name="n", poll_time=0)], local_scheduler=True)

    assert [c.args for c in client.call_args_list] == [("batch",), ("logs",)]
    fake.submit_job.assert_called_once_with(
        jobName="n", jobQueue="q", jobDefinition="def", parameters={"greeting": "hello"}
    )


def test_a_parameter_that_is_not_a_string_is_refused_before_submitting_naming_it():
    class Counted(BatchTask):
        @property
        def parameters(self) -> dict[str, str]:
            return {"count": 3}  # type: ignore[dict-item]  # the user's mistake under test

    fake = mock.Mock()
    fake.describe_job_queues.return_value = {
        "jobQueues": [{"jobQueueName": "q", "state": "ENABLED", "status": "VALID"}]
    }
    with mock.patch("boto3.client", return_value=fake):
        error = build_failing(Counted(job_definition="def", poll_time=0))

    assert str(error) == (
        "AWS Batch job parameter 'count' = 3 is not a string: return strings from BatchTask.parameters "
        "(str(...) or json.dumps(...))"
    )
    fake.submit_job.assert_not_called()


def test_the_module_imports_without_boto3_and_using_it_names_the_extra():
    code = (
        "from luigi.contrib.batch import BatchClient, BatchTask, BatchJobException, POLL_TIME\n"
        "try:\n    BatchClient()\nexcept ImportError as e:\n    print(e)"
    )
    out = printed_without("boto3", code)
    assert out == (
        "luigi.contrib.batch needs the 'boto3' package, which is not installed: "
        "pip install 'luigi[batch]' (or pip install boto3)"
    )


def test_boto3_patched_through_the_module_as_in_luigis_tests_is_seen():
    fake = mock.Mock()
    fake.describe_job_queues.return_value = {
        "jobQueues": [{"jobQueueName": "q", "state": "ENABLED", "status": "VALID"}]
    }
    with mock.patch("luigi.contrib.batch.boto3.client", return_value=fake):
        client = BatchClient(poll_time=0)
    assert client.get_active_queue() == "q"
