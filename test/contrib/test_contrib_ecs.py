"""luigi.contrib.ecs: ECSTask runs a task definition on a cluster and is done only when its tasks finished.

Against moto's server (real HTTP): registering a definition, RunTask with the merged overrides, and
polling until moto's documented state manager has moved the task through DEACTIVATING ... STOPPED. moto's
StopTask reports neither a stopCode nor an exit code, and moto never loses a task, so a task stopped by
an operator, one whose container exited non-zero, a lost one and a RunTask failure are driven by the
stand-in (helpers/aws_compute_standin.py), which answers as AWS documents.
"""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

import pytest

import luigi
import luigi.contrib.ecs
from luigi.contrib.ecs import ECSTask

boto3 = pytest.importorskip("boto3")

from helpers.aws_compute_standin import LOST, AwsComputeStandIn, aws_compute_standin  # noqa: E402, F401
from helpers.moto_compute import MotoAws, aws, s3_server  # noqa: E402, F401
from helpers.outcomes import build_failing, meanwhile, printed_without  # noqa: E402

SLEEP = ["/bin/sleep", "10"]


def definition(family: str) -> dict[str, Any]:
    """RegisterTaskDefinition's arguments for a one-container definition."""
    container = {"name": "main", "image": "busybox", "memory": 64, "command": ["true"]}
    # no requiresCompatibilities: moto 5.2 fails RunTask in Fargate's awsvpc mode (its ENI lacks a DNS name)
    return {"family": family, "containerDefinitions": [container]}


class Sleep(ECSTask):
    """A user's task: replaces the container's command and runs on Fargate with more disk."""

    @property
    def command(self) -> list[dict[str, Any]]:
        return [{"name": "main", "command": SLEEP}]

    @property
    def run_task_kwargs(self) -> dict[str, Any]:
        return {
            "launchType": "FARGATE",
            "overrides": {"ephemeralStorage": {"sizeInGiB": 30}},
        }


