"""What ``make demo`` runs: the word-count pipeline through the real ``luigi`` command.

Until the ``luigid`` server lands, the pipeline runs with ``--local-scheduler``; the demo then prints where
the report is. ``DEMO_EXIT=1`` is accepted already (the demo exits after the run either way for now).
"""

from __future__ import annotations

import os
import subprocess
import sys

from examples._paths import output_dir, output_path


def main() -> int:
    """Runs the pipeline, shows the top of the report, and returns the command's exit code."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))
    )
    command = [
        sys.executable,
        "-m",
        "luigi",
        "--module",
        "examples.wordcount",
        "WordCountReport",
        "--files",
        "6",
        "--local-scheduler",
        "--workers",
        "2",
        "--log-level",
        "INFO",
    ]
    print("$", " ".join(["luigi", *command[3:]]), flush=True)
    code = subprocess.call(command, env=env)
    report = output_path("wordcount", "report-6.tsv")
    if code == 0 and os.path.exists(report):
        with open(report) as handle:
            top = [next(handle).rstrip("\n") for _ in range(5)]
        print(f"\nTop words ({report}):")
        for line in top:
            print("   ", line.replace("\t", "  "))
    print(f"\nOutputs are under {os.path.abspath(output_dir())}; delete it to run everything again.")
    return code


if __name__ == "__main__":
    sys.exit(main())
