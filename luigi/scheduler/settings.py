"""Scheduler settings: the ``[scheduler]`` and ``[resources]`` config sections with Luigi's defaults.

``SchedulerConfig`` is the one source of defaults. The ``scheduler`` Config class only declares a
``--scheduler-<option>`` flag for each option (with those defaults), so that ``luigi ...
--local-scheduler --scheduler-retry-delay 5`` works as in Luigi; importing this module registers it.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from luigi.metrics import MetricsCollectors, MetricsSetupError
from luigi.parameter import (
    BoolParameter,
    EnumParameter,
    FloatParameter,
    IntParameter,
    OptionalParameter,
    Parameter,
)
from luigi.task import Config

BACKOFF_FIXED = "fixed"
BACKOFF_LINEAR = "linear"
BACKOFF_EXPONENTIAL = "exponential"
BACKOFFS = (BACKOFF_FIXED, BACKOFF_LINEAR, BACKOFF_EXPONENTIAL)


class RetryPolicy(NamedTuple):
    """Luigi's ``luigi.scheduler.RetryPolicy``: when repeated failures disable a task."""

    retry_count: int
    disable_hard_timeout: int
    disable_window: int


def _get_empty_retry_policy() -> RetryPolicy:
    """Luigi's policy of no values (every field None): a task's own policy before defaults fill it."""
    return RetryPolicy._make([None] * len(RetryPolicy._fields))


def _retry_policy_of(settings: Any) -> RetryPolicy:
    """Luigi's ``_get_retry_policy()`` of a settings object with the three retry options."""
    return RetryPolicy(settings.retry_count, settings.disable_hard_timeout, settings.disable_window)


class TaskRetryPolicy(NamedTuple):
    """What the scheduler keeps per task: Luigi's ``RetryPolicy`` fields, then how long a failed task
    waits before its retry (ours). ``retry_delay`` None: the scheduler's ``retry_delay``."""

    retry_count: int
    disable_hard_timeout: int
    disable_window: int
    retry_backoff: str = BACKOFF_FIXED
    retry_delay: float | None = None
    retry_max_delay: float = 0.0  # 0: no cap
    retry_jitter: float = 0.0  # a fraction of the delay, spread evenly either way


_POLICY_FIELDS = frozenset(TaskRetryPolicy._fields)

# The kind of each option decides how it is read from a config file and which override values it accepts.
_OPTION_KINDS: dict[str, str] = {
    "retry_delay": "float",
    "remove_delay": "float",
    "worker_disconnect_delay": "float",
    "state_path": "str",
    "state_url": "str?",
    "public_url": "str?",
    "batch_emails": "bool",
    "disable_window": "int",
    "retry_count": "int",
    "disable_hard_timeout": "int",
    "disable_persist": "int",
    "max_shown_tasks": "int",
    "max_graph_nodes": "int",
    "record_task_history": "bool",
    "prune_on_get_work": "bool",
    "pause_enabled": "bool",
    "send_messages": "bool",
    "metrics_collector": "metrics",
    "metrics_custom_import": "str?",
    "stable_done_cooldown_secs": "int",
    "task_log_dir": "str?",
    "task_log_keep_days": "float",
    "retry_backoff": "str",
    "retry_max_delay": "float",
    "retry_jitter": "float",
}

# Older spellings Luigi still reads when the current name is absent.
_LEGACY_NAMES: dict[str, str] = {
    "retry_count": "disable-num-failures",
    "disable_window": "disable-window-seconds",
    "disable_persist": "disable-persist-seconds",
}


