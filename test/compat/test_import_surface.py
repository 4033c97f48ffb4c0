"""What a bare ``import luigi`` loads and registers, in a fresh interpreter (LUIGI_COMPAT j.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

LOADED_BY_IMPORT_LUIGI = [
    "luigi.interface",
    "luigi.rpc",
    "luigi.scheduler",
    "luigi.worker",
    "luigi.lock",
    "luigi.cmdline_parser",
    "luigi.execution_summary",
    "luigi.setup_logging",
    "luigi.notifications",
    "luigi.batch_notifier",
    "luigi.metrics",
    "luigi.task_history",
    "luigi.tools.range",
]
NOT_LOADED_BY_IMPORT_LUIGI = [
    "luigi.retcodes",
    "luigi.cmdline",
    "luigi.server",
    "luigi.db_task_history",
    "luigi.mock",
    "luigi.util",
    "luigi.process",
    "luigi.safe_extractor",
]
# Luigi's --help-all order of the classes import luigi registers (j.1).
REGISTRATION_ORDER = [
    "TestNotificationsTask",
    "email",
    "smtp",
    "sendgrid",
    "batch_email",
    "scheduler",
    "worker",
    "execution_summary",
    "core",
    "RangeDailyBase",
    "RangeDaily",
]

PROBE = textwrap.dedent(
    """
    import json, sys
    import luigi
    from luigi.task_register import Register

    print(json.dumps({
        "modules": sorted(sys.modules),
        "registered": [cls.get_task_family() for cls in Register._reg],
        "worker_class": luigi.worker.Worker.__name__,
    }))
    """
)


@pytest.fixture(scope="module")
def fresh_import_luigi(tmp_path_factory) -> dict:
    """What one fresh interpreter saw after ``import luigi`` (one process for the whole module)."""
    tmp_path = tmp_path_factory.mktemp("import-luigi")
    config = tmp_path / "luigi.cfg"
    config.write_text("[core]\nautoload_range = true\n")
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(config)}
    env.pop("LUIGI_CONFIG_PARSER", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_import_luigi_loads_the_interface_scheduler_worker_and_email_modules(fresh_import_luigi):
    found = fresh_import_luigi
    modules = set(found["modules"])
    assert [name for name in LOADED_BY_IMPORT_LUIGI if name not in modules] == []
    assert [name for name in NOT_LOADED_BY_IMPORT_LUIGI if name in modules] == []
    assert not any(name.startswith("luigi.contrib.") for name in modules)
    assert found["worker_class"] == "Worker"  # luigi.worker.Worker works after a bare import luigi


def test_import_luigi_registers_luigis_classes_in_luigis_order(fresh_import_luigi):
    registered = fresh_import_luigi["registered"]
    assert [name for name in REGISTRATION_ORDER if name not in registered] == []
    positions = [registered.index(name) for name in REGISTRATION_ORDER]
    assert positions == sorted(positions), registered


def test_import_luigi_stays_cheap(fresh_import_luigi):
    """The database and web libraries load only when a store, a history or luigid is used."""
    modules = set(fresh_import_luigi["modules"])
    heavy = ["sqlalchemy", "tornado", "luigi.scheduler.core", "luigi.scheduler.store.sql"]
    assert [name for name in heavy if name in modules] == []
