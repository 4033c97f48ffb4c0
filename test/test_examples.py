"""The README's example pipelines run as written, through the real ``luigi`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.postgres import fresh_schema, require_postgres
from helpers.s3_server import s3_server  # noqa: F401  # the session fixture: moto's real HTTP server
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent


def luigi_command(
    args: list[str], out_dir: Path, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LUIGI_EXAMPLES_DIR=str(out_dir), PYTHONPATH=str(REPO))
    env.pop("LUIGI_CONFIG_PATH", None)
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "luigi", *args, "--local-scheduler", "--no-lock"],
        cwd=out_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_word_count_merges_every_file_into_one_report(tmp_path):
    done = luigi_command(
        ["--module", "examples.wordcount", "WordCountReport", "--files", "3", "--workers", "2"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "This progress looks :)" in done.stderr
    report = (tmp_path / "wordcount" / "report-3.tsv").read_text().splitlines()
    total = sum(int(line.split("\t")[1]) for line in report)
    assert total == 3 * 200 * 12  # three files of 200 lines of 12 words


@pytest.mark.slow
def test_daily_report_backfill_builds_exactly_the_days_with_logs(tmp_path):
    env = dict(os.environ, LUIGI_EXAMPLES_DIR=str(tmp_path), PYTHONPATH=str(REPO))
    subprocess.run(
        [sys.executable, "-m", "examples.daily_report", "make-logs", "2024-01-01", "2024-01-03"],
        cwd=tmp_path,
        env=env,
        check=True,
    )
    done = luigi_command(
        [
            "--module",
            "examples.daily_report",
            "RangeDaily",
            "--of",
            "DailyReport",
            "--start",
            "2024-01-01",
            "--stop",
            "2024-01-04",
            "--days-back",
            "5000",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    reports = sorted(p.name for p in (tmp_path / "daily" / "reports").iterdir())
    assert reports == ["2024-01-01.json", "2024-01-02.json", "2024-01-03.json"]
    day = json.loads((tmp_path / "daily" / "reports" / "2024-01-02.json").read_text())
    assert sum(day["requests"].values()) == 100


@pytest.mark.slow
def test_daily_report_for_a_day_without_its_log_reports_missing_external_data(tmp_path):
    done = luigi_command(
        [
            "--module",
            "examples.daily_report",
            "DailyReport",
            "--date",
            "2024-02-01",
            "--retcode-missing-data",
            "20",
        ],
        tmp_path,
    )
    assert done.returncode == 20, done.stderr
    assert "were missing external dependencies" in done.stderr


@pytest.mark.slow
def test_fan_out_fan_in_publishes_the_sum_of_every_shard(tmp_path):
    done = luigi_command(
        ["--module", "examples.fan_out_fan_in", "Publish", "--shards", "4", "--workers", "3"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    expected = sum(shard * 10 + i for shard in range(4) for i in range(10))
    assert (tmp_path / "fan" / "published-4.txt").read_text() == f"total {expected}\n"


def test_hello_world_greets_by_name(tmp_path):
    done = luigi_command(["--module", "examples.hello_world", "HelloWorld", "--name", "ada"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "hello" / "ada.txt").read_text() == "Hello, ada!\n"


@pytest.mark.slow
def test_demo_serves_luigid_runs_the_pipeline_and_stops_with_demo_exit(tmp_path):
    env = dict(os.environ, DEMO_EXIT="1", PYTHONPATH=str(REPO), LUIGI_EXAMPLES_DIR=str(tmp_path / "out"))
    env.pop("LUIGI_CONFIG_PATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "luigid is serving at http://127.0.0.1:" in done.stdout
    assert "/static/visualiser/index.html" in done.stdout
    assert "This progress looks :)" in done.stderr
    assert (tmp_path / "out" / "wordcount" / "report-6.tsv").exists()
    assert (tmp_path / "data" / "demo" / "state.sqlite").exists()  # luigid kept its state there


@pytest.mark.slow
def test_s3_to_postgres_loads_each_day_once_and_reports_totals_per_region(tmp_path, s3_server):  # noqa: F811
    url = require_postgres()
    bucket = s3_server.new_bucket()
    with fresh_schema(url) as schema_url:
        db = make_url(schema_url)
        config = tmp_path / "luigi.cfg"
        config.write_text(
            f"[warehouse]\nbucket = {bucket}\nhost = {db.host}\nport = {db.port}\n"
            f"database = {db.database}\nuser = {db.username}\npassword = {db.password}\n"
            f"[s3]\nendpoint_url = {s3_server.endpoint_url}\naws_access_key_id = {s3_server.access_key}\n"
            f"aws_secret_access_key = {s3_server.secret_key}\nregion_name = {s3_server.region}\n"
        )
        # The tables land in the test's own schema: libpq reads the search path from PGOPTIONS.
        env = {"LUIGI_CONFIG_PATH": str(config), "PGOPTIONS": db.query["options"]}
        uploaded = run_example(["upload", "2024-01-01", "2024-01-03"], tmp_path, env)
        assert uploaded.returncode == 0, uploaded.stderr
        args = ["--module", "examples.s3_to_postgres", "SalesReport", "--start", "2024-01-01"]
        first = luigi_command([*args, "--stop", "2024-01-04"], tmp_path, env)
        assert first.returncode == 0, first.stderr
        again = luigi_command([*args, "--stop", "2024-01-04"], tmp_path, env)  # the copies are done
        assert again.returncode == 0 and "complete" in again.stderr
        rows = query(schema_url, "SELECT region, COUNT(*), SUM(amount) FROM sales GROUP BY region")

    report = (tmp_path / "s3_to_postgres" / "report-2024-01-01-2024-01-04.tsv").read_text()
    totals = {region: total for region, total in (line.split("\t") for line in report.splitlines())}
    assert sorted(totals) == ["east", "north", "south", "west"]
    assert {region: count for region, count, _ in rows} == dict.fromkeys(totals, 3)  # each day loaded once
    assert {region: f"{total:.2f}" for region, _, total in rows} == totals
    assert s3_server.secret_key not in first.stderr + again.stderr


def run_example(args: list[str], out_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, LUIGI_EXAMPLES_DIR=str(out_dir), PYTHONPATH=str(REPO), **env)
    return subprocess.run(
        [sys.executable, "-m", "examples.s3_to_postgres", *args],
        cwd=out_dir,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def query(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql))]
    finally:
        engine.dispose()


# -- examples/spark_wordcount.py against the test's standalone Spark cluster -------------------------

from helpers.spark_cluster import spark_standalone  # noqa: E402, F401  # a real Spark master and worker


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spark_word_count_counts_every_file_on_the_standalone_cluster(tmp_path, spark_standalone):  # noqa: F811
    config = tmp_path / "luigi.cfg"
    config.write_text(spark_standalone.config_file_section())
    done = luigi_command(
        ["--module", "examples.spark_wordcount", "SparkWordCountReport", "--texts", "3"],
        tmp_path,
        {"LUIGI_CONFIG_PATH": str(config)},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    report = (tmp_path / "spark_wordcount" / "report-3.tsv").read_text().splitlines()
    assert sum(int(line.split("\t")[1]) for line in report) == 3 * 100 * 10  # 3 files, 100 lines of 10 words
    assert [app["state"] for app in spark_standalone.applications() if app["name"] == "SparkWordCount"] == [
        "FINISHED"
    ]


# -- examples/dask_fanout.py against the test's Dask scheduler and two Dask workers ----------------

from helpers.dask_cluster import dask_cluster  # noqa: E402, F401  # a real Dask scheduler and two workers


def test_dask_fan_out_runs_every_chunk_on_the_cluster_and_adds_them_up(tmp_path, dask_cluster):  # noqa: F811
    done = luigi_command(
        ["--module", "examples.dask_fanout", "DaskFanOut", "--chunks", "12", "--workers", "4"]
        + ["--worker-executor", "dask", "--dask-scheduler-address", dask_cluster.address],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    summary = json.loads((tmp_path / "dask_fanout" / "total-12.json").read_text())
    assert summary["total"] == sum(n * n for n in range(12 * 300_000))
    assert {int(where.rsplit(":", 1)[1]) for where in summary["ran_in"]} == dask_cluster.worker_pids()
