"""luigi.contrib.kubernetes: KubernetesJobTask runs its pod spec as a Kubernetes Job and is done only when a
pod of it succeeded.

Against the stand-in (helpers/kubernetes_standin.py), which speaks the Kubernetes API's Job and Pod calls
over real HTTP to pykube, pointed at it by a kubeconfig file as a user's would be. The tasks poll without
waiting; the tests wait on conditions, not time.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

import luigi
from luigi.contrib.kubernetes import KubernetesJobError, KubernetesJobTask, kubernetes

pykube = pytest.importorskip("pykube")
requests = pytest.importorskip("requests")

from helpers.kubernetes_standin import LOST, KubernetesStandIn, kubernetes_standin  # noqa: E402, F401
from helpers.outcomes import build_failing, meanwhile, printed_without  # noqa: E402

# output() is None, as in Luigi, so the worker warns that such a task is never complete before it runs it
pytestmark = pytest.mark.filterwarnings("ignore:Task .* without outputs has no custom complete:UserWarning")


class Hello(KubernetesJobTask):
    """A user's task: one container, polled without waiting."""

    poll_interval = 0
    pod_creation_wait_interal = 0

    @property
    def name(self) -> str:
        return "hello"

    @property
    def spec_schema(self) -> dict[str, Any]:
        return {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["echo", "hello"]}]}


@pytest.fixture
def cluster(kubernetes_standin: KubernetesStandIn, tmp_path: Path) -> KubernetesStandIn:  # noqa: F811
    """The stand-in, named in [kubernetes] kubeconfig_path as a user would name their cluster's file."""
    path = kubernetes_standin.write_kubeconfig(tmp_path / "kubeconfig")
    luigi.configuration.get_config().set("kubernetes", "kubeconfig_path", str(path))
    return kubernetes_standin


def test_a_job_whose_pod_succeeds_makes_the_task_done_and_is_deleted_in_the_background(
    cluster: KubernetesStandIn,
):
    task = Hello()
    assert luigi.build([task], local_scheduler=True)

    job = cluster.only_job()
    assert job.step == len(cluster.script) - 1  # listed once per step, the last one Succeeded
    assert job.obj["status"]["succeeded"] == 1
    assert job.deleted_with == {"propagationPolicy": "Background"}
    assert job.obj["spec"]["parallelism"] == 0  # scaled down before it was deleted, as Luigi does
    assert cluster.jobs == {}


class Configured(Hello):
    """A task that sets every knob of the Job Luigi's KubernetesJobTask has."""

    @property
    def labels(self) -> dict[str, str]:
        return {"team": "data", "pipeline": "daily"}

    @property
    def backoff_limit(self) -> int:
        return 2

    @property
    def active_deadline_seconds(self) -> int:
        return 600

    @property
    def delete_on_success(self) -> bool:
        return False


def test_the_job_carries_the_pod_spec_labels_backoff_limit_and_deadline_of_the_task(
    cluster: KubernetesStandIn,
):
    task = Configured()
    assert luigi.build([task], local_scheduler=True)

    job = cluster.only_job().obj
    name = job["metadata"]["name"]
    assert name == f"hello-{name.split('-')[1]}-{task.job_uuid[:16]}" and len(name.split("-")[1]) == 14
    assert job["metadata"]["labels"] == {
        "spawned_by": "luigi", "luigi_task_id": task.job_uuid, "team": "data", "pipeline": "daily",
    }  # fmt: skip
    assert job["metadata"]["namespace"] == "default"  # the kubeconfig context names none
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["template"] == {
        "metadata": {"name": name, "labels": {"team": "data", "pipeline": "daily"}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["echo", "hello"]}],
            "restartPolicy": "Never",  # added, as Kubernetes refuses a Job whose pods restart Always
        },
    }
    [pod] = cluster.only_job().pods
    assert pod["metadata"]["labels"]["job-name"] == name  # how the task found the pod it watched
    assert cluster.jobs  # delete_on_success = False leaves the job for the user to look at


