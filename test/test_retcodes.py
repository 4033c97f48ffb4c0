"""Exit codes of ``luigi``: ``run_with_retcodes`` maps the run's outcome to the ``[retcode]`` options."""

from __future__ import annotations

import logging
import re
import sys
import textwrap

import pytest

import luigi.interface  # noqa: F401 - registers [core] before the conftest snapshots the task registry
from luigi import configuration
from luigi.retcodes import retcode, run_with_retcodes
from luigi.setup_logging import InterfaceLogging

PIPELINE = textwrap.dedent(
    """
    from luigi.local_target import LocalTarget
    from luigi.parameter import IntParameter
    from luigi.task import ExternalTask, Task, WrapperTask


    class Data(ExternalTask):
        def output(self):
            return LocalTarget("data.txt")


    class Ok(Task):
        def output(self):
            return LocalTarget("ok.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("ok")


    class Fails(Task):
        def output(self):
            return LocalTarget("never.txt")

        def run(self):
            raise RuntimeError("task broke")


    class NeedsData(Task):
        def requires(self):
            return Data()

        def output(self):
            return LocalTarget("needs-data.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("ok")


    class BadComplete(Task):
        def complete(self):
            raise RuntimeError("complete broke")


    class FailsAndNeedsData(WrapperTask):
        def requires(self):
            return [Fails(), NeedsData()]


    class Numbered(Task):
        n = IntParameter()

        def output(self):
            return LocalTarget(f"numbered-{self.n}.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("ok")


    class Broken(Task):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            raise RuntimeError("init broke")
    """
)


