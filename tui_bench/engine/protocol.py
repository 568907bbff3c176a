"""The app's view of the worker event schema. The schema has one source, ``adapters/protocol.py``,
loaded here by path: ``adapters`` is not importable in the app (and must not be: the name belongs
to a PyPI project)."""

from __future__ import annotations

import importlib.util
import sys

from tui_bench.engine.paths import adapters_dir

_NAME = "tui_bench._worker_protocol"


def _load():
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, adapters_dir() / "protocol.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


_protocol = _load()
SCHEMA_VERSION: int = _protocol.SCHEMA_VERSION
EVENT_TYPES: frozenset[str] = _protocol.EVENT_TYPES
WorkerEvent = _protocol.WorkerEvent
DecodeError = _protocol.DecodeError
LineSplitter = _protocol.LineSplitter
decode = _protocol.decode
encode = _protocol.encode
