"""Targets named by URL: ``OpenerTarget("s3://bucket/key?format=Gzip")`` picks the target class by scheme.

An `OpenerRegistry` maps URL schemes to `Opener` classes, which turn the URL's parts and query string into
a target. The default registry (``opener``) knows ``file://`` and bare paths (`LocalTarget`), ``mock://``
(`MockTarget`) and ``s3://``/``s3n://`` (`S3Target`, imported only when such a URL is opened). Swapping a
pipeline's storage, say to ``mock://`` in tests, is then a matter of changing its URLs.

Query arguments are checked against what the opener allows; keyword arguments given to ``OpenerTarget``
win over them. ``format=`` names a `luigi.format` format (``Nop``, ``Text>>Gzip``, ...). An ``s3://`` URL may
carry the client's credentials and connection options (``aws_access_key_id``, ``aws_secret_access_key``,
``endpoint_url``, ...). A URL's password and the values of secret-looking query arguments (names with
``secret``, ``token``, ``password``, ``key``, ...) never appear in the target's ``str``/``repr``, its
``opener_path`` or an error message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, ClassVar
from urllib.parse import SplitResult, parse_qs, unquote_plus, urlsplit

import luigi.format
from luigi.local_target import LocalTarget
from luigi.mock import MockTarget
from luigi.target import FileSystemException, Target

__all__ = [
    "InvalidQuery",
    "LocalOpener",
    "MockOpener",
    "NoOpenerError",
    "Opener",
    "OpenerError",
    "OpenerRegistry",
    "OpenerTarget",
    "S3Opener",
    "opener",
]


class OpenerError(FileSystemException):
    """A URL could not be turned into a target."""


class NoOpenerError(OpenerError):
    """No opener is registered for the URL's scheme."""


class InvalidQuery(OpenerError):
    """The URL's query string has an argument its opener does not take, or a value it cannot use."""


class Opener:
    """Builds a target from a URL's parts; subclasses list their ``names`` (schemes) and implement get_target.

    ``allowed_kwargs`` maps each query argument the opener takes to whether its value is JSON (``True``:
    ``is_tmp=true`` gives a bool, and a bare ``?is_tmp`` means true) or a plain string (``False``). With
    ``filter_kwargs`` true any other query argument is refused with `InvalidQuery`; with it false the
    others are passed to the target as strings.
    """

    names: ClassVar[list[str]] = []
    allowed_kwargs: ClassVar[dict[str, bool]] = {}
    filter_kwargs: ClassVar[bool] = True

    @classmethod
    def conform_query(cls, query: str) -> dict[str, Any]:
        """The query string as target keyword arguments; raises InvalidQuery for what the opener refuses."""
        arguments: dict[str, Any] = {}
        for key, values in parse_qs(query, keep_blank_values=True).items():
            if key not in cls.allowed_kwargs and cls.filter_kwargs:
                allowed = ", ".join(sorted(cls.allowed_kwargs)) or "none"
                raise InvalidQuery(f"unknown query argument {key!r} (this opener takes: {allowed})")
            if len(values) > 1:
                raise InvalidQuery(f"query argument {key!r} is given {len(values)} times; give it once")
            arguments[key] = cls._query_value(key, values[0])
        return arguments

    @classmethod
    def _query_value(cls, key: str, value: str) -> Any:
        """One query value: JSON-decoded for JSON arguments (blank meaning true), else the string."""
        if not cls.allowed_kwargs.get(key, False):
            if value == "":
                raise InvalidQuery(f"query argument {key!r} needs a value ({key}=...)")
            return value
        if value == "":
            return True
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            # The value is left out of the message: query strings may carry secrets.
            raise InvalidQuery(f"query argument {key!r} must be JSON (true, false, a number, ...)") from None

    @classmethod
    def get_target(
        cls,
        scheme: str,
        path: str,
        fragment: str,
        username: str | None,
        password: str | None,
        hostname: str | None,
        port: int | None,
        query: dict[str, Any],
        **kwargs: Any,
    ) -> Target:
        """The target for these URL parts; ``query`` is the conformed query, ``kwargs`` the caller's."""
        raise NotImplementedError(f"{cls.__name__} must implement get_target()")


