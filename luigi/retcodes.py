"""Exit codes of the ``luigi`` command, so cron and CI can tell a failed task from a missing input.

Each outcome has a ``[retcode]`` option; the process exits with the largest code among the outcomes that
happened. Only ``unhandled_exception`` is non-zero by default (4), as in Luigi.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from luigi import execution_summary, parameter
from luigi.task import Config

if TYPE_CHECKING:
    from luigi.cmdline_parser import CmdlineParser

__all__ = ["retcode", "run_with_retcodes"]

logger = logging.getLogger("luigi-interface")


class retcode(Config):
    """``[retcode]``: the exit code for each kind of outcome (the highest applicable one wins)."""

    unhandled_exception = parameter.IntParameter(
        default=4, description="Exit code when luigi itself hits an unexpected error."
    )
    missing_data = parameter.IntParameter(
        default=0, description="Exit code when external dependencies (ExternalTask outputs) are missing."
    )
    task_failed = parameter.IntParameter(default=0, description="Exit code when a task's run() failed.")
    already_running = parameter.IntParameter(
        default=0, description="Exit code when the pid lock or another worker is already running the work."
    )
    scheduling_error = parameter.IntParameter(
        default=0, description="Exit code when complete() or requires() raised, or the task limit was hit."
    )
    not_run = parameter.IntParameter(
        default=0, description="Exit code when the scheduler did not grant a task permission to run."
    )


# Which summary category triggers which [retcode] option.
_CONDITIONS = (
    ("still_pending_ext", "missing_data"),
    ("failed", "task_failed"),
    ("run_by_other_worker", "already_running"),
    ("scheduling_error", "scheduling_error"),
    ("not_run", "not_run"),
)


def run_with_retcodes(argv: Sequence[str]) -> NoReturn:
    """Run the command line ``argv`` (without the program name) and exit with the matching code.

    As in Luigi, what goes wrong before the run starts (the command line names no task or module that
    exists, a config file is malformed) exits 1; what goes wrong in the run (the root task cannot be
    built, the scheduler cannot be reached, a bug) exits ``[retcode] unhandled_exception`` (4). Input
    errors print one line in the form of the last line of Python's traceback, with no traceback.
    """
    from luigi import interface

    argv = list(argv)
    parser = _parse_command_line(argv)
    # One parse serves the [retcode] values, the run and the exit code (requires() may read its flags).
    with parser.active():
        codes = _read_retcodes(argv)
        try:
            worker = interface.run_parsed(parser).worker
        except interface.PidLockAlreadyTakenExit:
            sys.exit(codes.already_running)
        except Exception as exc:
            if isinstance(exc, _user_errors()):
                _report_user_error(exc, argv)
            else:
                _log_unhandled(exc, argv)
            sys.exit(codes.unhandled_exception)
        sys.exit(_exit_code_for(worker, codes))


# Luigi reads its command line and ``[retcode]`` before its run starts, outside the handler of the run's
# exceptions: what fails there is Python's own uncaught exception, exit status 1.
_BEFORE_THE_RUN = 1


def _parse_command_line(argv: list[str]) -> CmdlineParser:
    """The parsed command line; a bad one is reported and ends us.

    The command line is parsed before anything runs, so mistakes in it (unknown task, a misspelt
    ``--module``) are reported first. A flag value that does not parse is one Luigi finds building the
    task, in the run (exit ``unhandled_exception``), unless it is a ``--retcode-*`` one.
    """
    from luigi.cmdline_parser import CmdlineParser, InvalidParameterValueException

    try:
        return CmdlineParser(argv)
    except InvalidParameterValueException as exc:
        _report_user_error(exc, argv)
        sys.exit(_BEFORE_THE_RUN if exc.family == "retcode" else _configured_unhandled_exception_code())
    except ModuleNotFoundError as exc:
        if not _is_missing_module_flag(exc, argv):
            raise  # a bug inside the user's module: Python's traceback says where, as in Luigi
        _report_user_error(exc, argv)
    except _user_errors() as exc:
        _report_user_error(exc, argv)
    sys.exit(_BEFORE_THE_RUN)


def _read_retcodes(argv: list[str]) -> Any:
    """The ``[retcode]`` values, the active command line's ``--retcode-*`` flags over the config; values
    that cannot be read are reported and end us before the run."""
    try:
        return retcode()
    except _user_errors() as exc:
        _report_user_error(exc, argv)
    sys.exit(_BEFORE_THE_RUN)


def _configured_unhandled_exception_code() -> int:
    try:
        return retcode().unhandled_exception
    except Exception:  # [retcode] itself is unreadable: Luigi's default
        return 4


def _is_missing_module_flag(exc: ModuleNotFoundError, argv: list[str]) -> bool:
    """True when ``exc`` says the module named by ``--module`` itself (or its package) does not exist."""
    requested = _module_flag(argv)
    return bool(exc.name and requested and (requested + ".").startswith(exc.name + "."))


def _module_flag(argv: list[str]) -> str | None:
    for index, arg in enumerate(argv):
        if arg == "--module" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--module="):
            return arg.split("=", 1)[1]
    return None


def _exit_code_for(worker: Any, codes: Any) -> int:
    task_sets = execution_summary._summary_dict(worker)
    code = max(getattr(codes, option) if task_sets[category] else 0 for category, option in _CONDITIONS)
    if code == 0:
        root = execution_summary._root_task(worker)
        if root not in task_sets["completed"] and root not in task_sets["already_done"]:
            return codes.not_run
    return code


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean the command line, the config or the scheduler URL is wrong: one line each."""
    from luigi.configuration import ConfigError
    from luigi.parameter import ParameterException
    from luigi.rpc import NoSchedulerError
    from luigi.task_register import TaskClassException

    # Bad command-line values raise a ParameterException too; ConfigError names the file and line.
    return (TaskClassException, ParameterException, ConfigError, NoSchedulerError)


