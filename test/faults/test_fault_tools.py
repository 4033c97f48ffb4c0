"""The fault suite's own tools: the TCP proxy (against a real echo server) and the rerun attribution.

The attribution is what turns a fault run into a verdict, so it is checked on logs where the answer is
known: a double run nothing explains must come out as a defect.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading

import pytest
from helpers.luigid import wait_until
from helpers.tcp_proxy import TcpProxy

from faults import analysis, injectors, processes
from faults.injectors import Fault
from faults.pipeline import Run

pytestmark = pytest.mark.faults

SILENCE = 0.5  # how long a blackholed connection is given to answer (it must not)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(OSError):  # the proxy resets connections on purpose
            while data := self.request.recv(4096):
                self.request.sendall(data)


@pytest.fixture
def proxy():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with TcpProxy(server.server_address[1]).running() as running:
        yield running
    server.shutdown()
    server.server_close()


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


def _echoes(sock: socket.socket, data: bytes = b"ping") -> bool:
    sock.sendall(data)
    return sock.recv(4096) == data


def _cut(sock: socket.socket) -> bool:
    """Whether the peer closed or reset ``sock``."""
    try:
        sock.sendall(b"x")
        return sock.recv(4096) == b""
    except OSError:
        return True


def _refused(proxy: TcpProxy) -> bool:
    """Whether a new connection is refused: reset during its handshake, or cut as soon as it is made
    (which of the two depends on when the proxy's reset reaches the connecting side)."""
    try:
        sock = _connect(proxy)
    except OSError:
        return True
    with sock:
        return _cut(sock)


def test_the_proxy_forwards_both_ways(proxy):
    with _connect(proxy) as sock:
        assert _echoes(sock, b"hello")
        assert _echoes(sock, b"again")


def test_a_drop_resets_open_connections_and_refuses_new_ones_for_a_while(proxy):
    with _connect(proxy) as sock:
        assert _echoes(sock)
        proxy.drop(refuse_for=60)
        assert wait_until(lambda: _cut(sock), timeout=5, what="the open connection to be cut")
    assert _refused(proxy)
    proxy.restore()
    with _connect(proxy) as sock:
        assert _echoes(sock)


def test_a_blackhole_swallows_everything_until_restored(proxy):
    with _connect(proxy) as before:
        assert _echoes(before)
        proxy.blackhole()
        seen = proxy.connections_seen
        with _connect(proxy) as during:
            wait_until(lambda: proxy.connections_seen > seen, timeout=5, what="the proxy to accept")
            for sock in (before, during):
                sock.settimeout(SILENCE)
                sock.sendall(b"anyone?")
                with pytest.raises(TimeoutError):
                    sock.recv(4096)
            proxy.restore()
            before.settimeout(5)
            assert wait_until(lambda: _cut(before), timeout=5, what="the blackholed connection to close")
    with _connect(proxy) as after:
        assert _echoes(after)


# -- attribution --------------------------------------------------------------------------------------------

WORKER_A, WORKER_B = 100, 200
SEATS = {WORKER_A: 0, WORKER_B: 1}


def _run(pid: int, worker: int, at: float) -> Run:
    return Run("Step_1_abc", pid, worker, at, 1)


def _fault(kind: str, at: float, pid: int | None = None, seat: int | None = None, hold: float = 0.0) -> Fault:
    return Fault(kind, at, hold, seat=seat, pid=pid, ended=at + hold)


def test_a_double_run_with_no_fault_is_a_defect():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 14.0)]
    verdict = analysis.judge(runs, [], SEATS, missing=[])
    assert len(verdict.unexplained) == 1 and "pid 101" in verdict.unexplained[0]


def test_a_luigid_kill_explains_no_rerun():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 14.0)]
    verdict = analysis.judge(runs, [_fault(injectors.KILL_LUIGID, 11.0, pid=1)], SEATS, missing=[])
    assert verdict.reruns == 1 and len(verdict.unexplained) == 1


def test_a_takeover_by_a_standby_luigid_explains_no_rerun():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 14.0)]
    verdict = analysis.judge(runs, [_fault(injectors.TAKEOVER, 11.0, pid=1)], SEATS, missing=[])
    assert verdict.reruns == 1 and len(verdict.unexplained) == 1


def test_a_kill_of_the_slot_that_ran_it_explains_the_rerun_and_a_kill_of_another_does_not():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 14.0)]
    explained = analysis.judge(runs, [_fault(injectors.KILL_SLOT, 10.1, pid=101)], SEATS, missing=[])
    assert explained.explained == {injectors.KILL_SLOT: 1} and not explained.unexplained
    other = analysis.judge(runs, [_fault(injectors.KILL_SLOT, 10.1, pid=102)], SEATS, missing=[])
    assert len(other.unexplained) == 1


def test_a_fault_long_after_the_run_or_after_the_rerun_explains_nothing():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 40.0)]
    late = _fault(injectors.KILL_WORKER, 10.0 + analysis.WINDOW + 1, pid=WORKER_A)
    assert len(analysis.judge(runs, [late], SEATS, missing=[]).unexplained) == 1
    after = _fault(injectors.KILL_WORKER, 41.0, pid=WORKER_A)
    assert len(analysis.judge(runs, [after], SEATS, missing=[]).unexplained) == 1


def test_a_worker_that_was_stopped_and_ran_a_grant_it_held_is_counted_as_stale():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 14.2)]
    stop = _fault(injectors.STOP_WORKER, 9.0, pid=WORKER_B, seat=1, hold=5.0)
    verdict = analysis.judge(runs, [stop], SEATS, missing=[])
    assert verdict.stale == {injectors.STOP_WORKER: 1} and not verdict.unexplained


def test_a_sigterm_explains_a_run_its_worker_started_during_the_grace_and_not_one_started_after_it():
    term = _fault(injectors.TERM_WORKER, 10.0, pid=WORKER_A)
    during = [_run(101, WORKER_A, 10.0 + processes.SHUTDOWN_GRACE - 0.5), _run(201, WORKER_B, 20.0)]
    assert analysis.judge(during, [term], SEATS, missing=[]).explained == {injectors.TERM_WORKER: 1}
    after = [
        _run(101, WORKER_A, 10.0 + processes.SHUTDOWN_GRACE + analysis.SLACK + 1),
        _run(201, WORKER_B, 30.0),
    ]
    assert len(analysis.judge(after, [term], SEATS, missing=[]).unexplained) == 1


def test_a_proxy_fault_explains_reruns_of_the_seat_behind_it_only():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 20.0)]
    on_a = _fault(injectors.PROXY_BLACKHOLE, 10.5, seat=0, hold=4.0)
    assert analysis.judge(runs, [on_a], SEATS, missing=[]).explained == {injectors.PROXY_BLACKHOLE: 1}
    on_b = _fault(injectors.PROXY_BLACKHOLE, 10.5, seat=1, hold=4.0)
    assert len(analysis.judge(runs, [on_b], SEATS, missing=[]).unexplained) == 1


def test_a_connection_fault_too_short_to_cut_the_worker_off_explains_nothing():
    runs = [_run(101, WORKER_A, 10.0), _run(201, WORKER_B, 20.0)]
    blip = _fault(injectors.PROXY_DROP, 10.1, seat=0, hold=0.5)
    assert len(analysis.judge(runs, [blip], SEATS, missing=[]).unexplained) == 1


def test_missing_outputs_are_lost_tasks():
    assert analysis.judge([], [], SEATS, missing=[3, 7]).lost == [3, 7]
