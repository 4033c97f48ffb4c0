"""A STAND-IN for the ``hadoop fs`` command (no Hadoop cluster can run here), over a private directory.

Run as a script (the `hadoop_cli` fixture puts a ``hadoop`` launcher for it first on PATH). It answers
``hadoop fs`` with ``-ls [-d] [-R]``, ``-lsr``, ``-stat``, ``-test -e|-d|-f|-z|-s``, ``-mkdir [-p]``,
``-put [-f] <local|-> <dst>``, ``-get``, ``-getmerge [-nl]``, ``-cat``, ``-rm [-f] [-r|-R] [-skipTrash]``,
``-rmr``, ``-mv``, ``-cp``, ``-count``, ``-du [-s]``, ``-chmod [-R]``, ``-chown [-R]`` and ``-touchz``,
printing what Hadoop 2/3's FsShell prints (``Found N items``, the ``-ls`` columns, ``-count``'s widths,
errors as ``<cmd>: `<path>': No such file or directory`` on stderr with exit 1, unknown commands with
exit 255). ``hadoop jar`` goes to `hadoop_jar_standin`.

Paths: ``hdfs://<host>[:port]/p``, ``hdfs:/p``, ``hdfs:///p`` and ``/p`` are ``p`` under
``$HADOOP_STANDIN_ROOT``; a relative path is under ``/user/<USER>``. Hosts other than those in
``$HADOOP_STANDIN_NAMENODES`` fail as an unknown host does; the file ``$HADOOP_STANDIN_ROOT.down`` makes
every command fail as a refused connection to the NameNode does. Hadoop globs (``* ? [abc] [^a] {a,b}``)
are expanded. Owners and groups set by ``-chown`` live in ``$HADOOP_STANDIN_ROOT.owners.json``.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

ROOT_VARIABLE = "HADOOP_STANDIN_ROOT"
NAMENODES_VARIABLE = "HADOOP_STANDIN_NAMENODES"
COPYING = "._COPYING_"


class ShellError(Exception):
    """One failed path: printed as ``<command>: <message>``; the command goes on and exits 1."""


class UsageError(Exception):
    """A malformed command line: Hadoop prints it and exits 255."""


def _root() -> str:
    return os.environ[ROOT_VARIABLE]


def _user() -> str:
    return os.environ.get("USER", "hadoop")


class HdfsPath:
    """A path as the user wrote it (for messages and listings) and where it lives on the local disk."""

    def __init__(self, given: str, absolute: str) -> None:
        self.given = given
        self.absolute = absolute  # the HDFS path, "/..."
        self.local = os.path.join(_root(), absolute.lstrip("/"))

    def child(self, name: str) -> HdfsPath:
        return HdfsPath(self.given.rstrip("/") + "/" + name, self.absolute.rstrip("/") + "/" + name)

    def parent(self) -> HdfsPath:
        given_parent = self.given.rstrip("/").rsplit("/", 1)[0] or "/"
        return HdfsPath(given_parent, os.path.dirname(self.absolute.rstrip("/")) or "/")

    @property
    def quoted(self) -> str:
        return f"`{self.given}'"


def _resolve(given: str) -> HdfsPath:
    parts = urlsplit(given)
    if parts.scheme not in ("", "hdfs"):
        raise ShellError(f'No FileSystem for scheme "{parts.scheme}"')
    if parts.netloc:
        host = parts.netloc.split(":")[0]
        known = os.environ.get(NAMENODES_VARIABLE, "localhost").split(",")
        if host not in known:
            raise UsageError(f"java.lang.IllegalArgumentException: java.net.UnknownHostException: {host}")
    path = parts.path or "/"
    if not path.startswith("/"):
        path = f"/user/{_user()}/{path}"
    normal = os.path.normpath(path)
    if normal.startswith("//"):
        normal = normal[1:]
    return HdfsPath(given, normal)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Hadoop's glob syntax for one path component as a regular expression."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            negate = body[:1] in ("^", "!")
            out.append("[" + ("^" if negate else "") + body[1 if negate else 0 :].replace("\\", "\\\\") + "]")
            i = end
        elif char == "{":
            end = pattern.index("}", i + 1)
            out.append("(?:" + "|".join(re.escape(alt) for alt in pattern[i + 1 : end].split(",")) + ")")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _has_glob(text: str) -> bool:
    return any(char in text for char in "*?[{")


def _expand(given: str) -> list[HdfsPath]:
    """The paths ``given`` names: itself, or its glob's matches in order; none is an error."""
    path = _resolve(given)
    if not _has_glob(path.absolute):
        if not os.path.lexists(path.local):
            raise ShellError(f"{path.quoted}: No such file or directory")
        return [path]
    matches = [HdfsPath("/", "/")]
    for component in [c for c in path.absolute.split("/") if c]:
        found = []
        for match in matches:
            if not _has_glob(component):
                candidate = match.child(component)
                if os.path.lexists(candidate.local):
                    found.append(candidate)
                continue
            if not os.path.isdir(match.local):
                continue
            regex = _glob_regex(component)
            found += [match.child(name) for name in sorted(os.listdir(match.local)) if regex.match(name)]
        matches = found
    if not matches:
        raise ShellError(f"{path.quoted}: No such file or directory")
    written = urlsplit(given).path
    prefix = given[: len(given) - len(written)] if written.startswith("/") else ""  # "hdfs://host:port"
    return [HdfsPath(prefix + match.absolute, match.absolute) for match in matches]


