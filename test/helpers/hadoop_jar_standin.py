"""A STAND-IN for ``hadoop jar`` (no Hadoop cluster can run here), reached through the ``hadoop`` stand-in.

Every call is recorded, its argument list one JSON line in ``$HADOOP_STANDIN_ROOT.jobs.jsonl``. A jar named
``hadoop-streaming*.jar`` runs a streaming job as Hadoop in local mode does: ``-mapper`` once per input
file (stdin to stdout, tab-separated records), an optional ``-combiner`` on each mapper's sorted output,
records partitioned by key into ``mapred.reduce.tasks`` reducers (0: map only), each partition sorted by
key and fed to ``-reducer``, ``part-NNNNN`` files and ``_SUCCESS`` in the ``-output`` directory. Steps run
in a working directory holding the ``-file``/``-files`` files, with the job's ``-D`` settings in their
environment (dots as underscores). ``reporter:counter:`` lines become counters printed at the end; other
step stderr passes through (as in local mode). A failed step fails the job with Hadoop's messages, its
output directory left empty. Any other jar stands for a program: it is run as a Python zip application
(``python <jar> [args]``), its exit status the command's. HDFS paths are those of `hadoop_cli_standin`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field

import hadoop_cli_standin as fs

GENERIC_OPTIONS = {"-D", "-files", "-libjars", "-archives", "-conf", "-fs", "-jt"}
STREAMING_OPTIONS = {"-mapper", "-combiner", "-reducer", "-input", "-output", "-file", "-inputformat",
                     "-outputformat", "-cmdenv", "-partitioner", "-numReduceTasks"}  # fmt: skip
TRACKING_URL = "http://localhost:8080/"


class JobFailed(Exception):
    """A step failed: the job fails as Hadoop's does."""


@dataclass
class StreamingJob:
    """A parsed streaming command line."""

    confs: dict[str, str] = field(default_factory=dict)
    options: dict[str, list[str]] = field(default_factory=dict)
    job_id: str = field(default_factory=lambda: f"job_local{random.randrange(10**9)}_0001")
    counters: dict[tuple[str, str], int] = field(default_factory=dict)

    def one(self, name: str) -> str | None:
        values = self.options.get(name)
        return values[-1] if values else None


def _log(level: str, logger: str, message: str) -> None:
    print(f"26/12/04 22:00:00 {level} {logger}: {message}", file=sys.stderr, flush=True)


def _parse(args: list[str]) -> StreamingJob:
    job = StreamingJob()
    pairs = iter(args)
    for option in pairs:
        value = next(pairs, None)
        if value is None or option not in GENERIC_OPTIONS | STREAMING_OPTIONS:
            raise ValueError(f"Unrecognized option: {option}")
        if option == "-D":
            key, _, conf = value.partition("=")
            job.confs[key] = conf
        else:
            job.options.setdefault(option, []).append(value)
    return job


def _input_files(given: str) -> list[str]:
    """The local files behind an ``-input`` path (a directory's files, hidden ones skipped)."""
    files = []
    for path in fs._expand(given):
        if os.path.isdir(path.local):
            children = [child.local for child in fs._children(path) if os.path.isfile(child.local)]
            files += [name for name in children if not os.path.basename(name).startswith(("_", "."))]
        else:
            files.append(path.local)
    return files


def _workspace(job: StreamingJob, root: str, name: str) -> str:
    """An attempt's working directory, with the shipped files in it."""
    work = os.path.join(root, name)
    os.makedirs(work)
    for path in job.options.get("-file", []):
        shutil.copy(path, os.path.join(work, os.path.basename(path)))
    for entry in ",".join(job.options.get("-files", [])).split(","):
        if entry:
            source, _, link = entry.partition("#")
            shutil.copy(source, os.path.join(work, link or os.path.basename(source)))
    for entry in ",".join(job.options.get("-archives", [])).split(","):
        if entry:
            source, _, link = entry.partition("#")
            shutil.unpack_archive(source, os.path.join(work, link or os.path.basename(source)))
    return work


def _run_step(job: StreamingJob, command: str, data: bytes, work: str, attempt: str) -> bytes:
    env = dict(os.environ)
    env.update({key.replace(".", "_"): value for key, value in job.confs.items()})
    for entry in job.options.get("-cmdenv", []):
        key, _, value = entry.partition("=")
        env[key] = value
    env["mapreduce_task_attempt_id"] = attempt
    done = subprocess.run(["sh", "-c", command], input=data, capture_output=True, cwd=work, env=env)
    for line in done.stderr.decode("utf-8", "replace").splitlines(keepends=True):
        if line.startswith("reporter:counter:"):
            fields = line[len("reporter:counter:") :].strip().rsplit(",", 2)
            if len(fields) != 3 or not fields[2].isdigit():
                _log("WARN", "streaming.PipeMapRed", f"Cannot parse reporter line: {line.strip()}")
                continue
            group, name, count = fields
            job.counters[(group, name)] = job.counters.get((group, name), 0) + int(count)
        elif not line.startswith("reporter:status:"):
            sys.stderr.write(line)  # local mode: the step's stderr reaches the console
    if done.returncode != 0:
        _log("INFO", "mapreduce.Job", f"Task Id : {attempt}, Status : FAILED")
        print(
            "Error: java.lang.RuntimeException: PipeMapRed.waitOutputThreads(): subprocess failed with code "
            f"{done.returncode}",
            file=sys.stderr,
        )
        raise JobFailed(attempt)
    return done.stdout


