"""luigi.contrib.redis_store against a real redis-server: markers written by tasks, read back by builds."""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers.luigid import free_port

import luigi
from luigi.contrib.redis_store import RedisTarget, RedisTargetError

if TYPE_CHECKING:
    from helpers.redis_server import RedisServer

pytest.importorskip("redis")
pytest_plugins = ["helpers.redis_server"]  # its session fixtures redis_server and redis_server_with_password

WRONG_PASSWORD = "not-the-pw-9d1e"


class RedisMarkedTask(luigi.Task):
    """Counts its runs in Redis, then touches its marker."""

    host = luigi.Parameter(significant=False)
    port = luigi.IntParameter(significant=False)
    db = luigi.IntParameter(default=0, significant=False)
    password = luigi.OptionalParameter(
        default=None, significant=False, visibility=luigi.parameter.ParameterVisibility.PRIVATE
    )
    expire = luigi.OptionalIntParameter(default=None, significant=False)
    run_name = luigi.Parameter()

    def output(self) -> RedisTarget:
        return RedisTarget(
            self.host, self.port, self.db, self.task_id, password=self.password, expire=self.expire
        )

    def run(self) -> None:
        target = self.output()
        target.redis_client.incr(f"runs:{self.run_name}")
        target.touch()


def _task(server: RedisServer, **kwargs: object) -> RedisMarkedTask:
    kwargs.setdefault("password", server.password)
    return RedisMarkedTask(host=server.host, port=server.port, run_name=uuid.uuid4().hex, **kwargs)


def _build(task: luigi.Task) -> luigi.execution_summary.LuigiRunResult:
    return luigi.build([task], local_scheduler=True, detailed_summary=True)


def test_task_run_touches_its_marker_hash(redis_server: RedisServer) -> None:
    task = _task(redis_server)

    assert _build(task).status == luigi.LuigiStatusCode.SUCCESS

    client = redis_server.client()
    assert client.get(f"runs:{task.run_name}") == b"1"
    marker = client.hgetall(f"luigi:{task.task_id}")
    assert marker[b"update_id"] == task.task_id.encode()
    assert marker[b"date"]
    assert client.ttl(f"luigi:{task.task_id}") == -1  # no expiry asked for, none set


def test_second_build_is_a_no_op(redis_server: RedisServer) -> None:
    task = _task(redis_server)
    assert luigi.build([task], local_scheduler=True)

    second = _build(task)

    assert second.status == luigi.LuigiStatusCode.SUCCESS
    assert "complete" in second.summary_text  # "1 complete ones were encountered"
    assert redis_server.client().get(f"runs:{task.run_name}") == b"1"


def test_tasks_run_in_forked_workers_share_the_server(redis_server: RedisServer) -> None:
    tasks = [_task(redis_server) for _ in range(3)]
    assert all(not task.complete() for task in tasks)  # the parent has connected before forking

    assert luigi.build(tasks, local_scheduler=True, workers=2)

    assert all(task.complete() for task in tasks)
    assert [redis_server.client().get(f"runs:{task.run_name}") for task in tasks] == [b"1"] * 3


def test_expire_gives_the_marker_a_ttl(redis_server: RedisServer) -> None:
    task = _task(redis_server, expire=600)

    assert luigi.build([task], local_scheduler=True)

    assert 0 < redis_server.client().ttl(f"luigi:{task.task_id}") <= 600


def test_marker_lives_in_the_given_db(redis_server: RedisServer) -> None:
    task = _task(redis_server, db=3)

    assert luigi.build([task], local_scheduler=True)

    assert redis_server.client(db=3).exists(f"luigi:{task.task_id}") == 1
    assert redis_server.client(db=0).exists(f"luigi:{task.task_id}") == 0