# --- what -ls and friends print --------------------------------------------------------------------------


def _owners() -> dict[str, list[str]]:
    try:
        with open(_root() + ".owners.json") as stream:
            return dict(json.load(stream))
    except FileNotFoundError:
        return {}


def _save_owners(owners: dict[str, list[str]]) -> None:
    with open(_root() + ".owners.json", "w") as stream:
        json.dump(owners, stream)


def _owner_of(path: HdfsPath) -> tuple[str, str]:
    owner, group = _owners().get(path.absolute, [_user(), "supergroup"])
    return owner, group


def _permissions(local: str) -> str:
    mode = os.stat(local).st_mode
    text = stat.filemode(mode)
    return text


def _ls_line(path: HdfsPath, widths: tuple[int, int, int, int]) -> str:
    info = os.stat(path.local)
    is_dir = os.path.isdir(path.local)
    owner, group = _owner_of(path)
    replication = "-" if is_dir else "3"
    size = 0 if is_dir else info.st_size
    when = datetime.datetime.fromtimestamp(info.st_mtime).strftime("%Y-%m-%d %H:%M")
    repl_w, owner_w, group_w, size_w = widths
    return (
        f"{_permissions(path.local)}  {replication:>{repl_w}} {owner:<{owner_w}} {group:<{group_w}} "
        f"{size:>{size_w}} {when} {path.given}"
    )


def _print_entries(entries: list[HdfsPath]) -> None:
    owners = [_owner_of(entry) for entry in entries]
    sizes = [0 if os.path.isdir(e.local) else os.stat(e.local).st_size for e in entries]
    widths = (
        1,
        max((len(o) for o, _ in owners), default=0),
        max((len(g) for _, g in owners), default=0),
        max((len(str(s)) for s in sizes), default=0),
    )
    for entry in entries:
        print(_ls_line(entry, widths))


def _children(path: HdfsPath) -> list[HdfsPath]:
    return [path.child(name) for name in sorted(os.listdir(path.local)) if not name.endswith(COPYING)]


def _walk(path: HdfsPath) -> Iterator[HdfsPath]:
    for child in _children(path):
        yield child
        if os.path.isdir(child.local):
            yield from _walk(child)


# --- the commands ------------------------------------------------------------------------------------------


