"""A stand-in for IBM LSF's ``bsub``, ``bjobs`` and ``bkill`` that runs each job as a local process.

LSF cannot run here, so the ``lsf_standin`` fixture puts three small scripts first on PATH that call this
file. It follows LSF's documented command lines and output formats, as far as ``luigi.contrib.lsf``
uses them:

* ``bsub [options] command [args]`` prints ``Job <N> is submitted to queue <q>.`` (``default queue
  <normal>`` without ``-q``). As LSF does, it joins the command words with spaces and runs the result
  with ``/bin/sh`` (so unquoted words would be split and expanded, as on a real cluster), with stdout
  appended to ``-o`` and stderr to ``-e``, in bsub's working directory and environment;
* ``bjobs [-noheader] [-o "field ..."] [jobid ...]``: states PEND, RUN, DONE, EXIT; an unknown job is
  ``Job <N> is not found`` on stderr;
* ``bkill [jobid ...]``: SIGINT, SIGTERM then SIGKILL to the job's process group, ``Job <N> is being
  terminated``; the job ends in EXIT.

A test can take LSF's master down for the next N bjobs calls by writing N to ``$LSF_STANDIN_SPOOL/down``:
each such call prints ``LSF is down. Please wait ...`` on stderr and exits 255, as bjobs does once its
retries (``LSB_NTRIES``) run out.

Each job lives under ``$LSF_STANDIN_SPOOL/<N>/``: ``job.json`` (what bsub was given), ``pgid`` once the
job runs, ``exit`` once it has ended. A detached supervisor (this file, ``_supervise``) starts the job,
waits for it and records its exit code, as LSF's execution daemon would.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# bsub options that take a value (LSF's reference, the subset a pipeline is likely to pass).
_BSUB_VALUE_OPTIONS = {
    "-q", "-n", "-M", "-R", "-W", "-J", "-o", "-e", "-oo", "-eo", "-P", "-G", "-m", "-w", "-cwd", "-u",
    "-g", "-sp", "-app", "-E", "-Ep", "-i", "-L", "-b", "-t", "-c", "-C", "-D", "-F", "-S", "-v", "-We",
}  # fmt: skip
_BSUB_FLAGS = {"-B", "-N", "-r", "-rn", "-x"}
_BJOBS_FIELDS = ("jobid", "user", "stat", "queue", "from_host", "exec_host", "job_name", "submit_time")


def _spool() -> Path:
    return Path(os.environ["LSF_STANDIN_SPOOL"])


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def _next_job_id() -> int:
    with open(_spool() / "next-id.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        counter = _spool() / "next-id"
        job_id = int(counter.read_text()) if counter.exists() else 101
        counter.write_text(str(job_id + 1))
        return job_id


def _parse_bsub(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(options, command words); raises ValueError for an option LSF would refuse."""
    options: dict[str, str] = {}
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        option = argv[index]
        if option in _BSUB_FLAGS:
            options[option] = ""
            index += 1
        elif option in _BSUB_VALUE_OPTIONS and index + 1 < len(argv):
            options[option] = argv[index + 1]
            index += 2
        else:
            raise ValueError(f"{option}: Illegal option")
    if index == len(argv):
        raise ValueError("Job not submitted: no command given")
    return options, argv[index:]


def _log_path(given: str | None, job_id: int, suffix: str) -> str:
    """Where -o/-e write: %J becomes the job id; a directory gets ``<jobid>.<suffix>`` inside it."""
    if not given:
        return os.devnull  # real LSF mails the output; nothing here reads it
    path = given.replace("%J", str(job_id))
    return os.path.join(path, f"{job_id}.{suffix}") if os.path.isdir(path) else path


def bsub(argv: list[str]) -> int:
    try:
        options, command = _parse_bsub(argv)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 255
    job_id = _next_job_id()
    job_dir = _spool() / str(job_id)
    job_dir.mkdir()
    job = {
        "queue": options.get("-q", "normal"),
        "name": options.get("-J", " ".join(command)),
        "command": " ".join(command),  # LSF's own join: the words reach /bin/sh as one command line
        "stdout": _log_path(options.get("-o") or options.get("-oo"), job_id, "out"),
        "stderr": _log_path(options.get("-e") or options.get("-eo"), job_id, "err"),
        "cwd": options.get("-cwd", os.getcwd()),
        "submitted": time.strftime("%b %d %H:%M"),
        "options": options,
    }
    _write_atomically(job_dir / "job.json", json.dumps(job))
    subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "_supervise", str(job_id)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    where = f"queue <{job['queue']}>" if "-q" in options else "default queue <normal>"
    print(f"Job <{job_id}> is submitted to {where}.")
    return 0


