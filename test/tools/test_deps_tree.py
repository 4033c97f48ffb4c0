"""``luigi-deps-tree`` and ``print_tree``: the dependency tree with each node's status in colour."""

from __future__ import annotations

from luigi.mock import MockFileSystem, MockTarget
from luigi.parameter import IntParameter
from luigi.task import ExternalTask, Task
from luigi.tools.deps_tree import bcolors, print_tree

COMPLETE = f"{bcolors.OKGREEN}COMPLETE{bcolors.ENDC}"
PENDING = f"{bcolors.OKBLUE}PENDING{bcolors.ENDC}"


def test_the_colour_codes_are_the_ansi_ones():
    assert (bcolors.OKGREEN, bcolors.OKBLUE, bcolors.ENDC) == ("\033[92m", "\033[94m", "\033[0m")


def test_luigi_deps_tree_prints_luigis_tree_with_statuses_and_significant_parameters(pipeline):
    (pipeline.data / "raw-2024-01-02.txt").write_text("raw")
    done = pipeline.run("luigi-deps-tree", "--module", "tools_pipeline", "Report", "--day", "2024-01-02")
    assert done.stdout == (
        "\n"
        f"└─--[Report-{{'day': '2024-01-02'}} ({PENDING})]\n"
        f"    |---[Clean-{{'day': '2024-01-02'}} ({PENDING})]\n"
        f"    |   └─--[Raw-{{'day': '2024-01-02'}} ({COMPLETE})]\n"
        f"    └─--[Lookup-{{}} ({PENDING})]\n"
    )


def test_the_tree_follows_values_given_to_other_tasks_on_the_command_line(pipeline):
    (pipeline.data / "lookup.txt").write_text("l")
    done = pipeline.run("luigi-deps-tree", "--module", "tools_pipeline", "Lookup")
    assert done.stdout == f"\n└─--[Lookup-{{}} ({COMPLETE})]\n"


def test_an_unknown_task_is_one_line_on_stderr(pipeline):
    done = pipeline.run("luigi-deps-tree", "--module", "tools_pipeline", "Nope", check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("luigi-deps-tree: error: ") and "Traceback" not in done.stderr


class Part(ExternalTask):
    n = IntParameter()

    def output(self):
        return MockTarget(f"part-{self.n}")


class Whole(Task):
    def requires(self):
        return [Part(n=0), Part(n=1)]

    def output(self):
        return MockTarget("whole")


class Top(Task):
    def requires(self):
        return {"whole": Whole(), "extra": Part(n=2)}


def test_print_tree_draws_luigis_middle_and_last_branches_and_four_column_indents():
    MockFileSystem().clear()
    with MockTarget("part-1").open("w") as handle:
        handle.write("done")
    tree = print_tree(Top())
    assert tree.splitlines() == [
        "",
        f"└─--[Top-{{}} ({PENDING})]",
        f"    |---[Whole-{{}} ({PENDING})]",
        f"    |   |---[Part-{{'n': '0'}} ({PENDING})]",
        f"    |   └─--[Part-{{'n': '1'}} ({COMPLETE})]",
        f"    └─--[Part-{{'n': '2'}} ({PENDING})]",
    ]


def test_print_tree_of_a_middle_child_continues_the_parents_rail():
    MockFileSystem().clear()
    assert print_tree(Part(n=5), indent="ab", last=False) == f"\nab|---[Part-{{'n': '5'}} ({PENDING})]"
