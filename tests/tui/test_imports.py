"""The console's import graph: no cycles, and screens, widgets and data never reach the app.

Read from the source with :mod:`ast`, so imports under ``TYPE_CHECKING`` and inside
functions count as much as those at the top of a module. Screens reach the app only
through the :class:`~redisflow_tui.screens.base.Console` protocol, which it must fill.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from redisflow_tui.app import RedisflowApp
from redisflow_tui.screens.base import Console

PACKAGE = "redisflow_tui"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
BELOW_THE_APP = ("screens", "widgets", "data")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                # a module's own package is itself when it is a package's __init__
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                anchor = ".".join(base + ([node.module] if node.module else []))
            else:
                anchor = node.module or ""
            # ``from x import y`` imports x.y when y is a module, else x
            targets = [f"{anchor}.{alias.name}" for alias in node.names]
            targets = [t if t in known else anchor for t in targets]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in done:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.screens.base" in graph[f"{PACKAGE}.screens.workflow"]
    assert f"{PACKAGE}.data.actions" in graph[f"{PACKAGE}.app"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_only_the_entry_points_import_the_app() -> None:
    app = f"{PACKAGE}.app"
    below = tuple(f"{PACKAGE}.{part}" for part in BELOW_THE_APP)
    offenders = sorted(
        name for name, deps in import_graph().items() if app in deps and name.startswith(below)
    )
    assert not offenders, f"these import the app instead of posting it messages: {offenders}"


def test_the_app_shares_what_screens_read(console: Callable[..., RedisflowApp]) -> None:
    app = console()
    missing = [name for name in Console.__annotations__ if not hasattr(app, name)]
    assert not missing, f"screens read these, the app lacks them: {missing}"
