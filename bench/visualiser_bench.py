"""Visualiser benchmark: a 100,000-task scheduler behind luigid's server, driven by headless Chromium.

    .venv/bin/python -m bench.visualiser_bench                    # 100,000 tasks, 10 pages, 2,000-node graph
    .venv/bin/python -m bench.visualiser_bench --tasks 20000 --pages 4 --seconds 10
    .venv/bin/python -m bench.visualiser_bench --screenshots doc/images

It measures (a benchmark, not a test; the figures go in doc/visualiser.md):

* the task list's first render: from navigation to the first page of rows and the status counts;
* a worker's ``get_work`` latency over HTTP, alone and while ``--pages`` task-list pages refresh
  (every ``--refresh`` seconds);
* the dependency graph of a 2,000-task pipeline: from navigation until it is laid out and drawn.

The scheduler runs in a child process (``luigi.server.SchedulerServer`` over a ``Scheduler``, as in
luigid), so the browser and the measuring client do not share its interpreter. It needs Chromium
(``scripts/ensure-browser.sh``) and the Playwright package.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

CHROMIUM = os.environ.get("LUIGI_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VISUALISER = "/static/visualiser/index.html"
BENCH_WORKER = "Worker(salt=1, workers=8, host=bench-01, username=bench, pid=1001)"
GRAPH_ROOT = "BigPipeline()"
GRAPH_DAYS = 111  # 18 tasks a day, a shared Config and the root: 2,000 tasks
SOURCES = 8


# -- the scheduler side (child process) ------------------------------------------------------------------


def add(
    sch: Any, task_id: str, family: str, params: dict[str, str], deps: list[str] | None = None, **kw: Any
) -> None:
    sch.add_task(worker=BENCH_WORKER, task_id=task_id, family=family, params=params, deps=deps or [], **kw)


def add_graph(sch: Any) -> int:
    """BigPipeline <- DailyReport(d) <- Aggregate(d) <- Clean(d, s) <- Fetch(d, s) <- Config: 2,000 tasks."""
    add(sch, "Config()", "Config", {}, status="DONE")
    reports = []
    for day in range(GRAPH_DAYS):
        date = f"2020-{1 + day // 28:02d}-{1 + day % 28:02d}"
        cleans = []
        for source in range(SOURCES):
            params = {"date": date, "source": f"s{source}"}
            fetch = f"Fetch(date={date}, source=s{source})"
            add(sch, fetch, "Fetch", params, ["Config()"], status="DONE" if day % 3 else "PENDING")
            clean = f"Clean(date={date}, source=s{source})"
            add(sch, clean, "Clean", params, [fetch])
            cleans.append(clean)
        aggregate = f"Aggregate(date={date})"
        add(sch, aggregate, "Aggregate", {"date": date}, cleans)
        report = f"DailyReport(date={date})"
        add(sch, report, "DailyReport", {"date": date}, [aggregate])
        reports.append(report)
    add(sch, GRAPH_ROOT, "BigPipeline", {}, reports)
    return 2 + GRAPH_DAYS * (2 * SOURCES + 2)


def add_filler(sch: Any, count: int) -> None:
    """Reports of ten parts, each of nine leaves; a third done, some failed, to make up ``count``."""
    made = 0
    report = 0
    while made < count:
        parts = []
        for part in range(10):
            leaves = []
            for leaf in range(9):
                if made >= count - 2:
                    break
                task_id = f"Leaf(report={report}, part={part}, leaf={leaf})"
                status = "DONE" if leaf % 3 == 0 else "PENDING"
                add(
                    sch,
                    task_id,
                    "Leaf",
                    {"report": str(report), "part": str(part), "leaf": str(leaf)},
                    status=status,
                )
                leaves.append(task_id)
                made += 1
            if made >= count - 1:
                break
            part_id = f"Part(report={report}, part={part})"
            add(sch, part_id, "Part", {"report": str(report), "part": str(part)}, leaves, priority=part % 3)
            parts.append(part_id)
            made += 1
        if made < count:
            add(sch, f"Report(report={report})", "Report", {"report": str(report)}, parts, priority=5)
            made += 1
        report += 1


def fail_and_run_some(sch: Any, failures: int = 50, running: int = 8) -> None:
    """Grant tasks to the bench worker: fail some (with a traceback), leave a few running."""
    for i in range(failures + running):
        task_id = sch.get_work(worker=BENCH_WORKER, host="bench-01")["task_id"]
        if task_id is None:
            return
        if i < failures:
            expl = (
                f'Traceback (most recent call last):\n  File "etl.py", line 7, in run\nIOError: disk {i} full'
            )
            sch.add_task(worker=BENCH_WORKER, task_id=task_id, status="FAILED", expl=expl)


def serve(tasks: int, port: int) -> None:
    """Build the scheduler and serve it until killed (the child process's whole life)."""
    from luigi.scheduler import Scheduler, SchedulerConfig
    from luigi.server import SchedulerServer, ServerSettings

    sch = Scheduler(SchedulerConfig(record_task_history=False))
    sch.add_worker(
        worker=BENCH_WORKER, info={"host": "bench-01", "pid": 1001, "username": "bench", "workers": 8}
    )
    graph = add_graph(sch)
    add_filler(sch, tasks - graph)
    fail_and_run_some(sch)
    server = SchedulerServer(sch, ServerSettings(), port=port)
    server.bind()
    print(f"READY {server.bound_port()} {len(sch.task_list(limit=False))}", flush=True)
    asyncio.run(server.serve())


@contextmanager
def scheduler_process(tasks: int) -> Iterator[tuple[str, int]]:
    """A child process serving a scheduler of ``tasks`` tasks; yields (base url, task count)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.visualiser_bench", "_serve", "--tasks", str(tasks)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError("the scheduler process did not start")
        yield f"http://127.0.0.1:{line[1]}", int(line[2])
    finally:
        child.terminate()
        child.wait(timeout=30)


# -- the measuring side -------------------------------------------------------------------------------


class Api:
    """A plain HTTP client for one luigid (one connection, like a worker's)."""

    def __init__(self, base_url: str) -> None:
        host, port = base_url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=60)

    def call(self, method: str, **kwargs: Any) -> Any:
        body = urlencode({"data": json.dumps(kwargs)})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        self.connection.request("POST", f"/api/{method}", body=body, headers=headers)
        reply = self.connection.getresponse()
        payload = json.loads(reply.read())
        if reply.status != 200:
            raise RuntimeError(f"{method}: {payload}")
        return payload["response"]


def get_work_latencies(base_url: str, seconds: float) -> list[float]:
    """A worker's loop for ``seconds``: get_work (timed, ms), then report the task DONE."""
    api = Api(base_url)
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        reply = api.call("get_work", worker=BENCH_WORKER, host="bench-01")
        latencies.append(1000 * (time.perf_counter() - started))
        if reply.get("task_id"):
            api.call("add_task", worker=BENCH_WORKER, task_id=reply["task_id"], status="DONE")
        time.sleep(0.005)  # a real worker does some work between requests
    return latencies


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "calls": len(ordered),
        "median_ms": statistics.median(ordered),
        "mean_ms": statistics.fmean(ordered),
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))],
    }


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, refresh_seconds: float | None = None, width: int = 1440, height: int = 900) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(120_000)
    if refresh_seconds is not None:
        context.add_init_script(
            f"localStorage.setItem('luigi.visualiser.refreshSeconds', '{refresh_seconds}')"
        )
    return context.new_page()


