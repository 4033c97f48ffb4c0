"""Public face of the package: re-exports only, so ``import luigi`` gives what Luigi users expect."""

from luigi import configuration, event, interface, local_target, parameter, rpc, target, task, task_register
from luigi.__version__ import VERSION as __version__
from luigi.event import Event
from luigi.execution_summary import LuigiStatusCode
from luigi.interface import build, run
from luigi.local_target import LocalTarget
from luigi.parameter import *  # noqa: F403 - every parameter type is part of the top-level API
from luigi.parameter import __all__ as _parameter_names
from luigi.rpc import RemoteScheduler, RPCError
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


def _autoload_range() -> bool:
    """Luigi imports the Range* tasks unless ``[core] autoload_range = false`` (absence warns)."""
    import warnings

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

    __all__.append("range")
