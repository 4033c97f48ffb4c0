"""The command-line parser: argparse flags generated from every registered task parameter.

While a ``CmdlineParser`` is active (``CmdlineParser.global_instance([...])``), parameters of any task look
up ``--Family-param`` values in it, so the command line configures the whole graph, not only the root task.

Bad values fail early: after parsing, every given flag is parsed by its parameter, and a value that does not
parse raises ``InvalidParameterValueException`` (a ``ParameterException`` and a ``ValueError``) whose message
is one line naming the flag, the parameter, the value and what was expected. The ``luigi`` command prints it
without a traceback; argparse itself only rejects unknown flags (exit code 2).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from luigi.parameter import Parameter, ParameterException
from luigi.task_register import Register, TaskClassException, TaskClassNotFoundException

logger = logging.getLogger("luigi-interface")

# Flags the parser needs even before the ``core`` Config is registered; dests match core's parameters.
_FALLBACK_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--module", "core_module", {"help": "Used for dynamic loading of modules"}),
    (
        "--help",
        "core_help",
        {"action": "store_true", "help": "Show most common flags and all task-specific flags"},
    ),
    ("--help-all", "core_help_all", {"action": "store_true", "help": "Show all command line flags"}),
)


class InvalidParameterValueException(ParameterException, ValueError):
    """A command-line value that its parameter cannot parse; the message is one line naming the flag.

    ``family`` is the task or Config family whose parameter the flag sets.
    """

    def __init__(self, message: str, family: str = "") -> None:
        super().__init__(message)
        self.family = family


class UnknownTaskValueException(InvalidParameterValueException, TaskClassNotFoundException):
    """A task-valued flag names no registered task: also the ``TaskClassNotFoundException`` Luigi raises."""


@dataclass(frozen=True)
class _Flag:
    """One generated flag: which parameter of which task it sets and where argparse stores it."""

    option: str
    dest: str
    family: str
    param_name: str
    param: Parameter[Any]


class CmdlineParser:
    """Parses ``[--module m] Family [--param v ...] [--Other-param v ...]`` against the task registry."""

    _instance: CmdlineParser | None = None

    @classmethod
    def get_instance(cls) -> CmdlineParser | None:
        """The active parser, or None outside ``global_instance``."""
        return cls._instance

    @classmethod
    @contextmanager
    def global_instance(
        cls, cmdline_args: Sequence[str], allow_override: bool = False
    ) -> Iterator[CmdlineParser]:
        """Parse ``cmdline_args`` and make the parser active for the duration of the block."""
        with cls(cmdline_args).active(allow_override) as parser:
            yield parser

    @contextmanager
    def active(self, allow_override: bool = False) -> Iterator[CmdlineParser]:
        """Make this parser the one parameters read their flags from for the duration of the block (the
        ``luigi`` command parses once, then runs with it active)."""
        cls = type(self)
        previous = cls._instance
        if previous is not None and not allow_override:
            raise RuntimeError("A CmdlineParser is already active; pass allow_override=True to replace it")
        cls._instance = self
        try:
            yield self
        finally:
            cls._instance = previous

    def __init__(self, cmdline_args: Sequence[str]) -> None:
        """Import ``--module``, find the root task, parse strictly and check every given value.

        Exits after printing help for ``--help``/``--help-all``; exits with "No task specified" without a
        task; raises ``TaskClassNotFoundException`` for an unknown family.
        """
        args = list(cmdline_args)
        _register_engine_flags()
        _import_module(_parse_leniently(_FlagSet.build(), args))
        # Parse again: the imported module may declare flags that change which word is the task.
        first_words = _parse_leniently(_FlagSet.build(), args)
        root_task = first_words.root_task
        wants_help_all = bool(getattr(first_words, "core_help_all", False))
        flags = _FlagSet.build(root_task=root_task, help_all=wants_help_all)
        if wants_help_all or getattr(first_words, "core_help", False):
            flags.parser.print_help()
            sys.exit(0)
        if not root_task:
            raise SystemExit("No task specified")
        Register.get_task_cls(root_task)
        self.known_args: argparse.Namespace = flags.parser.parse_args(args)
        self._root_task: str = root_task
        self._flags = flags
        self._check_values()

    def _get_task_cls(self) -> type:
        return Register.get_task_cls(self._root_task)

    def get_task_obj(self) -> Any:
        """Build the root task from its local ``--param`` flags (other values come via the parameters)."""
        return self._get_task_cls()(**self._get_task_kwargs())

    def _get_task_kwargs(self) -> dict[str, Any]:
        kwargs = {}
        for flag in self._flags.root_flags:
            raw = getattr(self.known_args, flag.dest, None)
            if raw:
                kwargs[flag.param_name] = _parse_flag_value(flag, raw)
        return kwargs

    def _check_values(self) -> None:
        """Parse every value given on the command line, so a bad one fails before anything runs."""
        for flag in self._flags.all_flags():
            raw = getattr(self.known_args, flag.dest, None)
            if raw:
                _parse_flag_value(flag, raw)


class _FlagSet:
    """An argparse parser plus the record of which flag belongs to which parameter."""

    def __init__(self) -> None:
        # Unique prefixes abbreviate flags, as in Luigi: ``--local`` is ``--local-scheduler``. The early
        # passes (finding ``--module`` and the task) also see a root-task flag as a prefix of the flags
        # known so far, so ``--b 4`` exits 2 with "ambiguous option" when several flags start with it.
        self.parser = argparse.ArgumentParser(
            add_help=False, allow_abbrev=True, formatter_class=_formatter_for_this_terminal()
        )
        self.parser.add_argument(
            "root_task", nargs="?", help="Task family to run. Is not optional.", metavar="Required root task"
        )
        self.global_flags: list[_Flag] = []
        self.root_flags: list[_Flag] = []
        self._options: set[str] = set()
        self._dests: set[str] = {"root_task"}

    @classmethod
    def build(cls, root_task: str | None = None, help_all: bool = False) -> _FlagSet:
        """Flags for every registered parameter; local ``--param`` flags too for the root task."""
        flags = cls()
        registered = list(Register.get_all_params())
        for family, without_section, param_name, param in registered:
            shown = help_all or family == root_task or param.always_in_help
            prefix = "" if without_section else f"{family}_"
            flag = _Flag(
                _option_for(prefix + param_name), f"{family}_{param_name}", family, param_name, param
            )
            if flags._add(flag, shown):
                flags.global_flags.append(flag)
        for family, _, param_name, param in registered:
            if family == root_task:
                dest = param_name if param_name not in flags._dests else f"_root_task_{param_name}"
                flag = _Flag(_option_for(param_name), dest, family, param_name, param)
                if flags._add(flag, shown=True):
                    flags.root_flags.append(flag)
        for option, dest, kwargs in _FALLBACK_FLAGS:
            if option not in flags._options:
                flags.parser.add_argument(option, dest=dest, **kwargs)
        return flags

    def _add(self, flag: _Flag, shown: bool) -> bool:
        """Add the flag unless its option string is taken (the first registered owner keeps it)."""
        if flag.option in self._options or flag.dest in self._dests:
            logger.debug("Not adding %s for %s.%s: already used", flag.option, flag.family, flag.param_name)
            return False
        kwargs = dict(flag.param._parser_kwargs(flag.param_name, flag.family))
        kwargs["dest"] = flag.dest
        if not shown:
            kwargs["help"] = argparse.SUPPRESS
        self.parser.add_argument(flag.option, **kwargs)
        self._options.add(flag.option)
        self._dests.add(flag.dest)
        return True

    def all_flags(self) -> list[_Flag]:
        return self.global_flags + self.root_flags


def _formatter_for_this_terminal() -> Any:
    """argparse's help formatter with the terminal's width read once: argparse makes a formatter for every
    flag it adds (to check its metavar), and reading the width each time was a fifth of a parse."""
    return functools.partial(argparse.HelpFormatter, width=shutil.get_terminal_size().columns - 2)


def _option_for(name: str) -> str:
    return "--" + name.replace("_", "-")


def _register_engine_flags() -> None:
    """Register the Configs behind the ``luigi`` command's own flags (``core``, ``[scheduler]``, ``[worker]``,
    the e-mails) and the Range* tasks: ``luigi.interface`` does, and ``import luigi`` leaves it for now."""
    import luigi.interface  # noqa: F401 - imported for its registrations


def _parse_leniently(flags: _FlagSet, args: list[str]) -> argparse.Namespace:
    """Parse what is known so far, ignoring flags of tasks whose module is not imported yet."""
    return flags.parser.parse_known_args(args)[0]


def _import_module(known_args: argparse.Namespace) -> None:
    module = getattr(known_args, "core_module", None)
    if module:
        importlib.import_module(module)


def _parse_flag_value(flag: _Flag, raw: Any) -> Any:
    """The parsed value of a flag, or an InvalidParameterValueException naming flag, parameter and value."""
    try:
        return flag.param.parse(raw)
    except (ValueError, TypeError, TaskClassException) as exc:
        detail = str(exc) or type(exc).__name__
        value_part = "" if str(raw) in detail else f" {raw!r}"
        not_found = isinstance(exc, TaskClassNotFoundException) or isinstance(
            exc.__cause__, TaskClassNotFoundException
        )
        error = UnknownTaskValueException if not_found else InvalidParameterValueException
        raise error(
            f"Invalid value{value_part} for {flag.option} (parameter '{flag.param_name}' of {flag.family}): "
            f"{detail}",
            flag.family,
        ) from exc
