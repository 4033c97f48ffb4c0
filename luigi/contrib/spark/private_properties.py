"""Spark properties that are secrets go to a private properties file, never onto the command line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["split_secret_conf", "write_private_properties"]

# Conf keys treated as secrets: the keys Spark itself redacts (spark.redaction.regex), and a few more.
_SECRET_CONF_KEY = re.compile(
    r"secret|password|passwd|token|credential|access[._-]?key|private[._-]?key", re.I
)
PROPERTIES_FILE_NAME = "spark-submit.properties"


def split_secret_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``conf`` split into (ordinary, secret) entries by key name."""
    public = {key: value for key, value in conf.items() if not _SECRET_CONF_KEY.search(key)}
    secret = {key: value for key, value in conf.items() if _SECRET_CONF_KEY.search(key)}
    return public, secret


def write_private_properties(directory: str, secret_conf: Mapping[str, str], base: str | None) -> str:
    """A properties file readable only by this user: ``base`` (or spark-defaults.conf) plus the secrets.

    ``--properties-file`` replaces spark-defaults.conf, so that file's content is carried over.
    """
    base_path = base or _spark_defaults_file()
    lines = [Path(base_path).read_text(), ""] if base_path and os.path.isfile(base_path) else []
    lines += [
        f"{_escape_property(key, True)}={_escape_property(value)}" for key, value in secret_conf.items()
    ]
    path = os.path.join(directory, PROPERTIES_FILE_NAME)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # in the 700 run directory
    with os.fdopen(descriptor, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def _spark_defaults_file() -> str | None:
    """Where spark-submit would read spark-defaults.conf from, if it exists."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir and os.environ.get("SPARK_HOME"):
        conf_dir = os.path.join(os.environ["SPARK_HOME"], "conf")
    if not conf_dir:
        return None
    path = os.path.join(conf_dir, "spark-defaults.conf")
    return path if os.path.isfile(path) else None


def _escape_property(text: str, is_key: bool = False) -> str:
    """``text`` escaped for a Java properties file."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if is_key:
        return re.sub(r"([=: #!])", r"\\\1", text)
    return "\\" + text if text.startswith((" ", "#", "!")) else text
