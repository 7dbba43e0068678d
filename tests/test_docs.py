"""The front door tells the truth: the README's first workflow is the docs' one, and it
runs as written (its YAML, its handler and its Python, on a real Redis)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from engine import Agent, Engine, load_file

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = ROOT / "docs" / "snippets"
README = ROOT / "README.md"

pytestmark = pytest.mark.same_on_cluster


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def test_readme_first_workflow_is_the_docs_one() -> None:
    readme = README.read_text()
    assert len(readme.splitlines()) <= 300
    for lang, name in (("yaml", "words.yaml"), ("python", "handlers.py"), ("python", "first.py")):
        assert (SNIPPETS / name).read_text() in blocks(readme, lang), name
    page = (ROOT / "docs" / "getting-started.md").read_text()
    for name in ("words.yaml", "handlers.py", "first.py"):
        assert f'--8<-- "snippets/{name}"' in page


@pytest.fixture()
def handlers() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("handlers", SNIPPETS / "handlers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["handlers"] = module
    yield module
    del sys.modules["handlers"]


def test_first_workflow_runs_as_written(engine: Engine, handlers: ModuleType) -> None:
    [wf] = load_file(SNIPPETS / "words.yaml")
    wid = engine.push(wf, input={"text": "the cat and the hat and the bat"})
    Agent(engine, "first", {"": handlers.run}).run(until_idle=True)
    st = engine.status(wid)
    assert st.state == "succeeded"
    assert st.task("split").output == ["the", "cat", "and", "the", "hat", "and", "the", "bat"]
    assert st.task("count").output == [["the", 3], ["and", 2], ["cat", 1]]
    assert st.task("report").output == "top words: [['the', 3], ['and', 2], ['cat', 1]]"


def test_first_workflow_from_python(redis_url: str, handlers: ModuleType) -> None:
    code = (SNIPPETS / "first.py").read_text().replace("redis://127.0.0.1:6390/0", redis_url)
    out = io.StringIO()
    scope: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "first.py", "exec"), scope)
    scope["engine"].close()  # type: ignore[attr-defined]
    assert out.getvalue() == "top words: [['a', 2], ['b', 1]]\n"
