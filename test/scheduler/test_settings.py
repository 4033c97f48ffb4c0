"""Scheduler settings (LUIGI_COMPAT h ``[scheduler]`` and ``[resources]``): defaults, files, overrides."""

from __future__ import annotations

import pytest

from luigi import configuration
from luigi.metrics import MetricsCollectors
from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.scheduler.settings import TaskRetryPolicy


def use_config(tmp_path, text: str) -> None:
    path = tmp_path / "luigi.cfg"
    path.write_text(text)
    configuration.add_config_path(str(path))


def test_the_defaults_are_luigis():
    config = SchedulerConfig.from_config()
    assert (config.retry_delay, config.remove_delay, config.worker_disconnect_delay) == (900, 600, 60)
    assert (config.disable_window, config.retry_count, config.disable_hard_timeout) == (
        3600,
        999999999,
        999999999,
    )
    assert (config.disable_persist, config.max_shown_tasks, config.max_graph_nodes) == (86400, 100000, 100000)
    assert (config.record_task_history, config.prune_on_get_work, config.batch_emails) == (
        False,
        False,
        False,
    )
    assert (config.pause_enabled, config.send_messages, config.stable_done_cooldown_secs) == (True, True, 10)
    assert config.state_path == "/var/lib/luigi-server/state.pickle"
    assert (config.metrics_collector, config.metrics_custom_import) == (MetricsCollectors.default, None)
    assert dict(config.resources) == {}
    assert config == SchedulerConfig()


def test_scheduler_and_resources_sections_are_read_from_the_config_file(tmp_path):
    use_config(
        tmp_path,
        "[scheduler]\nretry_delay = 12.5\nretry_count = 3\nsend_messages = false\nstate_path = /tmp/s\n"
        "[resources]\ndb = 2\ngpu = 1\n",
    )
    config = SchedulerConfig.from_config()
    assert (config.retry_delay, config.retry_count, config.send_messages) == (12.5, 3, False)
    assert config.state_path == "/tmp/s"
    assert dict(config.resources) == {"db": 2, "gpu": 1}


def test_legacy_option_names_are_still_read(tmp_path):
    use_config(tmp_path, "[scheduler]\ndisable-num-failures = 4\ndisable-window-seconds = 50\n")
    with pytest.warns(DeprecationWarning) as caught:
        config = SchedulerConfig.from_config()
    messages = {str(warning.message) for warning in caught}
    assert "Config option [scheduler] disable-num-failures is deprecated; write it as retry_count" in messages
    assert config.retry_policy() == TaskRetryPolicy(
        retry_count=4, disable_hard_timeout=999999999, disable_window=50
    )


def test_keyword_overrides_win_over_the_file(tmp_path):
    use_config(tmp_path, "[scheduler]\nretry_delay = 5\n[resources]\ndb = 2\n")
    config = SchedulerConfig.from_config(retry_delay=7.0, resources={"db": 9})
    assert (config.retry_delay, dict(config.resources)) == (7.0, {"db": 9})


def test_a_scheduler_built_with_overrides_reads_the_rest_from_config(tmp_path):
    use_config(tmp_path, "[scheduler]\nmax_shown_tasks = 7\n")
    sch = Scheduler(prune_on_get_work=True, record_task_history=False)
    assert (sch.config.max_shown_tasks, sch.config.prune_on_get_work) == (7, True)


def test_overrides_apply_on_top_of_an_explicit_config():
    sch = Scheduler(SchedulerConfig(retry_delay=1), clock=ManualClock(), retry_count=2)
    assert (sch.config.retry_delay, sch.config.retry_count) == (1, 2)


def test_an_unknown_option_is_refused_with_its_name():
    with pytest.raises(TypeError, match="Unknown scheduler option 'retry_dealy'"):
        SchedulerConfig.from_config(retry_dealy=5)


def test_an_option_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="retry_count must be int, got 'many'"):
        SchedulerConfig.from_config(retry_count="many")


def test_a_bad_value_in_the_file_names_the_option(tmp_path):
    use_config(tmp_path, "[scheduler]\nretry_delay = soon\n")
    with pytest.raises(ValueError, match="retry_delay"):
        SchedulerConfig.from_config()


def test_the_resources_section_gives_the_capacities(tmp_path):
    use_config(tmp_path, "[resources]\ndb = 2\n")
    sch = Scheduler(clock=ManualClock())
    assert sch.resource_list() == [
        {"name": "db", "num_total": 2, "num_used": 0, "num_consumer": 0, "running": {}}
    ]
