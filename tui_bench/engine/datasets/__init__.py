"""The real datasets' files: where they come from, their pinned checksums, the cache, downloads and
air-gapped imports. No framework and no numpy here: the worker parses the files
(``adapters/datasets.py``); this side makes sure they are the published bytes.

One module per concern: ``registry`` (which datasets and files, from the shared manifest
``adapters/datasets.json``; where the cache is), ``verify`` (hashing, pinned checksums, stamps,
atomic installs), ``cache_status`` (what is there and whether a run can use it), ``downloads``
and ``imports``. The names front ends use are importable from here.
"""

from __future__ import annotations

from tui_bench.engine.datasets.cache_status import (
    DatasetStatus,
    FileStatus,
    choice_note,
    problem,
    status,
)
from tui_bench.engine.datasets.downloads import USER_AGENT, Fetch, download, urllib_fetch
from tui_bench.engine.datasets.imports import ImportReport, import_path
from tui_bench.engine.datasets.registry import (
    REGISTRY,
    DataFile,
    RealDataset,
    cache_dir,
    cache_root,
    locate,
    megabytes,
)
from tui_bench.engine.datasets.verify import (
    CHUNK,
    PART_PREFIX,
    STAMP,
    Digest,
    Progress,
    digest_file,
    mismatch,
)
from tui_bench.engine.errors import DatasetError

__all__ = [
    "CHUNK",
    "PART_PREFIX",
    "REGISTRY",
    "STAMP",
    "USER_AGENT",
    "DataFile",
    "DatasetError",
    "DatasetStatus",
    "Digest",
    "Fetch",
    "FileStatus",
    "ImportReport",
    "Progress",
    "RealDataset",
    "cache_dir",
    "cache_root",
    "choice_note",
    "digest_file",
    "download",
    "import_path",
    "locate",
    "megabytes",
    "mismatch",
    "problem",
    "status",
    "urllib_fetch",
]