def first_render_ms(browser: Any, base_url: str) -> float:
    """Navigation start to the first rows and every main count on screen (the page's own clock)."""
    page = new_page(browser)
    page.goto(f"{base_url}{VISUALISER}#tab=tasks")
    page.wait_for_function(
        "() => document.querySelectorAll('.task-row').length > 0 && "
        "[...document.querySelectorAll('.cards:not(.cards-secondary) .card-count')]"
        ".every(c => /^[0-9,]+$/.test(c.textContent))"
    )
    elapsed = page.evaluate("() => performance.now()")
    page.context.close()
    return float(elapsed)


def graph_render_ms(browser: Any, base_url: str) -> tuple[float, int, int]:
    """Navigation start to the 2,000-task graph laid out and drawn; also its node and edge counts."""
    page = new_page(browser, refresh_seconds=300)
    page.goto(f"{base_url}{VISUALISER}#tab=graph&taskId={quote(GRAPH_ROOT)}&hideDone=0&invert=0")
    page.wait_for_selector(".graph-view[data-state=ready]")
    elapsed = page.evaluate("() => performance.now()")
    nodes = page.locator(".graph-svg .node").count()
    edges = page.locator(".graph-svg .edge").count()
    page.context.close()
    return float(elapsed), nodes, edges


def measure(tasks: int, pages: int, seconds: float, refresh: float) -> dict[str, Any]:
    results: dict[str, Any] = {"tasks": tasks, "pages": pages, "refresh_s": refresh}
    with scheduler_process(tasks) as (base_url, count), chromium() as browser:
        results["tasks"] = count
        first_render_ms(browser, base_url)  # warm-up: the server computes display names once
        results["list_first_render_ms"] = [round(first_render_ms(browser, base_url)) for _ in range(3)]
        results["get_work_alone"] = summary(get_work_latencies(base_url, seconds))
        open_pages = [new_page(browser, refresh_seconds=refresh) for _ in range(pages)]
        for page in open_pages:
            page.goto(f"{base_url}{VISUALISER}#tab=tasks")
        for page in open_pages:
            page.wait_for_selector(".task-row")
        results["get_work_with_pages"] = summary(get_work_latencies(base_url, seconds))
        results["page_refreshes"] = sum(
            page.evaluate("() => window.luigiVisualiser.live.ticks") for page in open_pages
        )
        for page in open_pages:
            page.context.close()
        graph = [graph_render_ms(browser, base_url) for _ in range(3)]
        results["graph_render_ms"] = [round(g[0]) for g in graph]
        results["graph_nodes"], results["graph_edges"] = graph[0][1], graph[0][2]
    alone, loaded = results["get_work_alone"], results["get_work_with_pages"]
    results["get_work_median_rise_pct"] = round(100 * (loaded["median_ms"] / alone["median_ms"] - 1), 1)
    results["get_work_mean_rise_pct"] = round(100 * (loaded["mean_ms"] / alone["mean_ms"] - 1), 1)
    return results


