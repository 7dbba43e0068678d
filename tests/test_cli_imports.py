"""The CLI answers at once: importing ``engine.cli.main`` and building its parser (what
``redisflow --help`` and every argument error do) loads none of the heavy parts. Each
command imports what it uses when it runs.

Run in a fresh interpreter, since this test process has loaded everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import engine

pytestmark = pytest.mark.same_on_cluster

# Top-level packages and our own modules that a command imports only when it runs.
HEAVY = (
    "redis",  # redis-py, and with it its asyncio client
    "asyncio",
    "jsonschema",
    "referencing",
    "yaml",
    "cel",  # common-expression-language: conditions
    "re2",
    "rich",
    "cronsim",
    "starlette",
    "uvicorn",
    "engine.client",
    "engine.store",
    "engine.connect",
    "engine.runtime",
    "engine.http",
    "engine.schedules.spec",
    "engine.schedules.clock",
    "engine.schedules.scheduler",
    "engine.spec.definition",
    "engine.spec.loader",
    "engine.spec.conditions",
    "engine.spec.schemas",
)

PROBE = """
import json, sys
import engine.cli.main as m
try:
    m.run({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_by(argv: list[str]) -> set[str]:
    """The modules loaded by a fresh interpreter that imports ``engine.cli.main`` and
    runs ``argv`` (for arguments that end before connecting: help, usage errors)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["status", "--help"],
        ["push", "--help"],
        ["schedule", "put", "--help"],
        ["no-such-command"],
    ],
)
def test_help_and_usage_errors_load_nothing_heavy(argv: list[str]) -> None:
    assert heavy_in(loaded_by(argv)) == []


# What a read command needs is redis-py (and with it asyncio), the store and the Engine;
# not the workflow language's parsers, the agent or the HTTP server
NOT_FOR_READS = (
    "yaml",
    "jsonschema",
    "referencing",
    "cel",
    "re2",
    "cronsim",
    "starlette",
    "uvicorn",
    "engine.runtime.agent",
    "engine.runtime.handlers",
    "engine.spec.loader",
    "engine.http",
    "engine.schedules.scheduler",
)


def test_a_read_loads_no_parser_agent_or_server(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``redisflow status`` against a Redis: the workflow is not there (exit 2), having
    connected and read, with none of the parts a read does not use loaded."""
    monkeypatch.setenv("REDISFLOW_URL", redis_url)
    modules = loaded_by(["status", "1"])
    assert "redis" in modules and "engine.client" in modules  # it did connect
    assert (
        sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in NOT_FOR_READS))
        == []
    )


def test_the_probe_sees_heavy_modules() -> None:
    """The check itself works: a command that reads a workflow file loads the loader."""
    modules = loaded_by(["plan", "/nonexistent/workflow.yaml"])
    assert "engine.spec.loader" in heavy_in(modules)


def test_engine_loads_its_names_on_first_use() -> None:
    """``import engine`` alone loads none of its parts; each public name works as
    ``engine.X`` and ``from engine import X`` and is the object its module defines."""
    probe = (
        "import json, sys, engine; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('engine.', 'redis')))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []
    assert sorted(engine._HOMES) == sorted(engine.__all__)
    for name in engine.__all__:
        value = getattr(engine, name)
        assert value is getattr(sys.modules[engine._HOMES[name]], name)
        assert name in dir(engine)
    from engine import Agent, Engine, Workflow

    assert (Agent, Engine, Workflow) == (engine.Agent, engine.Engine, engine.Workflow)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        engine.Nothing  # noqa: B018


def test_each_command_module_adds_the_commands_main_names() -> None:
    """main.COMMANDS (which module adds which command) is what the modules add, in the
    order of ``redisflow --help``."""
    from engine.cli import main
    from engine.cli.common import Parents, Parser, connection_options, json_option

    parents = Parents(connection_options(), json_option())
    added: dict[str, str] = {}
    for module in main.command_modules(None, parents):
        sub = Parser(prog="redisflow").add_subparsers(dest="command", parser_class=Parser)
        module.register(sub, parents)
        added.update(dict.fromkeys(sub.choices, module.__name__.rsplit(".", 1)[1]))
    assert added == main.COMMANDS
    assert list(added) == list(main.COMMANDS)


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["status", "1", "--help"], "status_cmds"),
        (["--namespace", "push", "list", "--help"], "status_cmds"),  # a value, not a command
        (["--json", "schedule", "list", "--help"], "schedule_cmds"),
    ],
)
def test_a_command_loads_its_own_module_only(argv: list[str], module: str) -> None:
    """Its module and what that imports (status shows logs: log_cmds), not the others."""
    loaded = {m for m in loaded_by(argv) if m.endswith("_cmds")}
    assert f"engine.cli.{module}" in loaded
    assert len(loaded) <= 2, sorted(loaded)
