"""Downloads into the cache: each missing or unverified file from its mirrors in turn, installed
only once its size and checksum match the manifest's pins."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tui_bench.engine.datasets.cache_status import DatasetStatus, status
from tui_bench.engine.datasets.registry import REGISTRY, cache_dir
from tui_bench.engine.datasets.verify import CHUNK, PART_PREFIX, Progress, install
from tui_bench.engine.errors import DatasetError

USER_AGENT = "tui-bench (dataset download)"

# fetch(url) -> chunks of the response body; raises OSError (URLError, timeouts) on failure
Fetch = Callable[[str], Iterable[bytes]]


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
                why = install(fetch(url), spec, directory, progress)
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
