"""The client's settings: explicit arguments, else ``[core]`` options, checked once at construction."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from luigi.__version__ import VERSION
from luigi.configuration import get_config
from luigi.rpc.address import SchedulerAddress

__all__ = ["ClientOptions", "request_headers"]


@dataclass(frozen=True)
class ClientOptions:
    """How a ``RemoteScheduler`` connects and retries (see its docstring for each option)."""

    connect_timeout: float
    retry_attempts: int
    retry_wait: float
    log_retries: bool
    auth_token: str | None
    use_channel: bool

    @classmethod
    def resolve(
        cls,
        connect_timeout: float | None,
        retry_attempts: int | None,
        retry_wait: float | None,
        log_retries: bool | None,
        auth_token: str | None,
    ) -> ClientOptions:
        """The options given, the rest from the configuration; ValueError names a bad one."""
        config = get_config()
        if connect_timeout is None:
            connect_timeout = config.getfloat("core", "rpc_connect_timeout", 10.0)
        if retry_attempts is None:
            retry_attempts = config.getint("core", "rpc_retry_attempts", 3)
        if retry_wait is None:
            retry_wait = config.getfloat("core", "rpc_retry_wait", 30.0)
        if log_retries is None:
            log_retries = config.getboolean("core", "rpc_log_retries", True)
        return cls(
            connect_timeout=_checked("rpc_connect_timeout", float(connect_timeout), minimum=0.0, strict=True),
            retry_attempts=int(_checked("rpc_retry_attempts", retry_attempts, minimum=1)),
            retry_wait=_checked("rpc_retry_wait", float(retry_wait), minimum=0.0),
            log_retries=bool(log_retries),
            auth_token=_auth_token(auth_token, config),
            use_channel=config.getboolean("core", "rpc_channel", True),
        )


def request_headers(address: SchedulerAddress, token: str | None) -> dict[str, str]:
    """The headers of every request: form content, our user agent, and the bearer token or Basic auth."""
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
        "User-Agent": f"luigi/{VERSION}",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    elif address.basic_auth is not None:
        headers["Authorization"] = address.basic_auth
    return headers


def _checked(option: str, value: Any, minimum: float, strict: bool = False) -> Any:
    if value < minimum or (strict and value == minimum):
        relation = "more than" if strict else "at least"
        raise ValueError(f"[core] {option} must be {relation} {minimum:g}, got {value!r}")
    return value


def _auth_token(explicit: str | None, config: Any) -> str | None:
    token = explicit or os.environ.get("LUIGI_AUTH_TOKEN") or config.get("scheduler", "auth_token", None)
    return str(token) if token else None
