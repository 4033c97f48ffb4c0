"""What the cfg and TOML parsers share: the per-class singleton, typed getters with defaults, and key aliases.

Each parser class keeps one instance (``instance()``) built from its list of config paths; tests may replace
``_instance`` to swap configuration. Option names are looked up in their underscore spelling first; the dash
spelling still works but warns, because Luigi's documented keys use underscores.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from configparser import ConfigParser, Error, NoOptionError, NoSectionError
from typing import Any, ClassVar, TypeVar

logger = logging.getLogger("luigi-interface")

_ParserT = TypeVar("_ParserT", bound="BaseParser")
# Keep two threads asking for the configuration at start-up from each loading their own copy.
_singleton_lock = threading.RLock()
ConfigPaths = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


class ConfigError(Error):
    """A configuration file cannot be used: malformed, a directory, unreadable; the message names the file."""

    def __init__(self, message: str, path: str | None = None, lineno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.lineno = lineno


class _NoDefault:
    """Marks "no default given", so that ``None`` stays a usable default."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


def existing_config_texts(filenames: ConfigPaths) -> Iterator[tuple[str, str]]:
    """(path, text) for each file of ``filenames`` that exists, in order (both parsers read this way)."""
    if isinstance(filenames, (str, os.PathLike)):
        filenames = [filenames]
    for name in filenames:
        path = os.fspath(name)
        text = read_config_text(path)
        if text is not None:
            yield path, text


def read_config_text(path: str) -> str | None:
    """A config file's text; None when it does not exist, ConfigError when it exists but can't be read."""
    if not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        raise ConfigError(f"Cannot read config file {path}: it is a directory, expected a file", path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"Cannot read config file {path}: {exc.strerror or exc}", path) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"Cannot read config file {path}, line {lineno}: not valid UTF-8 text", path, lineno
        ) from None


def to_bool(value: Any, section: str, option: str) -> bool:
    """A config value as a boolean: true/yes/on/1 or false/no/off/0 (any case), or a native bool."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ConfigParser.BOOLEAN_STATES:
        return ConfigParser.BOOLEAN_STATES[value.strip().lower()]
    raise ValueError(
        f"Config option [{section}] {option} = {value!r} is not a valid boolean "
        "(expected true/false, yes/no, on/off or 1/0)"
    )


def to_int(value: Any, section: str, option: str) -> int:
    """A config value as an integer, from a native int or its decimal text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"Config option [{section}] {option} = {value!r} is not a valid integer")


