"""Which real datasets exist, their published files and pinned checksums (read from the shared
manifest, ``adapters/datasets.json``), and where the cache keeps them.

Cache layout: ``<cache_home>/datasets/<name>/<published file name>`` plus ``.verified.json``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui_bench.engine import paths
from tui_bench.engine.dataset_manifest import manifest


@dataclass(frozen=True)
class DataFile:
    name: str  # the published file name, as stored in the cache
    size: int  # bytes
    sha256: str | None  # pinned; None only where no published sha256 could be found
    md5: str | None  # the published md5 (torchvision, Keras): a second check, or the only one
    urls: tuple[str, ...]  # mirrors, tried in order
    required: bool = True
    aliases: tuple[str, ...] = ()  # the same bytes under another published name

    @property
    def check(self) -> str:
        return "sha256" if self.sha256 else "md5"


@dataclass(frozen=True)
class RealDataset:
    name: str
    label: str
    files: tuple[DataFile, ...]
    source: str  # where the data is published, for the user

    @property
    def download_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def required_size(self) -> int:
        return sum(f.size for f in self.files if f.required)


def _data_file(entry: dict[str, Any]) -> DataFile:
    return DataFile(
        entry["name"],
        entry["size"],
        entry.get("sha256"),
        entry.get("md5"),
        tuple(entry["urls"]),
        entry.get("required", True),
        tuple(entry.get("aliases", ())),
    )


def _registry() -> dict[str, RealDataset]:
    return {
        name: RealDataset(
            name, entry["label"], tuple(map(_data_file, entry["files"])), entry["source"]
        )
        for name, entry in manifest().items()
        if not entry["synthetic"]
    }


REGISTRY: dict[str, RealDataset] = _registry()


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def cache_root() -> Path:
    return paths.cache_home() / "datasets"


def cache_dir(name: str) -> Path:
    return cache_root() / name


def locate(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Where a run finds dataset ``name``: ``DIR/NAME`` if that is a directory, else ``DIR``
    (the worker's ``adapters.datasets.dataset_dir`` applies the same rule); the cache by default."""
    base = Path(data_dir).expanduser() if data_dir else cache_root()
    nested = base / name
    return nested if nested.is_dir() else base


def file_in(directory: Path, spec: DataFile) -> Path | None:
    """The published file (or one of its aliases) in ``directory``, or None."""
    for candidate in (spec.name, *spec.aliases):
        path = directory / candidate
        if path.is_file():
            return path
    return None


def known_names() -> set[str]:
    return {n for d in REGISTRY.values() for f in d.files for n in (f.name, *f.aliases)}
