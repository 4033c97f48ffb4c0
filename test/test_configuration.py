"""Configuration through its public API: cfg files, search order, interpolation, getters and the singleton."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from luigi import configuration
from luigi.configuration import (
    ConfigError,
    InterpolationMissingEnvvarError,
    LuigiConfigParser,
    LuigiTomlParser,
    NoOptionError,
    NoSectionError,
    add_config_path,
    get_config,
    reset_for_tests,
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from an empty directory, so only the files it writes there are found."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def use_env_config(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """What a user does: point LUIGI_CONFIG_PATH at a file (picked up again by reset_for_tests)."""
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(path))
    reset_for_tests()


# -- search order ------------------------------------------------------------------------------------


def test_cfg_search_path_is_luigis_in_increasing_priority() -> None:
    assert LuigiConfigParser._config_paths == [
        "/etc/luigi/client.cfg",
        "/etc/luigi/luigi.cfg",
        "client.cfg",
        "luigi.cfg",
    ]


def test_luigi_cfg_in_working_directory_is_read(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nworkers = 3\n")
    assert get_config().getint("core", "workers") == 3


def test_client_cfg_is_read_with_a_deprecation_warning_and_luigi_cfg_wins(workdir: Path) -> None:
    write(workdir / "client.cfg", "[core]\nworkers = 1\nmodule = from_client\n")
    write(workdir / "luigi.cfg", "[core]\nworkers = 2\n")
    with pytest.warns(DeprecationWarning, match=r"client\.cfg.*rename it to luigi\.cfg"):
        config = get_config()
    assert config.getint("core", "workers") == 2
    assert config.get("core", "module") == "from_client"


def test_luigi_config_path_overrides_luigi_cfg(
    workdir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(workdir / "luigi.cfg", "[core]\nworkers = 2\nlog_level = INFO\n")
    extra = write(tmp_path_factory.mktemp("etc") / "extra.cfg", "[core]\nworkers = 7\n")
    use_env_config(monkeypatch, extra)
    assert get_config().getint("core", "workers") == 7
    assert get_config().get("core", "log_level") == "INFO"


def test_luigi_config_path_is_honoured_at_import(tmp_path: Path) -> None:
    config_file = write(tmp_path / "conf.cfg", "[core]\nmodule = from_env\n")
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(config_file), "PYTHONPATH": str(Path(__file__).parents[1])}
    env.pop("LUIGI_CONFIG_PARSER", None)
    result = subprocess.run(
        [sys.executable, "-c", "import luigi.configuration as c; print(c.get_config().get('core','module'))"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "from_env"


def test_reset_for_tests_drops_values_and_rereads_the_environment(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    get_config().set("core", "workers", "9")
    extra = write(workdir / "extra.cfg", "[core]\nmodule = m\n")
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(extra))
    reset_for_tests()
    assert not get_config().has_option("core", "workers")
    assert get_config().get("core", "module") == "m"
    monkeypatch.delenv("LUIGI_CONFIG_PATH")
    reset_for_tests()
    assert LuigiConfigParser._config_paths == list(LuigiConfigParser._default_config_paths)
    assert not get_config().has_option("core", "module")


# -- interpolation and keys ----------------------------------------------------------------------------


def test_environment_variables_are_interpolated(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUIGI_TEST_HOST", "sched.example.com")
    write(workdir / "luigi.cfg", "[core]\nscheduler_url = http://${LUIGI_TEST_HOST}:8082/\n")
    assert get_config().get("core", "scheduler_url") == "http://sched.example.com:8082/"


def test_missing_environment_variable_raises_naming_it(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LUIGI_TEST_UNSET", raising=False)
    write(workdir / "luigi.cfg", "[core]\nmodule = ${LUIGI_TEST_UNSET}/x\n")
    with pytest.raises(InterpolationMissingEnvvarError, match="LUIGI_TEST_UNSET") as caught:
        get_config().get("core", "module")
    assert caught.value.envvar == "LUIGI_TEST_UNSET"
    assert get_config().get("core", "module", raw=True) == "${LUIGI_TEST_UNSET}/x"


def test_basic_and_environment_interpolation_combine(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LUIGI_TEST_USER", "ana")
    write(
        workdir / "luigi.cfg",
        "[DEFAULT]\nroot = /data/${LUIGI_TEST_USER}\n[paths]\nraw = %(root)s/raw\npercent = 100%%\n",
    )
    config = get_config()
    assert config.get("paths", "raw") == "/data/ana/raw"
    assert config.get("paths", "percent") == "100%"


def test_keys_are_case_sensitive(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[MyTask]\nParam = upper\nparam = lower\n")
    config = get_config()
    assert config.get("MyTask", "Param") == "upper"
    assert config.get("MyTask", "param") == "lower"
    assert not config.has_option("MyTask", "PARAM")


def test_underscore_key_is_read_without_warning(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nscheduler_host = a\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_config().get("core", "scheduler-host") == "a"
        assert get_config().get("core", "scheduler_host") == "a"


def test_dashed_key_works_but_warns(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nscheduler-host = b\n")
    config = get_config()
    with pytest.warns(DeprecationWarning, match=r"\[core\] scheduler-host.*scheduler_host"):
        assert config.has_option("core", "scheduler_host")
    with pytest.warns(DeprecationWarning, match=r"\[core\] scheduler-host.*scheduler_host"):
        assert config.get("core", "scheduler_host") == "b"


def test_underscore_key_wins_over_dashed_key(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nscheduler-host = dashed\nscheduler_host = underscored\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_config().get("core", "scheduler-host") == "underscored"


def test_missing_key_error_names_the_underscore_spelling(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\n")
    with pytest.raises(NoOptionError, match="scheduler_host"):
        get_config().get("core", "scheduler-host")


# -- getters, defaults, set ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("Yes", True), ("on", True), ("1", True), ("FALSE", False), ("no", False), ("0", False)],
)
def test_getboolean_accepts_the_usual_spellings(workdir: Path, text: str, expected: bool) -> None:
    write(workdir / "luigi.cfg", f"[core]\nflag = {text}\n")
    assert get_config().getboolean("core", "flag") is expected


def test_typed_getters_convert_values(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[scheduler]\nretry_delay = 900\nping = 1.5\nname = x\n")
    config = get_config()
    assert config.getint("scheduler", "retry_delay") == 900
    assert config.getfloat("scheduler", "ping") == 1.5
    assert config.getfloat("scheduler", "retry_delay") == 900.0
    assert config.get("scheduler", "name") == "x"


def test_getters_return_the_default_when_section_or_option_is_missing(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\n")
    config = get_config()
    assert config.get("core", "absent", "dflt") == "dflt"
    assert config.get("nosection", "absent", None) is None
    assert config.getint("core", "absent", 4) == 4
    assert config.getfloat("core", "absent", 2) == 2
    assert config.getboolean("nosection", "absent", False) is False


def test_getters_raise_when_missing_and_no_default(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\n")
    with pytest.raises(NoSectionError):
        get_config().getint("nosection", "x")
    with pytest.raises(NoOptionError):
        get_config().getboolean("core", "x")


def test_bad_typed_value_names_the_option_and_value(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nworkers = many\nflag = maybe\n")
    with pytest.raises(ValueError, match=r"\[core\] workers = 'many' is not a valid integer"):
        get_config().getint("core", "workers")
    with pytest.raises(ValueError, match=r"\[core\] flag = 'maybe' is not a valid boolean"):
        get_config().getboolean("core", "flag")


def test_default_of_the_wrong_type_is_reported(workdir: Path) -> None:
    with pytest.raises(TypeError, match=r"\[core\] workers.*'3' is not int"):
        get_config().getint("core", "workers", "3")


def test_getintdict_reads_a_section_of_integers(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[DEFAULT]\nshared = 5\n[resources]\ngpu = 2\nDB = 10\n")
    config = get_config()
    assert config.getintdict("resources") == {"gpu": 2, "DB": 10}
    assert config.getintdict("nosection") == {}


def test_set_creates_the_section_and_is_visible_to_getters(workdir: Path) -> None:
    config = get_config()
    config.set("new_section", "answer", "42")
    assert config.has_section("new_section")
    assert config.getint("new_section", "answer") == 42
    assert get_config().get("new_section", "answer") == "42"


def test_set_rejects_non_string_values_clearly(workdir: Path) -> None:
    with pytest.raises(TypeError, match=r"\[core\] workers.*must be strings.*3"):
        get_config().set("core", "workers", 3)  # type: ignore[arg-type]


def test_section_proxy_access_still_works(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nworkers = 3\n")
    section = LuigiConfigParser.instance()["core"]
    assert section.getint("workers") == 3
    assert section.get("absent") is None
    assert "workers" in section


# -- the singleton ---------------------------------------------------------------------------------------


def test_get_config_returns_the_cfg_singleton(workdir: Path) -> None:
    assert get_config() is get_config()
    assert get_config() is LuigiConfigParser.instance()
    assert isinstance(get_config(), LuigiConfigParser)


def test_replacing_instance_swaps_the_configuration(workdir: Path) -> None:
    write(workdir / "luigi.cfg", "[core]\nworkers = 3\n")
    replacement = LuigiConfigParser()
    replacement.set("core", "workers", "8")
    LuigiConfigParser._instance = replacement
    assert get_config().getint("core", "workers") == 8


def test_reload_picks_up_changed_files(workdir: Path) -> None:
    config_file = write(workdir / "luigi.cfg", "[core]\nworkers = 3\n")
    assert get_config().getint("core", "workers") == 3
    write(config_file, "[core]\nworkers = 4\n")
    assert LuigiConfigParser.reload() == ["luigi.cfg"]
    assert get_config().getint("core", "workers") == 4


# -- add_config_path -------------------------------------------------------------------------------------


@pytest.mark.parametrize("extension", ["cfg", "conf", "ini"])
def test_add_config_path_reads_cfg_like_files_at_once(workdir: Path, extension: str) -> None:
    config = get_config()
    path = write(workdir / f"more.{extension}", "[core]\nmodule = more\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert add_config_path(path) is True
    assert config.get("core", "module") == "more"


def test_add_config_path_warns_when_the_file_is_missing(workdir: Path) -> None:
    with pytest.warns(UserWarning, match="does not exist: .*nothere.cfg"):
        assert add_config_path(workdir / "nothere.cfg") is False
    assert str(workdir / "nothere.cfg") not in LuigiConfigParser._config_paths


def test_add_config_path_warns_when_the_file_is_for_another_parser(workdir: Path) -> None:
    path = write(workdir / "other.toml", "[core]\nmodule = 'toml'\n")
    with pytest.warns(UserWarning, match="toml parser but the active parser is cfg"):
        add_config_path(path)
    assert str(path) in LuigiTomlParser._config_paths
    assert not get_config().has_option("core", "module")


def test_add_config_path_without_known_extension_uses_the_active_parser(workdir: Path) -> None:
    path = write(workdir / "settings", "[core]\nmodule = plain\n")
    add_config_path(path)
    assert get_config().get("core", "module") == "plain"


def test_unknown_parser_in_environment_warns_and_falls_back_to_cfg(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "yaml")
    with pytest.warns(UserWarning, match="LUIGI_CONFIG_PARSER='yaml'"):
        config = get_config()
    assert isinstance(config, LuigiConfigParser)


def test_unknown_parser_argument_is_an_error() -> None:
    with pytest.raises(ConfigError, match="Unknown config parser 'yaml'"):
        get_config("yaml")


def test_package_exports_the_contract_names() -> None:
    names = ["get_config", "add_config_path", "LuigiConfigParser", "LuigiTomlParser", "NoSectionError"]
    names += ["NoOptionError", "InterpolationMissingEnvvarError", "ConfigError", "reset_for_tests"]
    missing = [name for name in names if not hasattr(configuration, name)]
    assert missing == []