def to_float(value: Any, section: str, option: str) -> float:
    """A config value as a float, from a native number or its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError(f"Config option [{section}] {option} = {value!r} is not a valid number")


def _spellings(option: str) -> list[str]:
    """The underscore spelling of an option, then its dash spelling when that differs."""
    underscored = option.replace("-", "_")
    dashed = option.replace("_", "-")
    return [underscored] if dashed == underscored else [underscored, dashed]


class BaseParser:
    """Singleton management and the typed getter API shared by LuigiConfigParser and LuigiTomlParser."""

    NO_DEFAULT: ClassVar[Any] = NO_DEFAULT
    enabled: ClassVar[bool] = True
    _instance: ClassVar[BaseParser | None] = None
    _config_paths: ClassVar[list[str]] = []
    _default_config_paths: ClassVar[tuple[str, ...]] = ()
    _no_option_error: ClassVar[type[NoOptionError]] = NoOptionError

    # -- the singleton -----------------------------------------------------------------------------------

    @classmethod
    def instance(cls: type[_ParserT], *args: Any, **kwargs: Any) -> _ParserT:
        """The shared parser of this class, created and loaded from ``_config_paths`` on first use."""
        instance = cls._instance
        if instance is not None:  # the usual case, read without the lock: every task's creation asks
            return instance  # type: ignore[return-value]
        with _singleton_lock:
            if cls._instance is None:
                cls._create(*args, **kwargs)
            return cls._instance  # type: ignore[return-value]

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> list[str]:
        """Build and load a new instance; it becomes the singleton only if every file loaded cleanly."""
        parser = cls(*args, **kwargs)
        loaded = parser.read(cls._config_paths)
        cls._instance = parser
        logger.debug("Loaded config files %r", loaded)
        return loaded

    @classmethod
    def reload(cls) -> list[str]:
        """Re-read every config path on top of the current values; returns the files actually read."""
        with _singleton_lock:
            if cls._instance is None:
                return cls._create()
            return cls._instance.read(cls._config_paths)

    @classmethod
    def add_config_path(cls, path: str | os.PathLike[str]) -> None:
        """Append a file to this parser's search path (highest priority) and read it if already loaded."""
        path = os.fspath(path)
        cls._config_paths.append(path)
        if cls._instance is not None:
            cls._instance.read([path])

    @classmethod
    def _reset(cls) -> None:
        """Forget the instance and any added paths (used between tests)."""
        cls._instance = None
        cls._config_paths = list(cls._default_config_paths)

    # -- what each parser provides -------------------------------------------------------------------

    def read(self, filenames: ConfigPaths) -> list[str]:
        """Load the existing files among ``filenames`` in order, later ones winning; returns those read."""
        raise NotImplementedError

    def _read_option(self, section: str, option: str, **kwargs: Any) -> Any:
        """The value of exactly this option, raising NoSectionError/NoOptionError when absent."""
        raise NotImplementedError

    # -- the getter API ------------------------------------------------------------------------------

    def get(self, section: str, option: str, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The value of ``[section] option``; ``default`` when absent, raising if there is no default."""
        return self._get_with_default(section, option, default, kwargs, None, None)

    def getboolean(self, section: str, option: str, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The option as a bool (true/yes/on/1, false/no/off/0), or ``default`` when absent."""
        return self._get_with_default(section, option, default, kwargs, to_bool, (bool,))

    def getint(self, section: str, option: str, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The option as an int, or ``default`` when absent."""
        return self._get_with_default(section, option, default, kwargs, to_int, (int,))

    def getfloat(self, section: str, option: str, default: Any = NO_DEFAULT, **kwargs: Any) -> Any:
        """The option as a float, or ``default`` when absent."""
        return self._get_with_default(section, option, default, kwargs, to_float, (float, int))

    def _get_with_default(
        self,
        section: str,
        option: str,
        default: Any,
        kwargs: dict[str, Any],
        convert: Callable[[Any, str, str], Any] | None,
        expected: tuple[type, ...] | None,
    ) -> Any:
        fallback = kwargs.pop("fallback", NO_DEFAULT)  # configparser's keyword, used by SectionProxy
        if default is NO_DEFAULT:
            default = fallback
        try:
            value = self._lookup(section, option, **kwargs)
        except (NoSectionError, NoOptionError):
            if default is NO_DEFAULT:
                raise
            _check_default_type(default, expected, section, option)
            return default
        return value if convert is None else convert(value, section, option)

    def _lookup(self, section: str, option: str, **kwargs: Any) -> Any:
        """Read the underscore spelling, then the deprecated dash spelling (with a warning)."""
        spellings = _spellings(option)
        for spelling in spellings:
            try:
                value = self._read_option(section, spelling, **kwargs)
            except NoOptionError:
                continue
            if spelling != spellings[0]:
                _warn_dashed(section, spelling, spellings[0], stacklevel=5)
            return value
        raise self._no_option_error(spellings[0], section)

    def has_option(self, section: str, option: str) -> bool:
        """True when ``[section]`` has the option in its underscore or (warning) dash spelling."""
        spellings = _spellings(option)
        if self._has_exact_option(section, spellings[0]):
            return True
        if len(spellings) > 1 and self._has_exact_option(section, spellings[1]):
            _warn_dashed(section, spellings[1], spellings[0], stacklevel=3)
            return True
        return False

    def _has_exact_option(self, section: str, option: str) -> bool:
        raise NotImplementedError


def _warn_dashed(section: str, dashed: str, underscored: str, stacklevel: int) -> None:
    """Luigi's DeprecationWarning for a key read in its dash spelling."""
    warnings.warn(
        f"Configuration [{section}] {dashed} (with dashes) should be avoided. "
        f"Please use underscores: {underscored}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def _check_default_type(default: Any, expected: tuple[type, ...] | None, section: str, option: str) -> None:
    """A typed getter's default must have that type (or be None): catches e.g. ``getint(..., "3")``."""
    if expected is None or default is None or isinstance(default, expected):
        return
    names = " or ".join(t.__name__ for t in expected)
    raise TypeError(
        f"Config option [{section}] {option} is not set and its default {default!r} is not {names}"
    )
