"""``python -m bench.compare``, the one benchmark entry point: a JSON line per run, then a markdown table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULT_KEYS = {
    "workload",
    "mode",
    "n",
    "side",
    "checkout",
    "wall_s",
    "floor_s",
    "overhead_us_per_task",
    "round",
}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def run_bench(*args: str, bench_root: Path) -> subprocess.CompletedProcess[str]:
    """``python -m bench.compare ARGS`` from the checkout's root, its outputs under ``bench_root``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_ROOT": str(bench_root)}
    command = [sys.executable, "-m", "bench.compare", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=580)


def compare(*args: str, bench_root: Path) -> tuple[list[dict], str]:
    """The bench's JSON lines, and the rest of its output (the table)."""
    done = run_bench(*args, bench_root=bench_root)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    results = [json.loads(line) for line in lines if line.startswith("{")]
    table = "\n".join(line for line in lines if not line.startswith("{"))
    return results, table


def test_quick_runs_every_quick_workload_once_beside_its_floor(tmp_path):
    results, table = compare("--quick", "--rounds", "1", "--sizes", "10", bench_root=tmp_path)

    assert [r["workload"] for r in results] == [
        "tiny",
        "wide",
        "noop-complete",
        "startup-fresh",
        "startup-complete",
        "import",
    ]
    for result in results:
        assert RESULT_KEYS <= result.keys(), result
        assert result["side"] == "this" and result["checkout"] == str(ROOT)
        assert result["ok"] is True
        assert result["wall_s"] > 0 and result["floor_s"] > 0
        expected = (result["wall_s"] - result["floor_s"]) / result["n"] * 1e6
        assert result["overhead_us_per_task"] == pytest.approx(expected, abs=0.01)
    sizes = {r["workload"]: r["n"] for r in results}
    assert sizes == {
        "tiny": 10,
        "wide": 10,
        "noop-complete": 10,
        "startup-fresh": 11,
        "startup-complete": 11,
        "import": 1,
    }
    assert {r["mode"] for r in results if r["workload"] in ("tiny", "wide", "noop-complete")} == {"local-w1"}
    assert all(r["cpu_s"] > 0 for r in results if r["mode"] == "process")
    assert "| workload | mode | N | side | runs | wall s |" in table
    assert "| startup-complete | process | 11 | this | 1 |" in table
    assert list(tmp_path.iterdir()) == []  # every run's outputs were under BENCH_ROOT, and are cleaned up


def test_against_alternates_which_checkout_runs_first_and_gives_the_ratio(tmp_path):
    results, table = compare(
        "--workloads", "import", "--rounds", "3", "--against", str(ROOT), bench_root=tmp_path
    )

    assert [(r["round"], r["side"]) for r in results] == [
        (0, "this"),
        (0, "against"),
        (1, "against"),
        (1, "this"),
        (2, "this"),
        (2, "against"),
    ]
    row = next(line for line in table.splitlines() if line.startswith("| import | process | 1 | this |"))
    ratio = float(row.rstrip(" |").rsplit("|", 1)[1])
    this = sorted(r["wall_s"] for r in results if r["side"] == "this")[1]
    against = sorted(r["wall_s"] for r in results if r["side"] == "against")[1]
    assert ratio == pytest.approx(this / against, abs=0.006)


def test_a_size_out_of_range_is_refused_naming_the_range(tmp_path):
    done = run_bench("--sizes", "5", bench_root=tmp_path)
    assert done.returncode == 2
    assert "N must be from 10 to 1,000,000, got 5" in done.stderr
