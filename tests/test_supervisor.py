"""Runs outlive the terminal: the supervisor owns them, front ends only view them.

Real workers, real processes, real pseudo-terminals: each test here fails if runs go back to
belonging to the process that started them. What owns a run does not depend on the framework in
its worker: the workers are the example numpy plugin's (conftest's ``numpy_framework``, an MLP
whose worker starts in ~0.3 s against ~4 s for torch), the same worker, supervisor and CLI."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO
from test_cli import cli

from tui_bench.engine.results.history import History, read_jsonl
from tui_bench.engine.runs import follow, supervisor
from tui_bench.engine.runs.batch import BatchRequest
from tui_bench.engine.spec import RunSpec

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("numpy_framework")]

EPOCHS = 3
STEPS = 30  # per epoch: 1200 training samples (20 % validate) / batch 32 ≥ 30


def small(epochs: int = EPOCHS, steps: int = STEPS, **fields) -> RunSpec:
    return RunSpec(
        framework="numpy-mlp",
        api="numpy",
        model="mlp",
        threads=1,
        epochs=epochs,
        steps_per_epoch=steps,
        batch_size=32,
        train_samples=1200,
        test_samples=128,
        warmup_steps=1,
        **fields,
    )


SMALL_FLAGS = [
    "--framework", "numpy-mlp", "--api", "numpy", "--model", "mlp", "--threads", "1", "--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS),
    "--batch-size", "32", "--train-samples", "1200", "--test-samples", "128", "--warmup-steps", "1",
]  # fmt: skip


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def training(batch_id: str | None = None) -> supervisor.BatchState | None:
    """The (given or only) batch once its run has streamed steps."""
    states = [s for s in supervisor.all_batches() if batch_id in (None, s.id)]
    for state in states:
        if state.run_ids and follow.progress(state.id).step > 0:
            return state
    return None


def assert_finished_whole(run_id: str, epochs: int = EPOCHS) -> None:
    record = History().get(run_id)
    assert record.status == "finished", record.reason
    events = list(read_jsonl(History().series_path(run_id)))
    assert [e["epoch"] for e in events if e["type"] == "epoch_finished"] == list(
        range(1, epochs + 1)
    )
    assert events[-1]["type"] == "result"


def batch_done(batch_id: str, timeout: float = 120) -> supervisor.BatchState:
    state = supervisor.wait_done(batch_id, timeout)
    assert state.done is not None, "the batch did not end"
    return state


# -- under a pseudo-terminal ----------------------------------------------------------------------
class Terminal:
    """A program on a real pty, as an SSH session runs it; ``hang_up`` is the link dropping."""

    def __init__(self, argv: list[str], cols: int = 100, rows: int = 30) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session leader with the pty as controlling terminal
            os.chdir(REPO)
            os.environ.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
            # As from a login shell: a suite started under nohup (SIGHUP ignored, which exec
            # keeps) must not make the program under test immune to the hang-up it tests.
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            os.execv(sys.executable, [sys.executable, *argv])
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def hang_up(self) -> None:
        os.close(self.fd)  # the kernel sends SIGHUP to the session's processes

    def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("the program did not end")


def test_cli_run_survives_its_terminal_hanging_up():
    # Long enough that it cannot end between its first step and the CLI's end: 6 epochs (under
    # 1 s of training on a quiet machine) once finished first and left nothing to prove. 24
    # epochs of the numpy MLP (8.4 ms a step) train as long as 40 of torch's (4.8 ms) did.
    term = Terminal(["-m", "tui_bench", "run", *SMALL_FLAGS, "--epochs", "24"])
    state = wait_until(training, 90, "the run to train")
    term.hang_up()
    status = term.wait()
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGHUP  # the CLI is gone
    assert History().get(state.run_ids[0]).status == "running"  # its run is not
    batch_done(state.id)
    assert_finished_whole(state.run_ids[0], epochs=24)


QUICK_PRESET = """
name = "quick"
framework = "numpy-mlp"
api = "numpy"
model = "mlp"
threads = 1
epochs = 6
steps_per_epoch = 30
batch_size = 32
train_samples = 1200
test_samples = 128
warmup_steps = 1
"""


@pytest.mark.parametrize("ending", ["hangup", "sigkill"])
def test_tui_run_survives_the_tui_ending(isolated_home, ending):
    """Start a run from the real TUI on a pty (F7 loads a preset, ctrl+r starts), then drop the
    terminal or SIGKILL the app: the run finishes in history with every epoch."""
    (isolated_home / "presets").mkdir(parents=True)
    (isolated_home / "presets" / "quick.toml").write_text(QUICK_PRESET)
    term = Terminal(["-m", "tui_bench"])
    time.sleep(4)  # first frame and the runtime probe
    term.send("\x1b[18~")  # F7: load a preset
    time.sleep(1.5)
    term.send("quick\r")
    time.sleep(2)

    def started() -> supervisor.BatchState | None:
        if not supervisor.all_batches():
            term.send("\x12")  # ctrl+r: start (again, if the form was not ready)
            time.sleep(1.5)
        return training()

    state = wait_until(started, 120, "the run started from the TUI to train")
    if ending == "hangup":
        term.hang_up()
    else:
        os.kill(term.pid, signal.SIGKILL)
    term.wait()
    batch_done(state.id)
    assert_finished_whole(state.run_ids[0], epochs=6)


def test_two_viewers_follow_one_run_and_it_finishes_undisturbed():
    batch_id = supervisor.launch(BatchRequest(spec=small().to_dict()))
    viewers = [
        subprocess.Popen(
            [sys.executable, "-m", "tui_bench", "attach", batch_id],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [v.communicate(timeout=120) for v in viewers]
    assert [v.returncode for v in viewers] == [0, 0], outputs
    state = batch_done(batch_id)
    assert_finished_whole(state.run_ids[0])
    for out, err in outputs:
        assert state.run_ids[0] in out  # each printed the results table
        assert f"epoch {EPOCHS}:" in err  # and followed every epoch
    # Followers that come late see the same events from the first line.
    first, second = follow.BatchTail(batch_id).read(), follow.BatchTail(batch_id).read()
    assert first == second and sum(e["type"] == "steps" for e in first) > 0
    assert follow.BatchFollower(batch_id).catch_up().losses  # folded, the same curve


def test_killed_supervisor_turns_its_run_interrupted_and_its_worker_ends():
    batch_id = supervisor.launch(BatchRequest(spec=small(epochs=200).to_dict()))
    state = wait_until(lambda: training(batch_id), 90, "the run to train")
    run_id = state.run_ids[0]
    worker = next(e for e in read_jsonl(History().series_path(run_id)) if e["type"] == "worker")
    assert psutil.pid_exists(worker["pid"])
    os.kill(state.supervisor["pid"], signal.SIGKILL)
    gone, alive = psutil.wait_procs([psutil.Process(worker["pid"])], timeout=15)
    assert not alive, "the worker outlived its supervisor"
    viewer = follow.BatchFollower(batch_id)
    view = viewer.catch_up()  # a viewer's next look settles the run
    assert viewer.done and view.done and "ended without finishing" in view.lost
    assert view.status == "interrupted"
    record = History().get(run_id)
    assert record.status == "interrupted"
    assert f"pid {state.supervisor['pid']}" in record.reason
    steps = [e for e in read_jsonl(History().series_path(run_id)) if e["type"] == "steps"]
    assert steps, "the series was kept"
    assert not supervisor.in_progress()


def test_detach_ps_attach_stop_end_to_end():
    started = cli("run", "--detach", "--json", *SMALL_FLAGS, "--epochs", "300")
    assert started.returncode == 0, started.stderr
    batch_id = json.loads(started.stdout)["batch"]
    wait_until(lambda: training(batch_id), 90, "the run to train")

    listed = json.loads(cli("ps", "--json").stdout)
    assert [row["id"] for row in listed] == [batch_id]
    row = listed[0]
    assert row["supervisor_pid"] == supervisor.BatchState.read(batch_id).supervisor["pid"]
    assert row["progress"].startswith("run 1/1 · epoch ") and row["label"].startswith(
        "numpy-mlp/numpy"
    )
    run_id = row["run_id"]

    refused = cli("history", "delete", run_id)
    assert refused.returncode == 2 and "in progress" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1

    # attach by a run-id prefix; Ctrl-C detaches and the run goes on.
    attach = subprocess.Popen(
        [sys.executable, "-m", "tui_bench", "attach", run_id[:20]],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    time.sleep(3)
    attach.send_signal(signal.SIGINT)
    _, err = attach.communicate(timeout=30)
    assert attach.returncode == 0 and "detached" in err, err
    assert supervisor.BatchState.read(batch_id).in_progress

    stopped = cli("stop", batch_id)
    assert stopped.returncode == 0, stopped.stderr
    assert History().get(run_id).status == "cancelled"
    assert cli("ps", "--json").stdout.strip() == "[]"
    again = cli("stop", batch_id)
    assert again.returncode == 2 and "already ended" in again.stderr


def test_cli_repeats_are_one_group_with_a_seed_per_repeat():
    done = cli("run", *SMALL_FLAGS, "--epochs", "1", "--repeats", "2", "--seed", "7", "--json")
    assert done.returncode == 0, done.stderr
    records = json.loads(done.stdout)
    groups = {r["group"] for r in records}
    assert len(groups) == 1 and None not in groups  # `compare GROUP` works for CLI repeats
    assert [r["repeat"] for r in records] == [0, 1]
    assert [r["spec"]["seed"] for r in records] == [7, 8]
    compared = cli("compare", groups.pop(), "--json")
    assert compared.returncode == 0, compared.stderr
    summary = next(t for t in json.loads(compared.stdout) if t["name"] == "summary")
    assert [row[1] for row in summary["rows"]] == [2]  # one configuration, n = 2


def test_a_killed_foreground_cli_leaves_its_run_to_finish():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui_bench", "run", *SMALL_FLAGS, "--epochs", "6"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    state = wait_until(training, 90, "the run to train")
    proc.kill()  # SIGKILL: no handler runs
    proc.wait()
    assert not History().mark_interrupted()  # the supervisor is alive: nothing to settle
    batch_done(state.id)
    assert_finished_whole(state.run_ids[0], epochs=6)


def test_supervisor_start_failure_is_one_line(monkeypatch, tmp_path):
    """A supervisor that cannot start (here: the interpreter is missing) is a clear error."""
    monkeypatch.setattr(supervisor, "START_TIMEOUT_S", 2.0)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises((supervisor.SupervisorError, OSError)):
        supervisor.launch(BatchRequest(spec=small().to_dict()))


def test_viewer_reads_only_complete_lines(tmp_path):
    path = tmp_path / "f.jsonl"
    tail = follow.Tail(path)
    assert tail.read() == []
    path.write_text('{"a": 1}\n{"b": ')
    assert tail.read() == [{"a": 1}]
    with open(path, "a") as handle:
        handle.write('2}\nnot json\n{"c": 3}\n')
    assert tail.read() == [{"b": 2}, {"c": 3}]


def test_unique_run_ids_even_when_the_random_part_repeats(monkeypatch):
    from tui_bench.engine.results import history as history_module

    h = History()
    ids = {h.reserve_run_id() for _ in range(500)}
    assert len(ids) == 500
    values = iter(["20260101-000000-aaaaaaaa", "20260101-000000-aaaaaaaa", "20260101-000000-b"])
    monkeypatch.setattr(history_module, "new_run_id", lambda: next(values))
    assert h.reserve_run_id() == "20260101-000000-aaaaaaaa"
    assert h.reserve_run_id() == "20260101-000000-b"  # the taken id was skipped


def _logind(root: Path, text: str) -> None:
    (root / "etc/systemd").mkdir(parents=True, exist_ok=True)
    (root / "etc/systemd/logind.conf").write_text(text)


def test_logout_trap_is_detected_with_its_fix(tmp_path):
    from tui_bench.engine.machine.sysinfo import logout_trap

    root = tmp_path
    _logind(root, "[Login]\n#KillUserProcesses=yes\n")
    assert logout_trap(root, "ana", in_session=True) is None  # commented out: the default, no
    _logind(root, "[Login]\nKillUserProcesses=yes\n")
    warning = logout_trap(root, "ana", in_session=True)
    assert warning and "loginctl enable-linger ana" in warning and "\n" not in warning
    assert logout_trap(root, "ana", in_session=False) is None  # not a logind session
    assert logout_trap(root, "root", in_session=True) is None  # KillExcludeUsers=root default
    dropin = root / "etc/systemd/logind.conf.d"
    dropin.mkdir()
    (dropin / "90-keep.conf").write_text("[Login]\nKillUserProcesses=no\n")
    assert logout_trap(root, "ana", in_session=True) is None  # a drop-in wins
    (dropin / "90-keep.conf").unlink()
    (root / "var/lib/systemd/linger").mkdir(parents=True)
    (root / "var/lib/systemd/linger/ana").touch()
    assert logout_trap(root, "ana", in_session=True) is None  # lingering: processes stay


def test_resuming_a_sweep_that_is_still_running_is_refused(isolated_home):
    from tui_bench.engine.runs import presets
    from tui_bench.engine.runs import sweep as sweep_module

    (isolated_home / "presets").mkdir(parents=True)
    (isolated_home / "presets" / "long.toml").write_text(
        QUICK_PRESET.replace('name = "quick"', 'name = "long"').replace(
            "epochs = 6", "epochs = 300"
        )
    )
    sweep = sweep_module.create(presets.load(presets.find("long")))
    batch_id = supervisor.launch(BatchRequest(sweep_id=sweep.id))
    wait_until(lambda: training(batch_id), 90, "the sweep to train")
    again = cli("run", "--resume", sweep.id)
    assert again.returncode == 2 and f"tui-bench attach {batch_id}" in again.stderr
    assert len(supervisor.in_progress()) == 1
