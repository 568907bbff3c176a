"""Who is alive: a process is named by its pid *and* its start time, because pids are reused."""

from __future__ import annotations

import os
import signal
from typing import Any

import psutil

# Start times are read from /proc in clock ticks; two readings of one process agree far closer.
_SAME_START_S = 0.05


def identity(pid: int | None = None) -> dict[str, Any]:
    """This process (or ``pid``) as recorded in a run: ``{"pid": …, "started": epoch seconds}``."""
    pid = os.getpid() if pid is None else pid
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        started = None
    return {"pid": pid, "started": started}


def alive(pid: int | None, started: float | None) -> bool:
    """True if ``pid`` runs and is the process that started at ``started`` (not a reused pid).

    Without a recorded start time (records written before it was kept) the pid alone decides."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if started is None:
            return True
        return abs(process.create_time() - float(started)) < _SAME_START_S
    except psutil.Error:
        return False


def kill_group(pid: int | None, started: float | None) -> bool:
    """SIGKILL the process group led by ``pid`` if that process is still the one recorded.
    Workers lead their own group, so this takes their compile helpers down too."""
    if pid is None or not alive(pid, started):
        return False
    try:
        os.killpg(int(pid), signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
