"""Running tasks from Python or the command line: ``build()``, ``run()`` and the ``[core]`` options.

Both end in ``_schedule_and_run``: read ``core``, set up logging, take the pid lock, pick the local or the
remote scheduler, then let one worker add the tasks and run them, and summarise how it went.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

# As in Luigi, the scheduler and the worker are loaded with the interface, so that their Config classes
# (``--scheduler-*``, ``--worker-*``, ``--email-*`` flags) are registered before any command line is parsed
# (``CmdlineParser`` imports this module first); the scheduler first, then the worker, then ``core`` and the
# Range* tasks below: ``--help-all`` lists them in Luigi's order.
# ``luigi.interface.scheduler``/``.worker``/``.rpc`` are those modules, as in Luigi (patching their names
# reaches the factory below, which looks them up at each call).
from luigi import configuration, lock, parameter, rpc, scheduler, worker
from luigi.cmdline_parser import CmdlineParser
from luigi.execution_summary import LuigiRunResult
from luigi.setup_logging import InterfaceLogging
from luigi.task import Config, Task

if TYPE_CHECKING:
    from luigi.rpc import RemoteScheduler
    from luigi.scheduler import Scheduler
    from luigi.scheduler_api import SchedulerAPI
    from luigi.worker import Worker

__all__ = ["PidLockAlreadyTakenExit", "build", "core", "run"]

logger = logging.getLogger("luigi-interface")

# [core] keys that other parts read directly (or as legacy aliases of their own sections); not warned about.
_CORE_KEYS_READ_ELSEWHERE = frozenset(
    {
        "autoload_range",
        "no_configure_logging",
        "progress",  # the worker's live progress line (luigi.worker.progress); no flag, to spare task names
        "rpc_connect_timeout",
        "rpc_retry_attempts",
        "rpc_retry_wait",
        "rpc_log_retries",
        "default_scheduler_host",
        "default_scheduler_port",
        "default_scheduler_url",
        "error_email",
        "email_prefix",
        "email_sender",
        "email_type",
        "smtp_host",
        "smtp_local_hostname",
        "smtp_login",
        "smtp_password",
        "smtp_port",
        "smtp_ssl",
        "smtp_timeout",
        "smtp_without_tls",
        "retry_external_tasks",
        "worker_count_last_scheduled",
        "worker_count_uniques",
        "worker_keep_alive",
        "worker_max_reschedules",
        "worker_ping_interval",
        "worker_task_limit",
        "worker_timeout",
        "worker_wait_interval",
        "worker_wait_jitter",
        "hdfs_tmp_dir",
        "history_filename",
    }
)


class core(Config):
    """The ``[core]`` section: global flags of the ``luigi`` command (``--workers``, ``--no-lock``...)."""

    use_cmdline_section = False
    ignore_unconsumed = _CORE_KEYS_READ_ELSEWHERE

    local_scheduler = parameter.BoolParameter(
        default=False,
        description="Use an in-memory central scheduler. Useful for testing.",
        always_in_help=True,
    )
    scheduler_host = parameter.Parameter(
        default="localhost",
        description="Hostname of machine running remote scheduler",
        config_path={"section": "core", "name": "default-scheduler-host"},
    )
    scheduler_port = parameter.IntParameter(
        default=8082,
        description="Port of remote scheduler api process",
        config_path={"section": "core", "name": "default-scheduler-port"},
    )
    scheduler_url = parameter.Parameter(
        default="",
        description="Full path to remote scheduler",
        config_path={"section": "core", "name": "default-scheduler-url"},
    )
    lock_size = parameter.IntParameter(
        default=1, description="Maximum number of workers running the same command"
    )
    no_lock = parameter.BoolParameter(
        default=False, description="Ignore if similar process is already running"
    )
    lock_pid_dir = parameter.Parameter(
        default=os.path.join(tempfile.gettempdir(), "luigi"), description="Directory to store the pid file"
    )
    take_lock = parameter.BoolParameter(
        default=False, description="Signal other processes to stop getting work if already running"
    )
    workers = parameter.IntParameter(default=1, description="Maximum number of parallel tasks to run")
    logging_conf_file = parameter.Parameter(default="", description="Configuration file for logging")
    log_level = parameter.ChoiceParameter(
        default="DEBUG",
        choices=["NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        description="Default log level to use when logging_conf_file is not set",
    )
    module = parameter.Parameter(
        default="", description="Used for dynamic loading of modules", always_in_help=True
    )
    parallel_scheduling = parameter.BoolParameter(
        default=False, description="Use multiprocessing to do scheduling in parallel."
    )
    parallel_scheduling_processes = parameter.IntParameter(
        default=0,
        description="The number of processes to use for scheduling in parallel. By default the number "
        "of available CPUs will be used",
    )
    assistant = parameter.BoolParameter(default=False, description="Run any task from the scheduler.")
    help = parameter.BoolParameter(
        default=False, description="Show most common flags and all task-specific flags", always_in_help=True
    )
    help_all = parameter.BoolParameter(
        default=False, description="Show all command line flags", always_in_help=True
    )


class PidLockAlreadyTakenExit(SystemExit):
    """The same command is already running (``[core] lock_size`` of them); ``luigi`` exits with a retcode."""


class _WorkerSchedulerFactory:
    """Makes the schedulers and the worker; pass your own to ``build``/``run`` to change either."""

    def create_local_scheduler(self) -> Scheduler:
        return scheduler.Scheduler(prune_on_get_work=True, record_task_history=False)

    def create_remote_scheduler(self, url: str) -> RemoteScheduler:
        return rpc.RemoteScheduler(url)

    def create_worker(
        self, scheduler: SchedulerAPI, worker_processes: int, assistant: bool = False
    ) -> Worker:
        return worker.Worker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)


def _scheduler_url(env_params: core) -> str:
    if env_params.scheduler_url:
        return env_params.scheduler_url
    return f"http://{env_params.scheduler_host}:{env_params.scheduler_port:d}/"


def _schedule_and_run(
    tasks: Iterable[Task],
    worker_scheduler_factory: Any = None,
    override_defaults: dict[str, Any] | None = None,
) -> LuigiRunResult:
    """Add ``tasks`` with one worker, run them, and return the run's result (with its summary)."""
    if worker_scheduler_factory is None:
        worker_scheduler_factory = _WorkerSchedulerFactory()
    env_params = core(**(override_defaults or {}))
    InterfaceLogging.setup(env_params)
    kill_signal = signal.SIGUSR1 if env_params.take_lock else None
    if not env_params.no_lock and not lock.acquire_for(
        env_params.lock_pid_dir, env_params.lock_size, kill_signal
    ):
        raise PidLockAlreadyTakenExit()
    if env_params.local_scheduler:
        chosen = worker_scheduler_factory.create_local_scheduler()
    else:
        chosen = worker_scheduler_factory.create_remote_scheduler(url=_scheduler_url(env_params))
    runner = worker_scheduler_factory.create_worker(
        scheduler=chosen, worker_processes=env_params.workers, assistant=env_params.assistant
    )
    success = True
    with runner:
        for task in tasks:
            success &= runner.add(
                task, env_params.parallel_scheduling, env_params.parallel_scheduling_processes
            )
        logger.info("Done scheduling tasks")
        success &= runner.run()
    result = LuigiRunResult(runner, success)
    logger.info(result.summary_text)
    if hasattr(chosen, "close"):  # a factory of the user's may give one without it, as Luigi allowed
        chosen.close()
    return result


