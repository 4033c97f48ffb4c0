"""A real container engine for the docker_runner tests: Podman's Docker-compatible API on a private socket.

No registry is reachable here, so the one image is imported from a root filesystem tarball holding a
static busybox (Debian's ``busybox-static``). Podman keeps its storage, state and events in the test's
temporary folder. It runs in a private mount namespace without the cgroup v2 mount, because crun refuses
the hybrid cgroup layout of these machines; containers run without cgroups (``cgroups = "disabled"``),
on the host network, with limits no higher than ours (we may not raise them).
"""

from __future__ import annotations

import io
import os
import resource
import struct
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.services import require_program, unavailable

__all__ = ["IMAGE", "Podman", "podman"]

IMAGE = "localhost/luigi-test-busybox:latest"
_APPLETS = ("sh", "echo", "cat", "ls", "env", "test", "false", "true", "sleep")
_PT_INTERP = 3  # ELF program header type of a dynamic loader request


@dataclass(frozen=True)
class Podman:
    """The running service: its Engine API address (``docker_url``) and the podman command for its store."""

    url: str
    command: tuple[str, ...]
    env: dict[str, str]

    def container_names(self) -> list[str]:
        """Names of every container the store holds, running or not."""
        listing = subprocess.run(
            [*self.command, "ps", "-a", "--format", "{{.Names}}"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return listing.stdout.split()


def _is_static(binary: Path) -> bool:
    """True when the ELF file asks for no dynamic loader (it can run alone in an empty root)."""
    data = binary.read_bytes()
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    types = (struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum))
    return _PT_INTERP not in types


def _rootfs_tarball(busybox: Path, into: Path) -> Path:
    """A tarball of ``/bin/busybox``, its applets as links, and an empty ``/tmp``."""
    tarball = into / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(busybox, arcname="bin/busybox")
        for applet in _APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        folder = tarfile.TarInfo("tmp")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(folder, io.BytesIO())
    return tarball


def _containers_conf(into: Path) -> Path:
    nofile = min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    nproc = min(1024, resource.getrlimit(resource.RLIMIT_NPROC)[0])
    conf = into / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        'cgroups = "disabled"\nnetns = "host"\n'
        "[engine]\n"
        'cgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        f'events_logfile_path = "{into / "events.log"}"\n'
    )
    return conf


def _wait_for_socket(service: subprocess.Popen[bytes], socket: Path, log: Path, deadline: float) -> None:
    while not socket.exists():
        if service.poll() is not None:
            raise RuntimeError(f"podman system service exited {service.returncode}: {log.read_text()}")
        if time.monotonic() > deadline:
            raise RuntimeError("podman system service did not open its socket within 30 s")
        time.sleep(0.05)


def _import_image(command: tuple[str, ...], env: dict[str, str], busybox: Path, home: Path) -> None:
    tarball = _rootfs_tarball(busybox, home)
    run = subprocess.run([*command, "import", str(tarball), IMAGE], env=env, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"podman import exited {run.returncode}: {run.stderr.strip()}")


def _start_service(
    command: tuple[str, ...], env: dict[str, str], socket: Path, log: Path
) -> subprocess.Popen[bytes]:
    """``podman system service`` on ``socket`` in a mount namespace of its own without cgroup v2's mount."""
    serve = " ".join([*command, "system", "service", "--time=0", f"unix://{socket}"])
    unmount_v2 = "umount /sys/fs/cgroup/unified 2>/dev/null"  # absent on a pure v1 or v2 machine: fine
    with log.open("wb") as errors:
        return subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{unmount_v2}; exec {serve}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )


def _require_engine() -> tuple[str, Path]:
    """Podman and a static busybox, as root; otherwise skip (or fail under CI) naming what to install."""
    program = require_program("podman", "podman")
    require_program("unshare", "util-linux")
    busybox = Path(require_program("busybox", "busybox-static"))
    if not _is_static(busybox):
        unavailable(f"{busybox} is dynamically linked (apt-get install busybox-static)")
    if os.geteuid() != 0:
        unavailable("the podman API service runs here only as root (it needs a private mount namespace)")
    return program, busybox


@pytest.fixture(scope="session")
def podman() -> Iterator[Podman]:
    """Podman's API service holding the busybox image, for the session; stopped and removed after."""
    program, busybox = _require_engine()
    # a short folder of our own: podman refuses a runroot path longer than 50 characters
    with tempfile.TemporaryDirectory(prefix="luigi-podman-", ignore_cleanup_errors=True) as folder:
        home = Path(folder)
        command = (program, "--root", f"{home}/root", "--runroot", f"{home}/run", "--tmpdir", f"{home}/tmp")
        env = {**os.environ, "CONTAINERS_CONF": str(_containers_conf(home))}
        _import_image(command, env, busybox, home)
        socket, log = home / "api.sock", home / "service.log"
        service = _start_service(command, env, socket, log)
        try:
            _wait_for_socket(service, socket, log, time.monotonic() + 30)
            yield Podman(url=f"unix://{socket}", command=command, env=env)
        finally:
            service.terminate()
            service.wait(timeout=30)
            subprocess.run([*command, "rm", "-af"], env=env, capture_output=True)
