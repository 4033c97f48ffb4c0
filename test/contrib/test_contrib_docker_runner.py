"""luigi.contrib.docker_runner: DockerTask runs its command in a container and fails when the command does.

Against a real engine: Podman's Docker-compatible API service (helpers/podman_service.py) with a busybox
image imported from a local tarball. Tasks run through ``luigi.build`` as a user's would.
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path
from typing import Any

import pytest

import luigi
from luigi.contrib.docker_runner import DockerTask

docker = pytest.importorskip("docker")
pytestmark = pytest.mark.slow  # podman takes a few seconds to start and wait for each container here

from helpers import podman_service  # noqa: E402
from helpers.outcomes import build_failing, printed_without  # noqa: E402
from helpers.podman_service import IMAGE, Podman  # noqa: E402

podman = podman_service.podman  # the fixture, visible to this module's tests


class InContainer(DockerTask):
    """A user's task: a shell command in the test image, writing what it has to show into ``out``."""

    script = luigi.Parameter()
    out = luigi.Parameter()
    url = luigi.Parameter(significant=False)

    image = IMAGE

    @property
    def command(self) -> list[str]:
        return ["sh", "-c", self.script]

    @property
    def docker_url(self) -> str:
        return self.url

    @property
    def binds(self) -> list[str]:
        return [f"{self.out}:/out"]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(f"{self.out}/result.txt")


def in_container(podman: Podman, out: Path, script: str, **overrides: Any) -> InContainer:
    """An `InContainer` task; ``overrides`` replace its class's properties (a subclass made here)."""
    cls = type("Custom", (InContainer,), overrides) if overrides else InContainer
    return cls(script=script, out=str(out), url=podman.url)


def test_a_command_that_succeeds_makes_the_task_done_and_removes_its_container(podman: Podman, tmp_path):
    task = in_container(podman, tmp_path, "echo hello from busybox > /out/result.txt", name="luigi-ok")

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "hello from busybox\n"
    assert "luigi-ok" not in podman.container_names()


def test_a_command_exiting_non_zero_fails_the_task_with_its_exit_code_and_error_output(
    podman: Podman, tmp_path
):
    task = in_container(
        podman, tmp_path, "echo progress; echo 'cannot parse input.csv' >&2; exit 3", name="luigi-failing"
    )

    error = build_failing(task)

    assert isinstance(error, docker.errors.ContainerError)
    assert error.exit_status == 3
    assert error.stderr == "cannot parse input.csv"
    assert str(error) == (
        f"Command '{task.command}' in image '{IMAGE}' returned non-zero exit status 3: cannot parse input.csv"
    )
    assert "luigi-failing" not in podman.container_names()


def test_the_environment_reaches_the_container_with_luigi_tmp_dir_added(podman: Podman, tmp_path):
    task = in_container(
        podman,
        tmp_path,
        'echo "$GREETING $LUIGI_TMP_DIR" > /out/result.txt',
        environment={"GREETING": "hi"},
        container_tmp_dir="/scratch",
    )

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "hi /scratch\n"


def test_mount_tmp_gives_each_run_a_host_folder_that_is_removed_after(podman: Podman, tmp_path):
    script = 'echo scratch > "$LUIGI_TMP_DIR/part" && cat "$LUIGI_TMP_DIR/part" > /out/result.txt'
    task = in_container(podman, tmp_path, script)

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "scratch\n"
    assert glob.glob(f"/tmp/luigi-docker-tmp-dir-*{task.task_id}") == []


def test_without_mount_tmp_nothing_is_mounted_at_the_container_tmp_dir(podman: Podman, tmp_path):
    task = in_container(
        podman, tmp_path, "test -e /tmp/luigi && exit 9; echo absent > /out/result.txt", mount_tmp=False
    )

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "absent\n"


