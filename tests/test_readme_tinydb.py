"""The README's tinydb example, run as it stands against a history written by the store."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from tests.histories import record
from tui_bench.engine.results.history import History

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- tinydb example[^\n]*-->\n```python\n(.*?)```", text, re.S)
    assert found, "README.md lost its tinydb example"
    return found.group(1)


def test_the_readme_tinydb_example_queries_a_history_the_store_wrote(isolated_home):
    history = History()
    fast = record(0, 40)  # torch, 40 ms: too fast
    history.add(fast)
    history.add(record(1, 80))  # torch, 80 ms: found
    history.add(record(2, 90, framework="tensorflow", api="keras"))  # not torch
    history.add(record(3, 120, status="failed"))  # not finished
    history.update(fast["id"], label="renamed")  # a journal with an update in it
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].endswith("torch/eager cnn synthetic-mnist cpu×2 80.0 ms")