def supervise(job_id: str) -> int:
    """Run job ``job_id`` in its own process group and record its exit code (128+N when signal N)."""
    job_dir = _spool() / job_id
    job = json.loads((job_dir / "job.json").read_text())
    if (job_dir / "killed").exists():  # bkill while pending
        _write_atomically(job_dir / "exit", str(128 + signal.SIGKILL))
        return 0
    with open(job["stdout"], "a") as out, open(job["stderr"], "a") as err:
        process = subprocess.Popen(
            ["/bin/sh", "-c", job["command"]], cwd=job["cwd"], stdout=out, stderr=err, start_new_session=True
        )
    _write_atomically(job_dir / "pgid", str(process.pid))
    if (job_dir / "killed").exists():  # bkill arrived between the check above and the pgid file
        _signal_group(process.pid)
    returncode = process.wait()
    _write_atomically(job_dir / "exit", str(128 - returncode if returncode < 0 else returncode))
    return 0


def _state(job_dir: Path) -> str:
    if (job_dir / "exit").exists():
        return "DONE" if (job_dir / "exit").read_text() == "0" else "EXIT"
    return "RUN" if (job_dir / "pgid").exists() else "PEND"


def _fields(job_id: str, job_dir: Path) -> dict[str, str]:
    job = json.loads((job_dir / "job.json").read_text())
    exit_code = (job_dir / "exit").read_text() if (job_dir / "exit").exists() else "-"
    return {
        "jobid": job_id,
        "user": os.environ.get("USER", "-"),
        "stat": _state(job_dir),
        "queue": job["queue"],
        "from_host": "localhost",
        "exec_host": "localhost" if (job_dir / "pgid").exists() else "-",
        "job_name": job["name"],
        "submit_time": job["submitted"],
        "exit_code": exit_code if exit_code != "0" else "-",
    }


def _parse_bjobs(argv: list[str]) -> tuple[bool, list[str], list[str]]:
    header, fields, job_ids = True, list(_BJOBS_FIELDS), []
    index = 0
    while index < len(argv):
        if argv[index] == "-noheader":
            header = False
        elif argv[index] == "-o" and index + 1 < len(argv):
            fields = [field.split(":")[0].lower() for field in argv[index + 1].split()]
            index += 1
        elif argv[index] in ("-a", "-w"):
            pass  # all jobs / wide: this stand-in always shows every job in full
        elif argv[index].startswith("-"):
            raise ValueError(f"{argv[index]}: Illegal option")
        else:
            job_ids.append(argv[index])
        index += 1
    return header, fields, job_ids


def _master_down() -> bool:
    """Whether this call finds the master down (spending one of the calls the test asked for)."""
    with open(_spool() / "next-id.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        down = _spool() / "down"
        calls = int(down.read_text()) if down.exists() else 0
        if calls > 0:
            down.write_text(str(calls - 1))
        return calls > 0


def bjobs(argv: list[str]) -> int:
    if _master_down():
        print("LSF is down. Please wait ...", file=sys.stderr)
        return 255
    try:
        header, fields, job_ids = _parse_bjobs(argv)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 255
    if not job_ids:
        job_ids = sorted((path.name for path in _spool().iterdir() if path.name.isdigit()), key=int)
    rows, status = [], 0
    for job_id in job_ids:
        job_dir = _spool() / job_id
        if not (job_dir / "job.json").exists():
            print(f"Job <{job_id}> is not found", file=sys.stderr)
            status = 255
            continue
        values = _fields(job_id, job_dir)
        rows.append([values.get(field, "-") for field in fields])
    if header and rows:
        rows.insert(0, [field.upper() for field in fields])
    for row in rows:
        print(" ".join(value.ljust(10) for value in row).rstrip())
    return status


def _signal_group(pgid: int) -> None:
    """LSF's default bkill: SIGINT and SIGTERM for a clean-up, then SIGKILL."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return


def bkill(argv: list[str]) -> int:
    status = 0
    for job_id in argv:
        job_dir = _spool() / job_id
        if not (job_dir / "job.json").exists():
            print(f"Job <{job_id}>: No matching job found", file=sys.stderr)
            status = 255
        elif (job_dir / "exit").exists():
            print(f"Job <{job_id}>: Job has already finished", file=sys.stderr)
            status = 255
        else:
            (job_dir / "killed").touch()
            if (job_dir / "pgid").exists():
                _signal_group(int((job_dir / "pgid").read_text()))
            print(f"Job <{job_id}> is being terminated")
    return status


def stop_leftovers(spool: Path, deadline_seconds: float = 10.0) -> list[str]:
    """bkill every job under ``spool`` that has not ended and wait until each has; their ids.

    For a test's teardown: whatever the test did, no job process outlives it.
    """
    left = [path.name for path in spool.iterdir() if path.name.isdigit() and not (path / "exit").exists()]
    bkill(left)
    deadline = time.monotonic() + deadline_seconds
    while any(not (spool / job_id / "exit").exists() for job_id in left):
        if time.monotonic() > deadline:
            raise TimeoutError(f"LSF stand-in jobs {left} did not end after bkill")
        time.sleep(0.01)
    return left


COMMANDS = {"bsub": bsub, "bjobs": bjobs, "bkill": bkill}

if __name__ == "__main__":
    if sys.argv[1] == "_supervise":
        sys.exit(supervise(sys.argv[2]))
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