def _flags(args: list[str], known: str) -> tuple[set[str], list[str]]:
    """Split leading ``-x`` flags (single letters in ``known`` or whole words) from the paths."""
    flags: set[str] = set()
    while args and args[0].startswith("-") and args[0] != "-" and len(args[0]) > 1:
        flag = args.pop(0)[1:]
        if flag not in known.split(","):
            raise UsageError(f"Illegal option -{flag}")
        flags.add(flag)
    return flags, args


def cmd_ls(args: list[str], recursive: bool = False) -> None:
    flags, paths = _flags(args, "d,R,h")
    recursive = recursive or "R" in flags
    for given in paths or ["."]:
        for path in _expand(given):
            if "d" in flags or not os.path.isdir(path.local):
                _print_entries([path])
            elif recursive:
                _print_entries(list(_walk(path)))
            else:
                entries = _children(path)
                print(f"Found {len(entries)} items")
                _print_entries(entries)


def cmd_stat(args: list[str]) -> None:
    for given in args[-1:] if len(args) > 1 else args:
        for path in _expand(given):
            when = datetime.datetime.fromtimestamp(os.stat(path.local).st_mtime, datetime.timezone.utc)
            print(when.strftime("%Y-%m-%d %H:%M:%S"))


def cmd_test(args: list[str]) -> int:
    flags, paths = _flags(args, "e,d,f,z,s")
    path = _resolve(paths[0])
    if not os.path.lexists(path.local):
        return 1
    checks: dict[str, Callable[[], bool]] = {
        "e": lambda: True,
        "d": lambda: os.path.isdir(path.local),
        "f": lambda: os.path.isfile(path.local),
        "z": lambda: os.path.isfile(path.local) and os.path.getsize(path.local) == 0,
        "s": lambda: os.path.isfile(path.local) and os.path.getsize(path.local) > 0,
    }
    return 0 if all(checks[flag]() for flag in flags) else 1


def _require_parent(path: HdfsPath) -> None:
    parent = path.parent()
    if not os.path.isdir(parent.local):
        raise ShellError(f"{path.quoted}: No such file or directory")


def cmd_mkdir(args: list[str]) -> None:
    flags, paths = _flags(args, "p")
    for given in paths:
        path = _resolve(given)
        if os.path.isdir(path.local):
            if "p" not in flags:
                raise ShellError(f"{path.quoted}: File exists")
            continue
        if os.path.exists(path.local):
            raise ShellError(
                f"{path.quoted}: Is not a directory" if "p" in flags else f"{path.quoted}: File exists"
            )
        if "p" not in flags:
            _require_parent(path)
            os.mkdir(path.local)
        else:
            os.makedirs(path.local)


def _destination(given: str, source_name: str, overwrite: bool) -> HdfsPath:
    destination = _resolve(given)
    if os.path.isdir(destination.local):
        destination = destination.child(source_name)
    if os.path.exists(destination.local) and not overwrite:
        raise ShellError(f"{destination.quoted}: File exists")
    _require_parent(destination)
    return destination


def cmd_put(args: list[str]) -> None:
    flags, paths = _flags(args, "f,p,d,l")
    *sources, target = paths
    for source in sources:
        destination = _destination(target, os.path.basename(source), "f" in flags)
        copying = destination.local + COPYING
        with open(copying, "wb") as sink:
            if source == "-":
                shutil.copyfileobj(sys.stdin.buffer, sink)
            else:
                if not os.path.exists(source):
                    os.remove(copying)
                    raise ShellError(f"`{source}': No such file or directory")
                with open(source, "rb") as stream:
                    shutil.copyfileobj(stream, sink)
        os.replace(copying, destination.local)


def cmd_get(args: list[str]) -> None:
    flags, (source, local) = _flags(args, "f,p,ignoreCrc,crc")
    for path in _expand(source):
        target = os.path.join(local, os.path.basename(path.absolute)) if os.path.isdir(local) else local
        if os.path.exists(target) and "f" not in flags:
            raise ShellError(f"`{target}': File exists")
        if os.path.isdir(path.local):
            shutil.copytree(path.local, target)
        else:
            shutil.copyfile(path.local, target)


