"""The real datasets' files: where they come from, their pinned checksums, the cache, downloads and
air-gapped imports. No framework and no numpy here: the worker parses the files
(``adapters/datasets.py``); this side makes sure they are the published bytes.

Cache layout: ``<cache_home>/datasets/<name>/<published file name>`` plus ``.verified.json``, which
records the sha256, size and mtime of each file when it was verified, so ``status()`` need not
hash 200 MB each time (``verify()`` re-hashes on demand).

A file enters the cache only by ``os.replace`` of a temporary file in the same directory after its
size and checksum matched: an interrupted, failed or mismatching download leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui_bench.engine import paths
from tui_bench.engine.errors import DatasetError

CHUNK = 1 << 20
STAMP = ".verified.json"
PART_PREFIX = ".part-"
USER_AGENT = "tui-bench (dataset download)"

# progress(file name, bytes done, bytes expected)
Progress = Callable[[str, int, int], None]
# fetch(url) -> chunks of the response body; raises OSError (URLError, timeouts) on failure
Fetch = Callable[[str], Iterable[bytes]]


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


def _idx_files(mirrors: tuple[str, ...], checks: list[tuple[str, int, str, str]]):
    return tuple(
        DataFile(name, size, sha, md5, tuple(m + name for m in mirrors))
        for name, size, sha, md5 in checks
    )


# Checksums: sha256 as pinned by Keras (imdb.npz), torchvision's prototype datasets (CIFAR-10) and
# many public projects (MNIST, Fashion-MNIST), each found in several independent sources; md5 as
# pinned by torchvision / the Fashion-MNIST README / Keras. The IMDb word index has no published
# sha256 that could be found: it is checked by its Keras md5 (and size).
REGISTRY: dict[str, RealDataset] = {
    "mnist": RealDataset(
        "mnist",
        "MNIST",
        _idx_files(
            (
                "https://ossci-datasets.s3.amazonaws.com/mnist/",
                "https://storage.googleapis.com/cvdf-datasets/mnist/",
            ),
            [
                (
                    "train-images-idx3-ubyte.gz",
                    9_912_422,
                    "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                    "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                ),
                (
                    "train-labels-idx1-ubyte.gz",
                    28_881,
                    "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                    "d53e105ee54ea40749a09fcbcd1e9432",
                ),
                (
                    "t10k-images-idx3-ubyte.gz",
                    1_648_877,
                    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                    "9fb629c4189551a2d022fa330f9573f3",
                ),
                (
                    "t10k-labels-idx1-ubyte.gz",
                    4_542,
                    "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                    "ec29112dd5afa0611ce80d1b7f02629c",
                ),
            ],
        ),
        "http://yann.lecun.com/exdb/mnist/ (IDX files, mirrored)",
    ),
    "fashion-mnist": RealDataset(
        "fashion-mnist",
        "Fashion-MNIST",
        _idx_files(
            (
                "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                "https://storage.googleapis.com/tensorflow/tf-keras-datasets/",
            ),
            [
                (
                    "train-images-idx3-ubyte.gz",
                    26_421_880,
                    "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                    "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                ),
                (
                    "train-labels-idx1-ubyte.gz",
                    29_515,
                    "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                    "25c81989df183df01b3e8a0aad5dffbe",
                ),
                (
                    "t10k-images-idx3-ubyte.gz",
                    4_422_102,
                    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                    "bef4ecab320f06d8554ea6380940ec79",
                ),
                (
                    "t10k-labels-idx1-ubyte.gz",
                    5_148,
                    "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
                    "bb300cfdad3c16e7a12a480ee83cd310",
                ),
            ],
        ),
        "https://github.com/zalandoresearch/fashion-mnist (IDX files)",
    ),
    "cifar10": RealDataset(
        "cifar10",
        "CIFAR-10",
        (
            DataFile(
                "cifar-10-python.tar.gz",
                170_498_071,
                "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                "c58f30108f718f92721af3b95e74349a",
                ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                aliases=("cifar-10-batches-py.tar.gz",),  # Keras' cache name
            ),
        ),
        "https://www.cs.toronto.edu/~kriz/cifar.html (python version)",
    ),
    "imdb": RealDataset(
        "imdb",
        "IMDb",
        (
            DataFile(
                "imdb.npz",
                17_464_789,
                "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f",
                None,
                ("https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb.npz",),
            ),
            DataFile(
                "imdb_word_index.json",
                1_641_221,
                None,
                "bfafd718b763782e994055a2d397834f",
                (
                    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/imdb_word_index.json",
                ),
                required=False,
            ),
        ),
        "Keras' imdb.npz (word ids ranked by frequency) and its word index",
    ),
}


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


def _file_in(directory: Path, spec: DataFile) -> Path | None:
    for candidate in (spec.name, *spec.aliases):
        path = directory / candidate
        if path.is_file():
            return path
    return None


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


# -- verification stamps --------------------------------------------------------------------------
def _read_stamp(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / STAMP).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # no stamp or a damaged one: files are simply re-verified


def _write_stamp(directory: Path, stamp: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=PART_PREFIX)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(stamp, handle, indent=1, sort_keys=True)
    os.replace(tmp, directory / STAMP)


def _stamp_entry(path: Path, digest: Digest) -> dict[str, Any]:
    info = path.stat()
    return {
        "sha256": digest.sha256,
        "md5": digest.md5,
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
    }


def _stamp_valid(entry: Any, path: Path, spec: DataFile) -> bool:
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


# -- status ---------------------------------------------------------------------------------------
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
    stamp = _read_stamp(directory) if in_cache else {}
    new_stamp = dict(stamp)
    files, on_disk, to_download = [], 0, 0
    for spec in dataset.files:
        path = _file_in(directory, spec)
        if path is None:
            files.append(FileStatus(spec.name, spec.required, spec.size, None, False))
            to_download += spec.size
            continue
        on_disk += path.stat().st_size
        entry = stamp.get(spec.name)
        problem = None
        if rehash or not _stamp_valid(entry, path, spec):
            digest = digest_file(path)
            problem = mismatch(spec, digest)
            if problem is None:
                new_stamp[spec.name] = _stamp_entry(path, digest)
            else:
                new_stamp.pop(spec.name, None)
        files.append(
            FileStatus(spec.name, spec.required, spec.size, str(path), problem is None, problem)
        )
    if in_cache and new_stamp != stamp and directory.is_dir():
        try:
            _write_stamp(directory, new_stamp)
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


# -- download -------------------------------------------------------------------------------------
def urllib_fetch(url: str, timeout: float = 60.0) -> Iterator[bytes]:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        while chunk := response.read(CHUNK):
            yield chunk


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"network error: {exc.reason}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _clean_parts(directory: Path, older_than_s: float = 24 * 3600) -> None:
    """Remove temporary files a killed download left (never a recent one: it may be in use)."""
    now = time.time()
    for part in directory.glob(PART_PREFIX + "*"):
        try:
            if now - part.stat().st_mtime > older_than_s:
                part.unlink()
        except OSError:
            pass


def _install(source: Iterable[bytes], spec: DataFile, directory: Path, progress: Progress | None):
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
        stamp = _read_stamp(directory)
        stamp[spec.name] = _stamp_entry(final, Digest(sha.hexdigest(), md5.hexdigest(), size))
        _write_stamp(directory, stamp)
        return None
    finally:
        tmp.unlink(missing_ok=True)


def download(
    name: str,
    progress: Progress | None = None,
    fetch: Fetch | None = None,
    include_optional: bool = True,
) -> DatasetStatus:
    """Download ``name``'s missing or unverified files into the cache, trying each mirror.
    Raises DatasetError naming each file that failed and why, for every mirror; the files that
    did verify stay in the cache."""
    if name not in REGISTRY:
        raise DatasetError(f"unknown dataset '{name}' (choose: {', '.join(REGISTRY)})")
    dataset = REGISTRY[name]
    fetch = fetch or urllib_fetch
    directory = cache_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    _clean_parts(directory)
    current = {f.name: f for f in status([name])[0].files}
    failures: dict[str, list[str]] = {}  # why (per mirror) -> files that failed that way
    for spec in dataset.files:
        if current[spec.name].verified or (not spec.required and not include_optional):
            continue
        reasons = []
        for url in spec.urls:
            try:
                why = _install(fetch(url), spec, directory, progress)
            except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, bad URLs
                why = _describe(exc)
            if why is None:
                break
            reasons.append(f"{urllib.parse.urlsplit(url).netloc or url}: {why}")
        else:
            failures.setdefault("; ".join(reasons), []).append(f"{name}/{spec.name}")
    if failures:  # the other files were still fetched: a retry only needs the failed ones
        raise DatasetError(
            " | ".join(
                f"could not download {files[0]}"
                + (f" and {len(files) - 1} more file(s)" if len(files) > 1 else "")
                + f": {why}"
                for why, files in failures.items()
            )
        )
    return status([name])[0]


# -- air-gapped import ----------------------------------------------------------------------------
@dataclass
class ImportReport:
    installed: list[str] = field(default_factory=list)  # "dataset/file"
    already: list[str] = field(default_factory=list)  # identical file was already in the cache
    rejected: list[str] = field(default_factory=list)  # a known file name with wrong bytes: why
    ignored: list[str] = field(default_factory=list)  # files that are no dataset file


def _known_names() -> set[str]:
    return {n for d in REGISTRY.values() for f in d.files for n in (f.name, *f.aliases)}


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
    known = _known_names()
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
            why = _install(iter(lambda: handle.read(CHUNK), b""), spec, directory, None)
        if why:  # the file changed while it was being copied
            report.rejected.append(f"{candidate}: {why}")
        else:
            report.installed.append(f"{dataset.name}/{spec.name}")
    return report
