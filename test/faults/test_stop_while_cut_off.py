"""A stop signal still stops a worker whose scheduler is gone (found by the fault suite).

A worker riding out an unreachable luigid (``[worker] scheduler_unreachable_timeout``) used to ignore
SIGTERM, the second one included, until the ride-out ended: ten minutes by default. Past the grace, or at
a second signal, the worker now stops riding out and exits.
"""

from __future__ import annotations

import signal
import time

import pytest
from helpers.luigid import running_luigid, wait_until
from helpers.worker_process import start_worker, write_module

pytestmark = pytest.mark.faults

STEPS = """
    import time
    import luigi

    class Step(luigi.Task):
        n = luigi.IntParameter()

        def output(self):
            return luigi.LocalTarget(f"step-{self.n}.done")

        def run(self):
            time.sleep(0.2)
            with self.output().open("w") as out:
                out.write("done")

    class Steps(luigi.WrapperTask):
        def requires(self):
            return [Step(n=n) for n in range(200)]
"""
CONFIG = "[core]\nrpc_retry_wait = 1\n[worker]\nshutdown_grace = 1\nscheduler_unreachable_timeout = 600\n"


@pytest.mark.parametrize("signals", [1, 2])
def test_a_stop_signal_ends_a_worker_that_is_riding_out_a_dead_scheduler(tmp_path, signals):
    write_module(tmp_path, "steps", STEPS)
    with running_luigid(tmp_path) as luigid:
        worker = start_worker(tmp_path, "steps", ["Steps"], luigid.url, workers=2, config=CONFIG)
        try:
            wait_until(lambda: len(list(tmp_path.glob("step-*.done"))) >= 2, what="two steps done")
            luigid.stop(signal.SIGKILL)
            log = tmp_path / "worker.log"
            wait_until(lambda: "Failed connecting to remote scheduler" in log.read_text(), what="a retry")
            signalled = time.monotonic()
            for _ in range(signals):
                worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
            assert time.monotonic() - signalled < 30  # the grace plus the ordinary attempts, not 600 s
        finally:
            if worker.poll() is None:
                worker.kill()