def cmd_getmerge(args: list[str]) -> None:
    flags, (source, local) = _flags(args, "nl,skip-empty-file")
    with open(local, "wb") as sink:
        for path in _expand(source):
            files = (
                [c for c in _children(path) if os.path.isfile(c.local)]
                if os.path.isdir(path.local)
                else [path]
            )
            for item in files:
                with open(item.local, "rb") as stream:
                    shutil.copyfileobj(stream, sink)
                if "nl" in flags:
                    sink.write(b"\n")


def cmd_cat(args: list[str]) -> None:
    out = sys.stdout.buffer
    for given in args:
        for path in _expand(given):
            if os.path.isdir(path.local):
                raise ShellError(f"{path.quoted}: Is a directory")
            with open(path.local, "rb") as stream:
                shutil.copyfileobj(stream, out)
    out.flush()


def _forget_owners(absolute: str, moved_to: str | None = None) -> None:
    owners = _owners()
    changed = {}
    for key, value in owners.items():
        if key == absolute or key.startswith(absolute.rstrip("/") + "/"):
            if moved_to is not None:
                changed[moved_to + key[len(absolute) :]] = value
            continue
        changed[key] = value
    if changed != owners:
        _save_owners(changed)


def cmd_rm(args: list[str], recursive: bool = False) -> None:
    flags, paths = _flags(args, "f,r,R,skipTrash,safely")
    recursive = recursive or bool({"r", "R"} & flags)
    for given in paths:
        try:
            matches = _expand(given)
        except ShellError:
            if "f" in flags:
                continue
            raise
        for path in matches:
            if os.path.isdir(path.local):
                if not recursive:
                    raise ShellError(f"{path.quoted}: Is a directory")
                shutil.rmtree(path.local)
            else:
                os.remove(path.local)
            _forget_owners(path.absolute)
            print(f"Deleted {path.given}")


def cmd_mv(args: list[str]) -> None:
    *sources, target = args
    destination = _resolve(target)
    if len(sources) > 1 and not os.path.isdir(destination.local):
        raise ShellError(f"{destination.quoted}: Is not a directory")
    for given in sources:
        for path in _expand(given):
            landing = _destination(target, os.path.basename(path.absolute), overwrite=False)
            if landing.absolute == path.absolute or landing.absolute.startswith(path.absolute + "/"):
                raise ShellError(f"{path.quoted} to {landing.quoted}: is a subdirectory of itself")
            os.rename(path.local, landing.local)
            _forget_owners(path.absolute, landing.absolute)


def cmd_cp(args: list[str]) -> None:
    flags, paths = _flags(args, "f,p")
    *sources, target = paths
    for given in sources:
        for path in _expand(given):
            landing = _destination(target, os.path.basename(path.absolute), "f" in flags)
            if os.path.isdir(path.local):
                shutil.copytree(path.local, landing.local)
            else:
                shutil.copyfile(path.local, landing.local)


def _totals(path: HdfsPath) -> tuple[int, int, int]:
    """Directories (itself included), files and bytes at and under ``path``."""
    if not os.path.isdir(path.local):
        return 0, 1, os.path.getsize(path.local)
    dirs, files, size = 1, 0, 0
    for entry in _walk(path):
        if os.path.isdir(entry.local):
            dirs += 1
        else:
            files, size = files + 1, size + os.path.getsize(entry.local)
    return dirs, files, size


def cmd_count(args: list[str]) -> None:
    _, paths = _flags(args, "q,h,v,u,t")
    for given in paths:
        for path in _expand(given):
            dirs, files, size = _totals(path)
            print(f"{dirs:>12} {files:>12} {size:>18} {path.given}")


