"""``luigi.configuration`` as Luigi users' tests reach into it (LUIGI_COMPAT j.14)."""

from __future__ import annotations

import warnings

import pytest

from luigi import configuration
from luigi.configuration import LuigiTomlParser, add_config_path, get_config

NOT_INSTALLED = (
    "Parser not installed yet. Please, install luigi with required parser:\npip install luigi[toml]"
)
DASHED = (
    "Configuration [core] scheduler-port (with dashes) should be avoided. "
    "Please use underscores: scheduler_port."
)


def test_disabling_the_toml_parser_makes_toml_raise_luigis_import_error(tmp_path, monkeypatch):
    monkeypatch.setattr(LuigiTomlParser, "enabled", False)
    with pytest.raises(ImportError) as from_get:
        get_config("toml")
    toml_file = tmp_path / "luigi.toml"
    toml_file.write_text("[core]\nworkers = 2\n")
    with pytest.raises(ImportError) as from_add:
        add_config_path(str(toml_file))
    assert str(from_get.value) == str(from_add.value) == NOT_INSTALLED


def test_with_the_parser_enabled_the_same_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("LUIGI_CONFIG_PARSER", "toml")
    toml_file = tmp_path / "luigi.toml"
    toml_file.write_text("[core]\nworkers = 2\n")
    assert add_config_path(str(toml_file)) is True
    assert get_config("toml").getint("core", "workers") == 2


def dashed_config(tmp_path):
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[core]\nscheduler-port = 8090\n")
    configuration.add_config_path(str(cfg))
    return get_config()


def test_a_dashed_key_read_warns_with_luigis_text(tmp_path):
    config = dashed_config(tmp_path)
    with pytest.warns(DeprecationWarning) as caught:
        assert config.getint("core", "scheduler_port") == 8090
    assert [str(w.message) for w in caught] == [DASHED]


def test_has_option_on_a_dashed_key_warns_too(tmp_path):
    config = dashed_config(tmp_path)
    with pytest.warns(DeprecationWarning) as caught:
        assert config.has_option("core", "scheduler_port")
    assert [str(w.message) for w in caught] == [DASHED]


def test_underscored_keys_do_not_warn(tmp_path):
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[core]\nscheduler_port = 8090\n")
    configuration.add_config_path(str(cfg))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_config().has_option("core", "scheduler_port")
        assert get_config().getint("core", "scheduler_port") == 8090
