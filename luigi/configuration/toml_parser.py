"""The TOML parser (``LUIGI_CONFIG_PARSER=toml``): natively typed values, read-only dict values.

Files are read with the standard ``tomllib`` (Python 3.11+) or the ``tomli`` package on 3.10. Later files are
merged into earlier ones table by table. ``parser["logging"]`` gives a fresh plain dict for ``dictConfig``.
"""

from __future__ import annotations

import copy
import re
import sys
from configparser import NoOptionError, NoSectionError
from types import ModuleType
from typing import Any, ClassVar

from luigi.configuration.base_parser import (
    BaseParser,
    ConfigError,
    ConfigPaths,
    existing_config_texts,
    to_int,
)
from luigi.freezing import recursively_freeze


def _load_toml_module() -> ModuleType | None:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:
        import tomli
    except ModuleNotFoundError:
        return None
    return tomli


_toml_lib = _load_toml_module()

# Luigi's words (users' tests match them); the ``toml`` extra installs ``tomli`` where Python lacks tomllib.
MISSING_TOML_MESSAGE = (
    "Parser not installed yet. Please, install luigi with required parser:\npip install luigi[toml]"
)


class ParserNotInstalledError(ConfigError, ImportError):
    """TOML configuration was asked for while ``LuigiTomlParser.enabled`` is false (no tomllib or tomli)."""


class TomlNoSectionError(NoSectionError, KeyError):
    """A missing TOML section; also a KeyError, as code written for Luigi's TOML parser expects."""


class TomlNoOptionError(NoOptionError, KeyError):
    """A missing TOML option; also a KeyError, as code written for Luigi's TOML parser expects."""


class LuigiTomlParser(BaseParser):
    """Configuration from TOML files, with the same getter API as LuigiConfigParser."""

    NO_DEFAULT: ClassVar[Any] = BaseParser.NO_DEFAULT
    enabled: ClassVar[bool] = _toml_lib is not None
    _instance: ClassVar[BaseParser | None] = None
    _default_config_paths: ClassVar[tuple[str, ...]] = ("/etc/luigi/luigi.toml", "luigi.toml")
    _config_paths: ClassVar[list[str]] = list(_default_config_paths)
    _no_option_error: ClassVar[type[NoOptionError]] = TomlNoOptionError

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def read(self, filenames: ConfigPaths) -> list[str]:
        """Merge the existing files among ``filenames`` in order; a malformed one raises ConfigError."""
        if not self.enabled or _toml_lib is None:
            raise ParserNotInstalledError(MISSING_TOML_MESSAGE)
        loaded = []
        for path, text in existing_config_texts(filenames):
            _merge(self.data, _parse_toml(text, path))
            loaded.append(path)
        return loaded

    # -- lookups -------------------------------------------------------------------------------------

    def _section(self, section: str) -> dict[str, Any]:
        try:
            return self.data[section]
        except KeyError:
            raise TomlNoSectionError(section) from None

    def _read_option(self, section: str, option: str, **kwargs: Any) -> Any:
        values = self._section(section)
        if option not in values:
            raise TomlNoOptionError(option, section)
        value = values[option]
        if isinstance(value, list):
            return [recursively_freeze(item) for item in value]
        return recursively_freeze(value)

    def _has_exact_option(self, section: str, option: str) -> bool:
        return option in self.data.get(section, {})

    def has_section(self, section: str) -> bool:
        """True when the files define ``[section]``."""
        return section in self.data

    def sections(self) -> list[str]:
        """The section names, in file order."""
        return list(self.data)

    def options(self, section: str) -> list[str]:
        """The option names of ``[section]``; NoSectionError when absent."""
        return list(self._section(section))

    def items(self, section: str) -> list[tuple[str, Any]]:
        """``(option, value)`` pairs of ``[section]`` with dict values frozen; NoSectionError when absent."""
        return [(option, self._read_option(section, option)) for option in self._section(section)]

    def __getitem__(self, section: str) -> dict[str, Any]:
        """A mutable deep copy of ``[section]`` (e.g. ``[logging]`` for ``logging.config.dictConfig``)."""
        return copy.deepcopy(self._section(section))

    def __contains__(self, section: object) -> bool:
        return section in self.data

    # -- updates -------------------------------------------------------------------------------------

    def set(self, section: str, option: str, value: Any = None) -> None:
        """Set ``[section] option = value`` (any TOML-like value), creating the section if needed."""
        self.data.setdefault(section, {})[option] = value

    def getintdict(self, section: str) -> dict[str, int]:
        """Every option of ``[section]`` as an int; {} when the section is absent."""
        return {key: to_int(value, section, key) for key, value in self.data.get(section, {}).items()}


def _parse_toml(text: str, path: str) -> dict[str, dict[str, Any]]:
    """One file's tables, checked to be ``[section]`` tables; ConfigError (file, line) when malformed."""
    assert _toml_lib is not None
    try:
        document = _toml_lib.loads(text)
    except _toml_lib.TOMLDecodeError as exc:
        lineno = _error_line(exc, text)
        raise ConfigError(f"Malformed TOML config file {path}, line {lineno}: {exc}", path, lineno) from None
    for key, value in document.items():
        if not isinstance(value, dict):
            raise ConfigError(
                f"Malformed TOML config file {path}: top-level key {key!r} must be inside a [section] table",
                path,
            )
    return document


def _error_line(exc: Exception, text: str) -> int:
    """The line a TOMLDecodeError points at (its message says "at line N" or "at end of document")."""
    lineno = getattr(exc, "lineno", None)  # Python 3.14+
    if isinstance(lineno, int):
        return lineno
    found = re.search(r"at line (\d+)", str(exc))
    return int(found.group(1)) if found else max(1, len(text.splitlines()))


def _merge(target: dict[str, Any], update: dict[str, Any]) -> None:
    """Merge ``update`` into ``target``: nested tables merge key by key, anything else replaces."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
