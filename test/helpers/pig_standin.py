"""A STAND-IN for Apache Pig's ``pig`` launcher (no Pig or Hadoop can run here), run over local files.

`install_pig` writes ``<home>/bin/pig``, a launcher for this module, where ``[pig] home`` points. Each run
appends what it was given to ``<home>/invocations.jsonl``: its arguments, pid, ``PIG_HOME``, ``PIG_OPTS``
and the parsed contents of its ``-param_file`` and ``-propertyFile``.

It takes Pig's options ``-x <mode>``, ``-param k=v``, ``-param_file f``, ``-propertyFile f``, ``-f script``
and ``-e "kill <job id>"``. A script is a small subset of Pig Latin, one statement per ``;``:
- ``%default NAME 'value'``; ``$NAME`` is replaced from ``-param``, then the param file, then defaults;
- ``a = LOAD 'path' [USING PigStorage('<sep>')] [AS (f1[:type], ...)]`` reads each line into fields
  (tab-separated unless told; fields beyond ``AS`` are dropped, as Pig projects them away);
- ``b = FOREACH a GENERATE <f>|UPPER(<f>)|LOWER(<f>), ...``;
- ``STORE b INTO 'dir' [USING PigStorage('<sep>')]`` writes ``dir/part-m-00000`` and ``dir/_SUCCESS``
  and first logs ``HadoopJobId: job_local<pid>_<n>``, as Pig's launcher logs each job it submits.

Errors follow Pig's documented return codes and message shape: a missing input exits 2 with
``ERROR 2118: Input path does not exist: <path>``; an existing output exits 6 with ``ERROR 6000: Output
Location Validation Failed``; a statement it cannot parse or an undefined parameter exits 6 with
``ERROR 1000: Error during parsing.``; bad options exit 4. ``kill <job id>`` prints ``Killed job <id>``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["install_pig", "invocations", "main"]

_HERE = Path(__file__).resolve().parent
_LOG = "invocations.jsonl"


class PigError(Exception):
    """A failure Pig reports as ``ERROR <code>: <message>`` and exits ``returncode``."""

    def __init__(self, returncode: int, code: int, message: str) -> None:
        super().__init__(f"ERROR {code}: {message}")
        self.returncode = returncode


def install_pig(home: Path) -> Path:
    """Write ``<home>/bin/pig``, a launcher running this stand-in with ``home`` as its installation."""
    launcher = home / "bin" / "pig"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text(
        f"#!{sys.executable} -S\n"
        "import sys\n"
        f"sys.path.insert(0, {str(_HERE)!r})\n"
        "import pig_standin\n"
        f"sys.exit(pig_standin.main({str(home)!r}, sys.argv[1:]))\n"
    )
    launcher.chmod(0o755)
    return launcher


def invocations(home: Path) -> list[dict]:
    """Every run of the launcher so far, oldest first."""
    log = home / _LOG
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def main(home: str, argv: list[str]) -> int:
    """Run ``pig`` with ``argv``: record the call, then run the script or the ``-e`` command."""
    try:
        options = _parse_options(argv)
        _record(home, argv, options)
        if "e" in options:
            return _run_command(options["e"])
        script = Path(options["f"]).read_text()
        _run_script(_substitute(script, options))
        return 0
    except PigError as error:
        print(f"ERROR org.apache.pig.Main - {error}", file=sys.stderr)
        return error.returncode


def _parse_options(argv: list[str]) -> dict:
    options: dict = {"param": {}, "param_file": None, "propertyFile": None}
    args = iter(argv)
    for flag in args:
        value = next(args, None)
        if flag not in ("-x", "-param", "-param_file", "-propertyFile", "-f", "-e") or value is None:
            raise PigError(4, 2999, f"Unexpected internal error. Found unknown option ({flag})")
        if flag == "-param":
            key, _, param = value.partition("=")
            options["param"][key] = param
        else:
            options[flag.lstrip("-")] = value
    if "f" not in options and "e" not in options:
        raise PigError(4, 2999, "Unexpected internal error. No script given (-f <script> or -e <command>)")
    return options


def _settings(path: str | None) -> dict[str, str]:
    """A parameter or property file: ``key=value`` lines."""
    if path is None:
        return {}
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def _record(home: str, argv: list[str], options: dict) -> None:
    entry = {
        "argv": argv,
        "pid": os.getpid(),
        "pig_home": os.environ.get("PIG_HOME"),
        "pig_opts": os.environ.get("PIG_OPTS"),
        "params": _settings(options["param_file"]),
        "param_file_text": Path(options["param_file"]).read_text() if options["param_file"] else None,
        "properties": _settings(options["propertyFile"]),
        "property_file_text": Path(options["propertyFile"]).read_text() if options["propertyFile"] else None,
    }
    with open(os.path.join(home, _LOG), "a") as log:
        log.write(json.dumps(entry) + "\n")


def _run_command(command: str) -> int:
    match = re.fullmatch(r"\s*kill\s+(\S+)\s*", command)
    if not match:
        raise PigError(6, 1000, f"Error during parsing. Encountered unexpected command: {command}")
    print(f"Killed job {match.group(1)}")
    return 0


def _substitute(script: str, options: dict) -> str:
    """Replace ``$NAME`` as Pig's preprocessor does; ``%default`` lines give the fallbacks."""
    defaults = dict(re.findall(r"^\s*%default\s+(\w+)\s+'([^']*)'\s*;?\s*$", script, re.M))
    script = re.sub(r"^\s*%default.*$", "", script, flags=re.M)
    values = {**defaults, **_settings(options["param_file"]), **options["param"]}

    def value(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise PigError(6, 1000, f"Error during parsing. Undefined parameter : {match.group(1)}")
        return values[match.group(1)]

    return re.sub(r"\$(\w+)", value, script)


_LOAD = re.compile(
    r"(\w+)\s*=\s*LOAD\s+'([^']+)'(?:\s+USING\s+PigStorage\('([^']*)'\))?(?:\s+AS\s*\(([^)]*)\))?", re.I
)
_FOREACH = re.compile(r"(\w+)\s*=\s*FOREACH\s+(\w+)\s+GENERATE\s+(.+)", re.I | re.S)
_STORE = re.compile(r"STORE\s+(\w+)\s+INTO\s+'([^']+)'(?:\s+USING\s+PigStorage\('([^']*)'\))?", re.I)
_FUNCTIONS = {"UPPER": str.upper, "LOWER": str.lower, "": lambda text: text}

# Field names, and how to read the rows: as in Pig, nothing is read before a STORE runs its job.
Relation = tuple[list[str], Callable[[], list[list[str]]]]


def _run_script(script: str) -> None:
    relations: dict[str, Relation] = {}
    jobs = 0
    for statement in (s.strip() for s in _without_comments(script).split(";")):
        if not statement:
            continue
        if load := _LOAD.fullmatch(statement):
            relations[load.group(1)] = _load(load.group(2), load.group(3), load.group(4))
        elif foreach := _FOREACH.fullmatch(statement):
            relations[foreach.group(1)] = _generate(_relation(relations, foreach.group(2)), foreach.group(3))
        elif store := _STORE.fullmatch(statement):
            jobs += 1
            job_id = f"job_local{os.getpid()}_{jobs:04d}"
            print(f"INFO  MapReduceLauncher - HadoopJobId: {job_id}", file=sys.stderr)
            sys.stderr.flush()  # a launcher's log line is visible while the job runs
            _store(_relation(relations, store.group(1)), store.group(2), store.group(3))
        else:
            raise PigError(6, 1000, f"Error during parsing. Cannot parse: {statement}")
    print(f"INFO  MapReduceLauncher - Success! ({jobs} jobs)", file=sys.stderr)


def _without_comments(script: str) -> str:
    return re.sub(r"--[^\n]*", "", script)


def _relation(relations: dict[str, Relation], alias: str) -> Relation:
    if alias not in relations:
        raise PigError(6, 1000, f"Error during parsing. Undefined alias: {alias}")
    return relations[alias]


def _load(path: str, separator: str | None, schema: str | None) -> Relation:
    fields = [field.split(":")[0].strip() for field in schema.split(",")] if schema else []

    def rows() -> list[list[str]]:
        try:
            with open(path, encoding="utf-8") as data:  # a FIFO blocks here, as a long-running job does
                split = [line.rstrip("\n").split(separator or "\t") for line in data]
        except FileNotFoundError:
            raise PigError(2, 2118, f"Input path does not exist: {path}") from None
        return [row[: len(fields)] if fields else row for row in split]

    return fields, rows


def _generate(relation: Relation, expressions: str) -> Relation:
    fields, rows = relation
    getters = []
    for expression in (e.strip() for e in expressions.split(",")):
        call = re.fullmatch(r"(?:(\w+)\()?(\w+)\)?", expression)
        if not call or call.group(2) not in fields or (call.group(1) or "").upper() not in _FUNCTIONS:
            raise PigError(6, 1025, f"Invalid field projection or function: {expression}")
        getters.append((_FUNCTIONS[(call.group(1) or "").upper()], fields.index(call.group(2))))
    names = [e.strip() for e in expressions.split(",")]
    return names, lambda: [[function(row[i]) for function, i in getters] for row in rows()]


def _store(relation: Relation, directory: str, separator: str | None) -> None:
    if os.path.exists(directory):
        raise PigError(6, 6000, f"Output Location Validation Failed for: '{directory}'. It already exists")
    rows = relation[1]()
    os.makedirs(directory)
    with open(os.path.join(directory, "part-m-00000"), "w", encoding="utf-8") as part:
        for row in rows:
            part.write((separator or "\t").join(row) + "\n")
    Path(directory, "_SUCCESS").touch()