def _format_named(name: str) -> luigi.format.Format:
    """The `luigi.format` format called ``name`` (case-insensitive), or a chain ``Text>>Gzip``."""
    formats = {
        attribute.lower(): value
        for attribute in luigi.format.__all__
        if isinstance(value := getattr(luigi.format, attribute), luigi.format.Format)
    }
    chain = []
    for part in name.split(">>"):
        try:
            chain.append(formats[part.strip().lower()])
        except KeyError:
            known = ", ".join(sorted(n for n in luigi.format.__all__ if n.lower() in formats))
            raise InvalidQuery(f"format={part!r} is not a luigi.format format (known: {known})") from None
    combined = chain[0]
    for layer in chain[1:]:
        combined = combined >> layer
    return combined


def _target_arguments(query: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Query arguments overridden by the caller's keyword arguments, with a format name resolved."""
    arguments = {**query, **kwargs}
    if isinstance(arguments.get("format"), str):
        arguments["format"] = _format_named(arguments["format"])
    return arguments


def _location(hostname: str | None, port: int | None, path: str, fragment: str) -> str:
    """``host[:port]/path[#fragment]``: the URL's location as a path (a ``#`` is part of a file name)."""
    location = (hostname or "") + (f":{port}" if port is not None else "") + path
    return f"{location}#{fragment}" if fragment else location


class LocalOpener(Opener):
    """``file:///abs/path``, ``file://rel/path`` or a bare path: a `LocalTarget`."""

    names: ClassVar[list[str]] = ["file"]
    allowed_kwargs: ClassVar[dict[str, bool]] = {"format": False, "is_tmp": True}

    @classmethod
    def get_target(
        cls,
        scheme: str,
        path: str,
        fragment: str,
        username: str | None,
        password: str | None,
        hostname: str | None,
        port: int | None,
        query: dict[str, Any],
        **kwargs: Any,
    ) -> Target:
        return LocalTarget(_location(hostname, port, path, fragment), **_target_arguments(query, kwargs))


class MockOpener(Opener):
    """``mock://some/path``: a `MockTarget` at ``some/path`` (``mock:///abs`` gives ``/abs``)."""

    names: ClassVar[list[str]] = ["mock"]
    allowed_kwargs: ClassVar[dict[str, bool]] = {"format": False, "is_tmp": True, "mirror_on_stderr": True}
    mock_target: ClassVar[type[MockTarget]] = MockTarget

    @classmethod
    def get_target(
        cls,
        scheme: str,
        path: str,
        fragment: str,
        username: str | None,
        password: str | None,
        hostname: str | None,
        port: int | None,
        query: dict[str, Any],
        **kwargs: Any,
    ) -> Target:
        return cls.mock_target(_location(hostname, port, path, fragment), **_target_arguments(query, kwargs))


# Query arguments of an s3:// URL that configure its S3Client (as the [s3] config keys of the same names
# do) rather than the upload. S3Client converts the strings ("false", "30") to the types boto3 wants.
S3_CLIENT_ARGUMENTS = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_role_arn",
    "aws_role_session_name",
    "profile_name",
    "region_name",
    "endpoint_url",
    "use_ssl",
    "verify",
    "connect_timeout",
    "read_timeout",
    "max_attempts",
    "retry_mode",
    "addressing_style",
    "signature_version",
)


class S3Opener(Opener):
    """``s3://bucket/key``: an `S3Target`; credentials and connection options in the query go to its client.

    Other query arguments are boto3 upload ``ExtraArgs`` (``ContentType``, ``ServerSideEncryption``, ...),
    as for ``S3Target(path, **kwargs)``.
    """

    names: ClassVar[list[str]] = ["s3", "s3n"]
    allowed_kwargs: ClassVar[dict[str, bool]] = dict.fromkeys(("format", *S3_CLIENT_ARGUMENTS), False)
    filter_kwargs: ClassVar[bool] = False

    @classmethod
    def get_target(
        cls,
        scheme: str,
        path: str,
        fragment: str,
        username: str | None,
        password: str | None,
        hostname: str | None,
        port: int | None,
        query: dict[str, Any],
        **kwargs: Any,
    ) -> Target:
        from luigi.contrib.s3 import S3Client, S3Target  # the s3 extra is needed only for s3:// URLs

        arguments = _target_arguments(query, kwargs)
        client_options = {name: arguments.pop(name) for name in S3_CLIENT_ARGUMENTS if name in arguments}
        if client_options:
            if arguments.get("client") is not None:
                raise InvalidQuery("give S3 credentials and options in the URL or as client=, not both")
            arguments["client"] = S3Client(**client_options)
        return S3Target(f"{scheme}://{_location(hostname, port, path, fragment)}", **arguments)


