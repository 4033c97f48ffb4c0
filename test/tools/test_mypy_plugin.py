"""``plugins = luigi.mypy``: mypy checks Task constructor calls against the parameters declared on the class.

Each sample line marked ``# E: <text>`` must get a mypy error containing that text, and no other line may
get one; the same sample without the plugin shows what the plugin adds.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# mypy analyses the whole luigi package on its first run: allow for a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BASE_MODULE = """
import luigi


class Base(luigi.Task):
    when = luigi.DateHourParameter()
    maybe = luigi.OptionalIntParameter(default=None)
"""

SAMPLE = """
from __future__ import annotations

import datetime
import enum
from pathlib import Path
from typing import Any

import luigi
from luigi.util import requires

from base_tasks import Base


class Color(enum.Enum):
    RED = 1


class Report(luigi.Task):
    day = luigi.DateParameter()
    copies = luigi.IntParameter(default=1)
    label = luigi.Parameter(default="x")
    ratio = luigi.OptionalFloatParameter(default=None)
    dry = luigi.BoolParameter()
    color = luigi.EnumParameter(enum=Color, default=Color.RED)
    key = luigi.Parameter(positional=False)
    stamp = luigi.DateSecondParameter(default=None, positional=False)


class Child(Report):
    extra = luigi.ListParameter(default=[])
    copies = luigi.IntParameter(default=2)


class Sub(Base):
    n = luigi.IntParameter(default=3)


class Custom(luigi.Task):
    a = luigi.IntParameter()

    def __init__(self, anything: str) -> None:
        super().__init__(a=int(anything))


class Annotated(luigi.Task):
    size: int = luigi.IntParameter(default=3)
    where: Path = luigi.Parameter()
    sizes = luigi.IntParameter(default=1)


@requires(Report)
class Decorated(luigi.Task):
    n = luigi.IntParameter()


class Wide(luigi.Task):
    items = luigi.ListParameter()
    where = luigi.PathParameter()
    colors = luigi.EnumListParameter(enum=Color)
    mode = luigi.ChoiceParameter(choices=["a", "b"])
    level = luigi.NumericalParameter(var_type=int, min_value=0, max_value=9)
    note = luigi.OptionalParameter()
    bounds: luigi.Parameter[Any] = luigi.OptionalParameter(default=None)


DAY = datetime.date(2024, 1, 1)
Report(day=DAY, key="k")
Report(DAY, 2, "label", key="k")
Report(day=DAY, key="k", ratio=None, dry=True, color=Color.RED)
Report(day=DAY, key="k", ratio=0.5, stamp=datetime.datetime(2024, 1, 1, 1, 2, 3))
Report(day="2024-01-01", key="k")  # E: Argument "day" to "Report" has incompatible type "str"
Report(key="k")  # E: Missing positional argument "day" in call to "Report"
Report(day=DAY)  # E: Missing named argument "key" for "Report"
Report(day=DAY, key="k", copies="2")  # E: Argument "copies" to "Report" has incompatible type "str"
Report(day=DAY, key="k", nope=1)  # E: Unexpected keyword argument "nope" for "Report"
Report(day=DAY, key="k", ratio="0.5")  # E: expected "float | None"
Report(day=DAY, key="k", color=1)  # E: expected "Color"
Report(DAY, 1, "label", 0.5, False, Color.RED, "k")  # E: Too many positional arguments for "Report"
Child(day=DAY, key="k", extra=[1, 2], copies=3)
Child(day=DAY, key="k", copies="3")  # E: Argument "copies" to "Child" has incompatible type "str"
Sub(when=datetime.datetime(2024, 1, 1, 5), maybe=None, n=4)
Sub(when=DAY)  # E: Argument "when" to "Sub" has incompatible type "date"; expected "datetime"
Sub(when=datetime.datetime(2024, 1, 1, 5), maybe="x")  # E: expected "int | None"
Custom("7")
Custom(a=7)  # E: Unexpected keyword argument "a" for "Custom"
Annotated(where=Path("/tmp"))
Annotated(where="/tmp")  # E: Argument "where" to "Annotated" has incompatible type "str"; expected "Path"
Annotated(where=Path("/tmp"), size="3")  # E: Argument "size" to "Annotated" has incompatible type "str"
Annotated(where=Path("/tmp")).size + 1
Annotated(where=Path("/tmp")).sizes.anything_goes  # E: "int" has no attribute "anything_goes"
Decorated(n=1, day=DAY, key="k")
Decorated(n="1")  # E: Argument "n" to "Decorated" has incompatible type "str"; expected "int"
Wide([1], "/tmp", [Color.RED], "a", 3)
Wide((1,), Path("/tmp"), (Color.RED,), "b", 0, "text", object())
Wide(1, "/tmp", [Color.RED], "a", 3)  # E: incompatible type "int"; expected "Sequence[Any]"
Wide([1], 1, [Color.RED], "a", 3)  # E: Argument 2 to "Wide" has incompatible type "int"
Wide([1], "/tmp", [1], "a", 3)  # E: List item 0 has incompatible type "int"; expected "Color"
Wide([1], "/tmp", [Color.RED], 1, 3)  # E: Argument 4 to "Wide" has incompatible type "int"; expected "str"
Wide([1], "/tmp", [Color.RED], "a", "3")  # E: incompatible type "str"; expected "int"
Wide([1], "/tmp", [Color.RED], "a", 3, note=1)  # E: incompatible type "int"; expected "str | None"
"""

ERROR_LINE = re.compile(r"^sample\.py:(\d+): error: (.*)$")


def run_mypy(workdir: Path, plugin: bool) -> dict[int, str]:
    """Run mypy on sample.py (with or without the plugin); its errors by line."""
    config = workdir / ("with.ini" if plugin else "without.ini")
    config.write_text("[mypy]\n" + ("plugins = luigi.mypy\n" if plugin else ""))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(workdir / "cache"),
         "--no-error-summary", "sample.py"],
        cwd=workdir, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stdout + done.stderr
    errors: dict[int, str] = {}
    for line in done.stdout.splitlines():
        match = ERROR_LINE.match(line)
        if match:
            errors[int(match.group(1))] = errors.get(int(match.group(1)), "") + match.group(2)
    return errors


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mypy_plugin")
    (root / "base_tasks.py").write_text(textwrap.dedent(BASE_MODULE))
    (root / "sample.py").write_text(SAMPLE)
    return root


def expected_errors() -> dict[int, str]:
    marked = {}
    for number, line in enumerate(SAMPLE.splitlines(), start=1):
        if "# E: " in line:
            marked[number] = line.split("# E: ", 1)[1]
    return marked


def test_the_plugin_reports_exactly_the_wrong_calls(workdir):
    errors = run_mypy(workdir, plugin=True)
    expected = expected_errors()
    assert sorted(errors) == sorted(expected), errors
    for number, text in expected.items():
        assert text in errors[number], (number, errors[number])


def test_without_the_plugin_mypy_sees_no_parameters_at_all(workdir):
    errors = run_mypy(workdir, plugin=False)
    # No call is checked but the one to a class with its own __init__; annotations naming the value clash
    # with the parameter assigned, and the values are typed (sizes is an int).
    assert [SAMPLE.splitlines()[number - 1].split("  #")[0].strip() for number in sorted(errors)] == [
        "size: int = luigi.IntParameter(default=3)",
        "where: Path = luigi.Parameter()",
        "Custom(a=7)",
        'Annotated(where=Path("/tmp")).sizes.anything_goes',
    ]
