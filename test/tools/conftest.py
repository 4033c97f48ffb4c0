"""A pipeline module in tmp and a way to run the tool commands on it as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

# The small pipeline the commands run on: Report needs Clean (which fails) and Lookup; Clean needs Raw.
PIPELINE = """
import os

import luigi

DATA = os.environ["TOOLS_DATA"]


def target(name):
    return luigi.LocalTarget(os.path.join(DATA, name))


class Raw(luigi.ExternalTask):
    day = luigi.DateParameter()

    def output(self):
        return target(f"raw-{self.day}.txt")


class Lookup(luigi.ExternalTask):
    def output(self):
        return target("lookup.txt")


class Clean(luigi.Task):
    day = luigi.DateParameter()

    def requires(self):
        return Raw(self.day)

    def output(self):
        return target(f"clean-{self.day}.txt")

    def run(self):
        raise RuntimeError("clean is broken today")


class Report(luigi.Task):
    day = luigi.DateParameter()
    note = luigi.Parameter(default="x", significant=False)

    def requires(self):
        return [Clean(self.day), Lookup()]

    def output(self):
        return {"csv": target(f"report-{self.day}.csv"), "json": target(f"report-{self.day}.json")}
"""


@dataclass
class Pipeline:
    """Where the pipeline module and its data live, and the environment to run commands in."""

    root: Path
    data: Path
    env: dict[str, str]

    def run(self, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``command`` (a console script of the venv) with ``args``; its output as text."""
        done = subprocess.run(
            [str(BIN / command), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check:
            assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done


@pytest.fixture
def pipeline(tmp_path: Path) -> Pipeline:
    root = tmp_path / "proj"
    data = root / "data"
    data.mkdir(parents=True)
    (root / "tools_pipeline.py").write_text(PIPELINE)
    config = root / "client.cfg"
    config.write_text("[core]\nno_lock = true\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LUIGI_CONFIG_PARSER", "LUIGI_AUTH_TOKEN")}
    env.update(TOOLS_DATA=str(data), LUIGI_CONFIG_PATH=str(config), NO_COLOR="")
    env["PYTHONPATH"] = f"{root}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return Pipeline(root, data, env)
