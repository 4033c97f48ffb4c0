"""Exit codes of the ``luigi`` command, so cron and CI can tell a failed task from a missing input.

Each outcome has a ``[retcode]`` option; the process exits with the largest code among the outcomes that
happened. Only ``unhandled_exception`` is non-zero by default (4), as in Luigi.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from luigi import execution_summary, parameter
from luigi.task import Config

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
    """Run the command line ``argv`` (without the program name) and exit with the matching code."""
    from luigi import interface
    from luigi.cmdline_parser import CmdlineParser

    argv = list(argv)
    codes = _read_retcodes(argv)
    try:
        worker = interface._run(argv).worker
    except interface.PidLockAlreadyTakenExit:
        sys.exit(codes.already_running)
    except Exception as exc:  # e.g. the root task cannot be built: logged as Luigi does, in one line
        _log_unhandled(exc, argv)
        sys.exit(codes.unhandled_exception)
    with CmdlineParser.global_instance(argv):  # tasks' requires() may read --Family-param values
        sys.exit(_exit_code_for(worker, codes))


def _read_retcodes(argv: list[str]) -> Any:
    """The ``[retcode]`` values, honouring ``--retcode-*`` flags; a bad command line is reported and ends us.

    The command line is parsed here first, so mistakes in it (unknown task, a misspelt ``--module``) are
    reported before anything runs. A value that does not parse is what Luigi finds building the task:
    logged as an uncaught exception, like the other failures to build it.
    """
    from luigi.cmdline_parser import CmdlineParser, InvalidParameterValueException

    try:
        with CmdlineParser.global_instance(argv):
            return retcode()
    except InvalidParameterValueException as exc:
        _log_unhandled(exc, None)
    except _user_errors() as exc:
        _report_user_error(exc)
    except ModuleNotFoundError as exc:
        if _is_missing_module_flag(exc, argv):
            _report_user_error(exc)
        else:  # a bug inside the user's module: the traceback says where
            _log_unhandled(exc, None)
    except Exception as exc:  # e.g. the --module raised on import, or a [retcode] value does not parse
        _log_unhandled(exc, None)
    sys.exit(_configured_unhandled_exception_code())


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
    """Exceptions that mean the command line or config is wrong, reported without a traceback."""
    from luigi.configuration import ConfigError
    from luigi.parameter import ParameterException
    from luigi.task_register import TaskClassException

    # Bad command-line values raise a ParameterException too; ConfigError names the file and line.
    return (TaskClassException, ParameterException, ConfigError)


def _report_user_error(exc: BaseException) -> None:
    print(f"luigi: error: {_one_line(exc)}", file=sys.stderr)


def _log_unhandled(exc: BaseException, argv: list[str] | None) -> None:
    """Set up logging if the failure came before it was, then log "Uncaught exception in luigi" in one line.

    The traceback follows at debug level, except for a bad parameter or config value (it says it all).
    """
    from luigi.setup_logging import InterfaceLogging

    options = _core_options(argv)
    if options is None:
        InterfaceLogging.setup()
    else:
        InterfaceLogging.setup(options)
    logger.error("Uncaught exception in luigi: %s: %s", type(exc).__name__, _one_line(exc))
    if not isinstance(exc, _user_errors()):
        logger.debug("Traceback of the uncaught exception:", exc_info=exc)


def _core_options(argv: list[str] | None) -> Any:
    """``[core]`` with the command line's ``--log-level`` etc. when given and parseable, else from config."""
    from luigi import interface
    from luigi.cmdline_parser import CmdlineParser

    if argv is not None:
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
