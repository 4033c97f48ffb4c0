"""``luigi-deps`` and ``luigi.tools.deps``: the tasks on the paths up to an upstream family, with outputs."""

from __future__ import annotations

import datetime

from luigi.local_target import LocalTarget
from luigi.mock import MockTarget
from luigi.parameter import DateParameter
from luigi.target import Target
from luigi.task import ExternalTask, Task
from luigi.tools.deps import dfs_paths, find_deps, get_task_output_description, get_task_requires

TASK = "   TASK: "
OUTPUT = "                       : "


def test_luigi_deps_prints_the_tasks_between_the_task_and_the_upstream_family_with_their_outputs(pipeline):
    args = ["--module", "tools_pipeline", "Report", "--day", "2024-01-02", "--upstream-family", "Raw"]
    done = pipeline.run("luigi-deps", *args)
    data = pipeline.data
    assert done.stdout.splitlines() == [
        f"{TASK}Clean(day=2024-01-02)",
        f"{OUTPUT}[FileSystem] {data}/clean-2024-01-02.txt",
        f"{TASK}Raw(day=2024-01-02)",
        f"{OUTPUT}[FileSystem] {data}/raw-2024-01-02.txt",
        f"{TASK}Report(day=2024-01-02)",
        f"{OUTPUT}[FileSystem] {data}/report-2024-01-02.csv",
        f"{OUTPUT}[FileSystem] {data}/report-2024-01-02.json",
    ]


def test_without_an_upstream_family_every_upstream_task_is_listed(pipeline):
    done = pipeline.run("luigi-deps", "--module", "tools_pipeline", "Report", "--day", "2024-01-02")
    tasks = [line[len(TASK) :] for line in done.stdout.splitlines() if line.startswith(TASK)]
    assert tasks == ["Clean(day=2024-01-02)", "Lookup()", "Raw(day=2024-01-02)", "Report(day=2024-01-02)"]


def test_an_upstream_family_not_in_the_graph_lists_nothing(pipeline):
    args = ["--module", "tools_pipeline", "Report", "--day", "2024-01-02", "--upstream-family", "Nope"]
    done = pipeline.run("luigi-deps", *args)
    assert done.stdout == ""


def test_an_unknown_task_is_one_line_on_stderr_and_exit_status_1(pipeline):
    done = pipeline.run("luigi-deps", "--module", "tools_pipeline", "Reprot", check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("luigi-deps: error: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


class Leaf(ExternalTask):
    def output(self):
        return MockTarget("leaf")


class Middle(Task):
    def requires(self):
        return {"a": Leaf(), "b": [Leaf()]}


class Top(Task):
    def requires(self):
        return [Middle(), Leaf()]


def test_get_task_requires_flattens_whatever_requires_returns():
    assert get_task_requires(Middle()) == {Leaf()}
    assert get_task_requires(Leaf()) == set()


def test_dfs_paths_yields_each_path_to_the_goal_family_whole():
    # Two paths reach Leaf: Top -> Middle -> Leaf and Top -> Leaf.
    assert sorted(map(repr, dfs_paths(Top(), "Leaf"))) == sorted(
        ["Top()", "Middle()", "Leaf()", "Top()", "Leaf()"]
    )
    assert list(dfs_paths(Top(), "Absent")) == []


def test_find_deps_is_the_set_of_tasks_on_those_paths():
    assert find_deps(Top(), "Middle") == {Top(), Middle()}
    assert find_deps(Top(), None) == {Top(), Middle(), Leaf()}


class OddTarget(Target):
    def exists(self) -> bool:
        return False


def test_output_descriptions_name_the_kind_of_target_and_where_it_is(tmp_path):
    assert get_task_output_description(LocalTarget(str(tmp_path / "f"))) == f"[FileSystem] {tmp_path}/f"
    assert get_task_output_description(MockTarget("m/x")) == "[FileSystem] m/x"
    assert get_task_output_description(OddTarget()) == "to be determined"


def test_ssh_and_s3_targets_are_described_with_their_host_or_scheme():
    from luigi.contrib.s3 import S3Target
    from luigi.contrib.ssh import RemoteTarget

    remote = RemoteTarget("/srv/x.txt", "db1.example")
    assert get_task_output_description(remote) == "[SSH] db1.example:/srv/x.txt"
    assert get_task_output_description(S3Target("s3://bucket/key")) == "[S3] s3://bucket/key"


def test_a_task_of_the_goal_family_itself_is_its_only_path():
    class Dated(ExternalTask):
        day = DateParameter()

    assert find_deps(Dated(datetime.date(2020, 1, 2)), "Dated") == {Dated(datetime.date(2020, 1, 2))}
