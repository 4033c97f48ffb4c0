"""The default cfg (INI) parser: Luigi's search path, ``%(x)s`` and ``${ENV}`` interpolation, clear errors.

Keys are case-sensitive (no lower-casing), and a malformed file raises ConfigError naming the file and line.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Mapping, MutableMapping
from configparser import (
    BasicInterpolation,
    ConfigParser,
    DuplicateOptionError,
    DuplicateSectionError,
    Interpolation,
    InterpolationError,
    MissingSectionHeaderError,
    NoSectionError,
    ParsingError,
)
from typing import Any, ClassVar

from luigi.configuration.base_parser import (
    BaseParser,
    ConfigError,
    ConfigPaths,
    existing_config_texts,
    to_int,
)

_Sections = MutableMapping[str, Mapping[str, str]]

# Old file names still read, with a warning pointing to the new name.
_DEPRECATED_PATHS = {
    "/etc/luigi/client.cfg": "/etc/luigi/luigi.cfg",
    "client.cfg": "luigi.cfg",
}


class InterpolationMissingEnvvarError(InterpolationError):
    """A ``${VAR}`` in a config value names an environment variable that is not set."""

    def __init__(self, option: str, section: str, value: str, envvar: str) -> None:
        message = (
            f"Config option [{section}] {option} = {value!r} refers to environment variable "
            f"{envvar}, which is not set"
        )
        super().__init__(option, section, message)
        self.envvar = envvar


class EnvironmentInterpolation(Interpolation):
    """Replaces ``${VAR}`` with the value of environment variable VAR."""

    _pattern = re.compile(r"\$\{([^}]*)\}")

    def before_get(self, parser: _Sections, section: str, option: str, value: str, defaults: Any) -> str:
        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise InterpolationMissingEnvvarError(option, section, value, name)
            return os.environ[name]

        return self._pattern.sub(substitute, value)


class _ExactKeyView:
    """The parser as interpolations see it: their own ``get`` calls read the exact key, without aliasing.

    BasicInterpolation re-reads the option it expands; through Luigi's ``get`` that would apply the
    dash/underscore aliasing a second time and repeat its deprecation warning.
    """

    def __init__(self, parser: Any) -> None:
        self._parser = parser

    def get(self, section: str, option: str, **kwargs: Any) -> Any:
        return ConfigParser.get(self._parser, section, option, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


class CombinedInterpolation(Interpolation):
    """Applies several interpolations in turn (Luigi: basic ``%(x)s`` first, then ``${ENV}``)."""

    def __init__(self, interpolations: Iterable[Interpolation]) -> None:
        self._interpolations = list(interpolations)

    def before_get(self, parser: _Sections, section: str, option: str, value: str, defaults: Any) -> str:
        view: Any = _ExactKeyView(parser)
        for interpolation in self._interpolations:
            value = interpolation.before_get(view, section, option, value, defaults)
        return value

    def before_set(self, parser: _Sections, section: str, option: str, value: str) -> str:
        for interpolation in self._interpolations:
            value = interpolation.before_set(parser, section, option, value)
        return value

    def before_read(self, parser: _Sections, section: str, option: str, value: str) -> str:
        for interpolation in self._interpolations:
            value = interpolation.before_read(parser, section, option, value)
        return value

    def before_write(self, parser: _Sections, section: str, option: str, value: str) -> str:
        for interpolation in reversed(self._interpolations):
            value = interpolation.before_write(parser, section, option, value)
        return value


# ConfigParser is also a Mapping whose get(key, default) Luigi's get(section, option, default) replaces.
class LuigiConfigParser(BaseParser, ConfigParser):  # type: ignore[misc]
    """The cfg parser: a ConfigParser with Luigi's getters, search path and interpolation."""

    NO_DEFAULT: ClassVar[Any] = BaseParser.NO_DEFAULT
    _instance: ClassVar[BaseParser | None] = None
    _default_config_paths: ClassVar[tuple[str, ...]] = (
        "/etc/luigi/client.cfg",
        "/etc/luigi/luigi.cfg",
        "client.cfg",
        "luigi.cfg",
    )
    _config_paths: ClassVar[list[str]] = list(_default_config_paths)
    _DEFAULT_INTERPOLATION = CombinedInterpolation([BasicInterpolation(), EnvironmentInterpolation()])

    def optionxform(self, optionstr: str) -> str:
        """Keep keys exactly as written: Luigi config keys are case-sensitive."""
        return optionstr

    def read(  # type: ignore[override]
        self, filenames: ConfigPaths, encoding: str | None = None
    ) -> list[str]:
        """Load the existing files among ``filenames`` in order; a malformed one raises ConfigError."""
        loaded = []
        for path, text in existing_config_texts(filenames):
            if path in _DEPRECATED_PATHS:
                warnings.warn(
                    f"Config file {path} uses a deprecated name; rename it to {_DEPRECATED_PATHS[path]}",
                    DeprecationWarning,
                    stacklevel=2,
                )
            self._parse_text(text, path)
            loaded.append(path)
        return loaded

    def _parse_text(self, text: str, path: str) -> None:
        """Feed one file's text to ConfigParser, turning its syntax errors into ConfigError."""
        try:
            self.read_string(text, source=path)
        except MissingSectionHeaderError as exc:
            raise _file_error(path, text, exc.lineno, "option outside any [section]") from None
        except DuplicateSectionError as exc:
            raise _file_error(path, text, exc.lineno, f"section [{exc.section}] appears twice") from None
        except DuplicateOptionError as exc:
            problem = f"option {exc.option} appears twice in section [{exc.section}]"
            raise _file_error(path, text, exc.lineno, problem) from None
        except ParsingError as exc:
            lineno = exc.errors[0][0] if exc.errors else None
            problem = "expected 'key = value', '[section]' or a comment"
            raise _file_error(path, text, lineno, problem) from None

    def _read_option(self, section: str, option: str, **kwargs: Any) -> Any:
        return ConfigParser.get(self, section, option, raw=kwargs.get("raw", False), vars=kwargs.get("vars"))

    def _has_exact_option(self, section: str, option: str) -> bool:
        return ConfigParser.has_option(self, section, option)

    def set(self, section: str, option: str, value: str | None = None) -> None:
        """Set ``[section] option = value`` (a string), creating the section if needed."""
        if not isinstance(value, str) and value is not None:
            raise TypeError(
                f"Config option [{section}] {option}: cfg values must be strings, got {value!r} "
                f"({type(value).__name__})"
            )
        if section != self.default_section and not ConfigParser.has_section(self, section):
            self.add_section(section)
        ConfigParser.set(self, section, option, value)

    def getintdict(self, section: str) -> dict[str, int]:
        """Every option of ``[section]`` (not ``[DEFAULT]`` ones) as an int; {} when the section is absent."""
        try:
            items = self.items(section)
        except NoSectionError:
            return {}
        defaults = self.defaults()
        return {key: to_int(value, section, key) for key, value in items if key not in defaults}


def _file_error(path: str, text: str, lineno: int | None, problem: str) -> ConfigError:
    """A ConfigError pointing at ``path``, line ``lineno``, quoting that line."""
    if lineno is None:
        return ConfigError(f"Malformed config file {path}: {problem}", path)
    lines = text.splitlines()
    quoted = f": {lines[lineno - 1].strip()!r}" if 0 < lineno <= len(lines) else ""
    return ConfigError(f"Malformed config file {path}, line {lineno}: {problem}{quoted}", path, lineno)
