"""Which engine files a run crosses: a two-task pipeline (B needs A) traced call by call.

    python -m bench.journey local      # luigi.build with --local-scheduler
    python -m bench.journey luigid     # the same against a luigid served in a thread of this process

A warm-up run first imports everything, so the trace counts the calls of one run (construction of the
scheduler and worker included), not module imports. Prints each file of luigi/scheduler, worker, rpc and
server with its number of calls, in the order first entered, then the top-level modules the run crosses
(``luigi/*.py`` and the small packages beside the engine's four), then one task's turn: the files whose
calls grow when a third task (C needs B) joins the chain, with the calls that task adds.
doc/architecture.md quotes the figures.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
from collections import Counter
from types import FrameType
from typing import Any

import luigi
from luigi.scheduler import Scheduler
from luigi.server import SchedulerServer, ServerSettings

ENGINE = ("scheduler", "worker", "rpc", "server")
ROOT = os.path.dirname(luigi.__file__)
OUT = tempfile.mkdtemp(prefix="luigi-journey-")


class A(luigi.Task):
    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(OUT, "a"))

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("a")


class B(luigi.Task):
    def requires(self) -> A:
        return A()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(OUT, "b"))

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("b")


class C(luigi.Task):
    def requires(self) -> B:
        return B()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(OUT, "c"))

    def run(self) -> None:
        with self.output().open("w") as out:
            out.write("c")


def trace(run: Any) -> Counter[str]:
    """Calls per luigi file while ``run()`` runs, in every thread."""
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name != "<module>" and code.co_filename.startswith(ROOT):
            calls[os.path.relpath(code.co_filename, ROOT)] += 1

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return calls


def local(root: luigi.Task) -> None:
    assert luigi.build([root], local_scheduler=True)


def through_luigid(root: luigi.Task) -> None:
    server = SchedulerServer(Scheduler(), ServerSettings(), port=0)
    server.bind()
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    server.ready.wait(10)
    try:
        assert luigi.build([root], scheduler_url=f"http://127.0.0.1:{server.bound_port()}/")
    finally:
        server.stop()
        thread.join(10)


def traced(run: Any, root: luigi.Task) -> Counter[str]:
    """The calls of one run of ``root``'s pipeline over fresh outputs."""
    for name in ("a", "b", "c"):
        if os.path.exists(os.path.join(OUT, name)):
            os.remove(os.path.join(OUT, name))
    return trace(lambda: run(root))


def show(title: str, calls: Counter[str]) -> None:
    """The engine's four packages file by file, then the top-level modules."""
    engine = [name for name in calls if name.split("/")[0] in ENGINE]
    top = [name for name in calls if name.split("/")[0] not in ENGINE]
    print(f"{title}: {len(engine)} engine files, {len(top)} top-level modules")
    for package in ENGINE:
        names = [name for name in engine if name.split("/")[0] == package]
        if names:
            shown = ", ".join(f"{name.split('/', 1)[1]} {calls[name]}" for name in names)
            print(f"  {package} ({len(names)}): {shown}")
    if top:
        shown = ", ".join(f"{name.removesuffix('.py')} {calls[name]}" for name in top)
        print(f"  top level ({len(top)}): {shown}")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "local"
    run = {"local": local, "luigid": through_luigid}[mode]
    run(C())  # warm-up
    two = traced(run, B())
    show(mode, two)
    three = traced(run, C())
    turn = Counter({name: three[name] - two[name] for name in three if three[name] > two[name]})
    show(f"one task's turn ({mode}, calls a third task adds)", turn)


if __name__ == "__main__":
    main()
