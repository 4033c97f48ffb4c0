"""A stand-in ``hive`` command for luigi.contrib.hive's tests (no Hive can run here).

Run as ``python hive_standin.py STATE_DIR ARGS...`` by a launcher the test puts in ``[hive] command``. It
records every argument list (``calls.jsonl``) and answers, over tables kept in ``tables.json``, the
statements the module sends, in the forms Hive documents: ``use DB``, ``show tables like "T"`` (one name
per line), ``show partitions T partition (SPEC)`` (``k=v/k2=v2`` lines), ``describe T`` (tab-separated
column lines), ``describe formatted T [PARTITION (SPEC)]`` (with its ``Location:`` line), and from a file
(``-f``, after ``-i`` files, with ``--hiveconf``/``--hivevar``) ``CREATE TABLE`` and ``INSERT ... TABLE T
[PARTITION (...)]``. A missing table is ``Table T does not exist`` on stdout with exit 0 in the CDH 4
dialect, and ``FAILED: SemanticException [Error 10001]: Table not found T`` on stderr with exit 1 in
Apache's (``release`` in ``tables.json``); a statement it does not know fails as Hive's parser does.
Running an INSERT prints the Hadoop job lines Hive prints, tracking URL included. Not shipped.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

WAREHOUSE = "hdfs://namenode:8020/user/hive/warehouse"


class HiveFailure(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _spec(text: str) -> str:
    """``k='v', k2='v2'`` (quotes and backticks optional) as ``k=v/k2=v2`` in the order given."""
    pairs = [part.split("=", 1) for part in re.split(r"\s*,\s*", text.strip()) if part]
    return "/".join(f"{k.strip(' `')}={v.strip().strip(chr(39))}" for k, v in pairs)


NOT_FOUND = "FAILED: SemanticException [Error 10001]: Table not found {}"
_FLAGS = re.I | re.S


class Hive:
    """The statements, each a pattern and the method that answers it (what it prints on stdout)."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.database = "default"
        self.grammar = [
            (r"use\s+(\w+)", self.use),
            (r'show tables like "(\w+)"', self.show_tables),
            (r"show partitions (\w+) partition\s*\((.*)\)", self.show_partitions),
            (r"describe formatted (\w+)(?: PARTITION \((.*)\))?", self.describe_formatted),
            (r"describe (\w+)", self.describe),
            (r"create table (?:if not exists )?(\w+)\s*\((.*?)\)(?:\s*partitioned by \((.*)\))?",
             self.create),
            (r"insert (?:overwrite|into) table (\w+)(?:\s+partition\s*\((.*?)\))?.*", self.insert),
        ]

    def run(self, statement: str, variables: dict[str, str]) -> str:
        text = re.sub(r"\$\{hivevar:(\w+)\}", lambda m: variables[m.group(1)], statement.strip())
        for pattern, answer in self.grammar:
            if found := re.fullmatch(pattern, text, _FLAGS):
                return answer(*found.groups())
        word = text.split()[0]
        raise HiveFailure(f"FAILED: ParseException line 1:0 cannot recognize input near '{word}'", 64)

    def table(self, name: str) -> dict[str, Any] | None:
        return self.state["tables"].get(self.database, {}).get(name.lower())

    def existing(self, name: str) -> dict[str, Any]:
        table = self.table(name)
        if table is None:
            raise HiveFailure(NOT_FOUND.format(name))
        return table

    def missing(self, name: str) -> str:
        """A missing table as the dialect says it: on stdout with CDH 4, as a failure with Apache's."""
        if self.state.get("release") == "apache":
            raise HiveFailure(NOT_FOUND.format(name))
        return f"Table {name} does not exist"

    def use(self, database: str) -> str:
        self.database = database
        return ""

    def show_tables(self, name: str) -> str:
        return name.lower() + "\n" if self.table(name) else ""

    def show_partitions(self, name: str, spec: str) -> str:
        wanted = set(_spec(spec).split("/"))
        return "".join(p + "\n" for p in self.existing(name)["partitions"] if wanted <= set(p.split("/")))

    def describe_formatted(self, name: str, spec: str | None) -> str:
        table = self.table(name)
        if table is None:
            return self.missing(name)
        location = f"{WAREHOUSE}/{self.database}.db/{name.lower()}" + (f"/{_spec(spec)}" if spec else "")
        columns = "".join(f"{c}\t{t}\t\n" for c, t in table["columns"])
        header = "# col_name\tdata_type\tcomment\n"
        return f"{header}{columns}\n# Detailed Table Information\nLocation:           \t{location}\t\n"

    def describe(self, name: str) -> str:
        table = self.table(name)
        if table is None:
            return self.missing(name)
        return "".join(f"{c:<20}\t{t:<20}\t\n" for c, t in table["columns"])

    def create(self, name: str, columns: str, partitioned_by: str | None) -> str:
        pairs = [c.split() for c in columns.split(",")]
        tables = self.state["tables"].setdefault(self.database, {})
        tables[name.lower()] = {"columns": [[c[0], c[1]] for c in pairs], "partitions": [], "rows": 0}
        return ""

    def insert(self, name: str, spec: str | None) -> str:
        table = self.existing(name)
        if spec and _spec(spec) not in table["partitions"]:
            table["partitions"].append(_spec(spec))
        table["rows"] += 1
        jobs = self.state["calls_with_jobs"]
        job = f"job_20240101000000_{len(jobs) + 1:04d}"
        jobs.append(job)
        for line in (
            f"Starting Job = {job}, Tracking URL = http://jobtracker:50030/jobdetails.jsp?jobid={job}",
            "Hadoop job information for Stage-1: number of mappers: 1; number of reducers: 0",
            "2024-01-01 00:00:01,000 Stage-1 map = 100%,  reduce = 0%",
            f"Ended Job = {job}",
        ):
            print(line, file=sys.stderr)
        return ""


def _statements(text: str) -> list[str]:
    return [s for s in text.split(";") if s.strip()]


def main(state_dir: Path, args: list[str]) -> int:
    state_file = state_dir / "tables.json"
    state = json.loads(state_file.read_text())
    with (state_dir / "calls.jsonl").open("a") as calls:
        calls.write(json.dumps(args) + "\n")
    hive = Hive(state)
    variables: dict[str, str] = {}
    scripts: list[str] = []
    index = 0
    while index < len(args):
        flag, value = args[index], args[index + 1] if index + 1 < len(args) else ""
        if flag == "--hivevar":
            key, _, val = value.partition("=")
            variables[key] = val
        elif flag in ("-i", "-f"):
            scripts.append(Path(value).read_text())
        elif flag == "-e":
            scripts.append(value)
        elif flag != "--hiveconf":
            print(f"Unrecognized option: {flag}", file=sys.stderr)
            return 1
        index += 2
    try:
        for script in scripts:
            for statement in _statements(script):
                sys.stdout.write(hive.run(statement, variables))
    except HiveFailure as failure:
        print(str(failure), file=sys.stderr)
        return failure.code
    finally:
        state_file.write_text(json.dumps(state))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
