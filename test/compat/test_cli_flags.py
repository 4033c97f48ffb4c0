"""No command-line flag Luigi 3.8 documents is missing (LUIGI_COMPAT e.1, h, j.15).

The spec below lists, section by section, every option Luigi registers as a ``--<section>-<option>`` flag
when ``import luigi`` (and, for ``[retcode]``, the ``luigi`` command) runs: the help of a real ``luigi``
process, of ``python -m luigi`` and of a script calling ``luigi.run()`` must name each, before any user
module is loaded. Booleans are bare switches; every other flag takes a value that reaches its Config.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import luigi
import luigi.retcodes  # noqa: F401 - what the luigi command loads: [retcode] and its flags
from luigi.cmdline_parser import CmdlineParser
from luigi.task_register import Register

BIN = Path(sys.executable).parent

# (Config class, option, sample value); None marks a boolean, which is a bare switch.
CORE = [
    ("core", "local_scheduler", None),
    ("core", "scheduler_host", "sched.example"),
    ("core", "scheduler_port", "8083"),
    ("core", "scheduler_url", "http://sched.example:8083/"),
    ("core", "workers", "3"),
    ("core", "no_lock", None),
    ("core", "lock_size", "2"),
    ("core", "lock_pid_dir", "/tmp/pids"),
    ("core", "take_lock", None),
    ("core", "log_level", "WARNING"),
    ("core", "logging_conf_file", "logging.ini"),
    ("core", "module", "luigi.tools.range"),
    ("core", "parallel_scheduling", None),
    ("core", "parallel_scheduling_processes", "2"),
    ("core", "assistant", None),
]
SCHEDULER = [
    ("scheduler", "retry_delay", "5"),
    ("scheduler", "remove_delay", "6"),
    ("scheduler", "worker_disconnect_delay", "7"),
    ("scheduler", "state_path", "/tmp/state.pickle"),
    ("scheduler", "batch_emails", None),
    ("scheduler", "disable_window", "8"),
    ("scheduler", "retry_count", "9"),
    ("scheduler", "disable_hard_timeout", "10"),
    ("scheduler", "disable_persist", "11"),
    ("scheduler", "max_shown_tasks", "12"),
    ("scheduler", "max_graph_nodes", "13"),
    ("scheduler", "record_task_history", None),
    ("scheduler", "prune_on_get_work", None),
    ("scheduler", "pause_enabled", None),
    ("scheduler", "send_messages", None),
    ("scheduler", "metrics_collector", "prometheus"),
    ("scheduler", "metrics_custom_import", "my.Collector"),
    ("scheduler", "stable_done_cooldown_secs", "14"),
]
BATCH_EMAIL = [
    ("batch_email", "email_interval", "15"),
    ("batch_email", "batch_mode", "family"),
    ("batch_email", "error_lines", "16"),
    ("batch_email", "error_messages", "2"),
    ("batch_email", "group_by_error_messages", None),
]
WORKER = [
    ("worker", "id", "worker-7"),
    ("worker", "ping_interval", "2.5"),
    ("worker", "keep_alive", None),
    ("worker", "count_uniques", None),
    ("worker", "count_last_scheduled", None),
    ("worker", "wait_interval", "3.5"),
    ("worker", "wait_jitter", "0.5"),
    ("worker", "max_keep_alive_idle_duration", "1 hour"),
    ("worker", "max_reschedules", "4"),
    ("worker", "timeout", "60"),
    ("worker", "task_limit", "100"),
    ("worker", "retry_external_tasks", None),
    ("worker", "send_failure_email", None),
    ("worker", "no_install_shutdown_handler", None),
    ("worker", "check_unfulfilled_deps", None),
    ("worker", "check_complete_on_run", None),
    ("worker", "force_multiprocessing", None),
    ("worker", "task_process_context", "my.Context"),
    ("worker", "cache_task_completion", None),
]
EMAIL = [
    ("email", "force_send", None),
    ("email", "format", "html"),
    ("email", "method", "sendgrid"),
    ("email", "prefix", "[luigi]"),
    ("email", "receiver", "ops@example.com"),
    ("email", "sender", "luigi@example.com"),
    ("email", "traceback_max_length", "100"),
]
SMTP = [
    ("smtp", "host", "mail.example"),
    ("smtp", "port", "2525"),
    ("smtp", "local_hostname", "me.example"),
    ("smtp", "no_tls", None),
    ("smtp", "ssl", None),
    ("smtp", "username", "user"),
    ("smtp", "password", "secret"),
    ("smtp", "timeout", "3.5"),
]
OTHERS = [
    ("sendgrid", "apikey", "key"),
    ("TestNotificationsTask", "raise_in_complete", None),
    ("execution_summary", "summary_length", "9"),
]
RETCODE = [
    ("retcode", "unhandled_exception", "5"),
    ("retcode", "missing_data", "6"),
    ("retcode", "task_failed", "7"),
    ("retcode", "already_running", "8"),
    ("retcode", "scheduling_error", "9"),
    ("retcode", "not_run", "10"),
]
IMPORT_LUIGI_OPTIONS = CORE + SCHEDULER + BATCH_EMAIL + WORKER + EMAIL + SMTP + OTHERS
HELP_FLAGS = ["--help", "--help-all"]


def flag(section: str, option: str) -> str:
    """Luigi's spelling: ``core`` options unprefixed, others ``--<section>-<option>``, dashes for ``_``."""
    name = option if section == "core" else f"{section}_{option}"
    return "--" + name.replace("_", "-")


