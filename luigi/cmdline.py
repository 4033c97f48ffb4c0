"""Entry points of the ``luigi`` and ``luigid`` commands (also ``python -m luigi``)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Sequence
from typing import NoReturn

# As in Luigi, loading the command registers ``[retcode]``, so ``--retcode-*`` flags exist for ``luigi``
# and ``python -m luigi`` (and not for scripts calling ``luigi.run()``).
from luigi.retcodes import run_with_retcodes

__all__ = ["luigi_run", "luigid"]

# luigid's heap is mostly its long-lived state, so Python's default young-generation threshold (700)
# collects it often and promotes it fast into full passes that pause every worker; 10,000 makes young
# passes ~20 times rarer (a 10,000-task run: 27 collections instead of ~490, half the collector time,
# no full pass) at no cost in memory that shows. ``luigi`` itself runs the user's code: left alone.
LUIGID_GC_THRESHOLDS = (10_000, 10, 10)


def luigi_run(argv: Sequence[str] | None = None) -> NoReturn:
    """``luigi [--module m] Task [--param v ...]``: run the task and exit with the ``[retcode]`` code."""
    run_with_retcodes(sys.argv[1:] if argv is None else argv)


def luigid(argv: Sequence[str] | None = None) -> None:
    """``luigid``: serve the central scheduler until SIGTERM/SIGINT (see ``luigid --help``).

    Exits with status 1 and a one-line message when it cannot start (port busy, another server on the
    pidfile, unusable log directory, a bad ``[schedule:<name>]`` section).
    """
    import luigi.server
    from luigi import configuration, process
    from luigi.database import StorageError
    from luigi.metrics import MetricsSetupError
    from luigi.schedules.spec import ScheduleConfigError
    from luigi.setup_logging import DaemonLogging

    opts = _luigid_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    gc.set_threshold(*LUIGID_GC_THRESHOLDS)
    try:
        if opts.state_path:
            configuration.get_config().set("scheduler", "state_path", opts.state_path)
        if opts.logdir and not opts.background:
            process.prepare_logdir(opts.logdir)
        DaemonLogging.setup(opts)
        if opts.background:
            process.daemonize(
                luigi.server.run,
                pidfile=opts.pidfile,
                logdir=opts.logdir,
                api_port=opts.port,
                address=opts.address,
                unix_socket=opts.unix_socket,
            )
            return
        with process.hold_pidfile(opts.pidfile) if opts.pidfile else contextlib.nullcontext():
            luigi.server.run(api_port=opts.port, address=opts.address, unix_socket=opts.unix_socket)
    except (
        process.ServerAlreadyRunning,
        process.ServerSetupError,
        luigi.server.CannotListenError,
        StorageError,
        MetricsSetupError,
        ScheduleConfigError,
    ) as exc:
        print(f"luigid: {exc}", file=sys.stderr)
        sys.exit(1)


def _luigid_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="luigid", description="Central luigi scheduler server")
    parser.add_argument("--background", action="store_true", help="Run in the background (daemonize)")
    parser.add_argument("--pidfile", help="Write the server's pid here; refuse to start if that server runs")
    parser.add_argument("--logdir", help="Log directory (default /var/log/luigi in the background)")
    parser.add_argument("--state-path", help="Where the scheduler keeps its state ([scheduler] state_path)")
    parser.add_argument(
        "--address",
        default="127.0.0.1",
        help="Interface to listen on (default 127.0.0.1; 0.0.0.0 or :: for every interface)",
    )
    parser.add_argument("--unix-socket", help="Listen on this Unix socket instead of TCP")
    parser.add_argument(
        "--port", type=_port_number, default=8082, help="TCP port to listen on (default 8082)"
    )
    return parser


def _port_number(text: str) -> int:
    """An argparse type: a TCP port (0 picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (expected 0 to 65535)")
    return port