@pytest.fixture
def pipeline(tmp_path, monkeypatch):
    """An importable module of tasks (unique name per test); outputs land in tmp_path."""
    name = "retcode_pipeline_" + re.sub(r"\W", "_", tmp_path.name)
    (tmp_path / f"{name}.py").write_text(PIPELINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    # Logging is process-wide: keep the client set-up from adding handlers to pytest's process.
    monkeypatch.setattr(InterfaceLogging, "_configured", True)
    yield name
    sys.modules.pop(name, None)


def exit_code(*argv: str) -> int | str | None:
    with pytest.raises(SystemExit) as exit_info:
        run_with_retcodes(list(argv))
    return exit_info.value.code


def run_task(module: str, *argv: str) -> int | str | None:
    return exit_code("--module", module, *argv, "--local-scheduler", "--no-lock")


def _set(option: str, value: int) -> None:
    configuration.get_config().set("retcode", option, str(value))


def test_defaults_are_four_for_unhandled_exceptions_and_zero_otherwise():
    codes = retcode()
    assert codes.unhandled_exception == 4
    assert [codes.missing_data, codes.task_failed, codes.already_running] == [0, 0, 0]
    assert [codes.scheduling_error, codes.not_run] == [0, 0]


def test_successful_run_exits_zero(pipeline, tmp_path):
    _set("task_failed", 20)
    assert run_task(pipeline, "Ok") == 0
    assert (tmp_path / "ok.txt").read_text() == "ok"


def test_already_complete_root_exits_zero(pipeline, tmp_path):
    (tmp_path / "ok.txt").write_text("done before")
    _set("not_run", 40)
    assert run_task(pipeline, "Ok") == 0


def test_failed_task_exits_zero_by_default(pipeline):
    assert run_task(pipeline, "Fails") == 0


def test_failed_task_exits_with_configured_code(pipeline):
    _set("task_failed", 20)
    assert run_task(pipeline, "Fails") == 20


def test_retcode_flag_overrides_the_config(pipeline):
    _set("task_failed", 20)
    assert run_task(pipeline, "Fails", "--retcode-task-failed", "30") == 30


def test_missing_external_data_exits_with_missing_data(pipeline):
    _set("missing_data", 10)
    assert run_task(pipeline, "NeedsData") == 10


def test_scheduling_error_exits_with_scheduling_error(pipeline):
    _set("scheduling_error", 35)
    assert run_task(pipeline, "BadComplete") == 35


def test_highest_applicable_code_wins(pipeline):
    _set("missing_data", 10)
    _set("task_failed", 20)
    assert run_task(pipeline, "FailsAndNeedsData") == 20
    _set("missing_data", 25)
    assert run_task(pipeline, "FailsAndNeedsData") == 25


def test_root_task_not_done_falls_back_to_not_run(pipeline):
    _set("not_run", 40)  # the failure itself maps to 0, but the root task did not complete
    assert run_task(pipeline, "Fails") == 40


class _Records(logging.Handler):
    """Collects records straight from the logger, whatever other tests did to propagation."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_unexpected_exception_exits_with_unhandled_exception_and_is_logged(pipeline):
    collected = _Records()
    logger = logging.getLogger("luigi-interface")
    logger.addHandler(collected)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        assert run_task(pipeline, "Broken") == 4
    finally:
        logger.removeHandler(collected)
        logger.setLevel(level)
    errors = [r for r in collected.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == ["Uncaught exception in luigi: RuntimeError: init broke"]
    debug = [r for r in collected.records if r.levelno == logging.DEBUG and r.exc_info]
    assert debug and "init broke" in str(debug[0].exc_info[1])


def test_unhandled_exception_code_is_configurable(pipeline):
    _set("unhandled_exception", 7)
    assert run_task(pipeline, "Broken") == 7


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_unknown_task_family_is_one_line_with_a_suggestion_exit_1_as_in_luigi(pipeline, capsys):
    assert run_task(pipeline, "Numberd") == 1
    line = _one_error_line(capsys)
    assert line.startswith("luigi.task_register.TaskClassNotFoundException: No task Numberd.")
    assert "Did you mean: Numbered" in line


def test_bad_parameter_value_is_one_line_naming_flag_and_value_exit_4_as_in_luigi(pipeline, capsys):
    assert run_task(pipeline, "Numbered", "--n", "abc") == 4
    line = _one_error_line(capsys)
    assert line.startswith("luigi.cmdline_parser.InvalidParameterValueException: Invalid value for --n ")
    assert "'abc'" in line


def test_missing_root_parameter_is_luigis_last_traceback_line_exit_4(pipeline, capsys):
    assert run_task(pipeline, "Numbered") == 4
    assert _one_error_line(capsys) == (
        "luigi.parameter.MissingParameterException: "
        "Numbered[args=(), kwargs={}]: requires the 'n' parameter to be set"
    )


def test_no_task_specified_exits_with_that_message(pipeline):
    assert exit_code("--module", pipeline, "--local-scheduler") == "No task specified"


def test_misspelt_module_is_one_line_saying_how_to_import_it_exit_1(pipeline, capsys):
    assert exit_code("--module", pipeline + "_typo", "Ok", "--local-scheduler") == 1
    assert _one_error_line(capsys) == (
        f"ModuleNotFoundError: No module named '{pipeline}_typo'; --module {pipeline}_typo is imported "
        "from the Python path: run from the folder holding it with PYTHONPATH=. (or install it)"
    )


def test_module_that_fails_to_import_raises_for_pythons_own_traceback(pipeline, tmp_path):
    # Luigi imports --module before its run starts: the error leaves as Python's own (exit 1, traceback).
    (tmp_path / f"{pipeline}_broken.py").write_text("import a_module_nobody_wrote\n")
    with pytest.raises(ModuleNotFoundError, match="a_module_nobody_wrote"):
        run_with_retcodes(["--module", f"{pipeline}_broken", "Ok", "--local-scheduler"])


def test_malformed_config_file_is_one_line_naming_it_exit_1(pipeline, tmp_path, capsys):
    broken = tmp_path / "broken.cfg"
    broken.write_text("[core\nx = 1\n")
    configuration.add_config_path(str(broken))
    assert run_task(pipeline, "Ok") == 1
    line = _one_error_line(capsys)
    assert line.startswith("luigi.configuration.ConfigError: ") and "broken.cfg" in line and "line 1" in line


def test_bad_retcode_flag_value_exits_1_as_luigi_reads_retcode_before_its_run(pipeline, capsys):
    assert run_task(pipeline, "Ok", "--retcode-task-failed", "many") == 1
    assert _one_error_line(capsys).startswith(
        "luigi.cmdline_parser.InvalidParameterValueException: Invalid value for --retcode-task-failed"
    )
