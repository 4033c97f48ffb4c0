"""The fault-injection suite, one short seeded run (``python -m bench.faults --seeds 1-50`` by hand).

A pipeline run by real worker processes against a real luigid while luigid, workers and slots are
killed, workers are stopped past the disconnect delay or sent SIGTERM, a proxy drops and blackholes one
worker's connections, and (as root) the state's tmpfs fills up. Nothing may be lost, and every task that
ran twice must have had its earlier run hit by a fault.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _bench_faults():
    spec = importlib.util.spec_from_file_location("bench_faults", ROOT / "bench" / "faults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_faults"] = module
    spec.loader.exec_module(module)
    return module


def test_a_seeded_run_under_faults_loses_nothing_and_reruns_only_what_a_fault_hit():
    faults = _bench_faults()
    result = faults.run_seed(seed=7, tasks=120, duration=25)
    assert sum(result.faults.values()) >= 3, result
    assert result.lost == 0, result
    assert result.reruns_unexplained == [], result
