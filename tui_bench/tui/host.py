"""What every handler mixin of the app (``app_runs.LiveRuns``, ``app_presets.PresetFlow``) needs
from the app it is mixed into: the part of Textual's ``App`` they all call, declared once. Each
mixin's own protocol adds what only it needs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen


class AppHost(Protocol):
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None: ...

    def push_screen(
        self, screen: Screen[Any], callback: Callable[[Any], None] | None = None
    ) -> Any: ...
