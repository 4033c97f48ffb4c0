"""Task run logs: what a task writes is kept per run by luigid and comes back from ``task_log``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.browser import browser, checked_page, open_view
from helpers.luigid import LuigidProcess, luigid_env, running_luigid, wait_until
from prometheus_client.parser import text_string_to_metric_families

from luigi.scheduler.store.task_logs import FLUSH_EVERY_SECONDS, SEGMENT_BUFFER_BYTES, TaskLogStore
from luigi.worker.output_capture import cut_marker

PIPELINE = textwrap.dedent(
    '''
    import logging
    import os
    import subprocess
    import sys
    import time

    import luigi

    logger = logging.getLogger("luigi-interface")


    class Talks(luigi.Task):
        """Prints a marker, runs echo in a child process, logs a third marker."""

        root = luigi.Parameter()
        n = luigi.IntParameter(default=0)

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, f"talked-{self.n}"))

        def run(self):
            print(f"printed-marker-{self.n}", flush=True)
            subprocess.run(["echo", f"child-marker-{self.n}"], check=True)
            logger.info("logged-marker-%d", self.n)
            self.output().open("w").close()


    class Talkers(luigi.WrapperTask):
        root = luigi.Parameter()

        def requires(self):
            return [Talks(self.root, n) for n in range(3)]


    class Quiet(luigi.Task):
        """Writes nothing to stdout or stderr."""

        root = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "quiet"))

        def run(self):
            self.output().open("w").close()


    class Secretive(luigi.Task):
        """Prints the values of its private and hidden parameters."""

        root = luigi.Parameter()
        password = luigi.Parameter(visibility=luigi.parameter.ParameterVisibility.PRIVATE)
        token = luigi.Parameter(visibility=luigi.parameter.ParameterVisibility.HIDDEN)

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "secretive"))

        def run(self):
            print(f"connecting with {self.password} and {self.token}", flush=True)
            self.output().open("w").close()


    class PrintsCredentials(luigi.Task):
        """Prints a credential of each shape [task_log] masks, some of them in pieces within a line."""

        root = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "credentials"))

        def run(self):
            print("db login password=hunter22-pw for ann", flush=True)
            print("env PGPASSWORD=pg-secret-31 set", flush=True)
            for piece in ("header Authorization: Bea", "rer eyJhbGc.tok", "-en-77 sent\\n"):
                os.write(1, piece.encode())  # one line in three writes, the token split between two
                time.sleep(0.1)  # (so that the capture reads them apart, as a slow printer's)
            print("retry with bearer zz9-plural-z-alpha now", flush=True)
            print("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY loaded", flush=True)
            print("key id AKIAIOSFODNN7EXAMPLE in use", flush=True)
            sys.stderr.write("connecting to postgresql://ann:url-pw-")
            sys.stderr.flush()
            time.sleep(0.1)
            sys.stderr.write("5309@db.example:5432/sales now\\n")
            print("GET https://api.example/v1?api_key=k3y-99817&page=2 ok", flush=True)
            print("order order-ref-48213 shipped", flush=True)
            self.output().open("w").close()


    class Floods(luigi.Task):
        """Writes far more than the capture keeps."""

        root = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "flooded"))

        def run(self):
            for line in range(5000):
                print(f"line {line:05d} " + "x" * 40)
            self.output().open("w").close()


    class WaitsForGo(luigi.Task):
        """Prints a first marker, then runs until the file ``go`` exists (so a reader can follow it live)."""

        root = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "went"))

        def run(self):
            print("before-go-marker", flush=True)
            go = os.path.join(self.root, "go")
            give_up = time.monotonic() + 60
            while not os.path.exists(go) and time.monotonic() < give_up:
                time.sleep(0.05)
            print("after-go-marker", flush=True)
            self.output().open("w").close()


    class Chatters(luigi.Task):
        """Prints a line every 20 ms and reports how far it got, until the file ``go`` exists."""

        root = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(self.root, "chatted"))

        def run(self):
            go = os.path.join(self.root, "go")
            give_up = time.monotonic() + 120
            line = 0
            while not os.path.exists(go) and time.monotonic() < give_up:
                line += 1
                print(f"chatter line {line:05d}", flush=True)
                if line % 10 == 0:  # the detail panel shows it: each report redraws the panel
                    self.set_status_message(f"{line} lines")
                time.sleep(0.02)
            self.output().open("w").close()
    '''
)


def run_pipeline(luigid: LuigidProcess, tmp_path: Path, *args: str, config: str = "") -> subprocess.Popen:
    (tmp_path / "talking_pipeline.py").write_text(PIPELINE)
    env = luigid_env(tmp_path, config)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "luigi", "--module", "talking_pipeline", *args]
    command += ["--scheduler-url", luigid.url, "--root", str(tmp_path / "out")]
    return subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finished(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output.decode()
    return output.decode()


def task_log(luigid: LuigidProcess, task_id: str, **kwargs: object) -> dict:
    reply = luigid.probe().call("task_log", {"task_id": task_id, **kwargs}, verb="GET")
    assert reply.status == 200, reply.body
    return reply.json()["response"]


def task_id_of(luigid: LuigidProcess, family: str, n: int | None = None) -> str:
    tasks = luigid.probe().call("task_list", {"status": "", "upstream_status": ""}).json()["response"]
    return next(
        task_id
        for task_id, task in tasks.items()
        if task["name"] == family and (n is None or task["params"].get("n") == str(n))
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_prints_child_output_and_log_records_of_a_run_come_back_from_task_log(
    tmp_path: Path, workers: int
) -> None:
    with running_luigid(tmp_path) as luigid:
        output = finished(run_pipeline(luigid, tmp_path, "Talkers", "--workers", str(workers)))
        for n in range(3):
            log = task_log(luigid, task_id_of(luigid, "Talks", n))
            assert log["kept"] and log["ended"] and log["attempt"] == 1
            for marker in ("printed-marker", "child-marker", "logged-marker"):
                assert f"{marker}-{n}" in log["chunk"]
            assert f"child-marker-{(n + 1) % 3}" not in log["chunk"]  # only this run's output
    for marker in ("printed-marker-0", "child-marker-1", "logged-marker-2"):
        assert marker in output  # still echoed to the worker's console


@pytest.mark.parametrize("workers", [1, 2])
def test_the_task_detail_shows_the_runs_log_with_all_three_markers(tmp_path: Path, workers: int) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Talks", "--n", "5", "--workers", str(workers)))
        task_id = task_id_of(luigid, "Talks", 5)
        with browser() as chromium, checked_page(chromium) as page:
            open_view(page, luigid.url.rstrip("/"), f"#tab=tasks&detail={quote(task_id)}")
            page.wait_for_function(
                "() => /ended/.test(document.querySelector('#task-log .task-log-note').textContent)"
            )
            shown = page.locator("#task-log .task-log").inner_text()
            if workers == 2:
                page.screenshot(path=str(tmp_path / "log.png"))
            assert page.locator("#task-log .task-log *").count() == 0  # text, never markup
            assert page.locator(".traceback").count() == 0  # a run that ended well has no error to show
    for marker in ("printed-marker-5", "child-marker-5", "logged-marker-5"):
        assert marker in shown


@pytest.mark.parametrize("workers", [1, 2])
def test_a_short_runs_log_comes_with_its_final_status_and_costs_no_call_of_its_own(
    tmp_path: Path, workers: int
) -> None:
    with running_luigid(tmp_path, config="[scheduler]\nmetrics_collector = prometheus\n") as luigid:
        finished(run_pipeline(luigid, tmp_path, "Talkers", "--workers", str(workers)))
        logs = [task_log(luigid, task_id_of(luigid, "Talks", n)) for n in range(3)]
        calls = rpc_calls(luigid.probe().request("GET", "/metrics").body.decode())
    assert all(log["ended"] and f"logged-marker-{n}" in log["chunk"] for n, log in enumerate(logs))
    assert calls.get("append_task_log", 0) == 0 and calls["add_task"] >= 3


def test_task_slots_that_capture_logs_serve_one_task_after_another(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Talkers", "--workers", "2"))
        logs = [task_log(luigid, task_id_of(luigid, "Talks", n))["chunk"] for n in range(3)]
    slot_pids = {re.search(r"\[pid (\d+)\] Worker", log).group(1) for log in logs}
    assert len(slot_pids) <= 2  # two slots for three tasks: a slot does not retire after each run


def rpc_calls(metrics_page: str) -> dict[str, float]:
    """How many calls of each RPC method luigid served, from its Prometheus page."""
    counts = {}
    for family in text_string_to_metric_families(metrics_page):
        for sample in family.samples:
            if sample.name == "luigid_rpc_duration_seconds_count":
                counts[sample.labels["method"]] = sample.value
    return counts


def test_a_run_that_writes_nothing_keeps_no_log(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Quiet", "--log-level", "WARNING"))
        log = task_log(luigid, task_id_of(luigid, "Quiet"))
    assert log["kept"] and log["attempts"] == [] and log["chunk"] == ""


@pytest.mark.parametrize("workers", [1, 2])
def test_the_values_of_hidden_and_private_parameters_never_reach_the_kept_log(
    tmp_path: Path, workers: int
) -> None:
    secrets = ["--password", "hunter22-pw", "--token", "tok-9f3a2"]
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Secretive", *secrets, "--workers", str(workers)))
        log = task_log(luigid, task_id_of(luigid, "Secretive"))
    assert "connecting with *** and ***" in log["chunk"]
    assert "hunter22-pw" not in log["chunk"] and "tok-9f3a2" not in log["chunk"]


CREDENTIALS = [  # printed by PrintsCredentials: none may reach luigid
    "hunter22-pw",
    "pg-secret-31",
    "eyJhbGc.token-77",
    "zz9-plural-z-alpha",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AKIAIOSFODNN7EXAMPLE",
    "url-pw-5309",
    "k3y-99817",
    "order-ref-48213",
]
MASKED_LINES = [  # the rest of each line is kept
    "db login password=*** for ann",
    "env PGPASSWORD=*** set",
    "header Authorization: Bearer *** sent",
    "retry with bearer *** now",
    "aws_secret_access_key = *** loaded",
    "key id *** in use",
    "connecting to postgresql://ann:***@db.example:5432/sales now",
    "GET https://api.example/v1?api_key=***&page=2 ok",
    "order *** shipped",
]
OWN_PATTERN = "[task_log]\nredact =\n    order-ref-[0-9]+\n"  # one of the config's own, beside the built-in


def luigid_files_text(luigid: LuigidProcess) -> str:
    """Everything luigid keeps on disk: its task-log segments, its state and its own log, as text."""
    kept = [path for path in luigid.workdir.rglob("*") if path.is_file() and _kept_by_luigid(luigid, path)]
    assert any("task-logs" in path.parts for path in kept), kept  # the log store itself is read
    return "".join(path.read_bytes().decode("utf-8", "replace") for path in kept)


def _kept_by_luigid(luigid: LuigidProcess, path: Path) -> bool:
    relative = path.relative_to(luigid.workdir)
    return relative.parts[0] == "task-logs" or relative.name.startswith(("luigid-state", "luigid-"))


@pytest.mark.parametrize("workers", [1, 2])
def test_credentials_a_task_prints_never_reach_luigids_log_store_and_the_rest_of_each_line_does(
    tmp_path: Path, workers: int
) -> None:
    with running_luigid(tmp_path) as luigid:
        output = finished(
            run_pipeline(luigid, tmp_path, "PrintsCredentials", "--workers", str(workers), config=OWN_PATTERN)
        )
        log = task_log(luigid, task_id_of(luigid, "PrintsCredentials"))
        wait_until(
            lambda: "order *** shipped" in luigid_files_text(luigid),
            what="the log's segment to reach the disk",
        )
        on_disk = luigid_files_text(luigid)
    for line in MASKED_LINES:
        assert line in log["chunk"] and line in on_disk
    for secret in CREDENTIALS:
        assert secret not in log["chunk"] and secret not in on_disk
    assert "password=hunter22-pw" in output  # the worker's console shows the run's output unchanged


def test_the_task_detail_shows_a_log_with_its_credentials_masked(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "PrintsCredentials", config=OWN_PATTERN))
        task_id = task_id_of(luigid, "PrintsCredentials")
        with browser() as chromium, checked_page(chromium) as page:
            open_view(page, luigid.url.rstrip("/"), f"#tab=tasks&detail={quote(task_id)}")
            page.wait_for_function(
                "() => /ended/.test(document.querySelector('#task-log .task-log-note').textContent)"
            )
            shown = page.locator("#task-log .task-log").inner_text()
            page.screenshot(path=str(tmp_path / "credentials.png"))
    for line in MASKED_LINES:
        assert line in shown
    for secret in CREDENTIALS:
        assert secret not in shown


def test_the_task_detail_says_when_no_log_was_kept(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        luigid.probe().call(
            "add_task", {"task_id": "FromLuigi__99914b932b", "worker": "w", "status": "FAILED"}
        )
        with browser() as chromium, checked_page(chromium) as page:
            open_view(page, luigid.url.rstrip("/"), "#tab=tasks&detail=FromLuigi__99914b932b")
            page.wait_for_function(
                "() => /No log was kept/.test(document.querySelector('#task-log').textContent)"
            )
            assert page.locator("#task-log .task-log").inner_text() == ""


def test_a_log_is_cut_at_task_log_max_bytes_and_the_cut_is_marked(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Floods", config="[worker]\ntask_log_max_bytes = 20000\n"))
        log = task_log(luigid, task_id_of(luigid, "Floods"))
    assert log["chunk"].endswith(cut_marker(20000))
    assert len(log["chunk"].encode()) == 20000 + len(cut_marker(20000).encode())
    assert log["nextOffset"] == len(log["chunk"].encode()) and log["ended"]


def test_the_log_of_a_running_task_can_be_followed_from_the_offset_it_reached(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        run = run_pipeline(luigid, tmp_path, "WaitsForGo", config="[worker]\nping_interval = 0.1\n")
        task_id = wait_until(lambda: _task_id_or_none(luigid, "WaitsForGo"), what="the task to be known")
        first = wait_until(
            lambda: (log := task_log(luigid, task_id)) and "before-go-marker" in log["chunk"] and log,
            what="the first marker while the task still runs",
        )
        assert not first["ended"]
        (tmp_path / "out").mkdir(exist_ok=True)
        (tmp_path / "out" / "go").touch()
        rest = wait_until(
            lambda: (log := task_log(luigid, task_id, offset=first["nextOffset"])) and log["ended"] and log,
            what="the end of the run",
        )
        finished(run)
    assert "after-go-marker" in rest["chunk"] and "before-go-marker" not in rest["chunk"]


LOG_SCROLL = """() => {
    const log = document.querySelector('#task-log .task-log');
    return {top: log.scrollTop, bottom: log.scrollHeight - log.clientHeight, chars: log.textContent.length};
}"""
REDRAWN_AND_GROWN = """chars => !window.panelBefore.isConnected
    && document.querySelector('#task-log .task-log').textContent.length > chars"""


def redraw_and_grow(page) -> dict:
    """Wait until the detail panel was redrawn by a refresh and the log grew after that; its scroll then."""
    page.evaluate("() => { window.panelBefore = document.querySelector('#task-detail .detail-title'); }")
    page.wait_for_function("() => !window.panelBefore.isConnected")
    grown_from = page.evaluate(LOG_SCROLL)["chars"]
    page.wait_for_function(REDRAWN_AND_GROWN, arg=grown_from)
    return page.evaluate(LOG_SCROLL)


def test_the_live_log_keeps_following_its_tail_across_refreshes_until_the_user_scrolls_up(
    tmp_path: Path,
) -> None:
    with running_luigid(tmp_path) as luigid:
        run = run_pipeline(luigid, tmp_path, "Chatters", config="[worker]\nping_interval = 0.1\n")
        try:
            task_id = wait_until(lambda: _task_id_or_none(luigid, "Chatters"), what="the task to be known")
            with browser() as chromium, checked_page(chromium) as page:
                open_view(page, luigid.url.rstrip("/"), f"#tab=tasks&detail={quote(task_id)}")
                page.wait_for_function(
                    "() => { const log = document.querySelector('#task-log .task-log');"
                    " return log.scrollHeight > 2 * log.clientHeight && log.clientHeight > 0; }"
                )
                for _ in range(2):  # every refresh that redraws the panel
                    scroll = redraw_and_grow(page)
                    assert scroll["top"] >= scroll["bottom"] - 4, scroll  # still at the tail
                page.locator("#task-log .task-log").hover()
                page.mouse.wheel(0, -300)
                page.wait_for_function(
                    "() => { const log = document.querySelector('#task-log .task-log');"
                    " return log.scrollTop < log.scrollHeight - log.clientHeight - 100; }"
                )
                left_at = page.evaluate(LOG_SCROLL)["top"]
                for _ in range(2):
                    scroll = redraw_and_grow(page)
                    # Where the user left it: neither the tail nor the top.
                    assert scroll["top"] == left_at, scroll
                page.mouse.wheel(0, 100_000)  # back at the tail: following again
                page.wait_for_function(
                    "() => { const log = document.querySelector('#task-log .task-log');"
                    " return log.scrollTop >= log.scrollHeight - log.clientHeight - 4; }"
                )
                scroll = redraw_and_grow(page)
                assert scroll["top"] >= scroll["bottom"] - 4, scroll
        finally:
            (tmp_path / "out").mkdir(exist_ok=True)
            (tmp_path / "out" / "go").touch()
            finished(run)


def test_a_run_whose_worker_was_killed_has_ended_without_its_last_output(tmp_path: Path) -> None:
    with running_luigid(tmp_path, config="[scheduler]\nworker_disconnect_delay = 1\n") as luigid:
        run = run_pipeline(luigid, tmp_path, "WaitsForGo", config="[worker]\nping_interval = 0.1\n")
        task_id = wait_until(lambda: _task_id_or_none(luigid, "WaitsForGo"), what="the task to be known")
        wait_until(lambda: "before-go-marker" in task_log(luigid, task_id)["chunk"], what="the first marker")
        run.kill()  # the worker, and the task running in its process, die without a last word
        run.wait(timeout=30)
        log = wait_until(
            lambda: (log := task_log(luigid, task_id)) and log["ended"] and log,
            what="luigid to take the run for ended once it has lost its worker",
        )
        assert log["cutShort"] and log["attempts"][0]["cutShort"]
        assert "before-go-marker" in log["chunk"] and "after-go-marker" not in log["chunk"]
        with browser() as chromium, checked_page(chromium) as page:
            open_view(page, luigid.url.rstrip("/"), f"#tab=tasks&detail={quote(task_id)}")
            page.wait_for_function(
                "() => /ended without its last output/"
                ".test(document.querySelector('#task-log .task-log-note').textContent)"
            )
            assert "before-go-marker" in page.locator("#task-log .task-log").inner_text()


def _task_id_or_none(luigid: LuigidProcess, family: str) -> str | None:
    try:
        return task_id_of(luigid, family)
    except StopIteration:
        return None


def test_luigid_keeps_the_logs_across_a_kill_and_restart(tmp_path: Path) -> None:
    with running_luigid(tmp_path) as luigid:
        finished(run_pipeline(luigid, tmp_path, "Talks", "--n", "7"))
        task_id = task_id_of(luigid, "Talks", 7)
        before = task_log(luigid, task_id)
        luigid.stop(signal.SIGKILL)
    with running_luigid(tmp_path) as again:
        after = task_log(again, task_id)
    assert after["chunk"] == before["chunk"] and "child-marker-7" in after["chunk"]


def test_a_scheduler_that_keeps_no_logs_says_so(tmp_path: Path) -> None:
    from luigi.scheduler import Scheduler

    log = Scheduler().task_log("Anything__99914b932b")
    assert log["kept"] is False and log["chunk"] == "" and log["attempts"] == []


def test_a_chunk_sent_twice_is_kept_once_and_a_lost_one_is_marked(tmp_path: Path) -> None:
    store = TaskLogStore(str(tmp_path / "logs"), keep_days=7)
    store.append("T", "w", "run-1", 0, "hello ", False, now=1000.0)
    store.append("T", "w", "run-1", 0, "hello ", False, now=1000.0)  # a retried request
    store.append("T", "w", "run-1", 6, "world", False, now=1001.0)
    store.append("T", "w", "run-1", 20, "!", True, now=1002.0)  # 9 bytes never arrived
    log = store.read("T", None, 0)
    assert log["chunk"] == "hello world\n[luigi: 9 bytes of this log did not arrive]\n!"
    assert log["ended"] and [a["attempt"] for a in log["attempts"]] == [1]


def test_old_logs_are_deleted_after_keep_days(tmp_path: Path) -> None:
    store = TaskLogStore(str(tmp_path / "logs"), keep_days=2)
    day = 86400.0
    store.append("Old", "w", "r1", 0, "old run", True, now=10 * day)
    store.append("New", "w", "r2", 0, "new run", True, now=13 * day)
    store.expire(now=13 * day)
    assert store.read("Old", None, 0)["attempts"] == []
    assert store.read("New", None, 0)["chunk"] == "new run"
    assert len(os.listdir(tmp_path / "logs")) == 1


def test_a_log_disk_that_refuses_writes_costs_the_logs_only(tmp_path: Path, caplog) -> None:
    from luigi.scheduler import Scheduler

    logs = tmp_path / "logs"
    logs.mkdir()
    now = 1_000_000.0
    segment = logs / (time.strftime("%Y-%m-%d", time.gmtime(now)) + ".log.jsonl")
    store = TaskLogStore(str(logs), keep_days=0)
    segment.symlink_to("/dev/full")  # every write to it: ENOSPC, as on a full disk
    scheduler = Scheduler(task_logs=store, clock=lambda: now)
    for n in range(3):
        scheduler.append_task_log("T", "w", f"run-{n}", 0, "x" * 10000, True)
        scheduler.flush()  # the state's flush, before the answer, and after it the checkpoint that
        scheduler.checkpoint(due_only=True)  # keeps the logs: neither raises
    errors = [r for r in caplog.records if "Task logs are not kept" in r.getMessage()]
    assert len(errors) == 1 and "No space left on device" in errors[0].getMessage()


def test_a_log_in_any_script_reads_back_the_same_after_luigid_reopens_its_segments(tmp_path: Path) -> None:
    text = 'quotes " and \\ backslashes, tabs\t, Grüße, 日本, 🙂\n'
    store = TaskLogStore(str(tmp_path / "logs"), keep_days=0)
    store.append("T", "w", "run-1", 0, text, False, now=1000.0)
    size = len(text.encode("utf-8"))
    store.append("T", "w", "run-1", size, "end\n", True, now=1001.5)
    store.close()
    for reading in (store, TaskLogStore(str(tmp_path / "logs"), keep_days=0)):
        log = reading.read("T", None, 0)
        assert log["chunk"] == text + "end\n" and log["nextOffset"] == size + 4 and log["ended"]
        assert log["attempts"][0]["bytes"] == size + 4


def test_a_flood_of_chunks_is_written_as_it_comes_not_held_until_the_next_answer(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    store = TaskLogStore(str(logs), keep_days=0)
    for n in range(4000):  # as plain-HTTP appends would come, with no RPC channel answer between them
        store.append("T", "w", f"run-{n}", 0, "x" * 1000, True, now=1000.0)
    written = sum(segment.stat().st_size for segment in logs.iterdir())
    held = 256 * 1100 + SEGMENT_BUFFER_BYTES  # the chunks taken and not kept yet, and the segment's buffer
    assert written > 4000 * 1000 - held
    store.close()


def test_kept_chunks_reach_the_disk_at_most_a_second_apart_and_reads_see_them_at_once(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    clock = [100.0]
    store = TaskLogStore(str(logs), keep_days=0, clock=lambda: clock[0])

    def on_disk() -> int:
        return sum(segment.stat().st_size for segment in logs.iterdir())

    store.append("T", "w", "run-1", 0, "first\n", False, now=1000.0)
    store.flush_if_due()  # luigid's checkpoint: the first hand-off goes out at once
    first = on_disk()
    assert first > 0
    clock[0] += FLUSH_EVERY_SECONDS / 2
    store.append("T", "w", "run-1", 6, "second\n", False, now=1000.5)
    store.flush_if_due()
    assert on_disk() == first  # kept in the segment's buffer, not written yet
    assert store.read("T", None, 0)["chunk"] == "first\nsecond\n"  # a read hands everything over first
    second = on_disk()
    assert second > first
    clock[0] += FLUSH_EVERY_SECONDS * 3 / 4  # a second after the first hand-off, not yet after the read's
    store.append("T", "w", "run-1", 13, "third\n", True, now=1001.0)
    store.flush_if_due()
    assert on_disk() == second
    clock[0] += FLUSH_EVERY_SECONDS / 4
    store.append("T", "w", "run-1", 19, "", True, now=1002.0)
    store.append("U", "w", "run-2", 0, "other\n", True, now=1002.0)
    store.flush_if_due()
    assert on_disk() > second
    again = TaskLogStore(str(logs), keep_days=0)
    assert again.read("T", None, 0)["chunk"] == "first\nsecond\nthird\n"
    assert again.read("U", None, 0)["chunk"] == "other\n"


REFUSED_WRITE = """
import json, os, resource, signal, sys
from luigi.scheduler.store.task_logs import TaskLogStore

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
logs = sys.argv[1]
store = TaskLogStore(logs, keep_days=0)
store.append("T", "w", "run-1", 0, "kept\\n", False, now=1000.0)
store.flush()
(name,) = os.listdir(logs)
written = os.path.getsize(os.path.join(logs, name))
resource.setrlimit(resource.RLIMIT_FSIZE, (written, resource.RLIM_INFINITY))  # the disk refuses more
store.append("T", "w", "run-1", 5, "x" * 100 + "\\n", False, now=1001.0)
store.flush()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room again
store.append("T", "w", "run-1", 106, "after\\n", True, now=1002.0)
print(json.dumps([store.read("T", None, 0), store.read("T", None, 106)]))
"""


def test_a_chunk_the_disk_refused_reads_as_marked_and_the_log_after_it_keeps_offsets(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", REFUSED_WRITE, str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    whole, from_offset = json.loads(done.stdout)
    assert whole["chunk"].startswith("kept\n[luigi: this part of the log was lost")
    assert len(whole["chunk"]) == 112 and whole["chunk"].endswith("after\n")
    assert whole["nextOffset"] == 112 and whole["ended"]
    assert from_offset["chunk"] == "after\n"
    assert "Task logs are not kept while" in done.stderr and "File too large" in done.stderr


def test_a_restarted_luigid_appends_to_the_day_s_segment_after_what_it_holds(tmp_path: Path) -> None:
    first = TaskLogStore(str(tmp_path / "logs"), keep_days=0)
    first.append("Before", "w", "r1", 0, "from before the restart\n", True, now=1000.0)
    first.close()
    second = TaskLogStore(str(tmp_path / "logs"), keep_days=0)
    second.append("After", "w", "r2", 0, "from after it\n", True, now=1001.0)
    second.close()
    for reading in (second, TaskLogStore(str(tmp_path / "logs"), keep_days=0)):
        assert reading.read("Before", None, 0)["chunk"] == "from before the restart\n"
        assert reading.read("After", None, 0)["chunk"] == "from after it\n"


def test_a_run_after_older_ones_expired_is_numbered_after_the_last_one_kept(tmp_path: Path) -> None:
    store = TaskLogStore(str(tmp_path / "logs"), keep_days=2)
    day = 86400.0
    store.append("T", "w", "r1", 0, "first run", True, now=10 * day)
    store.append("T", "w", "r2", 0, "second run", True, now=13 * day)
    store.expire(now=13 * day)
    store.append("T", "w", "r3", 0, "third run", True, now=13 * day + 1)
    log = store.read("T", None, 0)
    assert [a["attempt"] for a in log["attempts"]] == [2, 3] and log["chunk"] == "third run"
    assert store.read("T", 2, 0)["chunk"] == "second run"
