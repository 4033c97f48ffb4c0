"""Public face of the package: re-exports only, so ``import luigi`` gives what Luigi users expect."""

from luigi import configuration, event, local_target, parameter, target, task, task_register
from luigi.__version__ import VERSION as __version__
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

__all__ = [
    "Config",
    "DynamicRequirements",
    "Event",
    "ExternalTask",
    "LocalTarget",
    "Target",
    "Task",
    "WrapperTask",
    "__version__",
    "auto_namespace",
    "configuration",
    "event",
    "local_target",
    "namespace",
    "parameter",
    "target",
    "task",
    "task_register",
    *_parameter_names,
]
