"""engine's import graph, every import counted (grimp: module level, inside functions,
under TYPE_CHECKING): no circle anywhere, no arrow up a floor (scripts/import_graph.py;
the floors between packages are also import-linter's contract in pyproject.toml)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("engine", cache_dir=None)


def test_no_import_circle(graph: grimp.ImportGraph) -> None:
    assert _script().cycles(graph) == []


def test_no_arrow_up_a_floor(graph: grimp.ImportGraph) -> None:
    assert _script().up_arrows(graph) == []


def test_only_the_entry_modules_sit_at_the_top(graph: grimp.ImportGraph) -> None:
    top = {p.name for p in (ROOT / "engine").glob("*.py")}
    assert top == {"__init__.py", "client.py", "errors.py"}
