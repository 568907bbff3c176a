"""Air-gapped import: published files copied from anywhere (another tool's cache, a USB stick)
are recognised by their checksum and installed into the cache."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tui_bench.engine.datasets.registry import (
    REGISTRY,
    DataFile,
    RealDataset,
    cache_dir,
    known_names,
)
from tui_bench.engine.datasets.verify import (
    CHUNK,
    PART_PREFIX,
    STAMP,
    Progress,
    digest_file,
    install,
    mismatch,
)
from tui_bench.engine.errors import DatasetError


@dataclass
class ImportReport:
    installed: list[str] = field(default_factory=list)  # "dataset/file"
    already: list[str] = field(default_factory=list)  # identical file was already in the cache
    rejected: list[str] = field(default_factory=list)  # a known file name with wrong bytes: why
    ignored: list[str] = field(default_factory=list)  # files that are no dataset file


def import_path(path: str | os.PathLike, progress: Progress | None = None) -> ImportReport:
    """Install the published files found at ``path`` (a file, or a directory searched
    recursively) into the cache. Files are recognised by their checksum, so renamed files and
    other tools' layouts (torchvision's ``MNIST/raw``, Keras' ``~/.keras/datasets``) work, and
    MNIST and Fashion-MNIST, which share file names, are told apart."""
    root = Path(path).expanduser()
    if not root.exists():
        raise DatasetError(f"{root}: no such file or directory")
    candidates = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    by_size: dict[int, list[tuple[RealDataset, DataFile]]] = {}
    for dataset in REGISTRY.values():
        for spec in dataset.files:
            by_size.setdefault(spec.size, []).append((dataset, spec))
    known = known_names()
    report = ImportReport()
    for candidate in candidates:
        if candidate.name.startswith(PART_PREFIX) or candidate.name == STAMP:
            continue
        size = candidate.stat().st_size
        matches = by_size.get(size, [])
        if not matches:
            if candidate.name in known:
                report.rejected.append(
                    f"{candidate}: size {size:,} bytes matches no published file"
                )
            else:
                report.ignored.append(str(candidate))
            continue
        digest = digest_file(candidate, progress)
        hit = next(((d, s) for d, s in matches if mismatch(s, digest) is None), None)
        if hit is None:
            spec = matches[0][1]
            report.rejected.append(f"{candidate}: {mismatch(spec, digest)}")
            continue
        dataset, spec = hit
        directory = cache_dir(dataset.name)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / spec.name
        if target.is_file() and target.resolve() == candidate.resolve():
            report.already.append(f"{dataset.name}/{spec.name}")
            continue
        if target.is_file() and mismatch(spec, digest_file(target)) is None:
            report.already.append(f"{dataset.name}/{spec.name}")
            continue
        with open(candidate, "rb") as handle:
            why = install(iter(lambda: handle.read(CHUNK), b""), spec, directory, None)
        if why:  # the file changed while it was being copied
            report.rejected.append(f"{candidate}: {why}")
        else:
            report.installed.append(f"{dataset.name}/{spec.name}")
    return report
