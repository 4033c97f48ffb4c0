"""A private network of "hosts" for tests: Linux network namespaces on a bridge, made and torn down here.

``private_network(["sched", "alpha", "beta"])`` makes one namespace per host and a switch namespace that
holds only a bridge; each host has one interface, ``eth0``, wired by a veth pair to a port of that bridge,
with an address in ``SUBNET``. The addresses exist only inside these namespaces, so nothing a test sends
over them can leave the namespaces it made. Programs start on a host through ``Host.command`` (``ip
netns exec`` plus a UTS namespace whose hostname is the host's name). ``cut`` and ``restore`` pull and
replug a host's cable at the switch. Needs root; ``require_private_networks`` skips (or, under CI,
fails) the test elsewhere.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import signal
import socket
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers.luigid import pid_alive, wait_until
from helpers.services import require_program, unavailable

SUBNET = "10.213.7"  # a /24 used only inside the namespaces made here
PREFIX = "luigi-test-net"  # every namespace made here is named <PREFIX>-<pid of its maker>-<run>-<role>
KILL_TIMEOUT = 10.0
TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


def ip(*args: str) -> str:
    """Run ``ip args`` and return its output; CalledProcessError (with ip's message) when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=KILL_TIMEOUT)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, ["ip", *args], done.stdout, done.stderr)
    return done.stdout


def namespace_pids(netns: str) -> list[int]:
    """The processes whose network namespace is ``netns``."""
    return [int(pid) for pid in ip("netns", "pids", netns).split()]


def wait_until_dead(pids: Sequence[int], what: str) -> None:
    """Wait until none of ``pids`` runs (a zombie counts as dead); AssertionError naming ``what``."""
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), timeout=KILL_TIMEOUT, what=f"{what} to die")


def listens_on(pid: int, address: str, port: int) -> bool:
    """Whether a TCP socket listens on IPv4 ``address:port`` in the network namespace of ``pid``.

    Read from ``/proc/<pid>/net/tcp``, which shows that namespace (psutil reads ours).
    """
    wanted = f"{socket.htonl(int(ipaddress.IPv4Address(address))):08X}:{port:04X}"
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return any(line.split()[1] == wanted and line.split()[3] == TCP_LISTEN for line in lines)


@dataclass(frozen=True)
class Host:
    """One namespace of the private network: its name (also its hostname), namespace and address."""

    name: str
    netns: str
    address: str
    switch_port: str  # the bridge port its cable is plugged into, in the switch namespace

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host: in its network namespace, with its own hostname."""
        set_name = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--", "sh", "-c", set_name,
                self.name, *argv]  # fmt: skip

    def pids(self) -> list[int]:
        """Every process running on this host."""
        return namespace_pids(self.netns)

    def signal_all(self, sig: int) -> list[int]:
        """Send ``sig`` to every process on this host; the pids it was sent to."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def kill_all(self) -> None:
        """SIGKILL every process on this host, as when the machine loses power, and wait until they are
        gone (each pid no longer runs, or is a zombie whose parent has not reaped it yet)."""
        while [pid for pid in self.pids() if pid_alive(pid)]:
            wait_until_dead(self.signal_all(signal.SIGKILL), f"the processes of {self.name}")


@dataclass
class PrivateNetwork:
    """The hosts of one ``private_network`` and the switch namespace joining them."""

    switch: str
    hosts: dict[str, Host] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def cut(self, host: Host) -> None:
        """Unplug ``host``'s cable at the switch: its packets go nowhere, its connections hang."""
        ip("-n", self.switch, "link", "set", host.switch_port, "down")

    def restore(self, host: Host) -> None:
        """Plug ``host``'s cable back in."""
        ip("-n", self.switch, "link", "set", host.switch_port, "up")


def require_private_networks() -> None:
    """Skip (or fail under CI) unless this process may make network namespaces, bridges and veths."""
    if os.geteuid() != 0:
        unavailable("making network namespaces needs root")
    for program, package in (("ip", "iproute2"), ("unshare", "util-linux"), ("hostname", "hostname")):
        require_program(program, package)
    try:
        with private_network(["probe"]):
            pass
    except subprocess.CalledProcessError as exc:
        unavailable(f"cannot make a private network here: {' '.join(exc.cmd)}: {exc.stderr.strip()}")


@contextlib.contextmanager
def private_network(names: Sequence[str]) -> Iterator[PrivateNetwork]:
    """Hosts ``names`` (at most 250) on a private bridge, addressed ``SUBNET.1``, ``.2``, ... in order.

    On the way out, even after a failure, every process left on them is killed and the namespaces are
    deleted (the veths and the bridge go with them). Namespaces left by an earlier run whose maker died
    without tearing down are removed first.
    """
    remove_abandoned_namespaces()
    run = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(3)}"
    network = PrivateNetwork(switch=f"{run}-switch")
    made: list[str] = []
    try:
        ip("netns", "add", network.switch)
        made.append(network.switch)
        ip("-n", network.switch, "link", "add", "br0", "type", "bridge", "stp_state", "0",
           "forward_delay", "0")  # fmt: skip
        ip("-n", network.switch, "link", "set", "br0", "up")
        for number, name in enumerate(names, start=1):
            host = Host(name, f"{run}-{name}", f"{SUBNET}.{number}", f"port{number}")
            ip("netns", "add", host.netns)
            made.append(host.netns)
            _wire(network.switch, host)
            network.hosts[name] = host
        yield network
    finally:
        for netns in reversed(made):
            _delete_namespace(netns)


def _wire(switch: str, host: Host) -> None:
    """A veth pair from a new bridge port to the host's ``eth0``, and the host's address on it."""
    ip("-n", switch, "link", "add", host.switch_port, "type", "veth", "peer", "name", "eth0",
       "netns", host.netns)  # fmt: skip
    ip("-n", switch, "link", "set", host.switch_port, "master", "br0", "up")
    ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
    ip("-n", host.netns, "link", "set", "eth0", "up")
    ip("-n", host.netns, "link", "set", "lo", "up")


def _delete_namespace(netns: str) -> None:
    """Kill what still runs in ``netns``, then delete it."""
    for _ in range(3):  # a process may fork while its siblings are being killed
        pids = namespace_pids(netns)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until_dead(pids, f"the processes left in {netns}")
    ip("netns", "del", netns)


def remove_abandoned_namespaces() -> None:
    """Delete namespaces made here by a process that no longer runs (a test run killed mid-way)."""
    pattern = re.compile(rf"^{re.escape(PREFIX)}-(\d+)-[0-9a-f]+-")
    for line in ip("netns", "list").splitlines():
        netns = line.split(" ", 1)[0]
        found = pattern.match(netns)
        if found and not pid_alive(int(found.group(1))):
            _delete_namespace(netns)
