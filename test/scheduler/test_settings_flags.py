"""Every [scheduler] option is also a --scheduler-<option> flag of the luigi command, as in Luigi."""

from __future__ import annotations

import luigi
from luigi.cmdline_parser import CmdlineParser
from luigi.scheduler import Scheduler, SchedulerConfig


class Idle(luigi.Task):
    def complete(self) -> bool:
        return True


def test_a_scheduler_flag_overrides_the_config_file_and_the_default(tmp_path, monkeypatch):
    cfg = tmp_path / "luigi.cfg"
    cfg.write_text("[scheduler]\nretry_delay = 30\nremove_delay = 40\n")
    luigi.configuration.add_config_path(str(cfg))
    with CmdlineParser.global_instance(["Idle", "--scheduler-retry-delay", "5", "--scheduler-pause-enabled"]):
        config = SchedulerConfig.from_config()
    assert config.retry_delay == 5.0  # flag beats the file
    assert config.remove_delay == 40.0  # file beats the default
    assert config.worker_disconnect_delay == 60.0  # default


def test_overrides_in_code_still_win_over_flags():
    with CmdlineParser.global_instance(["Idle", "--scheduler-prune-on-get-work"]):
        scheduler = Scheduler(prune_on_get_work=False)
    assert scheduler.config.prune_on_get_work is False
    with CmdlineParser.global_instance(["Idle", "--scheduler-retry-delay", "7"]):
        assert SchedulerConfig.from_config(retry_delay=3).retry_delay == 3


def test_a_bad_scheduler_flag_value_names_the_flag():
    import pytest

    from luigi.parameter import ParameterException

    with pytest.raises(ParameterException, match="--scheduler-retry-delay"):
        with CmdlineParser.global_instance(["Idle", "--scheduler-retry-delay", "soon"]):
            pass


def test_outside_a_command_line_the_config_file_decides():
    assert SchedulerConfig.from_config().retry_delay == 900.0