def test_a_restart_policy_in_the_spec_is_kept(cluster: KubernetesStandIn):
    class OnFailure(Hello):
        @property
        def spec_schema(self) -> dict[str, Any]:
            return {**super().spec_schema, "restartPolicy": "OnFailure"}

    assert luigi.build([OnFailure()], local_scheduler=True)

    assert cluster.only_job().obj["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


class Marked(Hello):
    """Luigi's pattern for a task that must not run twice: signal_complete writes what output() names."""

    marker = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.marker)

    def signal_complete(self) -> None:
        with self.output().open("w") as out:
            out.write(self.uu_name)


def test_signal_complete_runs_after_success_so_the_task_is_complete_and_not_run_again(
    cluster: KubernetesStandIn, tmp_path: Path
):
    task = Marked(marker=str(tmp_path / "hello.done"))
    assert luigi.build([task], local_scheduler=True)
    assert task.complete()
    assert (tmp_path / "hello.done").read_text() == cluster.only_job().name

    assert luigi.build([Marked(marker=str(tmp_path / "hello.done"))], local_scheduler=True)
    assert len(cluster.deleted) == 1  # no second job


def test_signal_complete_is_not_called_when_the_job_fails(cluster: KubernetesStandIn, tmp_path: Path):
    cluster.script = ["Pending", "Running", "Failed"]

    task = Marked(marker=str(tmp_path / "hello.done"))
    build_failing(task)

    assert not task.complete()


def test_the_task_output_is_none_as_in_luigi():
    assert Hello().output() is None


class Chatty(Hello):
    print_pod_logs_on_exit = True


def test_a_failed_pod_fails_the_task_with_its_exit_code_and_message_and_its_output_is_logged(
    cluster: KubernetesStandIn, caplog
):
    cluster.script = ["NoPod", "Pending", "Running", "Failed"]
    cluster.exit_code = 3
    cluster.termination_message = "no input for 2026-01-01\n"
    cluster.pod_output = "reading input\ntraceback: no input\n"
    caplog.set_level(logging.INFO, logger="luigi.contrib.kubernetes")

    error = build_failing(Chatty())

    job = cluster.only_job()
    [pod] = job.pods
    pod_name = pod["metadata"]["name"]
    assert isinstance(error, KubernetesJobError) and isinstance(error, RuntimeError)
    assert str(error) == (
        f"Kubernetes job {job.name} failed: 1 failed pod, max_retrials 0; "
        f"pod {pod_name} container main exited 3 (Error): no input for 2026-01-01"
    )
    assert f"Output of pod {pod_name}, container main:\nreading input\ntraceback: no input\n" in caplog.text
    assert f"kubectl logs -f pod/{pod_name} -n default" in caplog.text
    assert job.obj["spec"]["parallelism"] == 0  # stopped, so it starts no more pods
    assert job.deleted_with is None  # a failed job stays for the user to inspect


def test_pod_output_is_not_logged_unless_asked(cluster: KubernetesStandIn, caplog):
    cluster.pod_output = "the pod's output\n"
    caplog.set_level(logging.INFO, logger="luigi.contrib.kubernetes")

    assert luigi.build([Hello()], local_scheduler=True)
    assert "the pod's output" not in caplog.text
    assert luigi.build([Chatty()], local_scheduler=True)
    assert "the pod's output" in caplog.text


class WithInit(Hello):
    @property
    def spec_schema(self) -> dict[str, Any]:
        return {
            "initContainers": [{"name": "fetch", "image": "busybox:1.36", "command": ["wget", "input"]}],
            **super().spec_schema,
        }


