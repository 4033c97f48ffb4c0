"""The ``[worker]`` section (every knob of the worker loop, with Luigi's defaults), ``[dask]``, ``[ray]``
and ``[task_log]``."""

from __future__ import annotations

import datetime

from luigi import parameter
from luigi.task import Config

EXECUTOR_LOCAL = "local"
EXECUTOR_DASK = "dask"
EXECUTOR_RAY = "ray"


def _core_alias(name: str) -> dict[str, str]:
    """The deprecated ``[core] <name>`` spelling that older config files still use."""
    return {"section": "core", "name": name}


class worker(Config):
    """Options of the ``[worker]`` section; keyword arguments to ``Worker(...)`` override them."""

    id = parameter.Parameter(
        default="",
        description="Override the auto-generated worker id (it names this worker in the scheduler).",
    )
    ping_interval = parameter.FloatParameter(default=1.0, config_path=_core_alias("worker-ping-interval"))
    keep_alive = parameter.BoolParameter(default=False, config_path=_core_alias("worker-keep-alive"))
    count_uniques = parameter.BoolParameter(
        default=False,
        config_path=_core_alias("worker-count-uniques"),
        description="With keep_alive, stay alive only while tasks unique to this worker are pending.",
    )
    count_last_scheduled = parameter.BoolParameter(
        default=False,
        config_path=_core_alias("worker-count-last-scheduled"),
        description="With keep_alive, stay alive only while tasks this worker scheduled last are pending.",
    )
    wait_interval = parameter.FloatParameter(default=1.0, config_path=_core_alias("worker-wait-interval"))
    wait_jitter = parameter.FloatParameter(default=5.0, config_path=_core_alias("worker-wait-jitter"))
    max_keep_alive_idle_duration = parameter.TimeDeltaParameter(default=datetime.timedelta(0))
    max_reschedules = parameter.IntParameter(default=1, config_path=_core_alias("worker-max-reschedules"))
    timeout = parameter.IntParameter(default=0, config_path=_core_alias("worker-timeout"))
    task_limit = parameter.OptionalIntParameter(default=None, config_path=_core_alias("worker-task-limit"))
    retry_external_tasks = parameter.BoolParameter(
        default=False,
        config_path=_core_alias("retry-external-tasks"),
        description="Ask the scheduler to re-check incomplete external tasks after retry_delay.",
    )
    send_failure_email = parameter.BoolParameter(
        default=True, description="Send an email when a task fails or cannot be scheduled."
    )
    no_install_shutdown_handler = parameter.BoolParameter(
        default=False, description="Do not install the SIGUSR1 handler that stops taking new work."
    )
    check_unfulfilled_deps = parameter.BoolParameter(
        default=True, description="Before running a task, check that its dependencies are complete."
    )
    check_complete_on_run = parameter.BoolParameter(
        default=False, description="After run(), mark the task DONE only if complete() returns True."
    )
    force_multiprocessing = parameter.BoolParameter(
        default=False, description="Run every task in a child process, even with a single worker process."
    )
    task_process_context = parameter.OptionalStrParameter(
        default=None,
        description="Dotted path of a context manager class wrapped around each run (given the process).",
    )
    cache_task_completion = parameter.BoolParameter(
        default=False, description="Remember tasks found complete so complete() is not called for them again."
    )
    lookahead = parameter.BoolParameter(
        default=True,
        description="With one worker process and our luigid, ask for the next tasks while short ones run.",
    )
    scheduler_unreachable_timeout = parameter.FloatParameter(
        default=600.0,
        description="Seconds to keep retrying an unreachable scheduler before giving up (0: at once).",
    )
    task_log_max_bytes = parameter.IntParameter(
        default=1024 * 1024,
        description="Bytes of each task run's output shipped to a luigid that keeps task logs (0: none).",
    )
    shutdown_grace = parameter.FloatParameter(
        default=30.0,
        description="Seconds tasks may run on after SIGTERM or a first SIGINT before they are killed.",
    )
    executor = parameter.ChoiceParameter(
        default=EXECUTOR_LOCAL,
        choices=(EXECUTOR_LOCAL, EXECUTOR_DASK, EXECUTOR_RAY),
        description="Where tasks run: 'local' (this process or task slots), 'dask' or 'ray' (on a cluster).",
    )


class dask(Config):
    """Options of the ``[dask]`` section: the cluster that ``[worker] executor = dask`` runs tasks on."""

    scheduler_address = parameter.Parameter(
        default="", description="Address of the Dask scheduler, e.g. tcp://host:8786."
    )
    connect_timeout = parameter.FloatParameter(
        default=30.0, description="Seconds to wait for the Dask scheduler to answer when the worker starts."
    )


class ray(Config):
    """Options of the ``[ray]`` section: the cluster that ``[worker] executor = ray`` runs tasks on."""

    address = parameter.Parameter(
        default="", description="Address of the Ray cluster's head (host:port of `ray start --head`)."
    )


class task_log(Config):
    """Options of the ``[task_log]`` section: what is masked in each run's log before it leaves the worker
    (``luigi.worker.log_redaction``)."""

    redact = parameter.Parameter(
        default="",
        description="Regular expressions, one per line, whose matches are masked as *** in task logs.",
    )
    redact_defaults = parameter.BoolParameter(
        default=True,
        description="Also mask the built-in credential shapes (password=..., bearer tokens, AWS keys, ...).",
    )
