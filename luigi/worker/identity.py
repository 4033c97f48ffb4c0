"""Who a worker is: the info it registers with the scheduler and the id derived from it."""

from __future__ import annotations

import getpass
import os
import random
from typing import Any


def worker_info(worker_processes: int, host: str) -> dict[str, Any]:
    """``salt, workers, host, username, pid`` (and ``sudo_user`` under sudo), as Luigi reports them."""
    try:
        username = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. an anonymous container user
        username = "unknown"
    info: dict[str, Any] = {
        "salt": f"{random.randrange(0, 10**10):09d}",
        "workers": worker_processes,
        "host": host,
        "username": username,
        "pid": os.getpid(),
    }
    sudo_user = os.environ.get("SUDO_USER")
    if sudo_user:
        info["sudo_user"] = sudo_user
    return info


def worker_id(info: dict[str, Any]) -> str:
    """``Worker(salt=..., workers=..., host=..., username=..., pid=...)``: unique and readable in the UI."""
    return "Worker({})".format(", ".join(f"{key}={value}" for key, value in info.items()))