def test_binds_as_one_string_or_a_list_are_all_mounted(podman: Podman, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("rows\n")
    one = in_container(podman, data, "ls /elsewhere > /elsewhere/result.txt", binds=f"{data}:/elsewhere")
    several = in_container(
        podman,
        tmp_path,
        "cat /in/input.txt /in/input.txt > /out/result.txt",
        binds=[f"{data}:/in:ro", f"{tmp_path}:/out"],
    )

    assert luigi.build([one, several], local_scheduler=True)

    assert (data / "result.txt").read_text() == "input.txt\nresult.txt\n"
    assert (tmp_path / "result.txt").read_text() == "rows\nrows\n"


def test_an_image_that_does_not_exist_fails_the_task_with_image_not_found(podman: Podman, tmp_path, caplog):
    task = in_container(podman, tmp_path, "true", image="localhost/no-such-image")

    with caplog.at_level(logging.ERROR, logger="luigi-interface"):
        error = build_failing(task)

    assert isinstance(error, docker.errors.ImageNotFound)
    assert "no-such-image" in str(error)
    assert (
        "Docker image localhost/no-such-image:latest is not on the daemon and could not be pulled: "
        "check its name, or pull or build it there"
    ) in caplog.text


def test_force_pull_tries_the_registry_and_a_missing_image_still_fails_with_image_not_found(
    podman: Podman,
    tmp_path,
    caplog,
):
    task = in_container(podman, tmp_path, "true", image="localhost/no-such-image", force_pull=True)

    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        error = build_failing(task)

    assert isinstance(error, docker.errors.ImageNotFound)
    assert "Pulling Docker image localhost/no-such-image:latest failed" in caplog.text


def test_force_pull_without_a_registry_runs_the_image_already_here(podman: Podman, tmp_path):
    task = in_container(podman, tmp_path, "echo local > /out/result.txt", force_pull=True)

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "local\n"


def test_a_leftover_container_of_the_same_name_is_replaced_and_auto_remove_off_keeps_it(
    podman: Podman,
    tmp_path,
):
    leftover = in_container(
        podman, tmp_path / "x", "true", name="luigi-named", auto_remove=False, mount_tmp=False
    )
    (tmp_path / "x").mkdir()
    assert luigi.build([leftover], local_scheduler=True)
    assert "luigi-named" in podman.container_names()

    task = in_container(podman, tmp_path, "echo again > /out/result.txt", name="luigi-named")
    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "again\n"
    assert "luigi-named" not in podman.container_names()


def test_the_module_imports_without_docker_and_running_a_task_names_the_extra():
    code = (
        "import luigi\n"
        "from luigi.contrib.docker_runner import DockerTask\n"
        "try:\n    DockerTask().run()\nexcept ImportError as e:\n    print(e)"
    )
    assert printed_without("docker", code) == (
        "luigi.contrib.docker_runner needs the 'docker' package, which is not installed: "
        "pip install 'luigi[docker]' (or pip install docker)"
    )


def test_the_defaults_are_luigis():
    task = DockerTask()

    assert (task.image, task.command, task.name) == ("alpine", "echo hello world", None)
    assert (task.container_tmp_dir, task.binds, task.network_mode, task.docker_url) == (
        "/tmp/luigi",
        None,
        "",
        None,
    )
    assert (task.auto_remove, task.force_pull, task.mount_tmp) == (True, False, True)
    assert task.environment == task.host_config_options == task.container_options == {}


def test_network_mode_and_the_extra_options_reach_the_container(podman: Podman, tmp_path):
    script = (
        "pwd > /out/result.txt; ls /sys/class/net >> /out/result.txt; "
        "grep -c ' /scratch tmpfs' /proc/mounts >> /out/result.txt"
    )
    task = in_container(
        podman,
        tmp_path,
        script,
        network_mode="none",
        container_options={"working_dir": "/tmp"},
        host_config_options={"tmpfs": {"/scratch": "size=1m"}},
    )

    assert luigi.build([task], local_scheduler=True)

    assert (tmp_path / "result.txt").read_text() == "/tmp\nlo\n1\n"
