"""Public face of the package: re-exports only, so ``import luigi`` gives what Luigi users expect.

What a task definition needs is imported here; the machinery that runs tasks (the interface, the worker,
the scheduler, the RPC client, the e-mails) is imported on first use of its name (``luigi.build``,
``luigi.worker``, ``luigi.rpc.RemoteScheduler``...), so that ``import luigi`` stays cheap. Their Config
classes (the ``--scheduler-*``, ``--worker-*``, ``--email-*`` flags) are registered by ``luigi.interface``,
which every command line parser imports before parsing (``luigi.cmdline_parser``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from luigi import configuration, event, local_target, parameter, target, task, task_register
from luigi.__version__ import VERSION as __version__
from luigi._lazy import lazy_names
from luigi.event import Event
from luigi.local_target import LocalTarget
from luigi.parameter import *  # noqa: F403 - every parameter type is part of the top-level API
from luigi.parameter import __all__ as _parameter_names
from luigi.target import Target
from luigi.task import (
    Config,
    DynamicRequirements,
    ExternalTask,
    Task,
    WrapperTask,
    auto_namespace,
    namespace,
)

if TYPE_CHECKING:  # what the names below resolve to, for type checkers (``as`` marks a re-export)
    from luigi import batch_notifier as batch_notifier
    from luigi import cmdline_parser as cmdline_parser
    from luigi import execution_summary as execution_summary
    from luigi import interface as interface
    from luigi import lock as lock
    from luigi import metrics as metrics
    from luigi import notifications as notifications
    from luigi import rpc as rpc
    from luigi import scheduler as scheduler
    from luigi import setup_logging as setup_logging
    from luigi import task_history as task_history
    from luigi import tools as tools
    from luigi import worker as worker
    from luigi.execution_summary import LuigiStatusCode as LuigiStatusCode
    from luigi.interface import build as build
    from luigi.interface import run as run
    from luigi.rpc import RemoteScheduler as RemoteScheduler
    from luigi.rpc import RPCError as RPCError
    from luigi.tools import range as range

# Names imported on first use, and the module each comes from.
_LAZY_NAMES = {
    "build": "luigi.interface",
    "run": "luigi.interface",
    "RemoteScheduler": "luigi.rpc",
    "RPCError": "luigi.rpc",
    "LuigiStatusCode": "luigi.execution_summary",
}
# Modules reachable as attributes of ``luigi`` (as after Luigi's own ``import luigi``), imported on first use.
_LAZY_MODULES = {
    name: f"luigi.{name}"
    for name in (
        "batch_notifier",
        "cmdline_parser",
        "execution_summary",
        "interface",
        "lock",
        "metrics",
        "notifications",
        "rpc",
        "scheduler",
        "setup_logging",
        "task_history",
        "tools",
        "worker",
    )
} | {"range": "luigi.tools.range"}

__all__ = [
    "Config",
    "DynamicRequirements",
    "Event",
    "ExternalTask",
    "LocalTarget",
    "LuigiStatusCode",
    "RPCError",
    "RemoteScheduler",
    "Target",
    "Task",
    "WrapperTask",
    "__version__",
    "auto_namespace",
    "configuration",
    "build",
    "event",
    "interface",
    "local_target",
    "namespace",
    "parameter",
    "rpc",
    "run",
    "target",
    "task",
    "task_register",
    *_parameter_names,
]

__getattr__ = lazy_names(__name__, _LAZY_NAMES, globals(), modules=_LAZY_MODULES)
