"""The server's seam with the scheduler: no engine imports for types, no import cycles, calls served
without tornado (``dispatch``); ``ServedScheduler`` is the one type the modules take.

Read from the source (imports under ``TYPE_CHECKING`` count too), so the checks hold for how the modules
are written, not only for what one run happens to load.
"""

from __future__ import annotations

import ast
from pathlib import Path

import luigi.server

SERVER = Path(luigi.server.__file__).parent
# What serves a call with no transport in it, and what it needs.
TRANSPORT_FREE = {"dispatch", "errors", "served", "store_health", "tracing"}


def imports_of(module: str) -> set[str]:
    """Every module ``luigi/server/<module>.py`` imports, by absolute name."""
    found = set()
    for node in ast.walk(ast.parse((SERVER / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def server_modules() -> list[str]:
    return sorted(path.stem for path in SERVER.glob("*.py") if path.stem != "__init__")


def server_imports(module: str) -> set[str]:
    """The modules of ``luigi.server`` that ``module`` imports."""
    prefix = "luigi.server."
    return {name[len(prefix) :] for name in imports_of(module) if name.startswith(prefix)} & set(
        server_modules()
    )


def test_no_server_module_imports_the_scheduler_engine_for_its_types():
    found = {
        module: sorted(n for n in imports_of(module) if n.startswith("luigi.scheduler.core"))
        for module in server_modules()
    }
    assert {module: names for module, names in found.items() if names} == {}


def test_the_server_modules_import_each_other_without_a_cycle():
    graph = {module: server_imports(module) for module in server_modules()}
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        assert module not in path, f"import cycle: {' -> '.join([*path, module])}"
        if module not in done:
            for imported in sorted(graph[module]):
                walk(imported, [*path, module])
            done.add(module)

    for module in graph:
        walk(module, [])


def test_calls_are_served_by_modules_that_import_no_tornado():
    reached, todo = set(), ["dispatch"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(server_imports(module))
    assert reached <= TRANSPORT_FREE
    assert {m: sorted(n for n in imports_of(m) if n.startswith("tornado")) for m in reached} == dict.fromkeys(
        reached, []
    )
