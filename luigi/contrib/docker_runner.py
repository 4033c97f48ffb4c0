"""Docker for Luigi: `DockerTask` runs one command in a container and fails when the command does.

Needs the ``docker`` extra (docker-py), imported when a task runs, not at import. The client is
``docker.APIClient(docker_url)``: any daemon speaking the Docker Engine API (Docker, Podman's service).
With ``mount_tmp`` each run gets a fresh host folder mounted at ``container_tmp_dir`` (its path is in the
container's ``LUIGI_TMP_DIR``), removed when the run ends.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from typing import Any

import luigi
from luigi.contrib.optional import require

__all__ = ["DockerTask"]

logger = logging.getLogger("luigi-interface")


def __getattr__(name: str) -> Any:
    """``luigi.contrib.docker_runner.docker`` as in Luigi, which imported it on top (tests patch it)."""
    if name == "docker":
        return _docker()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _docker() -> Any:
    return require("docker", "docker", "luigi.contrib.docker_runner")


def _with_tag(image: str) -> str:
    """``image`` with ``:latest`` when it names no tag (a ``:`` in a registry's port is not a tag)."""
    return image if ":" in image.rsplit("/", 1)[-1] else f"{image}:latest"


def _bind_list(binds: str | list[str] | None) -> list[str]:
    """The user's ``binds`` (one ``host:container[:mode]`` string or a list of them) as a list."""
    if binds is None:
        return []
    return [binds] if isinstance(binds, str) else list(binds)


class DockerTask(luigi.Task):
    """Run ``command`` in a container of ``image``; a non-zero exit fails the task with its error output.

    Override the properties below (as class attributes or properties) to configure the container.
    """

    @property
    def image(self) -> str:
        return "alpine"

    @property
    def command(self) -> str | list[str]:
        return "echo hello world"

    @property
    def name(self) -> str | None:
        """The container's name; with ``auto_remove`` a container left with that name is removed first."""
        return None

    @property
    def host_config_options(self) -> dict[str, Any]:
        """More keyword arguments for docker-py's ``create_host_config`` (``mem_limit``, ``ulimits`` ...)."""
        return {}

    @property
    def container_options(self) -> dict[str, Any]:
        """More keyword arguments for docker-py's ``create_container`` (``user``, ``working_dir`` ...)."""
        return {}

    @property
    def environment(self) -> dict[str, str]:
        return {}

    @property
    def container_tmp_dir(self) -> str:
        return "/tmp/luigi"

    @property
    def binds(self) -> str | list[str] | None:
        """Host folders to mount: ``"host_path:container_path[:ro]"``, one string or a list."""
        return None

    @property
    def network_mode(self) -> str:
        return ""

    @property
    def docker_url(self) -> str | None:
        """The Engine API's address (``unix:///var/run/docker.sock``, ``tcp://host:2375``); None: default."""
        return None

    @property
    def auto_remove(self) -> bool:
        return True

    @property
    def force_pull(self) -> bool:
        return False

    @property
    def mount_tmp(self) -> bool:
        return True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._image = _with_tag(self.image)
        self._environment = {**self.environment, "LUIGI_TMP_DIR": self.container_tmp_dir}
        self._host_tmp_dir: str | None = None

    def run(self) -> None:
        """Pull if needed, run the container to its end, remove it; ContainerError on a non-zero exit."""
        docker = _docker()
        client = docker.APIClient(base_url=self.docker_url)
        self._host_tmp_dir = self._make_host_tmp_dir()
        try:
            self._pull_if_needed(client)
            self._remove_named_container(client, docker)
            self._run_container(client, docker)
        except docker.errors.ImageNotFound:
            logger.error(
                "Docker image %s is not on the daemon and could not be pulled: check its name, "
                "or pull or build it there",
                self._image,
            )
            raise
        except docker.errors.APIError as error:
            logger.error("The Docker daemon refused to run %s for %s: %s", self._image, self.task_id, error)
            raise
        finally:
            if self._host_tmp_dir is not None:
                shutil.rmtree(self._host_tmp_dir, ignore_errors=True)

    def _make_host_tmp_dir(self) -> str | None:
        if not self.mount_tmp:
            return None
        return tempfile.mkdtemp(suffix=self.task_id, prefix="luigi-docker-tmp-dir-", dir="/tmp")

    def _binds(self) -> list[str]:
        """The mounts of this run: the host tmp folder (with ``mount_tmp``) and then the user's ``binds``."""
        tmp = [f"{self._host_tmp_dir}:{self.container_tmp_dir}"] if self._host_tmp_dir else []
        return tmp + _bind_list(self.binds)

    def _pull_if_needed(self, client: Any) -> None:
        if not self.force_pull and client.images(name=self._image):
            return
        logger.info("Pulling Docker image %s", self._image)
        for line in client.pull(self._image, stream=True):
            report = json.loads(line)
            if "error" in report:
                # the daemon reports a failed pull in the stream, not as an HTTP error; a missing image
                # fails at create with ImageNotFound, an image already here still runs
                logger.warning("Pulling Docker image %s failed: %s", self._image, report["error"])
            else:
                logger.debug("Pulling Docker image %s: %s", self._image, report.get("status", report))

    def _remove_named_container(self, client: Any, docker: Any) -> None:
        if not (self.auto_remove and self.name):
            return
        try:
            client.remove_container(self.name, force=True)
        except docker.errors.APIError:
            pass  # no container of that name: nothing to clear out

    def _run_container(self, client: Any, docker: Any) -> None:
        binds = self._binds()
        host_config = client.create_host_config(
            binds=binds, network_mode=self.network_mode, **self.host_config_options
        )
        container = client.create_container(
            self._image,
            command=self.command,
            name=self.name,
            environment=self._environment,
            volumes=[bind.split(":")[1] for bind in binds],
            host_config=host_config,
            **self.container_options,
        )
        container_id = container["Id"]
        try:
            client.start(container_id)
            status = _exit_status(client.wait(container_id))
            errors = client.logs(container_id, stdout=False, stderr=True) if status else b""
        finally:
            if self.auto_remove:
                client.remove_container(container_id, force=True)
        if status:
            text = errors.decode("utf-8", "replace").strip()
            raise docker.errors.ContainerError(container_id, status, self.command, self._image, text)


def _exit_status(waited: dict[str, Any] | int) -> int:
    """The exit code from ``wait()``: a dict with ``StatusCode`` (Engine API 1.30+) or the bare code."""
    return int(waited["StatusCode"]) if isinstance(waited, dict) else int(waited)