def _report_user_error(exc: BaseException, argv: list[str]) -> None:
    """Print ``exc`` as the last line of its traceback would read, with a hint where one helps."""
    print(f"{qualified_name(type(exc))}: {_explained(exc, argv)}", file=sys.stderr)


def qualified_name(cls: type) -> str:
    """``cls`` as users import it: ``luigi.parameter.MissingParameterException`` for a class defined in
    ``luigi.parameter.base``; a builtin's bare name, as Python's tracebacks print it."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    parts = cls.__module__.split(".")
    for length in range(min(2, len(parts)), len(parts)):
        package = sys.modules.get(".".join(parts[:length]))
        if package is not None and getattr(package, cls.__qualname__, None) is cls:
            return f"{package.__name__}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _explained(exc: BaseException, argv: list[str]) -> str:
    """``exc``'s message in one line, and what to do when a task or module cannot be found."""
    from luigi.task_register import TaskClassNotFoundException

    module = _module_flag(argv)
    if isinstance(exc, ModuleNotFoundError) and module:
        return (
            f"{_one_line(exc)}; --module {module} is imported from the Python path: run from the folder "
            "holding it with PYTHONPATH=. (or install it)"
        )
    if isinstance(exc, TaskClassNotFoundException) and exc.task_name and not module:
        # The candidates would be luigi's own classes: the task is most likely in a module not loaded.
        return (
            f"No task {exc.task_name}, and no --module was given: name the module that defines it, "
            f"e.g. luigi --module my_tasks {exc.task_name}"
        )
    return _one_line(exc)


def _log_unhandled(exc: BaseException, argv: list[str]) -> None:
    """Set up logging if the failure came before it was, then log "Uncaught exception in luigi" in one line.

    The traceback follows at debug level (shown by default: ``--log-level`` is DEBUG).
    """
    from luigi.setup_logging import InterfaceLogging

    options = _core_options(argv)
    if options is None:
        InterfaceLogging.setup()
    else:
        InterfaceLogging.setup(options)
    logger.error("Uncaught exception in luigi: %s: %s", type(exc).__name__, _one_line(exc))
    logger.debug("Traceback of the uncaught exception:", exc_info=exc)


def _core_options(argv: list[str]) -> Any:
    """``[core]`` with the command line's ``--log-level`` etc. when given and parseable, else from config."""
    from luigi import interface
    from luigi.cmdline_parser import CmdlineParser

    try:
        with CmdlineParser.global_instance(argv):
            return interface.core()
    except Exception:  # the same bad input may break parsing again; settle for the config file
        pass
    try:
        return interface.core()
    except Exception:  # even [core] is unreadable: logging set-up falls back to its defaults
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        text = str(exc.args[0])
    return " ".join(text.split()) or type(exc).__name__
