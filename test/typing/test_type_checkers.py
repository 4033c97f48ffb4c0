"""mypy and pyright see a task's parameters with their value types, as they do with Luigi 3.8.1.

Both check ``pipeline_sample.py``: every line with a ``reveals`` comment must show that type (module
prefixes dropped, since mypy writes ``datetime.date`` where pyright writes ``date``), the typical
requires/output/input code in it must check clean, and mypy with ``plugins = luigi.mypy`` must report
exactly the lines with a ``plugin-error`` comment.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# mypy analyses the whole luigi package on its first run (twice: with and without the plugin).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SAMPLE = Path(__file__).with_name("pipeline_sample.py")
REPO = Path(__file__).resolve().parents[2]
MYPY_LINE = re.compile(r"^pipeline_sample\.py:(\d+): (error|note): (.*)$")
REVEALED = re.compile(r'^(?:Revealed type is|Type of ".*" is) "(.*)"$')


def marked_lines(marker: str) -> dict[int, str]:
    """The text after ``# marker: `` on each line of the sample that has one, by line number."""
    found = {}
    for number, line in enumerate(SAMPLE.read_text().splitlines(), start=1):
        if f"# {marker}: " in line:
            found[number] = line.split(f"# {marker}: ", 1)[1].strip()
    return found


def without_modules(type_text: str) -> str:
    """``datetime.date | None`` -> ``date | None``: the two checkers qualify names differently."""
    return re.sub(r"\b(?:\w+\.)+(?=\w)", "", type_text)


class Report:
    """What one checker said about the sample: revealed types and problems, by line."""

    def __init__(self) -> None:
        self.revealed: dict[int, str] = {}
        self.problems: dict[int, str] = {}

    def add(self, line: int, message: str, is_problem: bool) -> None:
        if is_problem:
            self.problems[line] = self.problems.get(line, "") + message
            return
        match = REVEALED.match(message)
        if match:
            self.revealed[line] = without_modules(match.group(1))


def checker_env() -> dict[str, str]:
    """The environment with this tree first on the path, so the checkers read this luigi."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_mypy(workdir: Path, plugin: bool) -> Report:
    name = "with_plugin" if plugin else "without_plugin"
    config = workdir / f"{name}.ini"
    config.write_text("[mypy]\ncheck_untyped_defs = True\n" + ("plugins = luigi.mypy\n" if plugin else ""))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(workdir / name),
         "--no-error-summary", "pipeline_sample.py"],
        cwd=workdir, env=checker_env(), capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report = Report()
    for line in done.stdout.splitlines():
        match = MYPY_LINE.match(line)
        if match:
            report.add(int(match.group(1)), match.group(3), is_problem=match.group(2) == "error")
    return report


def pyright_command() -> list[str]:
    """How to run pyright here: the PyPI package (the test extra), else an npm install on the PATH."""
    if importlib.util.find_spec("pyright") is not None:
        return [sys.executable, "-m", "pyright"]
    found = shutil.which("pyright")
    if found:
        return [found]
    message = "pyright is not installed (pip install pyright, part of the test extra)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def run_pyright(workdir: Path) -> Report:
    config = workdir / "pyrightconfig.json"
    config.write_text(json.dumps({"include": ["pipeline_sample.py"], "extraPaths": [str(REPO)]}))
    done = subprocess.run(
        [*pyright_command(), "--project", str(config), "--pythonpath", sys.executable, "--outputjson"],
        cwd=workdir, env=checker_env(), capture_output=True, text=True, timeout=800,
    )  # fmt: skip
    assert "{" in done.stdout, done.stdout + done.stderr
    output = json.loads(done.stdout[done.stdout.index("{") :])
    report = Report()
    for diagnostic in output["generalDiagnostics"]:
        line = diagnostic["range"]["start"]["line"] + 1  # pyright counts from 0
        report.add(line, diagnostic["message"], is_problem=diagnostic["severity"] != "information")
    return report


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("type_checkers")
    shutil.copy(SAMPLE, root / SAMPLE.name)
    return root


# One test per checker run: under pytest-xdist a module-scoped fixture would run once per worker.


def test_the_sample_marks_every_parameter_kind_and_some_wrong_calls():
    assert len(marked_lines("reveals")) >= 40
    assert len(marked_lines("plugin-error")) >= 3


def test_mypy_sees_each_parameter_as_its_value_type_and_typical_code_checks_clean(workdir: Path):
    report = run_mypy(workdir, plugin=False)
    assert report.revealed == marked_lines("reveals")
    assert report.problems == {}


def test_pyright_sees_each_parameter_as_its_value_type_and_typical_code_checks_clean(workdir: Path):
    report = run_pyright(workdir)
    assert report.revealed == marked_lines("reveals")
    assert report.problems == {}


def test_the_mypy_plugin_keeps_the_value_types_and_reports_exactly_the_wrong_arguments(workdir: Path):
    report = run_mypy(workdir, plugin=True)
    assert report.revealed == marked_lines("reveals")
    expected = marked_lines("plugin-error")
    assert sorted(report.problems) == sorted(expected), report.problems
    for line, text in expected.items():
        assert text in report.problems[line], (line, report.problems[line])


def test_the_package_ships_its_py_typed_marker():
    """PEP 561: an installed luigi is read for types only when py.typed is packaged beside its modules."""
    tomllib = pytest.importorskip("tomllib")
    assert (REPO / "luigi" / "py.typed").is_file()
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["*"]
