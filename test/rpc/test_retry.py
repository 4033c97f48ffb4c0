"""The client's one retry policy: a worker rides out a scheduler that is briefly unreachable (issue 4).

The scheduler is our luigid's stand-in whose requests carrying some calls first answer 503, as a
restarting ``luigid`` behind a proxy does; the backoff sleep and the ride-out's clock are injected into
the client, so nothing waits for real.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from helpers.fake_luigid import FakeLuigid, RecordedRequest, Reply
from helpers.luigid import free_port

from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter
from luigi.rpc import NoSchedulerError, RemoteScheduler, RPCError, SchedulerHTTPError
from luigi.rpc.retry import MAX_BACKOFF, is_unreachable
from luigi.task import Task
from luigi.worker import Worker


class RestartingLuigid(FakeLuigid):
    """Our luigid, except that while ``failures[name]`` is left, a request carrying ``name`` answers 503."""

    def __init__(self, failures: dict[str, int], status: int = 503) -> None:
        super().__init__(batch=True)
        self.failures = dict(failures)
        self.status = status
        self.carried: list[str] = []  # the calls of every request, answered or not

    def answer(self, request: RecordedRequest) -> Any:
        if "Upgrade" not in request.headers:
            names = _call_names(request)
            self.carried.extend(names)
            failing = [name for name in names if self.failures.get(name, 0) > 0]
            if failing:
                for name in failing:
                    self.failures[name] -= 1
                return Reply(self.status, {"error": "luigid is restarting"})
        return super().answer(request)


def _call_names(request: RecordedRequest) -> list[str]:
    if request.api_name == "_batch":
        return [call["method"] for call in request.data["calls"]]
    return [request.api_name]


class FakeClock:
    """``sleep`` advances ``now``: the client's retry wait and ride-out clock, waiting for nothing."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class ReconnectMarker(Task):
    """Writes its output file; ``runs`` counts how often run() was called."""

    runs = 0
    root_dir = ""
    n = IntParameter()

    def output(self) -> LocalTarget:
        return LocalTarget(f"{ReconnectMarker.root_dir}/marker-{self.n}")

    def run(self) -> None:
        type(self).runs += 1
        with self.output().open("w") as out:
            out.write("done")


def client_of(server: FakeLuigid, clock: FakeClock, **options: Any) -> RemoteScheduler:
    return RemoteScheduler(
        server.url, sleep=clock.sleep, clock=clock.monotonic, rng=random.Random(4), **options
    )


def run_worker(server: FakeLuigid, clock: FakeClock, tmp_path, **config: Any) -> bool:
    ReconnectMarker.root_dir = str(tmp_path)
    ReconnectMarker.runs = 0
    client = client_of(server, clock)
    try:
        with Worker(scheduler=client, lookahead=False, **config) as worker:
            assert worker.add(ReconnectMarker(n=1))
            return worker.run()
    finally:
        server.failures.clear()  # so that the exit flush is answered
        client.close()


def test_get_work_that_fails_a_few_times_is_retried_and_the_task_runs_once(tmp_path, clock):
    with RestartingLuigid({"get_work": 4}) as server:
        assert run_worker(server, clock, tmp_path)
    assert ReconnectMarker.runs == 1
    assert (tmp_path / "marker-1").read_text() == "done"
    assert len(clock.sleeps) == 4  # two between the ordinary attempts, two riding out
    assert server.carried.count("get_work") >= 5


def test_the_backoff_grows_and_stays_capped_with_jitter(tmp_path, clock):
    with RestartingLuigid({"get_work": 12}) as server:
        run_worker(server, clock, tmp_path)
    assert clock.sleeps[0] <= 1.0
    assert clock.sleeps[3] >= 4.0  # doubled three times, drawn from the upper half
    assert max(clock.sleeps) <= MAX_BACKOFF
    assert len(set(clock.sleeps)) > 1


