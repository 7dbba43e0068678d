"""Terminal escapes in what handlers write, errors and signals are shown, never obeyed:
``engine.core.text_safety`` makes control characters visible in every text output of the CLIs
(``redisflow``, ``redisflow-agent``); JSON output stays exact."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

from engine_helpers import cli

from engine import Engine, Workflow
from engine.core.text_safety import VisibleFormatter, VisibleStream, raw_stream, visible

# clipboard write (OSC 52, BEL-ended), clear screen, cursor up, a hidden link (OSC 8),
# a C1 CSI, a lone CR, DEL, NUL
ESCAPES = (
    "a\x1b]52;c;SGVsbG8=\x07b\x1b[2Jc\x1b[1Ad\x1b]8;;http://x.example/\x1b\\link"
    "\x1b]8;;\x1b\\e\x9b31mf\rg\x7fh\x00i"
)
SHOWN = (
    "a␛]52;c;SGVsbG8=\\x07b␛[2Jc␛[1Ad␛]8;;http://x.example/␛\\link"
    "␛]8;;␛\\e\\x9b31mf\\rg\\x7fh\\x00i"
)
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]


def test_visible_shows_every_c0_and_c1_control_character() -> None:
    assert visible(ESCAPES) == SHOWN
    one = visible("".join(CONTROL))
    assert not any(c in one for c in CONTROL), one
    assert one.isprintable()
    assert visible("\x1b") == "␛" and visible("\x07") == "\\x07" and visible("\x85") == "\\x85"
    assert visible("a\nb\tc\r\nd") == "a\\nb\\tc\\r\\nd"  # one line: breaks shown
    text = "plain ✔ text, ünïcode [brackets] \\x1b as typed"
    assert visible(text) is text  # nothing to change: the same string


def test_multiline_text_keeps_its_line_breaks_and_tabs() -> None:
    assert visible("a\tb\nc\r\nd\re\x1b[2J", multiline=True) == "a\tb\nc\r\nd\\re␛[2J"
    kept = visible("".join(CONTROL), multiline=True)
    assert [c for c in CONTROL if c in kept] == ["\t", "\n"]


def test_a_visible_stream_writes_what_it_is_given_visibly() -> None:
    raw = io.StringIO()
    stream = VisibleStream(raw)  # type: ignore[arg-type]
    print("one", ESCAPES, file=stream)
    print("two\tcols", file=stream)
    assert raw.getvalue() == f"one {SHOWN}\ntwo\tcols\n"
    assert raw_stream(stream) is raw and raw_stream(raw) is raw


def test_the_log_formatter_keeps_a_record_on_one_line() -> None:
    formatter = VisibleFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "got %s", (ESCAPES,), None)
    assert formatter.format(record) == f"WARNING got {SHOWN}"
    forged = logging.LogRecord("x", logging.WARNING, __file__, 1, "a\nERROR forged", (), None)
    assert formatter.format(forged) == "WARNING a\\nERROR forged"
    try:
        raise ValueError("bad \x1b[2J")
    except ValueError:
        info = sys.exc_info()
    failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), info)
    text = formatter.format(failed)
    assert "\x1b" not in text and "ValueError: bad ␛[2J" in text
    assert text.count("\n") >= 2  # the traceback keeps its lines


HANDLER = f"""
import logging
from engine import TaskFailed
ESCAPES = {ESCAPES!r}
logging.getLogger("handlers.import").warning("imported %s", ESCAPES)
print("imported", ESCAPES)

def handle(task):
    print("printed", ESCAPES)
    logging.getLogger("handlers").warning("logged %s", ESCAPES)
    raise TaskFailed("failed " + ESCAPES.replace("\\r", ""))
"""


def test_cli_and_agent_output_show_escapes_visibly(
    engine: Engine, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """A handler's lines, its error and the agent's own log: each escape appears escaped
    in ``redisflow logs``, ``status``, ``events`` and the agent's output; ``--json``
    keeps every character."""
    (tmp_path / "evil_handler.py").write_text(HANDLER)
    wf = Workflow("escapes")
    wf.task("t")
    wid = engine.push(wf)
    agent = cli(
        "--handler", "evil_handler:handle", "--until-idle",
        tool="redisflow-agent", env=cli_env, cwd=tmp_path,
    )  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    shown = SHOWN.replace("\\r", "")
    assert f"imported {SHOWN}\n" in agent.stdout  # a print outside any task
    assert f"WARNING imported {SHOWN}\n" in agent.stderr  # the agent's own log
    assert "\x1b" not in agent.stdout + agent.stderr
    assert engine.status(wid).task("t").error == "failed " + ESCAPES.replace("\r", "")

    logs = cli("logs", wid, env=cli_env)
    assert logs.returncode == 0, logs.stderr
    assert f"printed {SHOWN}" in logs.stdout and f"logged {SHOWN}" in logs.stdout
    status = cli("status", wid, env=cli_env)
    assert f"failed {shown}" in status.stdout, status.stdout
    events = cli("events", env=cli_env)
    assert f"error=failed {shown}" in events.stdout, events.stdout
    for out in (logs, status, events):
        assert out.returncode == 0, out.stderr
        assert not any(c in out.stdout for c in CONTROL if c != "\n"), out.stdout

    exact = json.loads(cli("logs", wid, "--json", env=cli_env).stdout)
    assert f"printed {ESCAPES}" in [x["text"] for x in exact["lines"]]
    listed = json.loads(cli("events", "--json", env=cli_env).stdout)
    assert "failed " + ESCAPES.replace("\r", "") in [e["data"].get("error") for e in listed]
