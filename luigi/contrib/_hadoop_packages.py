"""What a Hadoop streaming job ships to the nodes: the packages archive and the extra files.

``create_packages_archive`` writes the tar ``mrrunner`` unpacks on each node: Luigi, the job's modules
(a submodule brings its whole package) and ``attach``-ed packages. Re-exported by ``luigi.contrib.hadoop``.
"""

from __future__ import annotations

import glob
import logging
import os
import sys
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any

__all__ = ["attach", "create_packages_archive", "dereference", "flatten", "get_extra_files"]

logger = logging.getLogger("luigi-interface")

_attached_packages: list[ModuleType] = []


def attach(*packages: ModuleType) -> None:
    """Ship ``packages`` (modules) with every streaming job, beside the ones found automatically."""
    _attached_packages.extend(packages)


def dereference(f: str) -> str:
    """``f`` with every symlink on the way followed, so the archive holds the file, not the link."""
    while os.path.islink(f):
        f = os.path.join(os.path.dirname(f), os.readlink(f))
    return f


def get_extra_files(extra_files: Iterable[str | tuple[str, str]]) -> list[tuple[str, str]]:
    """``(src, dst)`` pairs for ``extra_files`` (paths, or pairs); a directory becomes one pair per file."""
    result = []
    for entry in extra_files:
        src, dst = (entry, os.path.basename(entry)) if isinstance(entry, str) else entry
        src = src.rstrip("/")
        if not os.path.isdir(src):
            result.append((src, dst))
            continue
        for root, _dirs, files in os.walk(src):
            for name in files:
                path = os.path.join(root, name)
                result.append((path, os.path.join(dst, os.path.relpath(path, src))))
    return result


def flatten(sequence: Iterable[Any]) -> Iterator[Any]:
    """Each item of ``sequence``, with iterable items (but not strings or bytes) opened one level."""
    for item in sequence:
        if isinstance(item, (str, bytes)) or not hasattr(item, "__iter__"):
            yield item
        else:
            yield from item


def _package_files(path: str, root: str, name: str) -> Iterator[tuple[str, str]]:
    """Files under ``path`` as ``(source, arcname)``, ``root`` renamed ``name``; no .pyc, dotfiles, .svn."""
    for directory, dirs, files in os.walk(path):
        if ".svn" in dirs:
            dirs.remove(".svn")
        for file_name in files:
            if file_name.endswith(".pyc") or file_name.startswith("."):
                continue
            yield dereference(directory + "/" + file_name), name + directory[len(root) :] + "/" + file_name


def _archive_entries(package: ModuleType) -> Iterator[tuple[str, str]]:
    """What ``package`` adds to the archive: a submodule brings its whole top package's subtree."""
    if not getattr(package, "__path__", None) and "." in package.__name__:
        package = __import__(package.__name__.rpartition(".")[0], None, None, ["dummy"])
    name = package.__name__.replace(".", "/")
    if not getattr(package, "__path__", None):
        source = str(package.__file__)
        source = source[:-1] if source.endswith(".pyc") else source
        yield dereference(source), (name + ".py" if "/" in name else os.path.basename(source))
        return
    path = package.__path__[0]
    parents = package.__name__.split(".")[:-1]
    for depth in range(1, len(parents) + 1):
        parent = __import__(".".join(parents[:depth]), None, None, ["dummy"])
        yield dereference(parent.__path__[0] + "/__init__.py"), "/".join(parents[:depth]) + "/__init__.py"
    yield from _package_files(path, path, name)
    for egg_info in glob.glob(path + "*.egg-info"):
        yield from _package_files(egg_info, path, name)


def create_packages_archive(packages: Sequence[ModuleType], filename: str) -> None:
    """Write a tar of ``packages`` (modules or packages) to ``filename``, as ``mrrunner`` unpacks it."""
    tar = tarfile.open(filename, "w")
    try:
        for package in packages:
            for source, arcname in _archive_entries(package):
                logger.debug("adding to the packages archive: %s -> %s", source, arcname)
                tar.add(source, arcname)
    finally:
        tar.close()


def _importable_module_name(module: str) -> str:
    """The name a node imports ``module`` by (a script run as ``__main__`` ships under its file's stem)."""
    if module != "__main__":
        return module
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)  # None for a script, set for ``python -m``
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    return os.path.splitext(os.path.basename(str(main.__file__)))[0]
