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


# -- examples/ray_fanout.py against the test's Ray cluster (a head node with two CPUs) ------------------

from helpers.ray_cluster import RayCluster, ray_cluster  # noqa: E402, F401  # a real local Ray cluster

from examples.ray_fanout import hits_in_batch  # noqa: E402


def test_ray_fan_out_runs_every_batch_on_ray_workers_and_adds_them_up(tmp_path, ray_cluster: RayCluster):  # noqa: F811
    done = luigi_command(
        ["--module", "examples.ray_fanout", "EstimatePi", "--batches", "6", "--workers", "2"]
        + ["--worker-executor", "ray", "--ray-address", ray_cluster.address],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    summary = json.loads((tmp_path / "ray_fanout" / "pi-6.json").read_text())
    assert summary["hits"] == sum(hits_in_batch(batch, 200_000) for batch in range(6))
    assert 3.1 < summary["pi"] < 3.2
    pids = {int(where.rsplit(":", 1)[1]) for where in summary["ran_in"]}
    assert len(pids) >= 2 and pids <= ray_cluster.worker_pids()


# -- examples/top_artists.py: local files, the HDFS stand-ins, and Spark -------------------------------

from helpers.hdfs_cluster import HdfsCluster, hadoop_cli, hdfs_cluster  # noqa: E402, F401  # HDFS stand-ins
from helpers.spark_cluster import spark_local  # noqa: E402, F401  # Spark in one local JVM

TOP_ARTISTS = ["--module", "examples.top_artists", "TopArtists", "--date-interval", "2024-03-01-2024-03-04"]


def top_artists_from(stream_files: list[Path], top_n: int) -> list[str]:
    """The report the pipeline should write, worked out from the raw stream records."""
    plays: dict[str, int] = {}
    for path in stream_files:
        for line in path.read_text().splitlines():
            artist = line.split("\t")[2]
            plays[artist] = plays.get(artist, 0) + 1
    ranked = sorted(plays.items(), key=lambda pair: (-pair[1], pair[0]))[:top_n]
    return [f"{rank}\t{artist}\t{count}" for rank, (artist, count) in enumerate(ranked, 1)]


def test_top_artists_with_local_outputs_ranks_the_most_played_over_the_interval(tmp_path):
    done = luigi_command([*TOP_ARTISTS, "--top-n", "4"], tmp_path)
    assert done.returncode == 0, done.stderr
    streams = sorted((tmp_path / "top_artists" / "streams").iterdir())
    assert [p.name for p in streams] == ["2024-03-01.tsv", "2024-03-02.tsv", "2024-03-03.tsv"]
    report = (tmp_path / "top_artists" / "top4-2024-03-01-2024-03-04-local.tsv").read_text().splitlines()
    assert report == top_artists_from(streams, 4)


@pytest.mark.slow
def test_top_artists_with_use_hdfs_keeps_streams_and_counts_on_hdfs(tmp_path, hdfs_cluster: HdfsCluster):  # noqa: F811
    config = tmp_path / "luigi.cfg"
    config.write_text(
        f"[hdfs]\nclient = {hdfs_cluster.client}\nnamenode_host = {hdfs_cluster.webhdfs.host}\n"
        f"[webhdfs]\nport = {hdfs_cluster.webhdfs.port}\n"
    )
    done = luigi_command([*TOP_ARTISTS, "--use-hdfs"], tmp_path, {"LUIGI_CONFIG_PATH": str(config)})
    assert done.returncode == 0, done.stderr[-5000:]
    days = ["2024-03-01", "2024-03-02", "2024-03-03"]
    streams = [hdfs_cluster.local(f"/examples/top_artists/streams/{day}.tsv") for day in days]
    assert hdfs_cluster.local("/examples/top_artists/plays/2024-03-01-2024-03-04.tsv").exists()
    assert not (tmp_path / "top_artists" / "streams").exists()  # nothing intermediate written locally
    leftovers = [
        p for p in hdfs_cluster.listing() if p.startswith("/tmp/") and hdfs_cluster.local(p).is_file()
    ]
    assert leftovers == []  # every write went through a temporary file that was renamed into place
    report = (tmp_path / "top_artists" / "top10-2024-03-01-2024-03-04-hdfs.tsv").read_text().splitlines()
    assert report == top_artists_from(streams, 10)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_top_artists_with_use_spark_counts_on_spark_as_the_worker_does(tmp_path, spark_local):  # noqa: F811
    config = tmp_path / "luigi.cfg"
    config.write_text(spark_local.config_file_section())
    env = {"LUIGI_CONFIG_PATH": str(config)}
    on_spark = luigi_command([*TOP_ARTISTS, "--top-n", "5", "--use-spark"], tmp_path, env)
    assert on_spark.returncode == 0, on_spark.stderr[-5000:]
    in_worker = luigi_command([*TOP_ARTISTS, "--top-n", "5"], tmp_path, env)
    assert in_worker.returncode == 0, in_worker.stderr[-5000:]
    plays = tmp_path / "top_artists" / "plays"
    spark_counts = (plays / "2024-03-01-2024-03-04-spark.tsv").read_text()
    assert spark_counts == (plays / "2024-03-01-2024-03-04.tsv").read_text()
    report = (tmp_path / "top_artists" / "top5-2024-03-01-2024-03-04-spark.tsv").read_text().splitlines()
    assert report == top_artists_from(sorted((tmp_path / "top_artists" / "streams").iterdir()), 5)


def test_top_artists_refuses_spark_on_hdfs_in_one_line(tmp_path):
    done = luigi_command([*TOP_ARTISTS, "--use-spark", "--use-hdfs"], tmp_path)
    assert "ValueError: --use-spark counts local files here: run it without --use-hdfs" in done.stderr
    assert "tasks whose scheduling failed" in done.stderr
    assert not (tmp_path / "top_artists").exists()
