"""Broken config files give a ConfigError naming the file and line, never a raw parser traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from luigi.configuration import ConfigError, add_config_path, get_config, reset_for_tests


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "lineno", "problem"),
    [
        ("workers = 2\n[core]\n", 1, "option outside any \\[section\\]: 'workers = 2'"),
        ("[core]\nworkers = 2\nthis is not\n", 3, "expected 'key = value'.*'this is not'"),
        ("[core]\n[other]\n[core]\n", 3, "section \\[core\\] appears twice"),
        ("[core]\nworkers = 1\nworkers = 2\n", 3, "option workers appears twice in section \\[core\\]"),
    ],
    ids=["no-section-header", "bad-line", "duplicate-section", "duplicate-option"],
)
def test_malformed_cfg_names_file_and_line(workdir: Path, text: str, lineno: int, problem: str) -> None:
    write(workdir / "luigi.cfg", text)
    with pytest.raises(ConfigError, match=f"luigi.cfg, line {lineno}: {problem}") as caught:
        get_config()
    assert caught.value.path == "luigi.cfg"
    assert caught.value.lineno == lineno


def test_malformed_toml_names_file_and_line(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "toml")
    write(workdir / "luigi.toml", '[core]\nworkers = 2\nmodule = "unterminated\n')
    with pytest.raises(ConfigError, match=r"Malformed TOML config file luigi\.toml, line 3: ") as caught:
        get_config()
    assert caught.value.lineno == 3


def test_toml_key_outside_a_table_is_reported(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "toml")
    write(workdir / "luigi.toml", "workers = 2\n")
    with pytest.raises(ConfigError, match=r"luigi\.toml: top-level key 'workers' must be inside a"):
        get_config()


def test_a_fixed_file_loads_after_an_error(workdir: Path) -> None:
    config_file = write(workdir / "luigi.cfg", "garbage\n")
    with pytest.raises(ConfigError):
        get_config()
    write(config_file, "[core]\nworkers = 2\n")
    assert get_config().getint("core", "workers") == 2


def test_malformed_file_added_later_is_reported(workdir: Path) -> None:
    get_config()
    bad = write(workdir / "bad.cfg", "[core\n")
    with pytest.raises(ConfigError, match=r"bad\.cfg, line 1"):
        add_config_path(bad)


def test_directory_in_place_of_a_config_file_is_a_clear_error(workdir: Path) -> None:
    (workdir / "luigi.cfg").mkdir()
    with pytest.raises(ConfigError, match=r"Cannot read config file luigi\.cfg: it is a directory"):
        get_config()


def test_directory_as_luigi_config_path_is_a_clear_error(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(workdir))
    reset_for_tests()
    with pytest.raises(ConfigError, match="it is a directory, expected a file"):
        get_config()


def test_file_that_is_not_utf8_is_a_clear_error(workdir: Path) -> None:
    (workdir / "luigi.cfg").write_bytes(b"[core]\nname = caf\xe9\n")
    with pytest.raises(ConfigError, match=r"luigi\.cfg, line 2: not valid UTF-8"):
        get_config()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_a_clear_error(workdir: Path) -> None:
    config_file = write(workdir / "luigi.cfg", "[core]\n")
    config_file.chmod(0)
    with pytest.raises(ConfigError, match=r"Cannot read config file luigi\.cfg: Permission denied"):
        get_config()


def test_dangling_symlink_is_a_clear_error(workdir: Path) -> None:
    (workdir / "luigi.cfg").symlink_to(workdir / "moved-away.cfg")
    with pytest.raises(ConfigError, match=r"Cannot read config file luigi\.cfg: No such file or directory"):
        get_config()


def test_toml_error_at_end_of_file_points_at_the_last_line(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "toml")
    write(workdir / "luigi.toml", "[core]\nnames = [1,\n")
    with pytest.raises(ConfigError, match=r"luigi\.toml, line 2: "):
        get_config()
