"""How S3Client reaches S3: the ``[s3]`` options, merged with constructor arguments, turned into boto3 calls.

Options fall into four groups: credentials (access key, secret, session token, or a role to assume),
session options (profile, region), client options (endpoint URL, TLS), and botocore ``Config`` options
(timeouts, retries, addressing style). The resource is made with ``boto3.resource("s3", ...)`` as in
Luigi, and cached per process and option set: building one loads the service model, which costs far more
than the requests a completion check makes.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from luigi import configuration
from luigi.contrib.optional import require
from luigi.contrib.s3.errors import DeprecatedBotoClientException

__all__ = ["ConnectionOptions", "build_resource", "read_s3_config", "shared_resource"]

CREDENTIAL_KEYS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
ROLE_KEYS = ("aws_role_arn", "aws_role_session_name")
SESSION_KEYS = ("profile_name", "region_name")
CLIENT_KEYS = ("endpoint_url", "use_ssl", "verify", "api_version")
INT_CONFIG_KEYS = ("connect_timeout", "read_timeout", "max_pool_connections", "max_attempts")
STR_CONFIG_KEYS = ("signature_version", "retry_mode", "addressing_style", "user_agent_extra")
OTHER_KEYS = ("sts_endpoint_url",)
KNOWN_KEYS = frozenset(
    CREDENTIAL_KEYS + ROLE_KEYS + SESSION_KEYS + CLIENT_KEYS + INT_CONFIG_KEYS + STR_CONFIG_KEYS + OTHER_KEYS
)
SECRET_KEYS = frozenset(("aws_secret_access_key", "aws_session_token"))

_DEPRECATED = {
    "encrypt_key": "encrypt_key is not an option of boto3: pass ServerSideEncryption='AES256' (or "
    "'aws:kms') to the put methods or the target instead",
    "host": "host is not an option of boto3: set region_name (e.g. region_name=us-west-1), or endpoint_url "
    "for an S3-compatible server; regions are listed at https://docs.aws.amazon.com/general/latest/gr/rande.html",
}


def check_deprecated_arguments(options: dict[str, Any]) -> None:
    """Raise DeprecatedBotoClientException for an argument only the old boto client understood."""
    for name, advice in _DEPRECATED.items():
        if name in options:
            raise DeprecatedBotoClientException(advice)


def read_s3_config() -> dict[str, Any]:
    """The options of the ``[s3]`` config section (not inherited ``[DEFAULT]`` ones), typed; unknown ones
    are dropped with a warning."""
    config = configuration.get_config()
    if not config.has_section("s3"):
        return {}
    defaults = dict(config.defaults()) if hasattr(config, "defaults") else {}
    options = {}
    for key, value in config.items("s3"):
        if key in defaults and defaults[key] == value:
            continue
        if key in _DEPRECATED:
            check_deprecated_arguments({key: value})
        if key not in KNOWN_KEYS:
            warnings.warn(
                f"Ignoring unknown [s3] option {key!r}: luigi.contrib.s3 has no such option", stacklevel=3
            )
            continue
        options[key] = _typed(key, value)
    return options


def _typed(key: str, value: Any) -> Any:
    """A config string as the type boto3 wants for ``key``."""
    if not isinstance(value, str):
        return value
    if key in INT_CONFIG_KEYS:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"[s3] {key} must be a whole number, got {value!r}") from None
    if key in ("use_ssl", "verify"):
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        if key == "use_ssl":
            raise ValueError(f"[s3] use_ssl must be true or false, got {value!r}")
    return value  # verify may also be the path of a CA bundle


@dataclass(frozen=True, repr=False)
class ConnectionOptions:
    """Everything needed to build the boto3 client; ``extra`` holds other keyword arguments for it."""

    values: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Secrets are masked: this object shows up in debuggers, tracebacks with locals and error reports.
        shown = {key: "***" if key in SECRET_KEYS else value for key, value in self.values.items()}
        return f"ConnectionOptions(values={shown!r}, extra=<{len(self.extra)} option(s)>)"

    @classmethod
    def merge(cls, config: dict[str, Any], overrides: dict[str, Any]) -> ConnectionOptions:
        """Config options overridden by constructor arguments (None means "not given")."""
        check_deprecated_arguments(overrides)
        values = dict(config)
        extra = {}
        for key, value in overrides.items():
            if value is None:
                continue
            if key in KNOWN_KEYS:
                values[key] = _typed(key, value)
            else:
                extra[key] = value
        return cls(values, extra)

    @property
    def endpoint_url(self) -> str | None:
        return self.values.get("endpoint_url")

    @property
    def region_name(self) -> str | None:
        return self.values.get("region_name")

    def credentials_source(self) -> str:
        """How the client authenticates, for ``repr`` (never the values)."""
        if self.values.get("aws_role_arn"):
            return f"role {self.values['aws_role_arn']}"
        if self.values.get("aws_access_key_id"):
            return f"access key ...{str(self.values['aws_access_key_id'])[-4:]}"
        if self.values.get("profile_name"):
            return f"profile {self.values['profile_name']}"
        return "the default AWS credential chain"

    @functools.cached_property
    def cache_key(self) -> tuple[Any, ...]:
        """Identifies equivalent options (objects such as a botocore Config by identity).

        Secrets enter the key only as digests, so the cache never holds them in the clear.
        """
        items = sorted({**self.values, **self.extra}.items())
        return tuple((key, _cache_value(key, value)) for key, value in items)

    def resource_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.resource("s3", ...)`` besides the credentials."""
        kwargs = {key: self.values[key] for key in ("region_name", *CLIENT_KEYS) if key in self.values}
        kwargs.update(self.extra)
        botocore_config = self._botocore_config()
        if botocore_config is not None:
            given = kwargs.get("config")
            kwargs["config"] = botocore_config if given is None else given.merge(botocore_config)
        return kwargs

    def sts_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client("sts", ...)``: the configured key, region and TLS options."""
        kwargs: dict[str, Any] = {key: self.values[key] for key in CREDENTIAL_KEYS if self.values.get(key)}
        kwargs.update(
            {key: self.values[key] for key in ("region_name", "use_ssl", "verify") if key in self.values}
        )
        if self.values.get("sts_endpoint_url"):
            kwargs["endpoint_url"] = self.values["sts_endpoint_url"]
        return kwargs

    def _botocore_config(self) -> Any:
        options: dict[str, Any] = {}
        for key in ("connect_timeout", "read_timeout", "max_pool_connections", "signature_version"):
            if key in self.values:
                options[key] = self.values[key]
        if "user_agent_extra" in self.values:
            options["user_agent_extra"] = self.values["user_agent_extra"]
        retries = {k: self.values[k] for k in ("max_attempts", "retry_mode") if k in self.values}
        if retries:
            renamed = {"max_attempts": "total_max_attempts", "retry_mode": "mode"}
            options["retries"] = {renamed[key]: value for key, value in retries.items()}
        if "addressing_style" in self.values:
            options["s3"] = {"addressing_style": self.values["addressing_style"]}
        if not options:
            return None
        from botocore.config import Config

        return Config(**options)


def _cache_value(key: str, value: Any) -> Any:
    if key in SECRET_KEYS and isinstance(value, str):
        return hashlib.sha256(value.encode("utf-8")).hexdigest()
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


@dataclass(frozen=True)
class _Built:
    """A boto3 S3 resource and, for assumed-role credentials, when they expire."""

    resource: Any
    expires: datetime.datetime | None


def build_resource(options: ConnectionOptions) -> _Built:
    """A boto3 S3 resource for ``options``, made as Luigi makes it: ``boto3.resource("s3", ...)``.

    Both ``boto3.resource`` and ``boto3.client`` are looked up here, so a test's ``mock.patch`` of either
    takes effect. A ``profile_name`` needs a session of its own (``boto3.resource`` takes none).
    """
    boto3 = require("boto3", "s3", "luigi.contrib.s3")
    credentials, expires = _credentials(boto3, options)
    profile = options.values.get("profile_name")
    factory = boto3.Session(profile_name=profile).resource if profile else boto3.resource
    try:
        resource = factory("s3", **credentials, **options.resource_kwargs())
    except TypeError as exc:
        if "got an unexpected keyword argument" not in str(exc):
            raise
        raise DeprecatedBotoClientException(
            f"boto3 refused an option of S3Client or [s3]: {exc}; luigi.contrib.s3's docstring lists the "
            "options it takes"
        ) from None
    return _Built(resource, expires)


def _credentials(boto3: Any, options: ConnectionOptions) -> tuple[dict[str, Any], datetime.datetime | None]:
    """The three credential arguments of ``boto3.resource`` (None when unset), and their expiry if any.

    With ``aws_role_arn`` they are the role's, from ``boto3.client("sts").assume_role(...)``.
    """
    role_arn, session_name = (options.values.get(key) for key in ROLE_KEYS)
    if not role_arn:
        return {key: options.values.get(key) for key in CREDENTIAL_KEYS}, None
    sts = boto3.client("sts", **options.sts_kwargs())
    answer = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name or "luigi")["Credentials"]
    expiration = answer.get("Expiration")
    credentials = {
        "aws_access_key_id": answer.get("AccessKeyId"),
        "aws_secret_access_key": answer.get("SecretAccessKey"),
        "aws_session_token": answer.get("SessionToken"),
    }
    return credentials, expiration if isinstance(expiration, datetime.datetime) else None


# Assumed-role credentials are renewed this long before they expire (botocore's own advisory margin).
RENEW_BEFORE = datetime.timedelta(minutes=15)

_resources: dict[tuple[Any, ...], _Built] = {}
_resources_lock = threading.Lock()


def shared_resource(options: ConnectionOptions) -> Any:
    """The boto3 S3 resource for ``options`` in this process, built on first use and then reused.

    Building one loads botocore's service model, which costs more than the requests of a completion
    check. Sharing is safe: the service resource holds no per-object state (each ``Object(...)`` it
    makes is new) and its client is thread-safe. The key holds the ``boto3.resource`` and
    ``boto3.client`` in use, so a patched one gets a resource of its own; assumed-role credentials are
    renewed by building again shortly before they expire.
    """
    boto3 = require("boto3", "s3", "luigi.contrib.s3")
    key = (os.getpid(), boto3.resource, boto3.client, options.cache_key)
    with _resources_lock:
        built = _resources.get(key)
        if built is None or _expiring(built):
            built = build_resource(options)
            _resources[key] = built
    return built.resource


def _expiring(built: _Built) -> bool:
    if built.expires is None:
        return False
    return built.expires - RENEW_BEFORE <= datetime.datetime.now(datetime.timezone.utc)
