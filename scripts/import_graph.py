"""engine's import graph, every import counted (module level, inside functions, under
``TYPE_CHECKING``): the import circles, and the arrows that run up a floor.

Run: ``python scripts/import_graph.py`` (exit 1 if there is a circle or an arrow up).
The floors, bottom first, are those the import-linter contract in pyproject.toml keeps.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def floors() -> list[str]:
    """The floors, bottom first: the layers of import-linter's ``floors`` contract in
    pyproject.toml (one list, so that the two checks cannot drift apart)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("id") == "floors":
            return list(reversed(contract["layers"]))
    raise LookupError("pyproject.toml has no import-linter contract with id 'floors'")


FLOORS = floors()


def floor_of(module: str) -> int | None:
    """The floor ``module`` stands on (``None``: ``engine`` itself, above them all)."""
    for n, floor in enumerate(FLOORS):
        if module == floor or module.startswith(floor + "."):
            return n
    return None


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def imports(module: str) -> Iterator[str]:
        return iter(sorted(graph.find_modules_directly_imported_by(module)))

    def visit(start: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        work.append((start, imports(start)))
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, imports(child)))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        group.append(m)
                        if m == node:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def up_arrows(graph: grimp.ImportGraph) -> list[tuple[str, str, list[int]]]:
    """Every import from a lower floor to a higher one: importer, imported, its lines."""
    out = []
    for importer in sorted(graph.modules):
        low = floor_of(importer)
        if low is None:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            high = floor_of(imported)
            if high is not None and high > low:
                details = graph.get_import_details(importer=importer, imported=imported)
                out.append((importer, imported, [d["line_number"] for d in details]))
    return out


def main() -> int:
    """Print the circles and the arrows up; 1 if there is any."""
    graph = grimp.build_graph("engine", cache_dir=None)
    circles = cycles(graph)
    arrows = up_arrows(graph)
    modules = sorted(m for m in graph.modules if m.startswith("engine"))
    print(f"{len(modules)} modules, {len(circles)} import circles, {len(arrows)} arrows up")
    for group in circles:
        print(f"circle of {len(group)}: " + ", ".join(group))
    for importer, imported, lines in arrows:
        print(f"up: {importer} -> {imported} (line {', '.join(map(str, lines))})")
    return 1 if circles or arrows else 0


if __name__ == "__main__":
    sys.exit(main())