def report(results: dict[str, Any]) -> None:
    alone, loaded = results["get_work_alone"], results["get_work_with_pages"]
    pages, refresh = results["pages"], results["refresh_s"]
    print(f"scheduler: {results['tasks']:,} tasks; {pages} pages refreshing every {refresh} s")
    print(f"task list first render (ms, 3 runs): {results['list_first_render_ms']}")
    print("get_work latency        calls   median     mean      p95")
    for label, row in (("alone", alone), (f"{results['pages']} pages open", loaded)):
        figures = " ".join(f"{row[key]:>7.2f}ms" for key in ("median_ms", "mean_ms", "p95_ms"))
        print(f"  {label:<20} {row['calls']:>6} {figures}")
    print(
        f"  rise with pages: median {results['get_work_median_rise_pct']:+.1f}%, "
        f"mean {results['get_work_mean_rise_pct']:+.1f}% ({results['page_refreshes']} page refreshes)"
    )
    print(
        f"graph of {results['graph_nodes']:,} nodes / {results['graph_edges']:,} edges, "
        f"navigation to drawn (ms, 3 runs): {results['graph_render_ms']}"
    )


# -- screenshots for the documentation ------------------------------------------------------------------

DEMO_DAYS = [f"2024-05-{d:02d}" for d in range(1, 15)]
DEMO_SOURCES = ("orders", "users", "clicks", "payments")
DEMO_REGIONS = ("eu", "us", "apac")
DEMO_ROOT = f"NightlyWarehouse(date={DEMO_DAYS[-1]})"
DEMO_MODULE = "pipelines.warehouse"
DEMO_HOSTS = (("etl-01", 4711, 4, 21873), ("etl-02", 815, 2, 9920), ("gpu-01", 42, 1, 3310))
DEMO_WORKERS = {
    name: f"Worker(salt={salt}, workers={n}, host={name}.example.com, username=etl, pid={pid})"
    for name, salt, n, pid in DEMO_HOSTS
}
TRACEBACK = """Traceback (most recent call last):
  File "/srv/etl/luigi/worker/task_process.py", line 171, in run
    self.task.run()
  File "/srv/etl/pipelines/warehouse.py", line 88, in run
    rows = validate(read_csv(self.input().path))
  File "/srv/etl/pipelines/checks.py", line 31, in validate
    raise ValueError(f"row {n}: amount {value!r} is not a number")
ValueError: row 1432: amount '12,50 €' is not a number"""