def test_the_spec_spells_the_flags_luigi_documents():
    flags = {flag(section, option) for section, option, _ in IMPORT_LUIGI_OPTIONS + RETCODE}
    assert {"--scheduler-host", "--scheduler-retry-delay", "--worker-keep-alive", "--smtp-host"} <= flags
    assert {"--TestNotificationsTask-raise-in-complete", "--execution-summary-summary-length"} <= flags
    assert {"--batch-email-group-by-error-messages", "--retcode-task-failed", "--sendgrid-apikey"} <= flags


def help_flags(args: list[str], cwd: Path) -> set[str]:
    """The flags a real process lists for ``--help-all`` (with its own empty config)."""
    env = dict(os.environ)
    env.pop("LUIGI_CONFIG_PARSER", None)
    config = cwd / "luigi.cfg"
    config.write_text("[core]\nautoload_range = true\n")
    env["LUIGI_CONFIG_PATH"] = str(config)
    done = subprocess.run(
        [*args, "--help-all"], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(re.findall(r"(?<![\w-])--[A-Za-z][\w.-]*", done.stdout))


def missing(expected: list[tuple[str, str, str | None]], found: set[str]) -> list[str]:
    return [flag(section, option) for section, option, _ in expected if flag(section, option) not in found]


def test_the_luigi_command_lists_every_documented_flag(tmp_path):
    found = help_flags([str(BIN / "luigi")], tmp_path)
    assert missing(IMPORT_LUIGI_OPTIONS + RETCODE, found) == []
    assert set(HELP_FLAGS) <= found


def test_python_m_luigi_lists_every_documented_flag(tmp_path):
    found = help_flags([sys.executable, "-m", "luigi"], tmp_path)
    assert missing(IMPORT_LUIGI_OPTIONS + RETCODE, found) == []


def test_a_script_calling_luigi_run_has_every_flag_of_import_luigi(tmp_path):
    script = tmp_path / "pipeline_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import luigi

            if __name__ == "__main__":
                luigi.run()
            """
        )
    )
    found = help_flags([sys.executable, str(script)], tmp_path)
    assert missing(IMPORT_LUIGI_OPTIONS, found) == []
    # As in Luigi, [retcode] belongs to the luigi command (luigi.retcodes is not imported by luigi).
    assert "--retcode-task-failed" not in found


class Idle(luigi.Task):
    def complete(self) -> bool:
        return True


def configured(section: str, option: str):
    """The value a Config (or TestNotificationsTask) instance resolves for ``option`` right now."""
    return getattr(Register.get_task_cls(section)(), option)


@pytest.mark.parametrize(
    ("section", "option"), [(s, o) for s, o, sample in IMPORT_LUIGI_OPTIONS + RETCODE if sample is None]
)
def test_a_boolean_flag_is_a_bare_switch(section, option):
    with CmdlineParser.global_instance(["Idle", flag(section, option)]):
        assert configured(section, option) is True


@pytest.mark.parametrize(
    ("section", "option", "sample"), [entry for entry in IMPORT_LUIGI_OPTIONS + RETCODE if entry[2]]
)
def test_a_valued_flag_reaches_its_config(section, option, sample):
    param = dict(Register.get_task_cls(section).get_params())[option]
    with CmdlineParser.global_instance(["Idle", flag(section, option), sample]):
        value = configured(section, option)
    assert value == param.normalize(param.parse(sample))
    assert value != param._default  # the flag, not the default, decided it