def test_marker_prefix_comes_from_a_config_file_loaded_after_import(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    config_file = tmp_path / "luigi.cfg"
    config_file.write_text("[redis]\nmarker_prefix = nightly-etl\n")
    luigi.configuration.add_config_path(config_file)
    task = _task(redis_server)

    assert luigi.build([task], local_scheduler=True)

    assert task.output().marker_key() == f"nightly-etl:{task.task_id}"
    assert redis_server.client().exists(f"nightly-etl:{task.task_id}") == 1
    assert redis_server.client().exists(f"luigi:{task.task_id}") == 0


def test_marker_prefix_in_luigis_dashed_spelling_still_counts(tmp_path: Path) -> None:
    config_file = tmp_path / "luigi.cfg"
    config_file.write_text("[redis]\nmarker-prefix = legacy\n")
    luigi.configuration.add_config_path(config_file)

    with pytest.warns(DeprecationWarning, match="Please use underscores: marker_prefix"):
        assert RedisTarget("127.0.0.1", 1, 0, "x").marker_key() == "legacy:x"


def test_marker_prefix_set_in_a_subclass_or_on_a_target_wins_over_config() -> None:
    luigi.configuration.get_config().set("redis", "marker_prefix", "from-config")

    class ProjectTarget(RedisTarget):
        marker_prefix = "project"

    own = RedisTarget("127.0.0.1", 1, 0, "x")
    own.marker_prefix = "mine"

    assert RedisTarget("127.0.0.1", 1, 0, "x").marker_key() == "from-config:x"
    assert ProjectTarget("127.0.0.1", 1, 0, "x").marker_key() == "project:x"
    assert own.marker_key() == "mine:x"


def test_password_protected_server_accepts_the_right_password(
    redis_server_with_password: RedisServer,
) -> None:
    task = _task(redis_server_with_password)

    assert luigi.build([task], local_scheduler=True)

    assert redis_server_with_password.client().exists(f"luigi:{task.task_id}") == 1


def test_wrong_password_fails_naming_the_server_but_not_the_password(
    redis_server_with_password: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_server_with_password
    task = _task(server, password=WRONG_PASSWORD)
    caplog.set_level(logging.DEBUG)

    result = _build(task)

    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    assert f"Redis at {server.host}:{server.port} db 0: authentication failed" in caplog.text
    with pytest.raises(RedisTargetError) as raised:
        task.output().exists()
    message = str(raised.value)
    assert f"{server.host}:{server.port}" in message and task.task_id in message
    for text in (
        caplog.text,
        message,
        result.summary_text,
        repr(task.output()),
        str(task.output()),
        task.task_id,
    ):
        assert WRONG_PASSWORD not in text
    assert server.client().exists(f"luigi:{task.task_id}") == 0


def test_missing_password_says_to_pass_one(redis_server_with_password: RedisServer) -> None:
    target = RedisTarget(redis_server_with_password.host, redis_server_with_password.port, 0, "no-pw")

    with pytest.raises(RedisTargetError, match="authentication failed .pass password= to RedisTarget"):
        target.exists()


def test_refused_connection_fails_naming_host_and_port(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    task = RedisMarkedTask(host="127.0.0.1", port=port, password=WRONG_PASSWORD, run_name="refused")

    result = _build(task)

    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    assert f"Redis at 127.0.0.1:{port} db 0: cannot connect" in caplog.text
    assert WRONG_PASSWORD not in caplog.text


def test_failing_run_leaves_no_marker(redis_server: RedisServer) -> None:
    class BrokenRun(RedisMarkedTask):
        def run(self) -> None:
            raise RuntimeError("the computation failed before touching the marker")

    task = BrokenRun(host=redis_server.host, port=redis_server.port, run_name=uuid.uuid4().hex)

    assert _build(task).status == luigi.LuigiStatusCode.FAILED

    assert redis_server.client().exists(f"luigi:{task.task_id}") == 0


def test_importing_the_module_leaves_redis_py_unimported() -> None:
    code = "import sys, luigi.contrib.redis_store; assert 'redis' not in sys.modules, 'imported redis'"

    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_redis_py_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"  # what a missing package looks like to import
        "from luigi.contrib.redis_store import RedisTarget\n"
        "RedisTarget('127.0.0.1', 6379, 0, 'x').exists()\n"
    )

    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)

    assert run.returncode != 0
    assert "MissingExtraError: luigi.contrib.redis_store needs the 'redis' package" in run.stderr
    assert "pip install 'luigi[redis]'" in run.stderr
