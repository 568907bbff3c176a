"""What the cache holds now: each dataset's files, whether they are the published bytes, and
why a run could not find its dataset, in one line for the front ends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine.datasets.registry import REGISTRY, RealDataset, file_in, locate, megabytes
from tui_bench.engine.datasets.verify import (
    digest_file,
    mismatch,
    read_stamp,
    stamp_entry,
    stamp_valid,
    write_stamp,
)


@dataclass
class FileStatus:
    name: str
    required: bool
    size: int  # published size
    path: str | None  # where it is, or None
    verified: bool
    problem: str | None = None  # why it is not verified (after a check), or None


@dataclass
class DatasetStatus:
    name: str
    label: str
    where: str
    present: bool  # every required file is there
    verified: bool  # and each matches its checksum
    size_on_disk: int
    download_size: int  # bytes still to download (required and optional files missing)
    files: list[FileStatus] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "where": self.where,
            "present": self.present,
            "verified": self.verified,
            "size_on_disk": self.size_on_disk,
            "download_size": self.download_size,
            "files": [vars(f) for f in self.files],
        }


def status(
    names: Iterable[str] | None = None, data_dir: str | None = None, rehash: bool = False
) -> list[DatasetStatus]:
    """Each dataset's state. Cheap: files verified before are trusted while their size and mtime
    are unchanged; ``rehash`` (or a file never verified) hashes the file now."""
    return [_status_one(REGISTRY[n], data_dir, rehash) for n in (names or REGISTRY)]


def _status_one(dataset: RealDataset, data_dir: str | None, rehash: bool) -> DatasetStatus:
    directory = locate(dataset.name, data_dir)
    in_cache = data_dir is None
    stamp = read_stamp(directory) if in_cache else {}
    new_stamp = dict(stamp)
    files, on_disk, to_download = [], 0, 0
    for spec in dataset.files:
        path = file_in(directory, spec)
        if path is None:
            files.append(FileStatus(spec.name, spec.required, spec.size, None, False))
            to_download += spec.size
            continue
        on_disk += path.stat().st_size
        entry = stamp.get(spec.name)
        problem = None
        if rehash or not stamp_valid(entry, path, spec):
            digest = digest_file(path)
            problem = mismatch(spec, digest)
            if problem is None:
                new_stamp[spec.name] = stamp_entry(path, digest)
            else:
                new_stamp.pop(spec.name, None)
        files.append(
            FileStatus(spec.name, spec.required, spec.size, str(path), problem is None, problem)
        )
    if in_cache and new_stamp != stamp and directory.is_dir():
        try:
            write_stamp(directory, new_stamp)
        except OSError:
            pass  # a read-only cache still works; it is just hashed again next time
    required = [f for f in files if f.required]
    present = all(f.path for f in required)
    return DatasetStatus(
        dataset.name,
        dataset.label,
        str(directory),
        present,
        present and all(f.verified for f in files if f.path),
        on_disk,
        to_download,
        files,
    )


def choice_note(name: str, data_dir: str | None = None) -> str:
    """What picking dataset ``name`` means right now, in one short line for a dataset picker
    (the TUI calls this off the UI thread: a never-verified file is hashed, up to ~0.5 s)."""
    if name not in REGISTRY:
        return "generated on the fly, no download"
    state = status([name], data_dir)[0]
    if state.verified:
        return f"present, verified ({megabytes(state.size_on_disk)})"
    if state.present:
        return "present but not verified: `tui-bench data list` says why"
    return f"not downloaded: {megabytes(REGISTRY[name].required_size)} to download"


def problem(spec: Any) -> str | None:
    """Why a run of ``spec`` cannot find its real dataset, as one line; None when it can (or the
    dataset is synthetic). Front ends call this before starting a worker: the worker itself
    trusts its data directory, so this is where the checksums guard every run."""
    dataset = REGISTRY.get(spec.dataset)
    if dataset is None:
        return None
    if spec.data_dir and not Path(spec.data_dir).expanduser().is_dir():
        return f"data_dir {spec.data_dir} is not a directory"
    state = status([dataset.name], spec.data_dir)[0]
    if not state.present:
        missing = ", ".join(f.name for f in state.files if f.required and not f.path)
        if spec.data_dir:
            return (
                f"dataset '{dataset.name}' is not in {state.where} (missing {missing}): "
                f"copy the published files there, or leave out --data-dir to use the cache"
            )
        return (
            f"dataset '{dataset.name}' is not in the cache: run `tui-bench data download "
            f"{dataset.name}` ({megabytes(dataset.required_size)}) or `tui-bench data import PATH`"
        )
    bad = next((f for f in state.files if f.problem), None)
    if bad is not None:
        return (
            f"{bad.path}: {bad.problem}; it is not the published {dataset.label} file "
            f"(`tui-bench data download {dataset.name}` replaces it)"
        )
    return None
