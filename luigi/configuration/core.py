"""Choosing the active parser (``LUIGI_CONFIG_PARSER``) and adding config files (``LUIGI_CONFIG_PATH``)."""

from __future__ import annotations

import os
import warnings

from luigi.configuration.base_parser import ConfigError
from luigi.configuration.cfg_parser import LuigiConfigParser
from luigi.configuration.toml_parser import MISSING_TOML_MESSAGE, LuigiTomlParser, ParserNotInstalledError

# Parser by file extension; also the accepted values of LUIGI_CONFIG_PARSER.
PARSERS: dict[str, type[LuigiConfigParser] | type[LuigiTomlParser]] = {
    "cfg": LuigiConfigParser,
    "conf": LuigiConfigParser,
    "ini": LuigiConfigParser,
    "toml": LuigiTomlParser,
}
DEFAULT_PARSER = "cfg"


def _active_parser_name() -> str:
    """The parser named by ``LUIGI_CONFIG_PARSER`` (read at each call), ``cfg`` when unset or unknown."""
    name = os.environ.get("LUIGI_CONFIG_PARSER", DEFAULT_PARSER) or DEFAULT_PARSER
    if name not in PARSERS:
        warnings.warn(
            f"LUIGI_CONFIG_PARSER={name!r} is not a known parser (expected one of {', '.join(PARSERS)}); "
            f"using {DEFAULT_PARSER}",
            stacklevel=3,
        )
        return DEFAULT_PARSER
    return name


def get_config(parser: str | None = None) -> LuigiConfigParser | LuigiTomlParser:
    """The configuration singleton of the active parser (or of ``parser``: cfg, conf, ini or toml)."""
    name = _active_parser_name() if parser is None else parser
    if name not in PARSERS:
        raise ConfigError(f"Unknown config parser {name!r}: expected one of {', '.join(PARSERS)}")
    parser_class = PARSERS[name]
    if not parser_class.enabled:
        raise ParserNotInstalledError(MISSING_TOML_MESSAGE)
    return parser_class.instance()


def add_config_path(path: str | os.PathLike[str]) -> bool:
    """Add a config file, with the parser its extension names; warns and returns False if it is missing.

    A file for a parser other than the active one is kept for that parser, with a warning that it is unused.
    A TOML file while ``LuigiTomlParser.enabled`` is false raises ``ParserNotInstalledError`` (an
    ImportError, as in Luigi).
    """
    path = os.fspath(path)
    if not os.path.lexists(path):
        warnings.warn(f"Config file does not exist: {path}", stacklevel=2)
        return False
    extension = os.path.splitext(path)[1].lstrip(".").lower()
    active = _active_parser_name()
    name = extension if extension in PARSERS else active
    parser_class = PARSERS[name]
    if not parser_class.enabled:
        raise ParserNotInstalledError(MISSING_TOML_MESSAGE, path)
    if parser_class is not PARSERS[active]:
        warnings.warn(
            f"Config file {path} is for the {name} parser but the active parser is {active} "
            f"(set LUIGI_CONFIG_PARSER={name} to use it); it is ignored",
            stacklevel=2,
        )
    parser_class.add_config_path(path)
    return True


def add_env_config_path() -> None:
    """Add the file named by ``LUIGI_CONFIG_PATH``, if set (done at import and by ``reset_for_tests``).

    A TOML file that cannot be read for want of a parser is ignored with a warning: ``import luigi``
    must not fail over it.
    """
    path = os.environ.get("LUIGI_CONFIG_PATH")
    if path:
        try:
            add_config_path(path)
        except ParserNotInstalledError as exc:
            warnings.warn(f"Config file {path} is ignored: {exc}", stacklevel=2)


def reset_for_tests() -> None:
    """Drop the parser singletons, restore the default search paths and re-read the environment."""
    for parser_class in (LuigiConfigParser, LuigiTomlParser):
        parser_class._reset()
    add_env_config_path()