# A query argument whose name holds one of these is shown as name=*** in messages and opener_path.
SECRET_NAME_PARTS = ("secret", "token", "password", "passwd", "credential", "key")


def _is_secret(name: str) -> bool:
    lowered = unquote_plus(name).lower()
    return any(part in lowered for part in SECRET_NAME_PARTS)


def _redacted(url: str, parts: SplitResult) -> str:
    """``url`` with any password and secret-looking query values replaced by ``***``, fit for messages."""
    shown = url
    if parts.password:
        shown = shown.replace(f":{parts.password}@", ":***@", 1)
    if parts.query:
        arguments = (argument.partition("=") for argument in parts.query.split("&"))
        query = "&".join(
            f"{name}=***" if value and _is_secret(name) else f"{name}{equals}{value}"
            for name, equals, value in arguments
        )
        shown = shown.replace(f"?{parts.query}", f"?{query}", 1)
    return shown


def _hostname(parts: SplitResult) -> str | None:
    """The URL's host as written: urlsplit lowercases it, but a bucket or a mock path keeps its case."""
    host = parts.netloc.rpartition("@")[2]
    if host.startswith("["):  # an IPv6 literal keeps its brackets off, as urlsplit does
        return parts.hostname
    return host.partition(":")[0] or None


class OpenerRegistry:
    """Which `Opener` handles which URL scheme; ``open(url)`` builds the target."""

    def __init__(self, openers: Iterable[type[Opener]] | None = None) -> None:
        self.registry: dict[str, type[Opener]] = {}
        self.default_opener = "file"
        for each in openers or ():
            self.add(each)

    def add(self, opener: type[Opener]) -> None:
        """Register ``opener`` for each of its scheme names (replacing an earlier one)."""
        for name in opener.names:
            self.registry[name] = opener

    def get_opener(self, name: str) -> type[Opener]:
        """The opener for scheme ``name``; NoOpenerError if none is registered."""
        try:
            return self.registry[name]
        except KeyError:
            raise self._no_opener(name) from None

    def _no_opener(self, name: str, url: str = "") -> NoOpenerError:
        """Luigi's ``No opener for <scheme>``, then the URL, the registered schemes and the fix."""
        known = ", ".join(f"{scheme}://" for scheme in sorted(self.registry)) or "none"
        where = f" in {url}" if url else ""
        return NoOpenerError(
            f"No opener for {name}{where} (registered: {known}); register one with OpenerRegistry.add()"
        )

    def open(self, target_uri: str | os.PathLike[str], **kwargs: Any) -> Target:
        """The target ``target_uri`` names; keyword arguments go to the target, winning over the query."""
        url = os.fspath(target_uri)
        parts = urlsplit(url, scheme=self.default_opener)
        shown = _redacted(url, parts)
        try:
            opener = self.get_opener(parts.scheme)
            port = parts.port
        except NoOpenerError:
            raise self._no_opener(parts.scheme, shown) from None
        except ValueError:
            raise OpenerError(f"Cannot open {shown}: its port is not a number") from None
        try:
            query = opener.conform_query(parts.query)
            target = opener.get_target(
                parts.scheme, parts.path, parts.fragment, parts.username, parts.password,
                _hostname(parts), port, query, **kwargs,
            )  # fmt: skip
        except InvalidQuery as exc:
            raise InvalidQuery(f"Cannot open {shown}: {exc}") from None
        target.opener_path = shown  # type: ignore[attr-defined]  # where the target came from, as Luigi sets
        return target


opener = OpenerRegistry([MockOpener, LocalOpener, S3Opener])

OpenerTarget = opener.open