def test_a_pod_initializing_for_a_while_then_running_then_succeeding_makes_the_task_done(
    cluster: KubernetesStandIn,
):
    # Luigi 3.8 took PodInitializing as a failure (Luigi #3187, #2570)
    cluster.script = ["NoPod", "Pending", "PodInitializing", "PodInitializing", "PodInitializing",
                      "ContainerCreating", "Running", "Running", "Succeeded"]  # fmt: skip

    assert luigi.build([WithInit()], local_scheduler=True)

    assert cluster.only_job().step == len(cluster.script) - 1  # every step was seen, none failed the task


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ("ImagePullBackOff", 'ImagePullBackOff: Back-off pulling image "busybox:1.36"'),
        ("CrashLoopBackOff", "CrashLoopBackOff: back-off 10s restarting failed container pod={pod}"),
    ],
)
def test_a_container_that_cannot_start_fails_the_task_with_kubernetes_reason(
    cluster: KubernetesStandIn, step: str, reason: str
):
    cluster.script = ["NoPod", "Pending", "ContainerCreating", step]  # Kubernetes would stay there for ever

    error = build_failing(WithInit())

    job = cluster.only_job()
    pod_name = job.pods[0]["metadata"]["name"]
    assert str(error) == (
        f"Kubernetes job {job.name} failed: pod {pod_name} container main cannot start: "
        + reason.format(pod=pod_name)
    )
    assert job.obj["spec"]["parallelism"] == 0


def test_a_container_that_never_started_has_no_output_and_the_task_fails_with_the_reason(
    cluster: KubernetesStandIn, caplog
):
    cluster.script = ["Pending", "ImagePullBackOff"]
    caplog.set_level(logging.INFO, logger="luigi.contrib.kubernetes")

    error = build_failing(Chatty())

    assert isinstance(error, KubernetesJobError)
    assert 'cannot start: ImagePullBackOff: Back-off pulling image "busybox:1.36"' in str(error)
    assert "container main:\n(no output: 400 Client Error: Bad Request" in caplog.text


def test_it_polls_every_pod_creation_wait_interal_until_a_pod_runs_then_every_poll_interval(
    cluster: KubernetesStandIn, monkeypatch
):
    class Timed(Hello):
        poll_interval = 0.002
        pod_creation_wait_interal = 0.001

    real_sleep, waits = time.sleep, []

    def sleep(seconds: float) -> None:
        if seconds in (0.001, 0.002):
            waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    cluster.script = ["NoPod", "Pending", "ContainerCreating", "Running", "Running", "Succeeded"]

    assert luigi.build([Timed()], local_scheduler=True)

    assert waits == [0.001, 0.001, 0.001, 0.002, 0.002]  # after each of the five listings before the end


def test_a_job_deleted_while_it_runs_fails_the_task(cluster: KubernetesStandIn):
    cluster.script = ["NoPod", "Pending", "Running"]  # runs until someone deletes it

    def delete() -> None:
        job = cluster.wait_for_step("Running")
        answer = requests.delete(  # what `kubectl delete job <name>` sends
            f"{cluster.url}/apis/batch/v1/namespaces/default/jobs/{job.name}",
            headers={"Authorization": f"Bearer {cluster.token}"},
            json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
        )
        assert answer.status_code == 200

    task = Chatty()
    with meanwhile(delete):
        error = build_failing(task)

    assert str(error) == (
        f"Kubernetes job {task.uu_name} is gone from namespace default (deleted while the task ran?)"
    )


def test_a_job_the_cluster_no_longer_has_fails_the_task(cluster: KubernetesStandIn):
    cluster.script = ["Pending", "Running", LOST]

    error = build_failing(Hello())

    assert isinstance(error, KubernetesJobError)
    assert str(error).endswith("is gone from namespace default (deleted while the task ran?)")


def test_failed_pods_up_to_max_retrials_are_retried_by_the_job_until_one_succeeds(cluster: KubernetesStandIn):
    luigi.configuration.get_config().set("kubernetes", "max_retrials", "2")
    cluster.script = ["Pending", "Running", "Failed", "Pending", "Failed", "Running", "Succeeded"]

    assert luigi.build([Configured()], local_scheduler=True)

    job = cluster.only_job()
    assert [pod["status"]["phase"] for pod in job.pods] == ["Failed", "Failed", "Succeeded"]
    assert job.obj["spec"]["backoffLimit"] == 2


