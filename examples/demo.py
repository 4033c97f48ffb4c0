"""What ``make demo`` runs: ``luigid`` plus the word-count pipeline run against it.

Starts ``luigid`` on 127.0.0.1 (port 8082, or a free one when 8082 is taken) with its state under
``data/demo``, runs the pipeline through the real ``luigi`` command, prints the summary and the
visualiser's address, then keeps serving until Ctrl-C. ``DEMO_EXIT=1`` stops right after the run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from examples._paths import output_dir, output_path

READY_DEADLINE_S = 20.0


def free_port(preferred: int = 8082) -> int:
    """The preferred port when nothing listens on it, else any free port."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])


def start_luigid(port: int) -> subprocess.Popen[bytes]:
    """luigid with its defaults, state kept beside the demo's outputs."""
    state_dir = os.path.join("data", "demo")
    os.makedirs(state_dir, exist_ok=True)
    command = [
        sys.executable,
        "-c",
        "from luigi.cmdline import luigid; luigid()",
        "--port",
        str(port),
        "--state-path",
        os.path.join(state_dir, "state.pickle"),
    ]
    return subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=open(os.path.join(state_dir, "luigid.log"), "wb")
    )


def wait_until_serving(url: str, server: subprocess.Popen[bytes]) -> None:
    """Poll ``HEAD /`` until luigid answers (or fail clearly if it exits or takes too long)."""
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"luigid exited with code {server.returncode}; see data/demo/luigid.log")
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=1)
            return
        except OSError:
            time.sleep(0.1)  # polling a subprocess we do not control; the deadline bounds it
    sys.exit(f"luigid did not answer at {url} within {READY_DEADLINE_S:.0f} s; see data/demo/luigid.log")


def run_pipeline(url: str) -> int:
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
        "--workers",
        "2",
        "--scheduler-url",
        url,
        "--log-level",
        "INFO",
    ]
    print("$", " ".join(["luigi", *command[3:]]), flush=True)
    return subprocess.call(command, env=env)


def show_report() -> None:
    report = output_path("wordcount", "report-6.tsv")
    if os.path.exists(report):
        with open(report) as handle:
            top = [next(handle).rstrip("\n") for _ in range(5)]
        print(f"\nTop words ({report}):")
        for line in top:
            print("   ", line.replace("\t", "  "))
    print(f"Outputs are under {os.path.abspath(output_dir())}; delete it to run everything again.")


def main() -> int:
    """Serve, run, report; keep serving until Ctrl-C unless DEMO_EXIT is set."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = start_luigid(port)
    try:
        wait_until_serving(url, server)
        print(f"luigid is serving at {url}", flush=True)
        code = run_pipeline(url)
        show_report()
        print(f"\nVisualiser: {url}static/visualiser/index.html", flush=True)
        if os.environ.get("DEMO_EXIT"):
            return code
        print("luigid keeps serving; press Ctrl-C to stop.", flush=True)
        server.wait()
        return code
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=15)


if __name__ == "__main__":
    sys.exit(main())
