"""Shared helpers of the TUI tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def wait_for(
    pilot, condition: Callable[[], bool], timeout: float = 120.0, what: str = ""
) -> None:
    """Let the app run until ``condition()`` holds (real workers take seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.1)


async def show_in_compare(app, pilot, records: list[dict], source: str = "two runs"):
    """Open Compare on ``records`` (no history needed) and return the screen."""
    from tui_bench.engine.results.record import Run
    from tui_bench.tui.screens.compare import CompareScreen

    app.switch_mode("compare")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    screen.show([Run.from_record(r) for r in records], source=source)  # as History gives
    await pilot.pause()
    return screen