@dataclass(frozen=True)
class SchedulerConfig:
    """Every ``[scheduler]`` option with Luigi's default, plus the ``[resources]`` capacities."""

    retry_delay: float = 900.0
    remove_delay: float = 600.0
    worker_disconnect_delay: float = 60.0
    state_path: str = "/var/lib/luigi-server/state.pickle"
    state_url: str | None = None  # a SQLAlchemy URL for the state; overrides state_path (ours, not Luigi's)
    # the URL workers reach this luigid at, which a standby names for the active one (ours, not Luigi's)
    public_url: str | None = None
    batch_emails: bool = False
    disable_window: int = 3600
    retry_count: int = 999999999
    disable_hard_timeout: int = 999999999
    disable_persist: int = 86400
    max_shown_tasks: int = 100000
    max_graph_nodes: int = 100000
    record_task_history: bool = False
    prune_on_get_work: bool = False
    pause_enabled: bool = True
    send_messages: bool = True
    metrics_collector: MetricsCollectors = MetricsCollectors.default
    metrics_custom_import: str | None = None
    stable_done_cooldown_secs: int = 10
    task_log_dir: str | None = None  # where luigid keeps task run logs; None: task-logs beside the state
    task_log_keep_days: float = 7.0  # (ours, not Luigi's; 0 keeps them until deleted by hand)
    retry_backoff: str = BACKOFF_FIXED  # ours, not Luigi's: fixed (Luigi's), linear or exponential
    retry_max_delay: float = 0.0  # ours: the longest retry delay backoff may reach (0: no cap)
    retry_jitter: float = 0.0  # ours: spread each retry delay by up to this fraction either way
    resources: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.retry_backoff not in BACKOFFS:
            raise ValueError(
                f"[scheduler] retry_backoff must be one of {', '.join(BACKOFFS)}, got {self.retry_backoff!r}"
            )

    @classmethod
    def from_config(cls, **overrides: Any) -> SchedulerConfig:
        """Read ``[scheduler]`` and ``[resources]`` from ``luigi.configuration``; keyword overrides win."""
        _check_overrides(overrides)
        from luigi import configuration

        parser = configuration.get_config()
        values: dict[str, Any] = {}
        for name, kind in _OPTION_KINDS.items():
            if name not in overrides:
                found, value = _read_option(parser, name, kind)
                if found:
                    values[name] = value
        if "resources" not in overrides:
            values["resources"] = dict(parser.getintdict("resources"))
        values.update(_command_line_values(overrides))
        values.update(_typed_overrides(overrides))
        return cls(**values)

    @classmethod
    def resolve(cls, config: SchedulerConfig | Config | None, **overrides: Any) -> SchedulerConfig:
        """The settings from what ``Scheduler()`` got: nothing, ours, or Luigi's ``scheduler`` Config."""
        if config is None:
            return cls.from_config(**overrides)
        if isinstance(config, SchedulerConfig):
            return config.with_overrides(**overrides) if overrides else config
        if isinstance(config, Config):
            return cls.from_section(config, **overrides)
        raise TypeError(
            "Scheduler config must be a SchedulerConfig or a luigi.scheduler.scheduler() instance, "
            f"got {config!r}"
        )

    @classmethod
    def from_section(cls, section: Config, **overrides: Any) -> SchedulerConfig:
        """The settings of a ``scheduler`` Config instance (what Luigi's ``Scheduler(config=...)`` takes)."""
        _check_overrides(overrides)
        from luigi import configuration

        values = {name: getattr(section, name) for name in _OPTION_KINDS if hasattr(section, name)}
        values["resources"] = dict(configuration.get_config().getintdict("resources"))
        values.update(_typed_overrides(overrides))
        _check_overrides(values)
        return cls(**values)

    def with_overrides(self, **overrides: Any) -> SchedulerConfig:
        """A copy with some options replaced (checked like ``from_config`` overrides)."""
        _check_overrides(overrides)
        return dataclasses.replace(self, **_typed_overrides(overrides))

    def _get_retry_policy(self) -> RetryPolicy:
        """Luigi's name for the scheduler-wide policy, in Luigi's three fields."""
        return _retry_policy_of(self)

    def retry_policy(self) -> TaskRetryPolicy:
        """The scheduler-wide retry policy (one immutable tuple, shared by every task that keeps it)."""
        return self._retry_policy

    @cached_property
    def _retry_policy(self) -> TaskRetryPolicy:
        return TaskRetryPolicy(
            self.retry_count,
            self.disable_hard_timeout,
            self.disable_window,
            self.retry_backoff,
            None,
            self.retry_max_delay,
            self.retry_jitter,
        )

    def retry_policy_for(self, task_policy: Mapping[str, Any] | None) -> TaskRetryPolicy:
        """The scheduler policy overlaid with a task's non-None ``retry_policy_dict`` values."""
        if not task_policy:
            return self._retry_policy
        unset = list(task_policy.values()).count(None)
        if unset == len(task_policy) and task_policy.keys() <= _POLICY_FIELDS:
            return self._retry_policy  # the usual report: Luigi's worker sends its fields, all None
        policy = self._retry_policy._asdict()
        for name, value in task_policy.items():
            if name not in policy:
                raise ValueError(
                    f"retry_policy_dict has unknown key {name!r} (expected one of: {', '.join(policy)})"
                )
            if value is not None:
                policy[name] = value
        if policy["retry_backoff"] not in BACKOFFS:
            raise ValueError(
                f"retry_backoff must be one of {', '.join(BACKOFFS)}, got {policy['retry_backoff']!r}"
            )
        return TaskRetryPolicy(**policy)


