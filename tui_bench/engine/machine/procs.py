"""Who is alive: a process is named by its pid *and* its start time, because pids are reused.

This is the one place that judges or signals a process a record names: a pid without its start
time is never taken as alive and never signalled (it may since have been given to another
process). Temporary FIFOs and sockets live in directories named after their owner, so the next
start removes those whose owner is gone."""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

import psutil

# Start times are read from /proc in clock ticks; two readings of one process agree far closer.
_SAME_START_S = 0.05
_OWNED_TEMP = re.compile(r"^tui-bench-[a-z]+-(\d+)-(\d+)-")


def identity(pid: int | None = None) -> dict[str, Any]:
    """This process (or ``pid``) as recorded in a run: ``{"pid": …, "started": epoch seconds}``."""
    pid = os.getpid() if pid is None else pid
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        started = None
    return {"pid": pid, "started": started}


def alive(pid: Any, started: Any) -> bool:
    """True if ``pid`` runs and is the process that started at ``started`` (not a reused pid).
    Without a start time the answer is no: a bare pid proves nothing."""
    if not pid or started is None:
        return False
    try:
        process = psutil.Process(int(pid))
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return abs(process.create_time() - float(started)) < _SAME_START_S
    except (psutil.Error, ValueError, TypeError, OverflowError):
        return False


def send_signal(pid: Any, started: Any, signum: int) -> bool:
    """Signal ``pid`` only if it is still the process that started at ``started``."""
    if not alive(pid, started):
        return False
    try:
        # psutil re-checks the process's identity before signalling: no race with pid reuse.
        psutil.Process(int(pid)).send_signal(signum)
    except psutil.Error:
        return False
    return True


def kill_group(pid: Any, started: Any) -> bool:
    """SIGKILL the process group led by ``pid`` if that process is still the one recorded.
    Workers lead their own group, so this takes their compile helpers down too."""
    if not alive(pid, started):
        return False
    try:
        os.killpg(int(pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def owned_temp_dir(kind: str) -> str:
    """A private temporary directory named after this process (pid and start time), for FIFOs
    and sockets; ``clean_stale_temp`` removes it at a later start if this process dies."""
    me = identity()
    started_ms = int((me["started"] or 0) * 1000)
    return tempfile.mkdtemp(prefix=f"tui-bench-{kind}-{me['pid']}-{started_ms}-")


def clean_stale_temp(root: str | None = None) -> int:
    """Remove temporary directories (``owned_temp_dir``) whose owner is gone; how many."""
    removed = 0
    base = Path(root or tempfile.gettempdir())
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        match = _OWNED_TEMP.match(entry.name)
        if not match or not entry.is_dir(follow_symlinks=False):
            continue
        pid, started_ms = int(match.group(1)), int(match.group(2))
        if alive(pid, started_ms / 1000):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue  # another user's: not ours to judge
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed += 1
    return removed