@pytest.fixture
def cluster(aws: MotoAws, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    """A cluster on moto whose tasks move one state per DescribeTasks (moto's state manager, set here)."""
    monkeypatch.setattr(luigi.contrib.ecs, "POLL_TIME", 0)
    transition = {"progression": "manual", "times": 1}
    aws.configure_moto("state-manager/set-transition", {"model_name": "ecs::task", "transition": transition})
    name = f"work-{uuid.uuid4().hex[:8]}"
    aws.client("ecs").create_cluster(clusterName=name)
    return name


# -- against moto's server ------------------------------------------------------------------------------


def test_a_task_def_is_registered_run_with_the_merged_overrides_and_followed_until_it_stopped(
    aws: MotoAws,  # noqa: F811
    cluster: str,
):
    task = Sleep(task_def=definition("sleep"), cluster=cluster)

    assert luigi.build([task], local_scheduler=True)

    [arn] = task.ecs_task_ids or []
    [described] = aws.client("ecs").describe_tasks(cluster=cluster, tasks=[arn])["tasks"]
    assert described["lastStatus"] == "STOPPED"  # the build returned only once moto said so
    assert described["taskDefinitionArn"].endswith("task-definition/sleep:1")
    assert described["overrides"] == {
        "ephemeralStorage": {"sizeInGiB": 30},
        "containerOverrides": [{"name": "main", "command": SLEEP}],
    }


def test_a_registered_definitions_arn_is_run_as_it_is(aws: MotoAws, cluster: str):  # noqa: F811
    ecs = aws.client("ecs")
    arn = ecs.register_task_definition(**definition("registered"))["taskDefinition"]["taskDefinitionArn"]
    task = Sleep(task_def_arn=arn, cluster=cluster)

    assert luigi.build([task], local_scheduler=True)

    [started] = task.ecs_task_ids or []
    [described] = ecs.describe_tasks(cluster=cluster, tasks=[started])["tasks"]
    assert described["taskDefinitionArn"] == arn
    assert ecs.list_task_definitions(familyPrefix="registered")["taskDefinitionArns"] == [arn]


@pytest.mark.parametrize("given", [{}, {"task_def": {"family": "f"}, "task_def_arn": "arn:aws:ecs:x"}])
def test_a_task_needs_exactly_one_of_task_def_and_task_def_arn(given: dict[str, Any]):
    task = ECSTask(**given)
    error = build_failing(task)
    assert isinstance(error, ValueError)
    assert (
        str(error)
        == f"{task.task_id}: give exactly one of task_def (a definition to register) and task_def_arn"
    )


# -- what moto cannot show: the stand-in ----------------------------------------------------------------


@pytest.fixture
def standin(
    aws: MotoAws,  # noqa: F811
    aws_compute_standin: AwsComputeStandIn,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> AwsComputeStandIn:
    aws.point_at(aws_compute_standin.endpoint_url, "ecs")
    monkeypatch.setattr(luigi.contrib.ecs, "POLL_TIME", 0)
    return aws_compute_standin


def test_the_task_follows_ecs_through_its_states_until_the_essential_container_exited(
    standin: AwsComputeStandIn,
):
    standin.script = ["PROVISIONING", "PENDING", "ACTIVATING", "RUNNING", "DEACTIVATING", "STOPPED"]

    assert luigi.build([Sleep(task_def_arn="arn:aws:ecs:task-definition/sleep:1")], local_scheduler=True)

    [run] = standin.runs.values()
    assert run.step == 5  # one DescribeTasks per state


def test_a_task_stopped_by_an_operator_fails_the_luigi_task_with_ecss_reason(standin: AwsComputeStandIn):
    standin.script = ["PROVISIONING", "RUNNING"]

    def stop() -> None:
        run = standin.wait_for_status("RUNNING")
        boto3.client("ecs").stop_task(
            cluster="default", task=run.arn, reason="Stopped by the on-call operator"
        )

    with meanwhile(stop):
        error = build_failing(Sleep(task_def_arn="arn:aws:ecs:task-definition/sleep:1"))

    [run] = standin.runs.values()
    assert str(error) == (
        f"task {run.arn} did not finish: container 'main' exited 143, stopCode UserInitiated, "
        "reason 'Stopped by the on-call operator'"
    )


def test_a_container_that_exited_non_zero_fails_the_luigi_task(standin: AwsComputeStandIn):
    standin.script = ["RUNNING"]

    def exit_2() -> None:
        run = standin.wait_for_status("RUNNING")
        containers = [{"name": "main", "lastStatus": "STOPPED", "exitCode": 2}]
        standin.end_run(run.arn, status="STOPPED", stopCode="EssentialContainerExited", containers=containers)

    with meanwhile(exit_2):
        error = build_failing(Sleep(task_def_arn="arn:aws:ecs:task-definition/sleep:1"))

    assert "did not finish: container 'main' exited 2, stopCode EssentialContainerExited" in str(error)


def test_a_task_ecs_no_longer_knows_fails_the_luigi_task_as_missing(standin: AwsComputeStandIn):
    standin.script = ["RUNNING", LOST]

    error = build_failing(Sleep(task_def_arn="arn:aws:ecs:task-definition/sleep:1"))

    [run] = standin.runs.values()
    missing = [{"arn": run.arn, "reason": "MISSING"}]
    assert str(error) == f"ECS could not describe the tasks on cluster 'default': {missing}"


def test_a_task_ecs_could_not_place_fails_with_luigis_message(standin: AwsComputeStandIn):
    standin.run_task_failure = "RESOURCE:MEMORY"

    error = build_failing(Sleep(task_def_arn="arn:aws:ecs:task-definition/sleep:1"))

    assert str(error) == "fail to run task arn:aws:ecs:container-instance/1 reason: RESOURCE:MEMORY"


# -- Luigi's overrides merge, patched clients, installs without boto3 -----------------------------------


class TwoContainers(ECSTask):
    @property
    def command(self) -> list[dict[str, Any]]:
        return [{"name": "a", "command": SLEEP}, {"name": "b", "command": SLEEP}]

    @property
    def run_task_kwargs(self) -> dict[str, Any]:
        return {"overrides": {"containerOverrides": [{"name": "a", "command": ["echo"], "memory": 8}]}}


def test_command_merges_into_the_overrides_and_wins_over_a_colliding_container():
    overrides = TwoContainers(task_def_arn="x").combined_overrides
    assert overrides == {
        "containerOverrides": [{"name": "a", "command": SLEEP, "memory": 8}, {"name": "b", "command": SLEEP}]
    }
    assert TwoContainers(task_def_arn="x").run_task_kwargs["overrides"]["containerOverrides"][0][
        "command"
    ] == ["echo"]  # the user's dict is not changed


class MoreDisk(ECSTask):
    @property
    def run_task_kwargs(self) -> dict[str, Any]:
        return {"overrides": {"ephemeralStorage": {"sizeInGiB": 30}}}


def test_without_a_command_the_overrides_are_run_task_kwargs_own():
    assert MoreDisk(task_def_arn="x").combined_overrides == {"ephemeralStorage": {"sizeInGiB": 30}}
    assert ECSTask(task_def_arn="x").combined_overrides == {}


def test_ecs_is_reached_through_boto3_client_so_a_patched_boto3_client_is_used(monkeypatch):
    monkeypatch.setattr(luigi.contrib.ecs, "POLL_TIME", 0)
    fake = mock.Mock()
    fake.run_task.return_value = {"tasks": [{"taskArn": "t1"}], "failures": []}
    stopped = {"taskArn": "t1", "lastStatus": "STOPPED", "containers": [{"name": "a", "exitCode": 0}]}
    fake.describe_tasks.return_value = {"ResponseMetadata": {"HTTPStatusCode": 200}, "tasks": [stopped]}

    with mock.patch("boto3.client", return_value=fake) as client:
        assert luigi.build([TwoContainers(task_def_arn="arn:def", cluster="c")], local_scheduler=True)

    assert {c.args for c in client.call_args_list} == {("ecs",)}
    fake.run_task.assert_called_once()
    assert fake.run_task.call_args.kwargs["taskDefinition"] == "arn:def"
    fake.describe_tasks.assert_called_with(tasks=["t1"], cluster="c")


def test_a_patched_module_client_is_used():
    fake = mock.Mock()
    fake.run_task.return_value = {"tasks": [], "failures": [{"arn": "i-1", "reason": "AGENT"}]}
    with mock.patch("luigi.contrib.ecs.client", fake):
        error = build_failing(TwoContainers(task_def_arn="arn:def"))
    assert str(error) == "fail to run task i-1 reason: AGENT"


def test_the_module_imports_without_boto3_and_using_it_names_the_extra():
    code = (
        "from luigi.contrib.ecs import ECSTask, POLL_TIME, client\n"
        "try:\n    client.describe_tasks\nexcept ImportError as e:\n    print(e)"
    )
    out = printed_without("boto3", code)
    assert out == (
        "luigi.contrib.ecs needs the 'boto3' package, which is not installed: "
        "pip install 'luigi[ecs]' (or pip install boto3)"
    )


def test_boto3_patched_through_the_module_as_in_luigis_tests_is_seen():
    fake = mock.Mock()
    fake.run_task.return_value = {"tasks": [], "failures": [{"arn": "i-2", "reason": "PATCHED"}]}
    with mock.patch("luigi.contrib.ecs.boto3.client", return_value=fake):
        error = build_failing(TwoContainers(task_def_arn="arn:def"))
    assert str(error) == "fail to run task i-2 reason: PATCHED"
