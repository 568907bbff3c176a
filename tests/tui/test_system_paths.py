"""The System screen at 80 columns (issue 48 item 8): a runtime's interpreter path is cut in the
middle ("/root/…/runtimes/tf/bin/python") and stays on its runtime's line, not wrapped over
three."""

from __future__ import annotations

from tests.tui.helpers import wait_for
from tui_bench.engine.machine import runtimes
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.widgets.cut_lines import CutLines, cut_line, cut_path

DEEP = "/home/someone/.local/share/tui-bench/runtimes/tensorflow/bin/python"


def test_a_path_keeps_its_first_and_last_parts():
    assert cut_path(DEEP, 40) == "/home/…/runtimes/tensorflow/bin/python"
    assert cut_path(DEEP, 30) == "/home/…/tensorflow/bin/python"
    assert cut_path(DEEP, len(DEEP)) == DEEP
    line = f"  TensorFlow/keras      ✓ tensorflow: {DEEP} (managed)"
    cut = cut_line(line, 76)
    assert len(cut) <= 76 and cut.endswith("/bin/python (managed)"), cut
    assert cut.startswith("  TensorFlow/keras      ✓ tensorflow: /home/…/")
    assert cut_line("no path here " * 10, 40) == "no path here " * 10  # wraps as text


async def test_the_system_screen_cuts_runtime_paths_at_80_columns(tui_home, monkeypatch):
    def deep(framework: str, api: str) -> runtimes.Runtime:
        return runtimes.Runtime(f"{framework}-{api}", DEEP.replace("tensorflow", framework), "x")

    monkeypatch.setattr(runtimes, "resolve", deep)
    app = TuiBenchApp(start_mode="system")
    async with app.run_test(size=(80, 24)) as pilot:
        info = app.screen.query_one("#system-info", CutLines)
        await wait_for(pilot, lambda: "runtimes (which" in info.text, 30, "the system report")
        await pilot.pause()
        width = info.content_region.width
        assert 60 <= width <= 80
        shown = str(info.render()).splitlines()
        runtime_lines = [line for line in shown if "✓ " in line]
        assert runtime_lines, shown
        for line in runtime_lines:
            assert len(line) <= width and "/…/" in line and line.endswith("/bin/python (x)"), line
        # one line a runtime: only a long line without a path (the NVML error) may wrap
        lines = info.text.splitlines()
        wrapping = sum(len(line) > width and "/" not in line for line in lines)
        assert info.region.height - 2 <= len(lines) + wrapping  # its padding above, below
