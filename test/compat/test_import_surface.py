"""What a bare ``import luigi`` loads, what its names resolve to, and what a command line registers, each in a
fresh interpreter (LUIGI_COMPAT j.1).

Luigi's ``import luigi`` loads the interface, the scheduler, the worker and the RPC client. Ours loads only
what a task definition needs and imports the rest on first use of its name, so the same attributes resolve
(``luigi.worker.Worker`` after a bare ``import luigi``) and a command line still knows every flag Luigi's
does, in Luigi's ``--help-all`` order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Machinery a task definition does not need: none of it is loaded by ``import luigi``.
NOT_LOADED_BY_IMPORT_LUIGI = [
    "tornado",
    "sqlalchemy",
    "email",
    "multiprocessing",
    "luigi.interface",
    "luigi.worker",
    "luigi.rpc",
    "luigi.rpc.client",
    "luigi.scheduler",
    "luigi.notifications",
    "luigi.batch_notifier",
    "luigi.metrics",
    "luigi.task_history",
    "luigi.lock",
    "luigi.cmdline_parser",
    "luigi.execution_summary",
    "luigi.setup_logging",
    "luigi.tools.range",
    "luigi.retcodes",
    "luigi.cmdline",
    "luigi.server",
    "luigi.db_task_history",
    "luigi.mock",
    "luigi.util",
    "luigi.process",
    "luigi.safe_extractor",
]
# Names Luigi users reach through the package after ``import luigi``, and the module each must be from.
LAZY_ATTRIBUTES = {
    "luigi.build": "luigi.interface",
    "luigi.run": "luigi.interface",
    "luigi.RemoteScheduler": "luigi.rpc.client",
    "luigi.RPCError": "luigi.rpc.errors",
    "luigi.LuigiStatusCode": "luigi.execution_summary",
    "luigi.interface.run": "luigi.interface",
    "luigi.interface.core": "luigi.interface",
    "luigi.worker.Worker": "luigi.worker.loop",
    "luigi.worker.TaskProcess": "luigi.worker.task_process",
    "luigi.scheduler.Scheduler": "luigi.scheduler.core",
    "luigi.rpc.RemoteScheduler": "luigi.rpc.client",
    "luigi.notifications.send_error_email": "luigi.notifications",
    "luigi.execution_summary.LuigiRunResult": "luigi.execution_summary",
    "luigi.lock.acquire_for": "luigi.lock",
    "luigi.cmdline_parser.CmdlineParser": "luigi.cmdline_parser",
    "luigi.setup_logging.InterfaceLogging": "luigi.setup_logging",
    "luigi.batch_notifier.BatchNotifier": "luigi.batch_notifier",
    "luigi.metrics.MetricsCollectors": "luigi.metrics",
    "luigi.task_history.TaskHistory": "luigi.task_history",
    "luigi.range.RangeDaily": "luigi.tools.range",
    "luigi.tools.range.RangeDaily": "luigi.tools.range",
}
# Luigi's --help-all order of the classes its import registers (j.1), as a command line registers them.
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
    import functools, json, sys
    import luigi
    from luigi.task_register import Register

    loaded_by_import = sorted(sys.modules)
    registered_by_import = [cls.get_task_family() for cls in Register._reg]
    attributes = {}
    for path in sys.argv[1:]:
        value = functools.reduce(getattr, path.split(".")[1:], luigi)
        attributes[path] = getattr(value, "__module__", None) or value.__name__
    from luigi.cmdline_parser import CmdlineParser
    with CmdlineParser.global_instance(["RangeDaily", "--of", "core", "--local-scheduler"]):
        pass
    print(json.dumps({
        "modules": loaded_by_import,
        "registered_by_import": registered_by_import,
        "attributes": attributes,
        "registered_by_command_line": [cls.get_task_family() for cls in Register._reg],
        "from_luigi_import": __import__("luigi", fromlist=["worker"]).worker.Worker.__name__,
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
        [sys.executable, "-c", PROBE, *LAZY_ATTRIBUTES],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_import_luigi_loads_no_worker_scheduler_rpc_email_or_processes(fresh_import_luigi):
    modules = set(fresh_import_luigi["modules"])
    assert [name for name in NOT_LOADED_BY_IMPORT_LUIGI if name in modules] == []
    assert not any(name.startswith(("luigi.contrib.", "tornado.", "sqlalchemy.")) for name in modules)
    assert {"luigi.task", "luigi.parameter", "luigi.local_target", "luigi.configuration"} <= modules


def test_import_luigi_registers_no_engine_config_before_a_command_line(fresh_import_luigi):
    assert [name for name in REGISTRATION_ORDER if name in fresh_import_luigi["registered_by_import"]] == []


def test_luigis_public_attributes_resolve_on_first_use_after_a_bare_import(fresh_import_luigi):
    assert fresh_import_luigi["attributes"] == LAZY_ATTRIBUTES
    assert fresh_import_luigi["from_luigi_import"] == "Worker"


def test_a_command_line_registers_luigis_classes_in_luigis_order(fresh_import_luigi):
    registered = fresh_import_luigi["registered_by_command_line"]
    assert [name for name in REGISTRATION_ORDER if name not in registered] == []
    positions = [registered.index(name) for name in REGISTRATION_ORDER]
    assert positions == sorted(positions), registered


def test_an_unknown_attribute_of_luigi_is_an_attribute_error():
    import luigi

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        luigi.no_such_name  # noqa: B018 - the access is the behaviour under test


def test_the_registry_finds_the_engine_classes_after_a_bare_import() -> None:
    """Luigi registers its Config classes and the Range* tasks at ``import luigi``; ours load with
    ``luigi.interface``, which the registry loads before it is read by name."""
    code = (
        "import sys, luigi\n"
        "from luigi.task_register import Register\n"
        "assert 'luigi.interface' not in sys.modules\n"
        "print(Register.get_task_cls('RangeDaily').__module__, Register.get_task_cls('core').__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["luigi.tools.range", "luigi.interface"]