def test_a_lower_rpc_retry_wait_caps_the_ride_out_too(tmp_path, clock):
    # a worker must be back within a short worker_disconnect_delay of a restart, or its tasks go to others
    with RestartingLuigid({"get_work": 12}) as server:
        server_client = client_of(server, clock, retry_wait=1.0)
        ReconnectMarker.root_dir, ReconnectMarker.runs = str(tmp_path), 0
        try:
            with Worker(scheduler=server_client, lookahead=False) as worker:
                assert worker.add(ReconnectMarker(n=1))
                assert worker.run()
        finally:
            server.failures.clear()
            server_client.close()
    assert len(clock.sleeps) >= 11 and max(clock.sleeps) <= 1.0


def test_held_add_task_and_add_worker_calls_are_ridden_out_with_the_call_that_carries_them(tmp_path, clock):
    with RestartingLuigid({"add_task": 2, "add_worker": 3}) as server:
        assert run_worker(server, clock, tmp_path)
        assert set(server.scheduler.task_list("DONE", "")) == {ReconnectMarker(n=1).task_id}
    assert ReconnectMarker.runs == 1
    # add() sends its held add_task calls before it returns (a scheduler that is down fails add(), as in
    # Luigi): that batch failed twice; add_worker rode with get_work, whose batch failed three times.
    assert len(clock.sleeps) == 2 + 3


def test_the_worker_gives_up_once_scheduler_unreachable_timeout_has_passed(tmp_path, clock):
    with RestartingLuigid({"get_work": 10_000}) as server, pytest.raises(RPCError, match="when connecting"):
        run_worker(server, clock, tmp_path, scheduler_unreachable_timeout=60)
    assert 60 <= sum(clock.sleeps) <= 60 + MAX_BACKOFF
    assert ReconnectMarker.runs == 0


def test_a_scheduler_that_never_answered_is_not_ridden_out_it_fails_after_the_ordinary_attempts(clock):
    # Nothing listens at the URL (a typo, no luigid started): nothing to ride out (issue 38).
    client = RemoteScheduler(
        f"http://127.0.0.1:{free_port()}/", sleep=clock.sleep, clock=clock.monotonic, rng=random.Random(4)
    )
    client.unreachable_timeout = 600
    with pytest.raises(NoSchedulerError, match=r"Errors \(3 attempts\) .* is luigid running there\?"):
        client.get_work(worker="w", host="h")
    assert len(clock.sleeps) == 2


def test_a_scheduler_answering_503_from_its_first_call_is_there_and_ridden_out(tmp_path, clock):
    # luigid started on a full disk answers 503 until the disk is freed: it answered, so it is ridden out.
    with RestartingLuigid({"add_task": 6}) as server:
        assert run_worker(server, clock, tmp_path, scheduler_unreachable_timeout=600, ping_interval=3600)
    assert ReconnectMarker.runs == 1
    assert len(clock.sleeps) == 6  # two between the ordinary attempts, four riding out


def test_a_timeout_of_zero_gives_up_after_the_ordinary_attempts_like_luigi(tmp_path, clock):
    with (
        RestartingLuigid({"get_work": 1_000}) as server,
        pytest.raises(RPCError, match=r"Errors \(3 attempts\)"),
    ):
        run_worker(server, clock, tmp_path, scheduler_unreachable_timeout=0)
    assert len(clock.sleeps) == 2


def test_a_refused_call_is_not_retried(tmp_path, clock):
    with RestartingLuigid({"get_work": 1}, status=400) as server, pytest.raises(RPCError, match="refused"):
        run_worker(server, clock, tmp_path)
    assert clock.sleeps == []


def test_a_ping_is_not_ridden_out_the_keep_alive_thread_pings_again_anyway(clock):
    with RestartingLuigid({"ping": 1_000}) as server:
        client = client_of(server, clock, unreachable_timeout=600)
        with pytest.raises(RPCError, match=r"Errors \(3 attempts\)"):
            client.ping(worker="w")
        assert len(clock.sleeps) == 2
        client.close()


def test_a_5xx_answer_counts_as_unreachable():
    error = RPCError("down", SchedulerHTTPError(503, "restarting", "/api/get_work"), status=503)
    assert is_unreachable(error)
    assert not is_unreachable(RPCError("Received null response from remote scheduler"))
    assert not is_unreachable(ValueError("not an rpc error"))


def test_a_negative_timeout_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="scheduler_unreachable_timeout must be 0 or more seconds, got -1"):
        RemoteScheduler("http://127.0.0.1:1/", unreachable_timeout=-1)
