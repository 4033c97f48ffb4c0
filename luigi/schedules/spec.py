"""The ``[schedule:<name>]`` sections of ``luigid``'s configuration, read and checked in full at start.

Each section is one ``ScheduleSpec``. ``read_schedules(config)`` reads them all or raises
``ScheduleConfigError`` with one line naming the section and the key, so ``luigid`` never starts with
half its schedules. Values are read raw (no ``%`` interpolation), so a command may say
``{scheduled_time:%Y-%m-%d}`` as written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from luigi.parameter import ParameterException, TimeDeltaParameter
from luigi.schedules.timing import Cadence, CronCadence, EveryCadence, local_time

__all__ = ["SECTION_PREFIX", "ScheduleConfigError", "ScheduleSpec", "read_schedules"]

SECTION_PREFIX = "schedule:"
ENV_PREFIX = "env."
CRON, EVERY, COMMAND, TIMEZONE, CATCHUP, CWD = "cron", "every", "command", "timezone", "catchup", "cwd"
DEADLINE = "deadline"
KEYS = (CRON, EVERY, COMMAND, TIMEZONE, CATCHUP, CWD, DEADLINE)
DEFAULT_TIMEZONE = "UTC"
# luigid adds its own address; a command naming another scheduler would run elsewhere, unseen.
RESERVED_FLAGS = ("--scheduler-url", "--scheduler-host", "--scheduler-port", "--local-scheduler")
PLACEHOLDERS = ("scheduled_time", "schedule")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVERY = re.compile(r"\s*(\d+)\s*([smhd])\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_SAMPLE_TIME = datetime(2024, 1, 31, 6, 0, tzinfo=timezone.utc)


class ScheduleConfigError(ValueError):
    """A ``[schedule:<name>]`` section ``luigid`` cannot run; the message names the section and key."""

    def __init__(self, section: str, key: str, problem: str) -> None:
        super().__init__(f"[{section}] {key}: {problem}")
        self.section = section
        self.key = key


@dataclass(frozen=True)
class ScheduleSpec:
    """One schedule as configured: when (cadence, timezone), what (the ``luigi`` arguments), and how."""

    name: str
    cadence: Cadence
    command: str  # as written, for display
    arguments: tuple[str, ...]  # split with shlex; placeholders are formatted per run
    zone: ZoneInfo
    catchup: bool = False
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    deadline: float | None = None  # seconds from a run's start by which it should have ended well

    def arguments_for(self, scheduled_time: float) -> list[str]:
        """The ``luigi`` arguments for a run scheduled at ``scheduled_time`` (placeholders filled in)."""
        values = {"scheduled_time": local_time(scheduled_time, self.zone), "schedule": self.name}
        return [argument.format(**values) for argument in self.arguments]


def read_schedules(config: Any) -> list[ScheduleSpec]:
    """Every ``[schedule:<name>]`` section of ``config`` (a luigi config parser), in file order.

    Raises ScheduleConfigError for the first bad one.
    """
    return [
        parse_section(section, _section_values(config, section))
        for section in config.sections()
        if section.startswith(SECTION_PREFIX)
    ]


def _section_values(config: Any, section: str) -> dict[str, Any]:
    """The options of ``section`` as written (raw), without ``[DEFAULT]``'s."""
    if hasattr(config, "defaults"):  # the cfg parser: skip interpolation and the DEFAULT section
        defaults = config.defaults()
        return {key: value for key, value in config.items(section, raw=True) if key not in defaults}
    values: dict[str, Any] = {}
    for key, value in config.items(section):  # TOML: ``env`` may be a table
        if key == "env" and isinstance(value, Mapping):
            values.update({f"{ENV_PREFIX}{name}": item for name, item in value.items()})
        else:
            values[key] = value
    return values


def parse_section(section: str, values: Mapping[str, Any]) -> ScheduleSpec:
    """One section's schedule, or ScheduleConfigError naming the key at fault."""
    name = section[len(SECTION_PREFIX) :]
    if not _NAME.fullmatch(name):
        raise ScheduleConfigError(
            section, "name", f"{name!r} is not a schedule name (letters, digits, '_', '.', '-'; at most 100)"
        )
    _refuse_unknown_keys(section, values)
    zone = _zone(section, values.get(TIMEZONE, DEFAULT_TIMEZONE))
    arguments = _arguments(section, values.get(COMMAND), name)
    return ScheduleSpec(
        name=name,
        cadence=_cadence(section, values, zone),
        command=str(values[COMMAND]).strip(),
        arguments=arguments,
        zone=zone,
        catchup=_flag(section, CATCHUP, values.get(CATCHUP, False)),
        cwd=_cwd(section, values.get(CWD)),
        env=_env(section, values),
        deadline=_deadline(section, values.get(DEADLINE)),
    )


