"""Files and commands on another host, over the system ``ssh`` program.

`RemoteContext` runs commands on a host (``Popen``, ``check_output``) and forwards ports (``tunnel``);
`RemoteFileSystem` and `RemoteTarget` keep task outputs there. Writes are atomic: a target opened for
writing fills a local temporary file, which on ``close()`` is uploaded under a temporary remote name and
renamed into place, so a task that fails mid-write leaves nothing on the host.

Authentication is whatever ``ssh`` does for the user (keys, agent, ``~/.ssh/config``); with ``sshpass=True``
the password is read by ``sshpass -e`` from the ``SSHPASS`` environment variable, so it never appears on a
command line, in a log or in an error. Paths are quoted for the remote shell, so spaces and glob
characters in them are taken literally.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shlex
import subprocess
from collections.abc import Iterator, Sequence
from typing import IO, Any

from luigi.contrib.staged_upload import StagedUpload, tmp_suffix
from luigi.format import Format, InputPipeProcessWrapper, get_default_format
from luigi.target import (
    FileAlreadyExists,
    FileSystem,
    FileSystemTarget,
    MissingParentDirectory,
    NotADirectory,
)

__all__ = [
    "AtomicRemoteFileWriter",
    "RemoteCalledProcessError",
    "RemoteContext",
    "RemoteFileSystem",
    "RemoteTarget",
]

logger = logging.getLogger("luigi-interface")

_STDERR_TAIL = 2000
_TUNNEL_READY = b"ready"
_TUNNEL_CLOSE_TIMEOUT = 30.0

# Exit statuses of the small shell scripts below; ssh itself uses 255, commands 1-127.
_EXISTS_AS_DIRECTORY = 70
_EXISTS_AS_FILE = 71
_PARENT_MISSING = 72
_DESTINATION_EXISTS = 73


def _stderr_tail(stderr: bytes | str | None) -> str:
    if not stderr:
        return ""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    return text.strip()[-_STDERR_TAIL:]


class RemoteCalledProcessError(subprocess.CalledProcessError):
    """A command run over ssh exited non-zero (255: ssh itself failed: refused, unknown host, bad key...)."""

    def __init__(
        self,
        returncode: int,
        command: Any,
        host: str,
        output: bytes | None = None,
        stderr: bytes | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(returncode, command, output, stderr)
        self.host = host
        self.port = port

    def __str__(self) -> str:
        where = self.host if self.port is None else f"{self.host}:{self.port}"
        command = self.cmd if isinstance(self.cmd, str) else " ".join(str(part) for part in self.cmd)
        message = f"Command {command!r} on host {where} returned non-zero exit status {self.returncode}"
        detail = _stderr_tail(self.stderr)
        return f"{message}: {detail}" if detail else message


class RemoteContext:
    """How to reach one host with ``ssh``: user, key, port and options, shared by every command run there."""

    def __init__(
        self,
        host: str,
        username: str | None = None,
        key_file: str | None = None,
        connect_timeout: int | None = None,
        port: int | str | None = None,
        no_host_key_check: bool = False,
        sshpass: bool = False,
        tty: bool = False,
    ) -> None:
        self.host = host
        self.username = username
        self.key_file = key_file
        self.connect_timeout = connect_timeout
        self.port = None if port is None or port == "" else int(port)
        self.no_host_key_check = no_host_key_check
        self.sshpass = sshpass
        self.tty = tty

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.host!r}, {self.username!r}, {self.key_file!r}, "
            f"{self.connect_timeout!r}, {self.port!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteContext) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def _host_ref(self) -> str:
        """``user@host``, or the bare host when no user is set."""
        return f"{self.username}@{self.host}" if self.username else self.host

    def _ssh_options(self) -> list[str]:
        options = ["-o", "ControlMaster=no"]
        if not self.sshpass:
            options += ["-o", "BatchMode=yes"]  # fail rather than wait for a password nobody types
        if self.port is not None:
            options += ["-p", str(self.port)]
        if self.key_file:
            options += ["-i", self.key_file]
        if self.connect_timeout is not None:
            options += ["-o", f"ConnectTimeout={int(self.connect_timeout)}"]
        if self.no_host_key_check:
            options += ["-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no"]
            options += ["-o", "LogLevel=ERROR"]  # else every command warns it "permanently added" the host
        if self.tty:
            options.append("-t")
        return options

    def _prepare_cmd(self, cmd: Sequence[str], ssh_options: Sequence[str] = ()) -> list[str]:
        """The local command line that runs ``cmd`` on the host (``ssh`` joins it with spaces)."""
        prefix = ["sshpass", "-e", "ssh"] if self.sshpass else ["ssh"]
        return [*prefix, *self._ssh_options(), *ssh_options, self._host_ref(), *cmd]

    def _spawn(self, local_cmd: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        try:
            return subprocess.Popen(local_cmd, **kwargs)
        except FileNotFoundError as err:
            package = "sshpass" if self.sshpass and err.filename == "sshpass" else "openssh-client"
            raise FileNotFoundError(
                err.errno, f"Cannot run {local_cmd[0]!r} to reach {self._where()}: install {package}"
            ) from err

    def _where(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"

    def Popen(self, cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` on the host; ``kwargs`` go to `subprocess.Popen` (stdin, stdout, ...)."""
        return self._spawn(self._prepare_cmd(cmd), **kwargs)

    def _run(
        self, cmd: Sequence[str], stdin: Any = subprocess.DEVNULL, stdout: Any = subprocess.PIPE
    ) -> bytes:
        """Run ``cmd`` on the host; its output (if piped), or `RemoteCalledProcessError` with its stderr."""
        process = self._spawn(self._prepare_cmd(cmd), stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
        output, stderr = process.communicate()
        if process.returncode != 0:
            raise RemoteCalledProcessError(
                process.returncode, list(cmd), self.host, output, stderr, self.port
            )
        return output or b""

    def check_output(self, cmd: Sequence[str]) -> bytes:
        """Run ``cmd`` on the host and return its stdout; raise `RemoteCalledProcessError` if it fails.

        Like ``ssh`` itself, the words of ``cmd`` are joined with spaces and run by the remote login shell.
        """
        return self._run(cmd)

    def _status(self, script: str) -> int:
        """Run a shell ``script`` on the host and return its exit status; ssh failures still raise."""
        try:
            self._run([script])
        except RemoteCalledProcessError as err:
            if err.returncode == 255:
                raise
            return err.returncode
        return 0

    @contextlib.contextmanager
    def tunnel(
        self, local_port: int, remote_port: int | None = None, remote_host: str = "localhost"
    ) -> Iterator[None]:
        """Forward ``localhost:local_port`` to ``remote_host:remote_port``, as seen from the host."""
        forward = f"{int(local_port)}:{remote_host}:{int(remote_port or local_port)}"
        options = ["-L", forward, "-o", "ExitOnForwardFailure=yes"]
        process = self._spawn(
            self._prepare_cmd([f"printf {_TUNNEL_READY.decode()} && cat"], options),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None and process.stdin is not None
        if process.stdout.read(len(_TUNNEL_READY)) != _TUNNEL_READY:
            self._fail_tunnel(process, forward)
        try:
            yield
        finally:
            process.stdin.close()  # the remote cat ends, and with it the session and the forwarding
            try:
                returncode = process.wait(timeout=_TUNNEL_CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                returncode = process.wait()
            process.stdout.close()
            if process.stderr is not None:
                process.stderr.close()
        if returncode not in (0, -9):
            raise RemoteCalledProcessError(returncode, ["-L", forward], self.host, port=self.port)

    def _fail_tunnel(self, process: subprocess.Popen[Any], forward: str) -> None:
        process.kill()
        _, stderr = process.communicate()
        raise RemoteCalledProcessError(
            process.returncode, ["-L", forward], self.host, None, stderr, self.port
        )


class RemoteFileSystem(FileSystem):
    """Paths on a host reached with ``ssh``; the keyword arguments are those of `RemoteContext`."""

    def __init__(self, host: str, **kwargs: Any) -> None:
        self.remote_context = RemoteContext(host, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.remote_context!r})"

    def exists(self, path: str) -> bool:
        """Whether anything (file, directory, ...) is at ``path``."""
        return self.remote_context._status(f"test -e {shlex.quote(path)}") == 0

    def isdir(self, path: str) -> bool:
        """Whether ``path`` is a directory (following symlinks)."""
        return self.remote_context._status(f"test -d {shlex.quote(path)}") == 0

    def listdir(self, path: str) -> list[str]:
        """Every file below directory ``path``, recursively, following symlinks."""
        path = path.rstrip("/") or ("/" if path.startswith("/") else ".")
        listing = self.remote_context.check_output(["find", "-L", shlex.quote(path), "-type", "f"])
        return [line.decode("utf-8", "surrogateescape") for line in listing.splitlines()]

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        """Delete ``path``; a directory only when ``recursive`` (there is no trash over ssh)."""
        flags = ["-r"] if recursive else []
        self.remote_context.check_output(["rm", *flags, "--", shlex.quote(path)])

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Create directory ``path`` (and its parents when ``parents``), with one round trip to the host."""
        quoted = shlex.quote(path)
        checks = f"if [ -d {quoted} ]; then exit {_EXISTS_AS_DIRECTORY}; fi; "
        checks += f"if [ -e {quoted} ]; then exit {_EXISTS_AS_FILE}; fi; "
        if not parents:
            parent = shlex.quote(posixpath.dirname(posixpath.normpath(path)) or ".")
            checks += f"if [ ! -d {parent} ]; then exit {_PARENT_MISSING}; fi; "
        status = self.remote_context._status(checks + f"mkdir {'-p ' if parents else ''}-- {quoted}")
        self._check_mkdir_status(status, path, raise_if_exists, parents)

    def _check_mkdir_status(self, status: int, path: str, raise_if_exists: bool, parents: bool) -> None:
        where = self._url(path)
        if status == _EXISTS_AS_DIRECTORY:
            if raise_if_exists:
                raise FileAlreadyExists(f"Cannot create directory {where}: it already exists")
        elif status == _EXISTS_AS_FILE:
            raise NotADirectory(f"Cannot create directory {where}: a file with that name exists")
        elif status == _PARENT_MISSING:
            raise MissingParentDirectory(
                f"Cannot create directory {where}: its parent does not exist (pass parents=True to create it)"
            )
        elif status != 0:
            kind = "mkdir -p" if parents else "mkdir"
            raise RemoteCalledProcessError(
                status, [kind, path], self.remote_context.host, port=self.remote_context.port
            )

    def move(self, path: str, dest: str, raise_if_exists: bool = False) -> None:
        """Rename ``path`` to ``dest`` on the host, creating ``dest``'s parent directory."""
        if raise_if_exists:
            self.rename_dont_move(path, dest)
            return
        self.remote_context.check_output([self._make_parent_script(dest) + self._mv_script(path, dest, "-f")])

    def rename_dont_move(self, path: str, dest: str) -> None:
        """Rename ``path`` to ``dest`` unless something is there (`FileAlreadyExists`); one remote command."""
        quoted_dest = shlex.quote(dest)
        quoted_path = shlex.quote(path)
        script = f"if [ -e {quoted_dest} ]; then exit {_DESTINATION_EXISTS}; fi; "
        # -n: should another writer win the race after the check, mv still leaves its file alone (and, on
        # some versions, exits 0 having moved nothing, hence the second check).
        script += self._make_parent_script(dest) + self._mv_script(path, dest, "-n") + "; status=$?; "
        script += f"if [ -e {quoted_path} ] && [ -e {quoted_dest} ]; then exit {_DESTINATION_EXISTS}; fi; "
        script += "exit $status"
        status = self.remote_context._status(script)
        if status == _DESTINATION_EXISTS:
            raise FileAlreadyExists(
                f"Cannot move {self._url(path)} to {dest!r}: the destination already exists"
            )
        if status != 0:
            raise RemoteCalledProcessError(
                status, ["mv", path, dest], self.remote_context.host, port=self.remote_context.port
            )

    def copy(self, path: str, dest: str) -> None:
        """Copy file or directory ``path`` to ``dest`` on the host, creating ``dest``'s parent directory."""
        copy = f"cp -R -- {shlex.quote(path)} {shlex.quote(dest)}"
        self.remote_context.check_output([self._make_parent_script(dest) + copy])

    def put(self, local_path: str, path: str) -> None:
        """Upload local file ``local_path`` to ``path``: sent to a temporary name, then renamed into place."""
        self._put_via(local_path, path, path + tmp_suffix())

    def _put_via(self, local_path: str, path: str, tmp_path: str) -> None:
        """Upload ``local_path`` to the remote ``tmp_path``, check its size, and rename it to ``path``."""
        tmp, dest = shlex.quote(tmp_path), shlex.quote(path)
        size = os.path.getsize(local_path)
        # The size check matters: if this client dies mid-upload, the remote cat still ends "successfully".
        script = (
            f"{{ {self._make_parent_script(path)}cat > {tmp} && test $(wc -c < {tmp}) -eq {size}"
            f" && mv -f -- {tmp} {dest}; }} || {{ status=$?; rm -f -- {tmp}; exit $status; }}"
        )
        with open(local_path, "rb") as source:
            self.remote_context._run([script], stdin=source)

    def get(self, path: str, local_path: str) -> None:
        """Download ``path`` to ``local_path``, which appears only once the whole file has arrived."""
        parent = os.path.dirname(os.path.normpath(local_path))
        if parent:
            os.makedirs(parent, exist_ok=True)
        tmp_local_path = local_path + tmp_suffix()
        try:
            with open(tmp_local_path, "wb") as sink:
                self.remote_context._run(["cat", "--", shlex.quote(path)], stdout=sink)
            os.replace(tmp_local_path, local_path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp_local_path)

    def _url(self, path: str) -> str:
        return f"{self.remote_context._host_ref()}:{path!r}"

    @staticmethod
    def _make_parent_script(path: str) -> str:
        parent = posixpath.dirname(posixpath.normpath(path))
        return f"mkdir -p -- {shlex.quote(parent)} && " if parent and parent != "/" else ""

    @staticmethod
    def _mv_script(path: str, dest: str, flag: str) -> str:
        return f"mv {flag} -- {shlex.quote(path)} {shlex.quote(dest)}"


class AtomicRemoteFileWriter(StagedUpload):
    """A remote file being written over ssh, uploaded atomically on ``close()``.

    The data is staged locally; ``tmp_path`` is the remote temporary name it is uploaded to and renamed
    from (Luigi's ``<path>-luigi-tmp-<n>``), so a test can check over ssh that nothing is left there.
    """

    local_prefix = "luigi-ssh"
    _fs: RemoteFileSystem

    def __init__(self, fs: RemoteFileSystem, path: str) -> None:
        self.__tmp_path = path + tmp_suffix()
        folder = os.path.dirname(os.path.normpath(path))
        if folder:  # as in Luigi: the folder exists (or its error is raised) once open('w') returns
            fs.mkdir(folder)
        super().__init__(fs, path)

    @property
    def tmp_path(self) -> str:
        """The remote temporary name the file is uploaded to before it is renamed to ``path``."""
        return self.__tmp_path

    def _upload(self, staged_path: str) -> None:
        self._fs._put_via(staged_path, self.path, self.__tmp_path)

    @property
    def fs(self) -> RemoteFileSystem:
        """The file system the file is written to."""
        return self._fs


class RemoteTarget(FileSystemTarget):
    """A file on a host reached with ``ssh``; the keyword arguments are those of `RemoteContext`."""

    def __init__(self, path: str, host: str, format: Format | None = None, **kwargs: Any) -> None:
        super().__init__(path)
        self.format = get_default_format() if format is None else format
        self._fs = RemoteFileSystem(host, **kwargs)

    @property
    def fs(self) -> RemoteFileSystem:
        return self._fs

    def open(self, mode: str = "r") -> IO[Any]:
        """Stream the remote file ('r') or write it atomically ('w'); 'b' and 't' are accepted and ignored."""
        direction = mode.replace("b", "").replace("t", "")
        if direction == "r":
            command = self._fs.remote_context._prepare_cmd(["cat", "--", shlex.quote(self.path)])
            return self.format.pipe_reader(InputPipeProcessWrapper(command))
        if direction == "w":
            return self.format.pipe_writer(AtomicRemoteFileWriter(self._fs, self.path))
        raise ValueError(f"Unsupported mode {mode!r} for RemoteTarget {self.path!r}: use 'r' or 'w'")

    def put(self, local_path: str) -> None:
        """Upload ``local_path`` to this target's path."""
        self._fs.put(local_path, self.path)

    def get(self, local_path: str) -> None:
        """Download this target to ``local_path``."""
        self._fs.get(self.path, local_path)
