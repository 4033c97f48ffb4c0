"""``luigi-grep``: find tasks in a running scheduler's graph by task-id prefix or by status.

::

    $ luigi-grep --scheduler-host localhost --scheduler-port 8082 --status FAILED
    Fetching from url: http://localhost:8082/api/graph
    Report_2024_01_01_ab12cd34ef: FAILED, Dependencies:
      status=DONE
        Extract_2024_01_01_0f1e2d3c4b

For each matching task: a line ``<task id>: <status>, Dependencies:``, then its dependencies grouped
by their status (``UNKNOWN`` for one the scheduler does not know). ``--prefix`` wins over ``--status``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

__all__ = ["LuigiGrep", "main"]

UNKNOWN_STATUS = "UNKNOWN"
FETCH_TIMEOUT = 60.0


class LuigiGrep:
    """Queries ``/api/graph`` of the scheduler at ``host:port`` and filters its tasks."""

    def __init__(self, host: str, port: int | str) -> None:
        self._host = host
        self._port = port

    @property
    def graph_url(self) -> str:
        """The URL of the scheduler's whole-graph RPC."""
        return f"http://{self._host}:{self._port}/api/graph"

    def _fetch_json(self) -> dict[str, Any]:
        """The decoded reply of ``/api/graph`` (``{"response": {task_id: task, ...}}``); says where from."""
        print("Fetching from url: " + self.graph_url)
        with urlopen(self.graph_url, timeout=FETCH_TIMEOUT) as reply:
            decoded: dict[str, Any] = json.loads(reply.read().decode("utf-8"))
        return decoded

    @staticmethod
    def _build_results(jobs: dict[str, Any], job: str) -> dict[str, Any]:
        """``{"name", "status", "deps_by_status"}`` of one task, its dependencies grouped by status."""
        deps_by_status: dict[str, list[str]] = defaultdict(list)
        for dep in jobs[job].get("deps", []):
            status = jobs[dep]["status"] if dep in jobs else UNKNOWN_STATUS
            deps_by_status[status].append(dep)
        return {"name": job, "status": jobs[job]["status"], "deps_by_status": deps_by_status}

    def prefix_search(self, job_name_prefix: str) -> Iterator[dict[str, Any]]:
        """The tasks whose id starts with ``job_name_prefix``."""
        jobs = self._fetch_json()["response"]
        for job in jobs:
            if job.startswith(job_name_prefix):
                yield self._build_results(jobs, job)

    def status_search(self, status: str) -> Iterator[dict[str, Any]]:
        """The tasks with ``status`` (compared case-insensitively)."""
        jobs = self._fetch_json()["response"]
        for job, info in jobs.items():
            if str(info["status"]).lower() == status.lower():
                yield self._build_results(jobs, job)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="luigi-grep",
        description="luigi-grep is used to search for workflows using the luigi scheduler's json api",
    )
    parser.add_argument("--scheduler-host", default="localhost", help="hostname of the luigi scheduler")
    parser.add_argument("--scheduler-port", default="8082", help="port of the luigi scheduler")
    parser.add_argument("--prefix", default=None, help="prefix of a task query to search for")
    parser.add_argument("--status", default=None, help="search for jobs with the given status")
    return parser


def _print_job(job: dict[str, Any]) -> None:
    print(f"{job['name']}: {job['status']}, Dependencies:")
    for status, deps in job["deps_by_status"].items():
        print(f"  status={status}")
        for dep in deps:
            print(f"    {dep}")


def main(argv: Sequence[str] | None = None) -> None:
    """The ``luigi-grep`` command; exits 1 with one line when the scheduler cannot be reached."""
    args = _parser().parse_args(argv)
    grep = LuigiGrep(args.scheduler_host, args.scheduler_port)
    results: Iterator[dict[str, Any]] = iter(())
    if args.prefix:
        results = grep.prefix_search(args.prefix)
    elif args.status:
        results = grep.status_search(args.status)
    try:
        for job in results:
            _print_job(job)
    except (URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"luigi-grep: error: cannot read {grep.graph_url}: {reason}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