def test_one_failed_pod_more_than_max_retrials_fails_the_task_though_the_job_would_retry(
    cluster: KubernetesStandIn,
):
    luigi.configuration.get_config().set("kubernetes", "max_retrials", "1")
    cluster.script = ["Running", "Failed", "Running", "Failed", "Running", "Succeeded"]

    error = build_failing(Hello())

    assert "failed: 2 failed pods, max_retrials 1; pod " in str(error)
    assert cluster.only_job().step == 3  # not polled past the second failure
    assert cluster.only_job().obj["spec"]["parallelism"] == 0


def test_a_job_past_its_backoff_limit_fails_the_task_with_kubernetes_condition(cluster: KubernetesStandIn):
    luigi.configuration.get_config().set("kubernetes", "max_retrials", "5")
    cluster.script = ["Running", "Failed", "Running", "Failed", "Running", "Failed"]

    error = build_failing(Configured())  # backoff_limit 2: the third failure ends the job

    assert str(error).endswith("; BackoffLimitExceeded: Job has reached the specified backoff limit")
    assert "failed: 3 failed pods, max_retrials 5; pod " in str(error)


def test_kubernetes_namespace_puts_the_job_and_finds_its_pods_there(cluster: KubernetesStandIn):
    luigi.configuration.get_config().set("kubernetes", "kubernetes_namespace", "batch-jobs")

    assert luigi.build([Configured()], local_scheduler=True)

    job = cluster.only_job()
    assert job.namespace == "batch-jobs" and job.obj["metadata"]["namespace"] == "batch-jobs"
    assert job.step == len(cluster.script) - 1  # it was followed in that namespace to the end


def test_without_kubernetes_namespace_the_kubeconfig_contexts_namespace_is_used(
    cluster: KubernetesStandIn, tmp_path: Path
):
    path = cluster.write_kubeconfig(tmp_path / "team-config", namespace="team-a")
    luigi.configuration.get_config().set("kubernetes", "kubeconfig_path", str(path))

    assert luigi.build([Configured()], local_scheduler=True)

    assert cluster.only_job().namespace == "team-a"
    assert "namespace" not in Configured()._KubernetesJobTask__job_json()["metadata"]  # type: ignore[attr-defined]


def test_the_config_section_has_luigis_keys_and_defaults():
    config = kubernetes()
    assert (config.auth_method, config.kubeconfig_path, config.max_retrials, config.kubernetes_namespace) == (
        "kubeconfig", "~/.kube/config", 0, None,
    )  # fmt: skip
    task = Hello()
    assert (task.auth_method, task.kubeconfig_path, task.max_retrials, task.kubernetes_namespace) == (
        "kubeconfig", "~/.kube/config", 0, None,
    )  # fmt: skip
    base = KubernetesJobTask
    assert (base.poll_interval.fget(task), base.pod_creation_wait_interal.fget(task)) == (5, 5)
    assert (task.backoff_limit, task.delete_on_success, task.print_pod_logs_on_exit) == (6, True, False)
    assert (task.active_deadline_seconds, task.labels) == (None, {})


def test_an_unknown_auth_method_is_refused_naming_the_choices():
    luigi.configuration.get_config().set("kubernetes", "auth_method", "token")

    error = build_failing(Hello())

    assert (
        str(error) == "[kubernetes] auth_method 'token' is not known: use 'kubeconfig' or 'service-account'"
    )


@pytest.mark.skipif(Path("/var/run/secrets/kubernetes.io/serviceaccount").exists(), reason="inside a pod")
def test_the_service_account_outside_a_cluster_is_refused_naming_the_fix():
    luigi.configuration.get_config().set("kubernetes", "auth_method", "service-account")

    error = build_failing(Hello())

    assert str(error).startswith("[kubernetes] auth_method = service-account found no service account (")
    assert str(error).endswith("): run the worker in a pod of the cluster, or set auth_method = kubeconfig")