class ShiftedClock:
    """Wall-clock time moved back by ``offset`` seconds: lets the demo have a past."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() - self.offset


def demo_scheduler() -> Any:
    """Two weeks of a nightly warehouse: finished days, a failure, running loads, queued days."""
    from luigi.scheduler import Scheduler, SchedulerConfig

    clock = ShiftedClock(6 * 3600)
    config = SchedulerConfig(record_task_history=False, resources={"db": 4, "gpu": 2, "api_quota": 10})
    sch = Scheduler(config, clock=clock)
    planner = DEMO_WORKERS["etl-01"]
    for name, _, processes, pid in DEMO_HOSTS:
        info = {"host": f"{name}.example.com", "username": "etl", "pid": pid, "workers": processes}
        sch.add_worker(worker=DEMO_WORKERS[name], info=info)
    days = []
    for i, date in enumerate(DEMO_DAYS):
        finished = i < 10
        regions = []
        for region in DEMO_REGIONS:
            cleans = []
            for source in DEMO_SOURCES:
                params = {"date": date, "source": source}
                raw = f"RawDump(date={date}, source={source})"
                sch.add_task(
                    worker=planner,
                    task_id=raw,
                    family="RawDump",
                    module=DEMO_MODULE,
                    params=params,
                    status="DONE",
                    runnable=False,
                )
                fetch = f"Fetch(date={date}, source={source})"
                sch.add_task(
                    worker=planner,
                    task_id=fetch,
                    family="Fetch",
                    module=DEMO_MODULE,
                    params=params,
                    deps=[raw],
                    resources={"api_quota": 2},
                    status="DONE" if finished else "PENDING",
                    runnable=False,
                    priority=20 if source == "orders" else 0,
                    retry_policy_dict={"retry_count": 1} if (i, source) == (12, "payments") else None,
                )
                clean = f"Clean(date={date}, source={source})"
                sch.add_task(
                    worker=planner,
                    task_id=clean,
                    family="Clean",
                    module=DEMO_MODULE,
                    params=params,
                    deps=[fetch],
                    resources={"db": 1},
                    status="DONE" if finished else "PENDING",
                    runnable=False,
                )
                cleans.append(clean)
            aggregate = f"Aggregate(date={date}, region={region})"
            sch.add_task(
                worker=planner,
                task_id=aggregate,
                family="Aggregate",
                module=DEMO_MODULE,
                params={"date": date, "region": region},
                deps=cleans,
                status="DONE" if finished else "PENDING",
                runnable=False,
            )
            regions.append(aggregate)
        report = f"DailyReport(date={date})"
        sch.add_task(
            worker=planner,
            task_id=report,
            family="DailyReport",
            module=DEMO_MODULE,
            params={"date": date, "format": "html"},
            deps=regions,
            status="DONE" if finished else "PENDING",
            runnable=False,
            priority=3,
        )
        days.append(report)
    sch.add_task(
        worker=planner,
        task_id=DEMO_ROOT,
        family="NightlyWarehouse",
        module=DEMO_MODULE,
        params={"date": DEMO_DAYS[-1]},
        deps=days,
        runnable=False,
    )
    _demo_activity(sch, clock)
    return sch


def _demo_activity(sch: Any, clock: ShiftedClock) -> None:
    """Day 11 fails in one place, day 12 is loading, day 13 has a task disabled after failing twice."""
    etl1, etl2, gpu = DEMO_WORKERS["etl-01"], DEMO_WORKERS["etl-02"], DEMO_WORKERS["gpu-01"]
    d11, d12, d13 = DEMO_DAYS[10], DEMO_DAYS[11], DEMO_DAYS[12]
    for source in DEMO_SOURCES:
        sch.add_task(worker=etl1, task_id=f"Fetch(date={d11}, source={source})", status="DONE")
        if source != "payments":
            sch.add_task(worker=etl1, task_id=f"Clean(date={d11}, source={source})", status="DONE")
    clock.offset = 4 * 60  # recent enough that retry_delay has not turned them PENDING again
    failed = f"Clean(date={d11}, source=payments)"
    sch.add_task(worker=etl2, task_id=failed, status="FAILED", expl=TRACEBACK)
    fragile = f"Fetch(date={d13}, source=payments)"
    sch.add_task(
        worker=etl2,
        task_id=fragile,
        status="FAILED",
        expl="IOError: the payments API answered 503 three times",
    )
    clock.offset = 27 * 60
    for worker, source in ((etl1, "orders"), (etl1, "users"), (gpu, "clicks")):
        task_id = f"Fetch(date={d12}, source={source})"
        sch.add_task(
            worker=worker,
            task_id=task_id,
            runnable=True,
            accepts_messages=True,
            tracking_url=f"https://jobs.example.com/etl/{source}",
        )
        assert sch.get_work(worker=worker, host="demo")["task_id"] == task_id
        clock.offset -= 6 * 60
    sch.set_task_status_message(
        task_id=f"Fetch(date={d12}, source=orders)", status_message="Downloaded 184,220 of 312,000 rows"
    )
    sch.set_task_progress_percentage(task_id=f"Fetch(date={d12}, source=orders)", progress_percentage=59)
    sch.set_task_progress_percentage(task_id=f"Fetch(date={d12}, source=users)", progress_percentage=12)
    clock.offset = 0
    for worker in DEMO_WORKERS.values():
        sch.ping(worker=worker)


# (file, address, what shows when it is drawn, a row to hover so its actions show (or None)).
SCREENSHOTS = (
    ("visualiser-tasks.png", "#tab=tasks", ".task-row", ".task-row:has(.badge.st-FAILED)"),
    (
        "visualiser-task-detail.png",
        f"#tab=tasks&status=FAILED&detail={quote('Clean(date=2024-05-11, source=payments)')}",
        "#task-detail .traceback",
        None,
    ),
    (
        "visualiser-graph.png",
        f"#tab=graph&taskId={quote('DailyReport(date=2024-05-12)')}&hideDone=0&invert=0",
        ".graph-view[data-state=ready]",
        None,
    ),
    ("visualiser-workers.png", "#tab=workers", ".worker-card", None),
    ("visualiser-resources.png", "#tab=resource", ".resource-table", None),
)


def take_screenshots(directory: Path, only: list[str] | None = None) -> None:
    """Serve the demo scheduler in this process and save a screenshot of every view (or those named
    in ``only``) in ``directory``."""
    from luigi.server import SchedulerServer, ServerSettings

    directory.mkdir(parents=True, exist_ok=True)
    server = SchedulerServer(demo_scheduler(), ServerSettings(), port=0)
    server.bind()
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    server.ready.wait(30)
    try:
        with chromium() as browser:
            for name, fragment, ready, hover in SCREENSHOTS:
                if only and name not in only:
                    continue
                page = new_page(browser, refresh_seconds=300)
                page.goto(f"{server.base_url()}{VISUALISER}{fragment}")
                page.wait_for_selector(ready)
                if hover:
                    page.locator(hover).first.hover()
                page.wait_for_timeout(400)  # let the counts settle
                page.screenshot(path=str(directory / name))
                page.context.close()
                print(f"saved {directory / name}")
    finally:
        server.stop()
        thread.join(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", default="measure", choices=["measure", "_serve"])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the scheduler (default 100,000)")
    parser.add_argument(
        "--pages", type=int, default=10, help="task-list pages refreshing at once (default 10)"
    )
    parser.add_argument(
        "--refresh", type=float, default=5, help="their refresh interval in seconds (default 5)"
    )
    parser.add_argument(
        "--seconds", type=float, default=20, help="length of each get_work phase (default 20)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--screenshots", type=Path, help="instead, save a screenshot of every view here")
    parser.add_argument(
        "--only", nargs="+", metavar="FILE", help="with --screenshots: only these (visualiser-tasks.png ...)"
    )
    args = parser.parse_args(argv)
    if args.mode == "_serve":
        serve(args.tasks, 0)
        return
    if args.screenshots is not None:
        take_screenshots(args.screenshots, args.only)
        return
    results = measure(args.tasks, args.pages, args.seconds, args.refresh)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