def _read_option(parser: Any, name: str, kind: str) -> tuple[bool, Any]:
    """(found, value) for ``[scheduler] name``, falling back to its legacy spelling (with a warning)."""
    if parser.has_option("scheduler", name):
        return True, _typed_get(parser, name, kind)
    legacy = _LEGACY_NAMES.get(name)
    if legacy is None:
        return False, None
    with warnings.catch_warnings():  # the parser would suggest the underscore spelling of the old name
        warnings.simplefilter("ignore", DeprecationWarning)
        if not parser.has_option("scheduler", legacy):
            return False, None
    warnings.warn(
        f"Config option [scheduler] {legacy} is deprecated; write it as {name}",
        DeprecationWarning,
        stacklevel=4,
    )
    with warnings.catch_warnings():  # the parser would suggest the underscore spelling of the old name
        warnings.simplefilter("ignore", DeprecationWarning)
        return True, _typed_get(parser, legacy, kind)


def _typed_get(parser: Any, option: str, kind: str) -> Any:
    if kind == "metrics":
        return _metrics_collector(parser.get("scheduler", option), f"[scheduler] {option}")
    if kind == "float":
        return parser.getfloat("scheduler", option)
    if kind == "int":
        return parser.getint("scheduler", option)
    if kind == "bool":
        return parser.getboolean("scheduler", option)
    return parser.get("scheduler", option)


def _check_overrides(overrides: Mapping[str, Any]) -> None:
    """Reject unknown option names and values of the wrong type, naming the option."""
    for name, value in overrides.items():
        if name == "resources":
            if not isinstance(value, Mapping):
                raise TypeError(f"Scheduler option resources must be a mapping of name to int, got {value!r}")
            continue
        kind = _OPTION_KINDS.get(name)
        if kind is None:
            known = ", ".join([*_OPTION_KINDS, "resources"])
            raise TypeError(f"Unknown scheduler option {name!r} (known options: {known})")
        if not _has_kind(value, kind):
            expected = _KIND_NAMES.get(kind.rstrip("?"), kind.rstrip("?"))
            raise TypeError(f"Scheduler option {name} must be {expected}, got {value!r}")


_KIND_NAMES = {"metrics": "a MetricsCollectors member or its name"}


def _has_kind(value: Any, kind: str) -> bool:
    if kind.endswith("?") and value is None:
        return True
    base = kind.rstrip("?")
    if base == "metrics":
        return isinstance(value, (MetricsCollectors, str))
    if base == "bool":
        return isinstance(value, bool)
    if base in ("int", "float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


def _typed_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides as stored: a ``metrics_collector`` given by name becomes its ``MetricsCollectors`` member."""
    typed = dict(overrides)
    if isinstance(typed.get("metrics_collector"), str):
        typed["metrics_collector"] = _metrics_collector(typed["metrics_collector"], "metrics_collector")
    return typed


def _metrics_collector(value: Any, where: str) -> MetricsCollectors:
    """The collector named ``value`` (or ``value`` itself); a MetricsSetupError (a ValueError) names
    ``where`` and the choices, so that luigid stops with that one line."""
    if isinstance(value, MetricsCollectors):
        return value
    try:
        return MetricsCollectors[str(value).strip()]
    except KeyError:
        names = ", ".join(MetricsCollectors.__members__)
        raise MetricsSetupError(f"{where} = {value!r} is not a metrics collector (one of: {names})") from None


def _command_line_values(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``--scheduler-*`` flags of the running ``luigi`` command, for options not overridden in code."""
    return {name: value for name, value in command_line_overrides().items() if name not in overrides}


# -- the --scheduler-* flags -------------------------------------------------------------------------

_PARAMETER_FOR_KIND = {
    "float": FloatParameter,
    "int": IntParameter,
    "bool": BoolParameter,
    "str": Parameter,
    "str?": OptionalParameter,
}


def _declared_parameters() -> dict[str, Parameter[Any]]:
    defaults = {f.name: f.default for f in dataclasses.fields(SchedulerConfig)}
    return {name: _declared_parameter(name, kind, defaults[name]) for name, kind in _OPTION_KINDS.items()}


def _declared_parameter(name: str, kind: str, default: Any) -> Parameter[Any]:
    description = f"[scheduler] {name}"
    if kind == "metrics":
        return EnumParameter(enum=MetricsCollectors, default=default, description=description)
    return _PARAMETER_FOR_KIND[kind](default=default, description=description)


scheduler: type[Config] = type(
    "scheduler",
    (Config,),
    {
        "__module__": __name__,
        "__doc__": "Flags for every [scheduler] option.",
        "_get_retry_policy": _retry_policy_of,
        **_declared_parameters(),
    },
)


def command_line_overrides() -> dict[str, Any]:
    """The ``--scheduler-*`` values given on the active command line (none outside a ``luigi`` run)."""
    from luigi.cmdline_parser import CmdlineParser

    parser = CmdlineParser.get_instance()
    if parser is None:
        return {}
    found: dict[str, Any] = {}
    for name, parameter in scheduler.get_params():
        raw = getattr(parser.known_args, f"scheduler_{name}", None)
        if raw not in (None, ""):
            found[name] = parameter.normalize(parameter.parse(raw) if isinstance(raw, str) else raw)
    return found
