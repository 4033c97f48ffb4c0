"""Every module of Luigi 3.8's core tree imports under its path, with the public names users import from it.

The list is LUIGI_COMPAT section a (the module map) and section j (the second pass), module by module.
"""

from __future__ import annotations

import importlib

import pytest

CORE_TREE: dict[str, tuple[str, ...]] = {
    "luigi": (
        "Task",
        "Config",
        "ExternalTask",
        "WrapperTask",
        "DynamicRequirements",
        "namespace",
        "auto_namespace",
        "Parameter",
        "IntParameter",
        "DateParameter",
        "BoolParameter",
        "ListParameter",
        "DictParameter",
        "LocalTarget",
        "Target",
        "Event",
        "build",
        "run",
        "range",
        "notifications",
        "configuration",
        "interface",
        "worker",
        "scheduler",
        "rpc",
    ),
    "luigi.__main__": (),
    "luigi.__version__": ("VERSION",),
    "luigi.task": (
        "Task",
        "Config",
        "ExternalTask",
        "WrapperTask",
        "DynamicRequirements",
        "MixinNaiveBulkComplete",
        "namespace",
        "auto_namespace",
        "task_id_str",
        "externalize",
        "flatten",
        "flatten_output",
        "getpaths",
    ),
    "luigi.task_register": ("Register", "load_task"),
    "luigi.parameter": (
        "Parameter",
        "ParameterVisibility",
        "ParameterException",
        "MissingParameterException",
        "OptionalParameterTypeWarning",
        "warnings",
    ),
    "luigi.freezing": ("FrozenOrderedDict", "recursively_freeze", "recursively_unfreeze"),
    "luigi.date_interval": ("DateInterval", "Date", "Week", "Month", "Year", "Custom"),
    "luigi.target": (
        "Target",
        "FileSystem",
        "FileSystemTarget",
        "AtomicLocalFile",
        "FileSystemException",
        "FileAlreadyExists",
        "MissingParentDirectory",
        "NotADirectory",
    ),
    "luigi.local_target": ("LocalFileSystem", "LocalTarget", "atomic_file"),
    "luigi.format": (
        "Format",
        "ChainFormat",
        "Text",
        "UTF8",
        "Nop",
        "SysNewLine",
        "Gzip",
        "Bzip2",
        "MixedUnicodeBytes",
        "InputPipeProcessWrapper",
        "OutputPipeProcessWrapper",
    ),
    "luigi.mock": ("MockFileSystem", "MockTarget"),
    "luigi.worker": (
        "Worker",
        "worker",
        "TaskProcess",
        "ContextManagedTaskProcess",
        "TaskStatusReporter",
        "SchedulerMessage",
        "KeepAliveThread",
        "time",
    ),
    "luigi.scheduler": (
        "Scheduler",
        "scheduler",
        "RetryPolicy",
        "RPC_METHODS",
        "PENDING",
        "RUNNING",
        "DONE",
        "FAILED",
        "DISABLED",
        "SUSPENDED",
        "UNKNOWN",
        "BATCH_RUNNING",
        "UPSTREAM_RUNNING",
        "UPSTREAM_MISSING_INPUT",
        "UPSTREAM_FAILED",
        "UPSTREAM_DISABLED",
        "WORKER_STATE_ACTIVE",
        "WORKER_STATE_DISABLED",
        "BatchNotifier",
        "notifications",
    ),
    "luigi.rpc": (
        "RemoteScheduler",
        "RPCError",
        "RequestsFetcher",
        "URLLibFetcher",
        "HAS_REQUESTS",
        "logger",
    ),
    "luigi.server": (
        "app",
        "_init_api",
        "run",
        "stop",
        "cors",
        "RPCHandler",
        "BaseTaskHistoryHandler",
        "MetricsHandler",
        "from_utc",
    ),
    "luigi.interface": ("core", "build", "run", "PidLockAlreadyTakenExit"),
    "luigi.cmdline": ("luigi_run", "luigid"),
    "luigi.cmdline_parser": ("CmdlineParser",),
    "luigi.retcodes": ("retcode", "run_with_retcodes"),
    "luigi.execution_summary": ("LuigiStatusCode", "LuigiRunResult", "execution_summary"),
    "luigi.event": ("Event",),
    "luigi.task_status": ("PENDING", "RUNNING", "DONE", "FAILED", "DISABLED", "UNKNOWN", "BATCH_RUNNING"),
    "luigi.task_history": ("TaskHistory", "NopHistory", "StoredTask"),
    "luigi.db_task_history": ("DbTaskHistory",),
    "luigi.notifications": (
        "email",
        "smtp",
        "sendgrid",
        "send_email",
        "generate_email",
        "send_email_smtp",
        "send_email_ses",
        "send_email_sendgrid",
        "send_email_sns",
        "TestNotificationsTask",
    ),
    "luigi.batch_notifier": ("batch_email", "BatchNotifier", "send_email"),
    "luigi.lock": ("acquire_for", "get_info", "getpcmd"),
    "luigi.process": ("check_pid", "write_pid", "get_log_format", "get_spool_handler", "daemonize"),
    "luigi.setup_logging": ("BaseLogging", "DaemonLogging", "InterfaceLogging"),
    "luigi.metrics": ("MetricsCollectors", "MetricsCollector", "NoMetricsCollector"),
    "luigi.util": (
        "inherits",
        "requires",
        "copies",
        "delegates",
        "common_params",
        "previous",
        "get_previous_completed",
    ),
    "luigi.safe_extractor": ("SafeExtractor",),
    "luigi.mypy": ("plugin",),
    "luigi.configuration": ("get_config", "add_config_path", "LuigiConfigParser", "LuigiTomlParser"),
    "luigi.configuration.core": ("get_config", "add_config_path"),
    "luigi.configuration.base_parser": (),
    "luigi.configuration.cfg_parser": ("LuigiConfigParser",),
    "luigi.configuration.toml_parser": ("LuigiTomlParser",),
    "luigi.tools.range": (
        "RangeDaily",
        "RangeHourly",
        "RangeByMinutes",
        "RangeMonthly",
        "RangeDailyBase",
        "RangeHourlyBase",
        "RangeByMinutesBase",
        "RangeBase",
        "RangeEvent",
    ),
    "luigi.tools.deps": (
        "get_task_requires",
        "dfs_paths",
        "find_deps",
        "find_deps_cli",
        "get_task_output_description",
        "main",
    ),
    "luigi.tools.deps_tree": ("print_tree", "main"),
    "luigi.tools.luigi_grep": ("LuigiGrep", "main"),
}


@pytest.mark.parametrize("module_name", sorted(CORE_TREE))
def test_the_module_imports_with_its_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [name for name in CORE_TREE[module_name] if not hasattr(module, name)]
    assert missing == [], f"{module_name} lacks {missing}"


def test_a_stored_task_shows_its_records_family_and_parameters() -> None:
    from luigi.scheduler import Scheduler
    from luigi.task_history import StoredTask

    scheduler = Scheduler()
    scheduler.add_task(task_id="Load_2024_abc", family="Load", params={"day": "2024"}, worker="w")
    record = scheduler._state.tasks["Load_2024_abc"]
    stored = StoredTask(record, "PENDING", host="vm")
    described = (stored.task_family, stored.parameters, stored.status, stored.host)
    assert described == ("Load", {"day": "2024"}, "PENDING", "vm")
    assert stored.record_id is None
