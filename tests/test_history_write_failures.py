"""A disk that fills during a run (ENOSPC/EIO): the run ends ``failed`` with the reason in the
history (which lives on a disk that still has room), its series keeps what was written, and no
temporary files are left behind. Injected OSError, then a real, tiny tmpfs where mounting works."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tui_bench.engine.results.history import History
from tui_bench.engine.runs import lifecycle, runner
from tui_bench.engine.spec import RunSpec

# What a full disk does to a run does not depend on its framework: the example numpy plugin's MLP
# (conftest's numpy_framework; its worker starts in ~0.3 s, torch's in ~4 s). These tests then
# run with only .[dev] installed too.
pytestmark = pytest.mark.usefixtures("numpy_framework")
TINY = dict(
    framework="numpy-mlp",
    api="numpy",
    model="mlp",
    threads=1,
    epochs=1,
    steps_per_epoch=4,
    train_samples=500,
    test_samples=100,
)


def settled(home: Path, run_id: str) -> None:
    record = History().get(run_id)
    assert record.status == "failed", record
    assert History().summaries()[-1].status == "failed"
    for raw in History().series_path(run_id).read_bytes().splitlines()[:-1]:
        json.loads(raw)  # every line but a possibly torn last one is whole
    assert not [p for p in home.rglob("*") if p.name.endswith(".tmp")]


def test_an_injected_write_error_fails_the_run_with_its_reason(isolated_home, monkeypatch):
    real_init = lifecycle.SeriesWriter.__init__

    class Filling:
        def __init__(self, handle, budget: int) -> None:
            self.handle, self.budget = handle, budget

        def write(self, text: str) -> int:
            if self.budget <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.budget -= 1
            return self.handle.write(text)

        def flush(self) -> None:
            self.handle.flush()

        def close(self) -> None:
            self.handle.close()

    def init(self, path):
        real_init(self, path)
        self._handle = Filling(self._handle, budget=3)

    monkeypatch.setattr(lifecycle.SeriesWriter, "__init__", init)
    result = runner.execute(RunSpec(**TINY).validate(), History(), sample_interval=0.2)
    assert result.status == "failed"
    assert "No space left on device" in result.reason
    run_id = History().summaries()[-1].id
    assert "No space left on device" in History().get(run_id).reason
    assert len(History().read_series(run_id)) == 3  # what was written before the disk filled
    settled(isolated_home, run_id)


def test_a_real_full_filesystem_fails_the_run_and_the_next_start_is_clean(isolated_home):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = Path("/tmp") / f"tui-bench-full-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(mount)])
    if mounted.returncode != 0:
        mount.rmdir()
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        history = History()
        history.runs_dir.rmdir()
        history.runs_dir.symlink_to(mount)  # series and logs on the tiny disk, history beside
        result = runner.execute(RunSpec(**TINY).validate(), History(), sample_interval=0.1)
        assert result.status == "failed", result.reason
        run_id = History().summaries()[-1].id
        settled(isolated_home, run_id)
        assert History().get(run_id).reason
        # The next start is clean: nothing to settle, and check finds only what it should.
        assert History().mark_interrupted() == 0
    finally:
        subprocess.run(["umount", "-l", str(mount)])
        mount.rmdir()


def test_a_disk_that_fills_on_the_result_line_fails_the_run(isolated_home, monkeypatch):
    """The last write of a run is its biggest (the final record): a disk that fills right there
    leaves a series without the run's end, so the history must not call the run finished."""
    from tui_bench.engine.runs import lifecycle

    real_write = lifecycle.SeriesWriter.write

    def full_on_result(self, item):
        if item.get("type") == "result":
            self._handle.write = _raise_enospc  # the disk fills on this line
        real_write(self, item)

    monkeypatch.setattr(lifecycle.SeriesWriter, "write", full_on_result)
    run = lifecycle.RunRecord(History())
    run.start({"label": "tiny", "spec": {"framework": "torch"}})
    run.write({"type": "steps", "epoch": 1, "first_step": 0, "losses": [2.3]})
    final = run.finish("finished", metrics={"step_median_s": 0.01})
    assert final["status"] == "failed" and "No space left" in final["reason"]
    assert History().get(run.run_id).status == "failed"


def _raise_enospc(_line):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
