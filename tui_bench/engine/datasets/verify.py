"""Whether bytes are the published file: hashing, the pinned-checksum check, the verification
stamps that spare ``status()`` from hashing 200 MB each time, and the one way a file enters the
cache. ``.verified.json`` records the sha256, size and mtime of each file when it was verified.

A file enters the cache only by ``os.replace`` of a temporary file in the same directory after its
size and checksum matched: an interrupted, failed or mismatching copy leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine.datasets.registry import DataFile

CHUNK = 1 << 20
STAMP = ".verified.json"
PART_PREFIX = ".part-"

# progress(file name, bytes done, bytes expected)
Progress = Callable[[str, int, int], None]


# -- hashing --------------------------------------------------------------------------------------
@dataclass
class Digest:
    sha256: str
    md5: str
    size: int


def digest_file(path: Path, progress: Progress | None = None) -> Digest:
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    total = path.stat().st_size
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
            if progress:
                progress(path.name, size, total)
    return Digest(sha.hexdigest(), md5.hexdigest(), size)


def mismatch(spec: DataFile, digest: Digest) -> str | None:
    """Why these bytes are not the published file, or None."""
    if digest.size != spec.size:
        return f"size {digest.size:,} bytes, expected {spec.size:,}"
    if spec.sha256 and digest.sha256 != spec.sha256:
        return f"sha256 {digest.sha256[:16]}… does not match the pinned {spec.sha256[:16]}…"
    if spec.md5 and digest.md5 != spec.md5:
        return f"md5 {digest.md5} does not match the published {spec.md5}"
    return None


# -- verification stamps ---------------------------------------------------------------------------
def read_stamp(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / STAMP).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # no stamp or a damaged one: files are simply re-verified


def write_stamp(directory: Path, stamp: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=PART_PREFIX)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(stamp, handle, indent=1, sort_keys=True)
    os.replace(tmp, directory / STAMP)


def stamp_entry(path: Path, digest: Digest) -> dict[str, Any]:
    info = path.stat()
    return {
        "sha256": digest.sha256,
        "md5": digest.md5,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
    }


def stamp_valid(entry: Any, path: Path, spec: DataFile) -> bool:
    if not isinstance(entry, dict):
        return False
    try:
        info = path.stat()
    except OSError:
        return False
    return (
        entry.get("size") == info.st_size == spec.size
        and entry.get("mtime_ns") == info.st_mtime_ns
        and (spec.sha256 is None or entry.get("sha256") == spec.sha256)
        and (spec.md5 is None or entry.get("md5") == spec.md5)
    )


def install(
    source: Iterable[bytes], spec: DataFile, directory: Path, progress: Progress | None
) -> str | None:
    """Stream ``source`` into a temporary file beside its final place; rename only after the size
    and checksum match. Returns None, or why the bytes were refused (nothing is left behind)."""
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=PART_PREFIX + spec.name + ".")
    tmp = Path(tmp_name)
    try:
        sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
        with os.fdopen(fd, "wb") as handle:
            for chunk in source:
                size += len(chunk)
                if size > spec.size:
                    return f"more than the expected {spec.size:,} bytes"
                handle.write(chunk)
                sha.update(chunk)
                md5.update(chunk)
                if progress:
                    progress(spec.name, size, spec.size)
            handle.flush()
            os.fsync(handle.fileno())
        if size < spec.size:
            return f"incomplete: {size:,} of {spec.size:,} bytes"
        why = mismatch(spec, Digest(sha.hexdigest(), md5.hexdigest(), size))
        if why:
            return why
        final = directory / spec.name
        os.replace(tmp, final)
        stamp = read_stamp(directory)
        stamp[spec.name] = stamp_entry(final, Digest(sha.hexdigest(), md5.hexdigest(), size))
        write_stamp(directory, stamp)
        return None
    finally:
        tmp.unlink(missing_ok=True)
