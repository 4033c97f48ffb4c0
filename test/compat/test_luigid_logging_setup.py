"""How ``luigid`` sets up its logging from the command line and the config (LUIGI_COMPAT e.2, j.17).

``DaemonLogging.setup`` takes the first source that applies:
- ``--background`` (INFO on the root logger; the daemon adds its rotating ``<logdir>/luigi-server.log``)
  or ``--logdir`` (``<logdir>/luigi-server.log``);
- ``[core] logging_conf_file``, an ini file for ``fileConfig`` with its default ``disable_existing_loggers``
  (the client's ``--logging-conf-file`` turns it off);
- a TOML ``[logging]`` table; then INFO on stderr.
``[core] no_configure_logging = true`` leaves logging alone. Each case runs a real ``luigid`` and reads the
files it wrote. (``--background --logdir`` is test/server/test_luigid.py's
``test_background_luigid_writes_its_pidfile_refuses_a_second_start_and_stops_on_sigterm``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.luigid import running_luigid

pytestmark = pytest.mark.slow  # each case starts a real luigid or interpreter

LISTENING = "luigid listening on 127.0.0.1:"


def _ini(path: Path, log_file: Path, loggers: list[str]) -> Path:
    """A ``fileConfig`` file sending the named loggers (root first) to ``log_file`` at INFO."""
    sections = "".join(
        f"[logger_{name}]\nlevel=INFO\nhandlers=file\n"
        + ("" if name == "root" else f"qualname={name}\npropagate=0\n")
        + "\n"
        for name in loggers
    )
    path.write_text(
        f"[loggers]\nkeys={','.join(loggers)}\n\n[handlers]\nkeys=file\n\n[formatters]\nkeys=plain\n\n"
        + sections
        + f"[handler_file]\nclass=FileHandler\nformatter=plain\nargs=({str(log_file)!r},)\n\n"
        + "[formatter_plain]\nformat=FROM-INI %(name)s %(message)s\n"
    )
    return path


def test_logdir_on_the_command_line_writes_luigi_server_log_in_the_daemon_format(tmp_path):
    logdir = tmp_path / "logs"
    with running_luigid(tmp_path, "--logdir", str(logdir)) as luigid:
        pid = luigid.pid
    lines = (logdir / "luigi-server.log").read_text().splitlines()
    (listening,) = [line for line in lines if LISTENING in line]
    assert f" luigi.server[{pid}] INFO: {LISTENING}" in listening


def test_logdir_on_the_command_line_comes_before_the_logging_conf_file(tmp_path):
    ini_log = tmp_path / "from-ini.log"
    conf = _ini(tmp_path / "logging.ini", ini_log, ["root", "luigi"])
    logdir = tmp_path / "logs"
    with running_luigid(tmp_path, "--logdir", str(logdir), config=f"[core]\nlogging_conf_file = {conf}\n"):
        pass
    assert LISTENING in (logdir / "luigi-server.log").read_text()
    assert not ini_log.exists()


def test_no_configure_logging_leaves_logging_alone_even_with_a_logdir(tmp_path):
    logdir = tmp_path / "logs"
    config = "[core]\nno_configure_logging = true\n"
    with running_luigid(tmp_path, "--logdir", str(logdir), config=config) as luigid:
        pass
    assert not (logdir / "luigi-server.log").exists()
    assert LISTENING not in luigid.logs()  # no handler anywhere: INFO goes nowhere


def test_the_logging_conf_file_configures_the_loggers_it_names(tmp_path):
    ini_log = tmp_path / "from-ini.log"
    conf = _ini(tmp_path / "logging.ini", ini_log, ["root", "luigi"])
    with running_luigid(tmp_path, config=f"[core]\nlogging_conf_file = {conf}\n") as luigid:
        pass
    assert f"FROM-INI luigi.server {LISTENING}" in ini_log.read_text()
    assert LISTENING not in luigid.logs()


def test_the_logging_conf_file_silences_the_loggers_luigid_made_before_it_and_does_not_name(tmp_path):
    ini_log = tmp_path / "from-ini.log"
    conf = _ini(tmp_path / "logging.ini", ini_log, ["root"])
    with running_luigid(tmp_path, config=f"[core]\nlogging_conf_file = {conf}\n"):
        pass
    assert LISTENING not in ini_log.read_text()  # luigi.server existed: fileConfig disabled it, as in Luigi


def test_the_toml_logging_table_is_used_when_no_option_or_file_says_otherwise(tmp_path):
    log_file = tmp_path / "from-table.log"
    table = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "FROM-TABLE %(name)s %(message)s"}},
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(log_file), "formatter": "plain"}
        },
        "root": {"handlers": ["file"], "level": "INFO"},
    }
    toml = tmp_path / "luigi.toml"
    toml.write_text(f"[logging]\n{_toml_table(table)}")
    env = {"LUIGI_CONFIG_PARSER": "toml", "LUIGI_CONFIG_PATH": str(toml)}
    with running_luigid(tmp_path, env=env):
        pass
    assert f"FROM-TABLE luigi.server {LISTENING}" in log_file.read_text()


def _toml_table(table: dict) -> str:
    """``table`` as the body of a TOML table: one inline value a key (JSON is valid TOML for these)."""
    return "".join(f"{key} = {_inline(value)}\n" for key, value in table.items())


def _inline(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


_EXISTING_LOGGER_SCRIPT = textwrap.dedent(
    """
    import logging, sys, types
    from luigi.setup_logging import DaemonLogging, InterfaceLogging
    which, conf = sys.argv[1:]
    made_before = logging.getLogger("made.before")
    opts = types.SimpleNamespace(background=None, logdir=None, logging_conf_file=conf, log_level="INFO")
    (DaemonLogging if which == "daemon" else InterfaceLogging).setup(opts)
    print(made_before.disabled)
    """
)


def test_the_daemon_ini_disables_existing_loggers_and_the_client_keeps_them(tmp_path):
    conf = _ini(tmp_path / "logging.ini", tmp_path / "out.log", ["root"])
    (tmp_path / "luigi.cfg").write_text(f"[core]\nlogging_conf_file = {conf}\n")
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PARSER"}
    env["LUIGI_CONFIG_PATH"] = str(tmp_path / "luigi.cfg")
    seen = {}
    for which in ("daemon", "client"):
        done = subprocess.run(
            [sys.executable, "-c", _EXISTING_LOGGER_SCRIPT, which, str(conf)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        seen[which] = done.stdout.strip()
    assert seen == {"daemon": "True", "client": "False"}