def _key(line: bytes) -> bytes:
    return line.split(b"\t", 1)[0].rstrip(b"\n")


def _sorted(data: bytes) -> bytes:
    return b"".join(sorted(data.splitlines(keepends=True), key=_key))


def _run_job(job: StreamingJob, staging: str, workspace: str) -> None:
    """Map each input, combine, partition, sort and reduce, writing part files into ``staging``."""
    tag = job.job_id[len("job_") :]
    reducers = int(job.confs.get("mapred.reduce.tasks", job.confs.get("mapreduce.job.reduces", "1")))
    reducer = job.one("-reducer") if reducers else None
    inputs = [name for given in job.options.get("-input", []) for name in _input_files(given)]
    map_outputs = []
    for index, path in enumerate(inputs):
        attempt = f"attempt_{tag}_m_{index:06d}_0"
        with open(path, "rb") as stream:
            data = stream.read()
        work = _workspace(job, workspace, attempt)
        output = _run_step(job, str(job.one("-mapper")), data, work, attempt)
        combiner = job.one("-combiner")
        if reducer and combiner:
            output = _run_step(job, combiner, _sorted(output), work, attempt)
        map_outputs.append(output)
    _log("INFO", "mapreduce.Job", " map 100% reduce 0%")
    if not reducer:
        for index, output in enumerate(map_outputs):
            with open(os.path.join(staging, f"part-{index:05d}"), "wb") as part:
                part.write(output)
        return
    lines = list(itertools.chain.from_iterable(o.splitlines(keepends=True) for o in map_outputs))
    for index in range(reducers):
        attempt = f"attempt_{tag}_r_{index:06d}_0"
        mine = b"".join(
            sorted((line for line in lines if zlib.crc32(_key(line)) % reducers == index), key=_key)
        )
        output = _run_step(job, reducer, mine, _workspace(job, workspace, attempt), attempt)
        with open(os.path.join(staging, f"part-{index:05d}"), "wb") as part:
            part.write(output)


def _print_counters(job: StreamingJob) -> None:
    _log("INFO", "mapreduce.Job", f"Counters: {len(job.counters)}")
    for group, names in itertools.groupby(sorted(job.counters), key=lambda key: key[0]):
        print(f"\t{group}", file=sys.stderr)
        for _group, name in names:
            print(f"\t\t{name}={job.counters[(group, name)]}", file=sys.stderr)


def streaming(args: list[str]) -> int:
    """Run a streaming job; 0 when it succeeded, 1 as Hadoop's ``Streaming Command Failed!``."""
    try:
        job = _parse(args)
        output = fs._resolve(str(job.one("-output")))
        if os.path.exists(output.local):
            raise ValueError(f"Output directory {output.given} already exists")
        if not job.one("-mapper") or not job.options.get("-input"):
            raise ValueError("Required arguments missing: -mapper and -input")
        fs._require_parent(output)
    except (ValueError, fs.ShellError) as error:
        _log("ERROR", "streaming.StreamJob", f"Error Launching job : {error}")
        print("Streaming Command Failed!", file=sys.stderr)
        return 1
    _log("INFO", "mapreduce.Job", f"The url to track the job: {TRACKING_URL}")
    _log("INFO", "mapreduce.Job", f"Running job: {job.job_id}")
    os.makedirs(output.local)
    staging = os.path.join(output.local, "_temporary")
    os.makedirs(staging)
    workspace = tempfile.mkdtemp(prefix="hadoop-standin-")
    try:
        _run_job(job, staging, workspace)
    except (JobFailed, fs.ShellError) as error:
        shutil.rmtree(staging)
        _log("INFO", "mapreduce.Job", f"Job {job.job_id} failed with state FAILED due to: {error}")
        _log("ERROR", "streaming.StreamJob", "Job not successful!")
        print("Streaming Command Failed!", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workspace)
    for name in os.listdir(staging):
        os.rename(os.path.join(staging, name), os.path.join(output.local, name))
    os.rmdir(staging)
    open(os.path.join(output.local, "_SUCCESS"), "wb").close()
    _log("INFO", "mapreduce.Job", f"Job {job.job_id} completed successfully")
    _print_counters(job)
    _log("INFO", "streaming.StreamJob", f"Output directory: {output.given}")
    return 0


def main(argv: list[str]) -> int:
    """``hadoop jar <jar> [args]``: record the call, then run the streaming job or the stand-in program."""
    with open(os.environ[fs.ROOT_VARIABLE] + ".jobs.jsonl", "a") as record:
        record.write(json.dumps(["jar", *argv]) + "\n")
    if not argv:
        print("RunJar jarFile [mainClass] args...", file=sys.stderr)
        return 255
    jar, args = argv[0], argv[1:]
    if not os.path.isfile(jar):
        print(f"JAR does not exist or is not a normal file: {os.path.abspath(jar)}", file=sys.stderr)
        return 255
    if os.path.basename(jar).startswith("hadoop-streaming"):
        return streaming(args)
    return subprocess.call([sys.executable, jar, *args])
