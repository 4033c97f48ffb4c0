"""The ``scheduler`` Config class: makes every ``[scheduler]`` option a ``--scheduler-<option>`` flag.

``SchedulerConfig`` stays the one source of defaults; this class only declares the flags (with those
defaults) so that ``luigi ... --local-scheduler --scheduler-retry-delay 5`` works as in Luigi.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from luigi.parameter import BoolParameter, FloatParameter, IntParameter, OptionalParameter, Parameter
from luigi.scheduler.config import _OPTION_KINDS, SchedulerConfig
from luigi.task import Config

_PARAMETER_FOR_KIND = {
    "float": FloatParameter,
    "int": IntParameter,
    "bool": BoolParameter,
    "str": Parameter,
    "str?": OptionalParameter,
}


def _declared_parameters() -> dict[str, Parameter]:
    defaults = {f.name: f.default for f in dataclasses.fields(SchedulerConfig)}
    return {
        name: _PARAMETER_FOR_KIND[kind](default=defaults[name], description=f"[scheduler] {name}")
        for name, kind in _OPTION_KINDS.items()
    }


scheduler: type[Config] = type(
    "scheduler",
    (Config,),
    {"__module__": __name__, "__doc__": "Flags for every [scheduler] option.", **_declared_parameters()},
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