def _refuse_unknown_keys(section: str, values: Iterable[str]) -> None:
    for key in values:
        if key in KEYS:
            continue
        if key.startswith(ENV_PREFIX):
            if not _ENV_NAME.fullmatch(key[len(ENV_PREFIX) :]):
                raise ScheduleConfigError(section, key, "is not an environment variable name (env.NAME)")
            continue
        known = ", ".join(KEYS)
        raise ScheduleConfigError(section, key, f"unknown key (a schedule takes {known} and env.<NAME>)")


def _text(section: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ScheduleConfigError(section, key, f"must be text, got {value!r}")
    return value.strip()


def _cadence(section: str, values: Mapping[str, Any], zone: ZoneInfo) -> Cadence:
    if (CRON in values) == (EVERY in values):
        both = "has both" if CRON in values else "needs one of"
        raise ScheduleConfigError(section, "cron/every", f"{both} 'cron' and 'every': give exactly one")
    if CRON in values:
        expression = _text(section, CRON, values[CRON])
        try:
            croniter(expression)
        except (ValueError, KeyError) as exc:
            raise ScheduleConfigError(
                section, CRON, f"{expression!r} is not a cron expression ({exc}); write e.g. '0 6 * * *'"
            ) from None
        return CronCadence(expression, zone)
    spelled = _text(section, EVERY, values[EVERY])
    match = _EVERY.fullmatch(spelled)
    if match is None or int(match.group(1)) == 0:
        raise ScheduleConfigError(
            section,
            EVERY,
            f"{spelled!r} is not an interval: write a positive number and s, m, h or d (30s, 5m)",
        )
    return EveryCadence(float(int(match.group(1)) * _UNIT_SECONDS[match.group(2)]), spelled)


def _deadline(section: str, value: Any) -> float | None:
    """``deadline = 45m`` in seconds: any duration TimeDeltaParameter reads (``2h``, ``1h30m``, ``P1D``)."""
    if value is None:
        return None
    spelled = _text(section, DEADLINE, value)
    try:
        seconds = TimeDeltaParameter().parse(spelled).total_seconds()
    except ParameterException:
        seconds = None
    if seconds is None or seconds <= 0:
        raise ScheduleConfigError(
            section, DEADLINE, f"{spelled!r} is not a positive duration; write e.g. 45m, 2h or 1h30m"
        )
    return seconds


def _zone(section: str, value: Any) -> ZoneInfo:
    name = _text(section, TIMEZONE, value)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleConfigError(
            section, TIMEZONE, f"{name!r} is not a known time zone (write an IANA name such as Europe/Berlin)"
        ) from None


def _arguments(section: str, value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        raise ScheduleConfigError(
            section, COMMAND, "missing: say what to run, e.g. '--module pipeline Report'"
        )
    text = _text(section, COMMAND, value)
    try:
        arguments = tuple(shlex.split(text))
    except ValueError as exc:
        raise ScheduleConfigError(section, COMMAND, f"cannot be split into arguments: {exc}") from None
    if not arguments:
        raise ScheduleConfigError(
            section, COMMAND, "is empty: say what to run, e.g. '--module pipeline Report'"
        )
    for argument in arguments:
        flag = argument.split("=", 1)[0]
        if flag in RESERVED_FLAGS:
            raise ScheduleConfigError(
                section, COMMAND, f"must not say {flag}: luigid adds --scheduler-url with its own address"
            )
        _check_placeholders(section, argument, name)
    return arguments


def _check_placeholders(section: str, argument: str, name: str) -> None:
    try:
        argument.format(scheduled_time=_SAMPLE_TIME, schedule=name)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        raise ScheduleConfigError(
            section,
            COMMAND,
            f"bad placeholder in {argument!r} ({type(exc).__name__}: {exc}); the known ones are {known} "
            "(write {{ and }} for literal braces)",
        ) from None


def _flag(section: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(section, key, value).lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ScheduleConfigError(section, key, f"{value!r} is not true or false")


def _cwd(section: str, value: Any) -> str | None:
    if value is None:
        return None
    path = Path(_text(section, CWD, value)).expanduser()
    if not path.is_dir():
        raise ScheduleConfigError(section, CWD, f"{str(path)!r} is not a directory")
    return str(path.absolute())


def _env(section: str, values: Mapping[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for key, value in values.items():
        if key.startswith(ENV_PREFIX):
            env[key[len(ENV_PREFIX) :]] = value if isinstance(value, str) else _text(section, key, value)
    return env
