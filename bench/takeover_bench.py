"""How long a standby luigid takes to take over: ``python -m bench.takeover_bench --kills 10``.

Two real ``luigid`` processes share one PostgreSQL state (a fresh schema of the test server:
``LUIGI_TEST_POSTGRES_URL``, else the URL ``scripts/start-postgres.sh`` left). The state holds
``--tasks`` tasks. Each round ``kill -9``s the luigid answering as active and times how long until the
other answers an API call as active; the killed one is started again and must come back as a standby.
Prints each round and the minimum, median and maximum (the promise: under 15 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from faults.processes import Luigid  # noqa: E402
from helpers.luigid import HttpProbe, wait_until  # noqa: E402
from helpers.postgres import fresh_schema, postgres_url  # noqa: E402

PROMISE = 15.0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.takeover_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=1000, help="tasks in the state the standby loads")
    return parser.parse_args(argv)


def _fill(luigid: Luigid, tasks: int) -> None:
    """``tasks`` pending tasks, added in batches as a worker would."""
    probe = HttpProbe(port=luigid.port)
    for start in range(0, tasks, 200):
        calls = [
            {"method": "add_task", "kwargs": {"worker": "bench", "task_id": f"T{i}", "status": "PENDING"}}
            for i in range(start, min(tasks, start + 200))
        ]
        reply = probe.batch(calls)
        if reply.status != 200:
            raise SystemExit(f"filling the state failed: HTTP {reply.status} {reply.body[:200]!r}")


def _one_round(luigids: list[Luigid]) -> float:
    """Kill the active one, time the takeover, bring the killed one back as a standby."""
    active = wait_until(
        lambda: next((one for one in luigids if one.answers_as() == "active"), None), 30, "an active luigid"
    )
    killed = time.monotonic()
    active.kill()
    others = [one for one in luigids if one is not active]
    wait_until(lambda: any(one.answers_as() == "active" for one in others), PROMISE * 2, "a takeover")
    took = time.monotonic() - killed
    active.start()
    wait_until(lambda: active.answers_as() == "standby", 30, "the killed luigid back as a standby")
    return took


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    url = postgres_url()
    if url is None:
        print(
            "no PostgreSQL answers: run scripts/start-postgres.sh and export LUIGI_TEST_POSTGRES_URL",
            file=sys.stderr,
        )
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="takeover-"))
    with fresh_schema(url) as state_url:
        luigids = [
            Luigid(workdir, workdir, state_url=state_url, name=name) for name in ("luigid-a", "luigid-b")
        ]
        try:
            luigids[0].start()
            wait_until(lambda: luigids[0].answers_as() == "active", 30, "the first luigid to be active")
            luigids[1].start()
            _fill(luigids[0], args.tasks)
            times = []
            for number in range(1, args.kills + 1):
                times.append(_one_round(luigids))
                print(f"kill {number:2d}: a standby answered as active after {times[-1]:.2f} s", flush=True)
        finally:
            for luigid in luigids:
                luigid.stop()
    print(
        f"takeover over {len(times)} kills ({args.tasks} tasks in the state): min {min(times):.2f} s, "
        f"median {statistics.median(times):.2f} s, max {max(times):.2f} s (promise: under {PROMISE:.0f} s)"
    )
    return 0 if max(times) < PROMISE else 1


if __name__ == "__main__":
    sys.exit(main())
