"""``luigi-grep`` against a real luigid that a real worker filled: search by id prefix and by status."""

from __future__ import annotations

import importlib
import sys

from helpers.luigid import running_luigid

from luigi.tools.luigi_grep import LuigiGrep

DAY = "2024-01-02"


def parse_jobs(stdout: str) -> dict[str, tuple[str, dict[str, list[str]]]]:
    """``{task_id: (status, {dep_status: [dep ids]})}`` from luigi-grep's output after the fetch line."""
    jobs: dict[str, tuple[str, dict[str, list[str]]]] = {}
    current: dict[str, list[str]] = {}
    group: list[str] = []
    for line in stdout.splitlines()[1:]:
        if line.startswith("    "):
            group.append(line.strip())
        elif line.startswith("  status="):
            group = current.setdefault(line.split("=", 1)[1], [])
        else:
            name, rest = line.split(": ", 1)
            assert rest.endswith(", Dependencies:"), line
            current = {}
            jobs[name] = (rest.removesuffix(", Dependencies:"), current)
    return jobs


def ids(pipeline):
    """The task ids of the pipeline's tasks, computed by the same code the worker ran."""
    sys.path.insert(0, str(pipeline.root))
    try:
        module = importlib.import_module("tools_pipeline")
    finally:
        sys.path.remove(str(pipeline.root))
    sys.modules.pop("tools_pipeline", None)
    day = module.Report.day.parse(DAY)
    return {
        "Report": module.Report(day).task_id,
        "Clean": module.Clean(day).task_id,
        "Raw": module.Raw(day).task_id,
        "Lookup": module.Lookup().task_id,
    }


def test_luigi_grep_finds_tasks_by_prefix_and_status_in_a_running_scheduler(pipeline, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLS_DATA", str(pipeline.data))
    (pipeline.data / "raw-2024-01-02.txt").write_text("raw")
    (pipeline.data / "lookup.txt").write_text("lookup")
    with running_luigid(tmp_path) as luigid:
        port = str(luigid.port)
        worker = pipeline.run(
            "luigi", "--module", "tools_pipeline", "Report", "--day", DAY,
            "--scheduler-host", "127.0.0.1", "--scheduler-port", port, check=False,
        )  # fmt: skip
        assert "clean is broken today" in worker.stdout + worker.stderr
        task = ids(pipeline)
        where = ["--scheduler-host", "127.0.0.1", "--scheduler-port", port]

        failed = pipeline.run("luigi-grep", *where, "--status", "failed")
        assert failed.stdout.splitlines()[0] == f"Fetching from url: http://127.0.0.1:{port}/api/graph"
        assert parse_jobs(failed.stdout) == {task["Clean"]: ("FAILED", {"DONE": [task["Raw"]]})}

        by_prefix = pipeline.run("luigi-grep", *where, "--prefix", "Report")
        status, deps = parse_jobs(by_prefix.stdout)[task["Report"]]
        assert status == "PENDING"
        assert deps == {"FAILED": [task["Clean"]], "DONE": [task["Lookup"]]}
        assert list(parse_jobs(by_prefix.stdout)) == [task["Report"]]

        grep = LuigiGrep("127.0.0.1", port)
        assert grep.graph_url == f"http://127.0.0.1:{port}/api/graph"
        assert set(grep._fetch_json()["response"]) == set(task.values())
        done_ids = sorted(job["name"] for job in grep.status_search("DONE"))
        assert done_ids == sorted([task["Lookup"], task["Raw"]])


def test_a_dependency_the_scheduler_does_not_know_is_grouped_as_unknown():
    jobs = {"A_1": {"status": "PENDING", "deps": ["B_2", "C_3"]}, "B_2": {"status": "DONE", "deps": []}}
    result = LuigiGrep._build_results(jobs, "A_1")
    assert result["name"] == "A_1" and result["status"] == "PENDING"
    assert dict(result["deps_by_status"]) == {"DONE": ["B_2"], "UNKNOWN": ["C_3"]}


def test_an_unreachable_scheduler_is_one_line_and_exit_status_1(pipeline):
    from helpers.luigid import free_port

    where = ["--scheduler-host", "127.0.0.1", "--scheduler-port", str(free_port())]
    done = pipeline.run("luigi-grep", *where, "--status", "FAILED", check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("luigi-grep: error: cannot read http://127.0.0.1:")
    assert "Traceback" not in done.stderr
