"""Text for a terminal: control characters made visible, so that what a handler printed,
an error or a signal's comment is shown and never obeyed.

A task's log line, an exception's text or a field a client sent may hold terminal
escapes: ``ESC ] 52`` writes the operator's clipboard, ``ESC [ 2J`` clears the screen,
``ESC [ 1A`` rewrites the lines above, ``ESC ] 8`` hides a link behind other text.
:func:`visible` shows each C0 and C1 control character (and DEL) as text instead: ``␛``
for ESC, ``\\n``, ``\\r``, ``\\t`` for those, ``\\x07``-style escapes for the others;
multi-line text keeps its line breaks and tabs.

The CLIs (``redisflow``, ``redisflow-agent``) write all their output through it:
:func:`protect_streams` wraps their stdout and stderr at start, their rich console
shows text through it, and the agent's log lines are formatted by
:class:`VisibleFormatter`. JSON output is left exact (it escapes control characters
itself). What is stored (task logs, errors, signals) is kept as it was given.
"""

from __future__ import annotations

import io
import logging
import re
import sys
from typing import Any, TextIO

# C0, DEL and C1; for multi-line text, all but a line break, a tab and CR before LF
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_IN_LINES = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")
_SHOWN = {"\x1b": "␛", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _show(match: re.Match[str]) -> str:
    c = match.group()
    return _SHOWN.get(c) or f"\\x{ord(c):02x}"


def visible(text: str, multiline: bool = False) -> str:
    """``text`` with its control characters shown as text (``␛`` for ESC, ``\\x07`` for
    BEL...): one line, unless ``multiline`` (then line breaks, tabs and CRLF are kept)."""
    pattern = _CONTROL_IN_LINES if multiline else _CONTROL
    if pattern.search(text) is None:
        return text
    return pattern.sub(_show, text)


class VisibleStream(io.TextIOBase):
    """A text stream writing to ``stream`` with control characters made visible (line
    breaks and tabs kept): whatever is printed, the terminal obeys none of it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text, multiline=True))
        return len(text)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def close(self) -> None:  # the stream it wraps is not its to close
        self.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


def raw_stream(stream: Any) -> Any:
    """The stream a :class:`VisibleStream` writes to (any other stream: itself). For a
    writer that makes text visible itself and adds escapes of its own: colours."""
    return stream.stream if isinstance(stream, VisibleStream) else stream


def protect_streams() -> None:
    """Wrap this process's stdout and stderr in :class:`VisibleStream` (once)."""
    if not isinstance(sys.stdout, VisibleStream):
        sys.stdout = VisibleStream(sys.stdout)
    if not isinstance(sys.stderr, VisibleStream):
        sys.stderr = VisibleStream(sys.stderr)


class VisibleFormatter(logging.Formatter):
    """A log formatter whose lines show control characters as text: a record's message
    stays one line (its line breaks shown as ``\\n``: no forged lines); a traceback keeps
    its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's
        return visible(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's
        return visible(super().formatException(ei), multiline=True)

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's
        return visible(super().formatStack(stack_info), multiline=True)
