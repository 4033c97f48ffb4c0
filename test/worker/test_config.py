"""The ``[worker]`` section: Luigi's defaults, config files, legacy ``[core] worker-*`` names, overrides."""

from __future__ import annotations

import datetime
import re
import warnings

from luigi import configuration
from luigi.worker import Worker, worker


class NullScheduler:
    """Enough of a scheduler for constructing a worker."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def test_worker_options_have_luigis_defaults():
    config = worker()
    assert config.id == ""
    assert (config.ping_interval, config.keep_alive, config.count_uniques, config.count_last_scheduled) == (
        1.0,
        False,
        False,
        False,
    )
    assert (config.wait_interval, config.wait_jitter, config.max_reschedules, config.timeout) == (
        1.0,
        5.0,
        1,
        0,
    )
    assert config.max_keep_alive_idle_duration == datetime.timedelta(0)
    assert (config.task_limit, config.retry_external_tasks, config.send_failure_email) == (None, False, True)
    assert (
        config.no_install_shutdown_handler,
        config.check_unfulfilled_deps,
        config.check_complete_on_run,
    ) == (
        False,
        True,
        False,
    )
    assert (config.force_multiprocessing, config.task_process_context, config.cache_task_completion) == (
        False,
        None,
        False,
    )


def test_worker_options_come_from_the_worker_section_and_legacy_core_names():
    conf = configuration.get_config()
    conf.set("worker", "keep_alive", "true")
    conf.set("core", "worker-timeout", "30")
    conf.set("core", "worker-task-limit", "5")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = Worker(scheduler=NullScheduler())
    assert any("[core] worker-timeout is deprecated" in str(warning.message) for warning in caught)
    assert (built._config.keep_alive, built._config.timeout, built._config.task_limit) == (True, 30, 5)


def test_keyword_arguments_override_the_config_file():
    configuration.get_config().set("worker", "wait_interval", "7")
    assert Worker(scheduler=NullScheduler(), wait_interval=0.5)._config.wait_interval == 0.5


def test_worker_id_is_generated_from_host_user_and_pid_unless_configured():
    generated = Worker(scheduler=NullScheduler(), worker_processes=3)._id
    assert re.fullmatch(
        r"Worker\(salt=\d{9,10}, workers=3, host=[^,]+, username=[^,]+, pid=\d+.*\)", generated
    )
    configuration.get_config().set("worker", "id", "etl-box-1")
    assert Worker(scheduler=NullScheduler())._id == "etl-box-1"
    assert Worker(scheduler=NullScheduler(), worker_id="explicit")._id == "explicit"
