"""The TOML parser (LUIGI_CONFIG_PARSER=toml): typed values, frozen dicts, the [logging] table."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from luigi.configuration import (
    ConfigError,
    LuigiTomlParser,
    NoOptionError,
    NoSectionError,
    add_config_path,
    get_config,
    reset_for_tests,
)
from luigi.freezing import FrozenOrderedDict

SAMPLE = """
[core]
workers = 4
parallel_scheduling = true
rpc_retry_wait = 2.5
module = "pipelines"

[MyTask]
names = ["a", "b"]
options = {depth = 2, tags = ["x", "y"], nested = {k = "v"}}

[resources]
gpu = 2
db = 10

[logging]
version = 1
disable_existing_loggers = false

[logging.loggers.mine]
level = "INFO"
"""


@pytest.fixture
def toml_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with the TOML parser selected."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "toml")
    reset_for_tests()
    return tmp_path


def toml_config() -> LuigiTomlParser:
    """get_config(), checked to be the TOML parser the environment selected."""
    config = get_config()
    assert isinstance(config, LuigiTomlParser)
    return config


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_toml_search_path_is_luigis() -> None:
    assert LuigiTomlParser._config_paths == ["/etc/luigi/luigi.toml", "luigi.toml"]


def test_environment_selects_the_toml_singleton(toml_workdir: Path) -> None:
    assert isinstance(get_config(), LuigiTomlParser)
    assert get_config() is LuigiTomlParser.instance()


def test_values_are_typed_natively(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    config = toml_config()
    assert config.get("core", "workers") == 4
    assert config.get("core", "parallel_scheduling") is True
    assert config.get("core", "rpc_retry_wait") == 2.5
    assert config.get("core", "module") == "pipelines"
    assert config.get("MyTask", "names") == ["a", "b"]


def test_typed_getters_accept_native_and_text_values(toml_workdir: Path) -> None:
    text = '[core]\nworkers = 4\nflag = true\ntext_flag = "yes"\ntext_int = "7"\n'
    write(toml_workdir / "luigi.toml", text)
    config = toml_config()
    assert config.getint("core", "workers") == 4
    assert config.getfloat("core", "workers") == 4.0
    assert config.getboolean("core", "flag") is True
    assert config.getboolean("core", "text_flag") is True
    assert config.getint("core", "text_int") == 7
    with pytest.raises(ValueError, match=r"\[core\] flag = True is not a valid integer"):
        config.getint("core", "flag")


def test_dict_values_are_frozen_recursively(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    options = get_config().get("MyTask", "options")
    assert isinstance(options, FrozenOrderedDict)
    assert options == {"depth": 2, "tags": ("x", "y"), "nested": {"k": "v"}}
    assert isinstance(options["nested"], FrozenOrderedDict)
    with pytest.raises(TypeError):
        options["depth"] = 3  # type: ignore[index]
    assert hash(options) == hash(get_config().get("MyTask", "options"))


def test_missing_values_raise_configparser_errors_that_are_also_key_errors(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    config = toml_config()
    with pytest.raises(NoSectionError):
        config.get("nosection", "x")
    with pytest.raises(NoOptionError):
        config.get("core", "absent")
    with pytest.raises(KeyError):
        config.get("core", "absent")
    assert config.get("core", "absent", "dflt") == "dflt"
    assert config.getint("nosection", "x", 3) == 3


def test_has_option_set_and_getintdict(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    config = toml_config()
    assert config.has_option("core", "workers")
    assert not config.has_option("nosection", "workers")
    config.set("extra", "count", 3)
    assert config.getint("extra", "count") == 3
    assert config.getintdict("resources") == {"gpu": 2, "db": 10}
    assert config.getintdict("nosection") == {}


def test_dashed_keys_work_with_a_warning(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", '[core]\nscheduler-host = "h"\n')
    with pytest.warns(DeprecationWarning, match="scheduler_host"):
        assert get_config().get("core", "scheduler_host") == "h"


def test_logging_table_is_a_plain_dict_for_dictconfig(toml_workdir: Path) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    config = toml_config()
    assert config.has_section("logging")
    logging_config = config["logging"]
    loggers = {"mine": {"level": "INFO"}}
    assert logging_config == {"version": 1, "disable_existing_loggers": False, "loggers": loggers}
    assert type(logging_config["loggers"]["mine"]) is dict
    logging_config["loggers"]["mine"]["level"] = "DEBUG"  # dictConfig mutates what it is given
    assert config["logging"]["loggers"]["mine"]["level"] == "INFO"


def test_later_files_merge_table_by_table(
    toml_workdir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(toml_workdir / "luigi.toml", SAMPLE)
    extra_text = "[core]\nworkers = 9\n[MyTask.options]\ndepth = 5\n"
    extra = write(tmp_path_factory.mktemp("etc") / "extra.toml", extra_text)
    monkeypatch.setenv("LUIGI_CONFIG_PATH", str(extra))
    reset_for_tests()
    config = toml_config()
    assert config.get("core", "workers") == 9
    assert config.get("core", "module") == "pipelines"
    assert config.get("MyTask", "options")["depth"] == 5
    assert config.get("MyTask", "options")["tags"] == ("x", "y")


def test_add_config_path_reads_a_toml_file_into_the_active_toml_parser(toml_workdir: Path) -> None:
    config = toml_config()
    path = write(toml_workdir / "more.toml", '[core]\nmodule = "more"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert add_config_path(path) is True
    assert config.get("core", "module") == "more"


def test_add_config_path_warns_for_a_cfg_file_while_toml_is_active(toml_workdir: Path) -> None:
    path = write(toml_workdir / "old.cfg", "[core]\nmodule = old\n")
    with pytest.warns(UserWarning, match="cfg parser but the active parser is toml"):
        add_config_path(path)
    assert not get_config().has_option("core", "module")


def test_missing_toml_library_gives_a_clear_error(
    toml_workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LuigiTomlParser, "enabled", False)
    message = "Parser not installed yet. Please, install luigi with required parser:\npip install luigi[toml]"
    with pytest.raises(ImportError) as caught:
        get_config()
    assert str(caught.value) == message
    assert isinstance(caught.value, ConfigError)  # reported in one line by the luigi command
    path = write(toml_workdir / "more.toml", "[core]\n")
    with pytest.raises(ImportError, match="Parser not installed yet"):
        add_config_path(path)