def cmd_du(args: list[str]) -> None:
    flags, paths = _flags(args, "s,h,x,v")
    for given in paths or ["."]:
        for path in _expand(given):
            entries = [path] if "s" in flags or not os.path.isdir(path.local) else _children(path)
            for entry in entries:
                size = _totals(entry)[2]
                print(f"{size:<10}  {size * 3:<10}  {entry.given}")


def _each(paths: list[str], recursive: bool) -> Iterator[HdfsPath]:
    for given in paths:
        for path in _expand(given):
            yield path
            if recursive and os.path.isdir(path.local):
                yield from _walk(path)


def cmd_chmod(args: list[str]) -> None:
    flags, (mode, *paths) = _flags(args, "R")
    if not re.fullmatch(r"[0-7]{3,4}", mode):
        raise ShellError(f"chmod : mode '{mode}' does not match the expected pattern.")
    for path in _each(paths, "R" in flags):
        os.chmod(path.local, int(mode, 8))


def cmd_chown(args: list[str]) -> None:
    flags, (ownership, *paths) = _flags(args, "R")
    owner, _, group = ownership.partition(":")
    owners = _owners()
    for path in _each(paths, "R" in flags):
        current_owner, current_group = owners.get(path.absolute, [_user(), "supergroup"])
        owners[path.absolute] = [owner or current_owner, group or current_group]
    _save_owners(owners)


def cmd_touchz(args: list[str]) -> None:
    for given in args:
        path = _resolve(given)
        if os.path.isdir(path.local):
            raise ShellError(f"{path.quoted}: Is a directory")
        if os.path.exists(path.local):
            if os.path.getsize(path.local):
                raise ShellError(f"{path.quoted}: Not a zero-length file")
            continue
        _require_parent(path)
        open(path.local, "wb").close()


COMMANDS: dict[str, Callable[[list[str]], int | None]] = {
    "ls": cmd_ls,
    "lsr": lambda args: cmd_ls(args, recursive=True),
    "stat": cmd_stat,
    "test": cmd_test,
    "mkdir": cmd_mkdir,
    "put": cmd_put,
    "copyFromLocal": cmd_put,
    "get": cmd_get,
    "copyToLocal": cmd_get,
    "getmerge": cmd_getmerge,
    "cat": cmd_cat,
    "rm": cmd_rm,
    "rmr": lambda args: cmd_rm(args, recursive=True),
    "mv": cmd_mv,
    "cp": cmd_cp,
    "count": cmd_count,
    "du": cmd_du,
    "chmod": cmd_chmod,
    "chown": cmd_chown,
    "touchz": cmd_touchz,
}


def main(argv: list[str]) -> int:
    """``hadoop [--config DIR] [--loglevel LEVEL] fs -<command> args...``: the command's exit status."""
    while len(argv) >= 2 and argv[0] in ("--config", "--loglevel"):
        argv = argv[2:]
    if argv[:1] == ["jar"]:  # ``hadoop jar``: the job stand-in
        import hadoop_jar_standin

        return hadoop_jar_standin.main(argv[1:])
    if len(argv) < 2 or argv[0] not in ("fs", "dfs") or not argv[1].startswith("-"):
        print("Usage: hadoop fs [generic options] -<command> ...", file=sys.stderr)
        return 255 if len(argv) >= 1 and argv[0] in ("fs", "dfs") else 1
    name, args = argv[1][1:], argv[2:]
    if name not in COMMANDS:
        print(f"-{name}: Unknown command", file=sys.stderr)
        return 255
    if os.path.exists(_root() + ".down"):
        print(
            f"{name}: Call From localhost/127.0.0.1 to localhost:8020 failed on connection exception: "
            "java.net.ConnectException: Connection refused",
            file=sys.stderr,
        )
        return 1
    try:
        return COMMANDS[name](list(args)) or 0
    except ShellError as err:
        print(f"{name}: {err}", file=sys.stderr)
        return 1
    except UsageError as err:
        print(f"-{name}: {err}", file=sys.stderr)
        return 255


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
