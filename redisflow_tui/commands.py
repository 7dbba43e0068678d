"""The command palette (Ctrl+P): every action of the current screen, and go to workflow."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from .widgets.app_bar import TABS


class ConsoleCommands(Provider):
    """Actions from the bindings of the screen and the app, plus ``Go to workflow N``."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app: Any = self.app
        screen = self.screen
        # the palette is a screen of its own: act on the one below it
        for candidate in reversed(app.screen_stack):
            if candidate is not screen and not candidate.is_modal:
                screen = candidate
                break
        out: list[tuple[str, str, Callable[[], Any]]] = []
        seen: set[str] = set()
        for node, bindings in ((screen, screen.BINDINGS), (app, app.BINDINGS)):
            for b in bindings:
                if not isinstance(b, Binding) or not b.description or b.action in seen:
                    continue
                name = b.action.split("(")[0]
                if node.check_action(name, ()) is False:
                    continue
                seen.add(b.action)
                key = b.key_display or b.key
                title = b.tooltip or b.description
                out.append((title, f"key: {key}", partial(node.run_action, b.action)))
        for mode, _, label in TABS:
            out.append(
                (f"Show {label}", f"the {label} screen", partial(app.run_action, f"show('{mode}')"))
            )
        out.append(("Go to workflow…", "open a workflow by id", app.action_goto))
        return out

    async def discover(self) -> Hits:
        for title, help_, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_)

    async def search(self, query: str) -> Hits:
        app: Any = self.app
        digits = "".join(ch for ch in query if ch.isdigit())
        if digits:
            yield Hit(
                1.0,
                f"Go to workflow {digits}",
                partial(app.goto, digits),
                help="open its graph and tasks",
            )
        matcher = self.matcher(query)
        for title, help_, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_)
