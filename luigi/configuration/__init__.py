"""Luigi configuration: cfg or TOML files behind one ``get_config()`` singleton.

Importing this package adds the file named by ``LUIGI_CONFIG_PATH``; ``LUIGI_CONFIG_PARSER=cfg|toml``
chooses the parser.
"""

from __future__ import annotations

from configparser import NoOptionError, NoSectionError

from luigi.configuration.base_parser import BaseParser, ConfigError
from luigi.configuration.cfg_parser import InterpolationMissingEnvvarError, LuigiConfigParser
from luigi.configuration.core import add_config_path, add_env_config_path, get_config, reset_for_tests
from luigi.configuration.toml_parser import LuigiTomlParser

__all__ = [
    "BaseParser",
    "ConfigError",
    "InterpolationMissingEnvvarError",
    "LuigiConfigParser",
    "LuigiTomlParser",
    "NoOptionError",
    "NoSectionError",
    "add_config_path",
    "get_config",
    "reset_for_tests",
]

add_env_config_path()