def _as_task_list(tasks: Any) -> list[Task]:
    if isinstance(tasks, Task):
        raise TypeError(
            f"build() takes a list of tasks, got the single task {tasks!r}; use build([{tasks!r}])"
        )
    try:
        return list(tasks)
    except TypeError:
        raise TypeError(f"build() takes a list of tasks, got {tasks!r} ({type(tasks).__name__})") from None


def build(
    tasks: Iterable[Task],
    worker_scheduler_factory: Any = None,
    detailed_summary: bool = False,
    **env_params: Any,
) -> bool | LuigiRunResult:
    """Run ``tasks`` and their dependencies from Python; ``env_params`` are ``[core]`` options.

    Returns whether scheduling and running succeeded, or the ``LuigiRunResult`` with ``detailed_summary``.
    No pid lock is taken unless ``no_lock=False`` is passed.
    """
    env_params.setdefault("no_lock", True)
    result = _schedule_and_run(_as_task_list(tasks), worker_scheduler_factory, override_defaults=env_params)
    return result if detailed_summary else result.scheduling_succeeded


def run(
    cmdline_args: Sequence[str] | None = None,
    main_task_cls: type[Task] | None = None,
    worker_scheduler_factory: Any = None,
    use_dynamic_argparse: bool | None = None,
    local_scheduler: bool = False,
    detailed_summary: bool = False,
) -> bool | LuigiRunResult:
    """Run the task a command line names (``sys.argv[1:]`` by default), like the ``luigi`` command does."""
    result = _run(
        cmdline_args,
        main_task_cls,
        worker_scheduler_factory,
        use_dynamic_argparse,
        local_scheduler,
        detailed_summary,
    )
    return result if detailed_summary else result.scheduling_succeeded


def _run(
    cmdline_args: Sequence[str] | None = None,
    main_task_cls: type[Task] | None = None,
    worker_scheduler_factory: Any = None,
    use_dynamic_argparse: bool | None = None,
    local_scheduler: bool = False,
    detailed_summary: bool = False,
) -> LuigiRunResult:
    """``run()`` returning the ``LuigiRunResult`` always (what ``luigi.retcodes`` needs)."""
    if use_dynamic_argparse is not None:
        warnings.warn("use_dynamic_argparse is deprecated, don't set it.", DeprecationWarning, stacklevel=2)
    if cmdline_args is None:
        cmdline_args = sys.argv[1:]
    if not isinstance(cmdline_args, (list, tuple)):
        raise TypeError(
            "cmdline_args must be a list or tuple of strings, "
            f"got {type(cmdline_args).__name__}: {cmdline_args!r}"
        )
    args = list(cmdline_args)
    if main_task_cls is not None:
        args.insert(0, main_task_cls.get_task_family())
    if local_scheduler:
        args.append("--local-scheduler")
    with CmdlineParser.global_instance(args) as parser:
        return run_parsed(parser, worker_scheduler_factory)


def run_parsed(parser: CmdlineParser, worker_scheduler_factory: Any = None) -> LuigiRunResult:
    """Run the root task of a parsed command line whose parser is active (the ``luigi`` command's path)."""
    return _schedule_and_run([parser.get_task_obj()], worker_scheduler_factory)


def _autoload_range() -> bool:
    """Luigi makes the Range* tasks known unless ``[core] autoload_range = false`` (absence warns)."""
    try:
        value = configuration.get_config().getboolean("core", "autoload_range", None)
    except (configuration.ConfigError, ValueError):
        return True  # a broken config file is reported where it is used, not at import
    if value is None:
        warnings.warn(
            "Autoloading range tasks by default is deprecated; set [core] autoload_range = true "
            "to keep it (or false to skip it).",
            DeprecationWarning,
            stacklevel=1,  # attributed to luigi itself, so hidden by Python's default warning filters
        )
        return True
    return bool(value)


if _autoload_range():
    from luigi.tools import range  # noqa: F401,E402 - makes RangeDaily & co. known to the command line
