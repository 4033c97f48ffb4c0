"""Logging set-up of the luigi client and of luigid, each checked in a fresh Python process.

Logging is process-wide state, so every scenario runs in its own interpreter and the test reads what
that process wrote to stderr or to its log file.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from luigi.setup_logging import DaemonLogging, InterfaceLogging

_SCRIPT = textwrap.dedent(
    """
    import logging, sys, types
    from luigi.setup_logging import DaemonLogging, InterfaceLogging
    kind, *pairs = sys.argv[1:]
    opts = types.SimpleNamespace(background=None, logdir=None, logging_conf_file=None, log_level="DEBUG")
    for pair in pairs:
        name, value = pair.split("=", 1)
        setattr(opts, name, value)
    setup = InterfaceLogging.setup if kind == "client" else DaemonLogging.setup
    print("first", setup(opts), "second", setup(opts), flush=True)
    logging.getLogger("luigi-interface").debug("debug-from-interface")
    logging.getLogger("luigi-interface").info("info-from-interface")
    logging.getLogger("luigi.server").info("info-from-server")
    logging.getLogger("luigi.server").debug("debug-from-server")
    root = logging.getLogger()
    print("root", logging.getLevelName(root.level), "handlers", len(root.handlers), flush=True)
    """
)


def run_setup(kind: str, tmp_path: Path, *options: str, config: str = "", toml: bool = False):
    """Run the set-up in a new interpreter with the given opts and config file; return (stdout, stderr)."""
    env = dict(os.environ)
    env.pop("LUIGI_CONFIG_PARSER", None)
    config_file = tmp_path / ("luigi.toml" if toml else "luigi.cfg")
    config_file.write_text(_with_autoload_range(textwrap.dedent(config), toml))
    env["LUIGI_CONFIG_PATH"] = str(config_file)
    if toml:
        env["LUIGI_CONFIG_PARSER"] = "toml"
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, kind, *options],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def _with_autoload_range(config: str, toml: bool) -> str:
    """Say ``[core] autoload_range`` explicitly, as current configs do, so luigi prints no deprecation."""
    line = "autoload_range = true"
    if "[core]" in config:
        return config.replace("[core]", f"[core]\n{line}", 1)
    return f"[core]\n{line}\n" + config


def _ini_logging_file(path: Path, log_file: Path, level: str = "INFO") -> Path:
    path.write_text(
        textwrap.dedent(
            f"""
            [loggers]
            keys=root

            [handlers]
            keys=file

            [formatters]
            keys=plain

            [logger_root]
            level={level}
            handlers=file

            [handler_file]
            class=FileHandler
            level={level}
            formatter=plain
            args=({str(log_file)!r},)

            [formatter_plain]
            format=FROM-INI %(name)s %(message)s
            """
        )
    )
    return path


# -- the luigi client -----------------------------------------------------------------------------------


def test_client_logs_to_stderr_at_the_chosen_level_and_configures_once(tmp_path):
    out, err = run_setup("client", tmp_path, "log_level=INFO")
    assert out.splitlines()[0] == "first True second False"
    assert "INFO: info-from-interface" in err.splitlines()
    assert "debug-from-interface" not in err


def test_client_default_level_is_debug(tmp_path):
    _out, err = run_setup("client", tmp_path)
    assert "DEBUG: debug-from-interface" in err.splitlines()


def test_client_uses_the_logging_conf_file_first(tmp_path):
    log_file = tmp_path / "client.log"
    conf = _ini_logging_file(tmp_path / "logging.ini", log_file)
    _out, err = run_setup("client", tmp_path, f"logging_conf_file={conf}")
    assert "FROM-INI luigi-interface info-from-interface" in log_file.read_text()
    assert "info-from-interface" not in err


def test_client_uses_the_toml_logging_table(tmp_path):
    log_file = tmp_path / "toml.log"
    _out, err = run_setup(
        "client",
        tmp_path,
        toml=True,
        config=f"""
        [logging]
        version = 1
        disable_existing_loggers = false

        [logging.formatters.plain]
        format = "FROM-TOML %(name)s %(message)s"

        [logging.handlers.file]
        class = "logging.FileHandler"
        formatter = "plain"
        filename = {str(log_file)!r}

        [logging.root]
        level = "INFO"
        handlers = ["file"]
        """,
    )
    assert "FROM-TOML luigi-interface info-from-interface" in log_file.read_text()
    assert "info-from-interface" not in err


def test_no_configure_logging_leaves_logging_alone(tmp_path):
    out, err = run_setup("client", tmp_path, config="[core]\nno_configure_logging = true\n")
    assert out.splitlines() == ["first False second False", "root WARNING handlers 0"]
    assert "info-from-interface" not in err


# -- luigid ---------------------------------------------------------------------------------------------


def test_daemon_default_is_info_on_stderr_with_timestamps(tmp_path):
    _out, err = run_setup("daemon", tmp_path)
    lines = [line for line in err.splitlines() if "info-from-server" in line]
    assert len(lines) == 1
    assert "luigi.server[" in lines[0]
    assert lines[0].endswith("INFO: info-from-server")
    assert "debug-from-server" not in err


def test_daemon_logdir_writes_luigi_server_log(tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _out, err = run_setup("daemon", tmp_path, f"logdir={logdir}")
    text = (logdir / "luigi-server.log").read_text()
    assert "INFO: info-from-server" in text
    assert "debug-from-server" not in text
    assert "info-from-server" not in err


def test_daemon_in_background_only_sets_info_on_root(tmp_path):
    out, _err = run_setup("daemon", tmp_path, "background=1")
    # The daemon machinery installs the rotating file handler; set-up only opens the root to INFO.
    assert out.splitlines() == ["first True second False", "root INFO handlers 0"]


def test_daemon_reads_logging_conf_file_from_core_section(tmp_path):
    log_file = tmp_path / "server.log"
    conf = _ini_logging_file(tmp_path / "logging.ini", log_file)
    run_setup("daemon", tmp_path, config=f"[core]\nlogging_conf_file = {conf}\n")
    assert "FROM-INI luigi.server info-from-server" in log_file.read_text()


# -- errors (in-process: nothing gets configured) -------------------------------------------------------


def test_missing_logging_conf_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(InterfaceLogging, "_configured", False)
    opts = type("Opts", (), {"logging_conf_file": str(tmp_path / "nope.ini"), "log_level": "INFO"})
    with pytest.raises(OSError, match=r"nope\.ini.*--logging-conf-file"):
        InterfaceLogging.setup(opts)


def test_already_configured_setup_does_nothing(monkeypatch, caplog):
    monkeypatch.setattr(DaemonLogging, "_configured", True)
    before = list(logging.getLogger().handlers)
    with caplog.at_level(logging.INFO, logger="luigi"):
        assert DaemonLogging.setup() is False
    assert logging.getLogger().handlers == before
    assert "logging already configured" in caplog.text