def test_a_missing_kubeconfig_file_is_refused_naming_the_setting(tmp_path: Path):
    luigi.configuration.get_config().set("kubernetes", "kubeconfig_path", str(tmp_path / "nope"))

    error = build_failing(Hello())

    assert str(error).startswith(
        f"[kubernetes] kubeconfig_path '{tmp_path / 'nope'}' is not a file: point it at"
    )


@pytest.mark.parametrize("name", ["Hello", "with_underscore", "-dash", "x" * 32])
def test_a_name_kubernetes_would_refuse_is_refused_before_anything_is_submitted(
    cluster: KubernetesStandIn, name: str
):
    class Named(Hello):
        @property
        def name(self) -> str:
            return name

    error = build_failing(Named())

    assert isinstance(error, ValueError)
    assert f"name {name!r} cannot start a Kubernetes job name: use at most 31 lowercase letters" in str(error)
    assert cluster.jobs == {}


def test_name_and_spec_schema_must_be_defined():
    with pytest.raises(NotImplementedError, match="must define name"):
        _ = KubernetesJobTask().name
    with pytest.raises(NotImplementedError, match="must define spec_schema"):
        _ = KubernetesJobTask().spec_schema


def test_an_error_from_the_cluster_fails_the_task_with_kubernetes_message(cluster: KubernetesStandIn):
    class Restarting(Hello):
        @property
        def spec_schema(self) -> dict[str, Any]:
            return {**super().spec_schema, "restartPolicy": "Always"}

    error = build_failing(Restarting())

    assert isinstance(error, pykube.exceptions.HTTPError) and error.code == 422
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in str(error)


def test_luigis_test_seams_track_job_and_get_job_status_still_decide_the_outcome():
    """Luigi's own tests patch the name-mangled status call and run the tracking directly."""
    task = Hello()
    task._KubernetesJobTask__logger = logging.getLogger("test")  # type: ignore[attr-defined]
    task.uu_name = "test"
    signalled = []
    task.signal_complete = lambda: signalled.append(True)  # type: ignore[method-assign]

    task._KubernetesJobTask__get_job_status = lambda: "SUCCEEDED"  # type: ignore[attr-defined]
    task._KubernetesJobTask__track_job()  # type: ignore[attr-defined]
    assert signalled == [True]

    task._KubernetesJobTask__get_job_status = lambda: "FAILED"  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="Kubernetes job test failed"):
        task._KubernetesJobTask__track_job()  # type: ignore[attr-defined]
    assert signalled == [True]


def test_the_module_imports_without_pykube_and_running_a_task_names_the_extra():
    code = (
        "import luigi\n"
        "from luigi.contrib.kubernetes import KubernetesJobTask, kubernetes\n"
        "class T(KubernetesJobTask):\n    name = 'n'\n    spec_schema = {}\n"
        "try:\n    T().run()\nexcept ImportError as e:\n    print(e)"
    )
    assert printed_without("pykube", code) == (
        "luigi.contrib.kubernetes needs the 'pykube' package, which is not installed: "
        "pip install 'luigi[kubernetes]' (or pip install pykube-ng)"
    )


def test_a_token_the_cluster_refuses_fails_the_task_with_kubernetes_message(
    cluster: KubernetesStandIn, tmp_path: Path
):
    path = cluster.write_kubeconfig(tmp_path / "stale")
    path.write_text(path.read_text().replace(cluster.token, "tok-expired"))
    luigi.configuration.get_config().set("kubernetes", "kubeconfig_path", str(path))

    error = build_failing(Hello())

    assert isinstance(error, pykube.exceptions.HTTPError) and error.code == 401
    assert str(error) == "Unauthorized"
    assert cluster.jobs == {}
