"""``redisflow-tui`` where the console extra is not installed: one line, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from redisflow_tui.__main__ import EXIT_NO_CONSOLE

# what the console shows and does with its keys: the same on a cluster, whose reads the
# engine's own tests check there
pytestmark = pytest.mark.same_on_cluster

# Runs the installed entry point in a fresh interpreter where ``module`` (and everything
# under it) cannot be imported, as on a machine without the extra.
WITHOUT = """
import sys
from importlib.abc import MetaPathFinder
from importlib.metadata import entry_points


class Uninstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Uninstalled())
sys.argv = ["redisflow-tui", *{args!r}]
(script,) = entry_points(group="console_scripts", name="redisflow-tui")
script.load()()
"""


def run_without(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = WITHOUT.format(module=module, args=list(args))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("module", ["textual", "networkx"])
def test_without_the_extra_one_line_and_exit_2(module: str) -> None:
    # an unreachable URL: were the check missing, this would fail later and differently
    done = run_without(module, "--url", "redis://127.0.0.1:1")
    assert done.returncode == EXIT_NO_CONSOLE == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"redisflow-tui: the console needs its extra ({module} is missing): "
        "pip install 'redisflow[console]'\n"
    )


def test_serve_names_textual_serve() -> None:
    done = run_without("textual_serve", "--serve", "--url", "redis://127.0.0.1:1")
    assert done.returncode == 2
    assert "(textual_serve is missing)" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_needs_no_extra() -> None:
    done = run_without("textual", "--help")
    assert done.returncode == 0
    assert "redisflow-tui" in done.stdout
