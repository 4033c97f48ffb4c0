"""What ``luigid`` is told by configuration: the ``[cors]`` section and the server's own options.

``[cors]`` is read per request, as in Luigi, so a change to the configuration after ``app()`` applies
(only requests carrying an ``Origin`` read it: the others never get CORS headers).

The server options live in ``[scheduler]`` beside the scheduler's: ``auth_token`` (or the
``LUIGI_AUTH_TOKEN`` environment variable, which wins), ``allowed_hosts`` (the names requests may be
addressed to, see ``luigi.server.guard``), ``max_body_size`` (bytes a request body may hold, default
100 MiB: tornado's default, which Luigi's server keeps, so a wrapper naming a million dependencies is
taken) and ``prune_interval`` (seconds between housekeeping runs, default 60).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from luigi import configuration, parameter
from luigi.task import Config

__all__ = ["ANY_HOST", "AUTH_TOKEN_ENV", "CorsPolicy", "ServerSettings", "cors"]

AUTH_TOKEN_ENV = "LUIGI_AUTH_TOKEN"
ANY_HOST = "*"  # in ``allowed_hosts``: answer whatever the Host header says (behind a proxy that checks it)
DEFAULT_MAX_BODY_SIZE = 100 * 1024 * 1024  # what tornado, and so Luigi's luigid, accepts
DEFAULT_PRUNE_INTERVAL = 60.0


class cors(Config):
    """``[cors]``: which other web origins may call the API from a browser (off by default)."""

    enabled = parameter.BoolParameter(default=False, description="Answer cross-origin requests at all.")
    allowed_origins = parameter.ListParameter(default=[], description="Origins allowed to call the API.")
    allow_any_origin = parameter.BoolParameter(default=False, description="Allow every origin ('*').")
    allow_null_origin = parameter.BoolParameter(default=False, description="Allow the 'null' origin.")
    max_age = parameter.IntParameter(default=86400, description="Seconds a browser may cache a preflight.")
    allowed_methods = parameter.Parameter(default="GET, OPTIONS", description="Access-Control-Allow-Methods.")
    allowed_headers = parameter.Parameter(
        default="Accept, Content-Type, Origin", description="Access-Control-Allow-Headers."
    )
    exposed_headers = parameter.Parameter(default="", description="Access-Control-Expose-Headers.")
    allow_credentials = parameter.BoolParameter(
        default=False, description="Send Access-Control-Allow-Credentials: true."
    )


@dataclass(frozen=True)
class CorsPolicy:
    """The ``[cors]`` options as plain data, and the headers they give a request from ``origin``."""

    enabled: bool = False
    allowed_origins: tuple[str, ...] = ()
    allow_any_origin: bool = False
    allow_null_origin: bool = False
    max_age: int = 86400
    allowed_methods: str = "GET, OPTIONS"
    allowed_headers: str = "Accept, Content-Type, Origin"
    exposed_headers: str = ""
    allow_credentials: bool = False

    @classmethod
    def from_config(cls) -> CorsPolicy:
        """Read ``[cors]`` through the ``cors`` Config class."""
        section = cors()
        return cls(
            enabled=section.enabled,
            allowed_origins=tuple(str(origin) for origin in section.allowed_origins),
            allow_any_origin=section.allow_any_origin,
            allow_null_origin=section.allow_null_origin,
            max_age=section.max_age,
            allowed_methods=section.allowed_methods,
            allowed_headers=section.allowed_headers,
            exposed_headers=section.exposed_headers,
            allow_credentials=section.allow_credentials,
        )

    def allowed_origin(self, origin: str | None) -> str | None:
        """The value of ``Access-Control-Allow-Origin`` for ``origin``, or None when it is not allowed.

        The ``null`` origin (sandboxed frames, files) is allowed only by ``allow_null_origin``, even with
        ``allow_any_origin``, as in Luigi.
        """
        if not self.enabled or not origin:
            return None
        if origin == "null":
            return "null" if self.allow_null_origin else None
        if self.allow_any_origin:
            return "*"
        return origin if origin in self.allowed_origins else None

    def headers_for(self, origin: str | None, preflight: bool) -> dict[str, str]:
        """The CORS response headers for a request from ``origin`` (preflight adds methods, headers, age)."""
        allowed = self.allowed_origin(origin)
        if allowed is None:
            return {}
        headers = {"Access-Control-Allow-Origin": allowed}
        if allowed != "*":
            headers["Vary"] = "Origin"
        if self.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        if self.exposed_headers:
            headers["Access-Control-Expose-Headers"] = self.exposed_headers
        if preflight:
            headers["Access-Control-Allow-Methods"] = self.allowed_methods
            headers["Access-Control-Allow-Headers"] = self.allowed_headers
            headers["Access-Control-Max-Age"] = str(self.max_age)
        return headers


@dataclass(frozen=True)
class ServerSettings:
    """Everything the HTTP layer needs beyond the scheduler; ``from_config()`` reads it from the files."""

    auth_token: str | None = None
    allowed_hosts: tuple[str, ...] = ()  # none listed: the bound address and the loopback names
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    prune_interval: float = DEFAULT_PRUNE_INTERVAL
    # A fixed policy, or None: read ``[cors]`` at each request that carries an ``Origin`` (``from_config``).
    cors: CorsPolicy | None = CorsPolicy()

    def __post_init__(self) -> None:
        if self.max_body_size < 1:
            raise ValueError(f"max_body_size must be a positive number of bytes, got {self.max_body_size!r}")
        if self.prune_interval <= 0:
            raise ValueError(
                f"prune_interval must be a positive number of seconds, got {self.prune_interval!r}"
            )
        if self.auth_token is not None and not self.auth_token.strip():
            raise ValueError("auth_token must not be blank (leave it unset to turn authentication off)")

    @classmethod
    def from_config(cls) -> ServerSettings:
        """Read ``[scheduler]`` server options, ``LUIGI_AUTH_TOKEN`` and ``[cors]``."""
        config = configuration.get_config()
        token = os.environ.get(AUTH_TOKEN_ENV) or config.get("scheduler", "auth_token", None) or None
        hosts = str(config.get("scheduler", "allowed_hosts", "") or "")
        return cls(
            auth_token=str(token) if token is not None else None,
            allowed_hosts=tuple(name for name in hosts.replace(",", " ").split() if name),
            max_body_size=config.getint("scheduler", "max_body_size", DEFAULT_MAX_BODY_SIZE),
            prune_interval=config.getfloat("scheduler", "prune_interval", DEFAULT_PRUNE_INTERVAL),
            cors=None,
        )

    def cors_policy(self) -> CorsPolicy:
        """The CORS policy for the request at hand: the fixed one, else ``[cors]`` as configured now."""
        return self.cors if self.cors is not None else CorsPolicy.from_config()

    def cors_headers(self, origin: str | None, preflight: bool) -> dict[str, str]:
        """The CORS headers for a request from ``origin``; none (and no config read) without one."""
        if not origin:
            return {}
        return self.cors_policy().headers_for(origin, preflight)

    @property
    def connection_body_limit(self) -> int:
        """Past this size the connection is dropped; smaller bodies over the cap are drained for a 413."""
        return self.max_body_size * 4
