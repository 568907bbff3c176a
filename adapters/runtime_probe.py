"""What a runtime's interpreter can import: ``python -I adapters/runtime_probe.py MODULE...``.

Run by the app (``runtimes.probe``) in a framework's runtime (stdlib + numpy + the framework;
never in the UI process). Imports each module, reports its version and whether it can use a GPU,
as one line ``TUI_BENCH_PROBE {json}``; never raises.
"""

import atexit
import json
import os
import platform
import sys
from pathlib import Path


def _keep_adapters_off_path(root: Path) -> None:
    """Drop the adapters tree from sys.path. A plain ``python adapters/runtime_probe.py`` (no
    ``-I``) puts this directory first on it, where ``adapters/torch/`` would stand in for the
    real ``torch`` (tests/test_framework_packages.py)."""

    def inside(entry: str) -> bool:
        where = Path(entry or ".").resolve()
        return where == root or root in where.parents

    sys.path[:] = [entry for entry in sys.path if not inside(entry)]


if __name__ == "__main__":
    _keep_adapters_off_path(Path(__file__).resolve().parent)

out = {"python": platform.python_version(), "executable": sys.executable, "modules": {}}
try:
    import numpy

    out["numpy"] = numpy.__version__
except Exception as exc:
    out["numpy"] = None
    out["numpy_error"] = f"{type(exc).__name__}: {exc}"


def gpu_info(name, module):
    if name == "torch":
        return {
            "build": module.version.cuda and f"CUDA {module.version.cuda}",
            "gpus": module.cuda.device_count() if module.cuda.is_available() else 0,
        }
    if name == "tensorflow":
        return {
            "build": "CUDA" if module.test.is_built_with_cuda() else None,
            "gpus": len(module.config.list_physical_devices("GPU")),
        }
    if name == "mxnet":
        cuda = module.runtime.Features().is_enabled("CUDA")
        return {"build": "CUDA" if cuda else None, "gpus": module.context.num_gpus() if cuda else 0}
    if name == "jax":
        gpus = [d for d in module.devices() if d.platform == "gpu"]
        return {"build": "CUDA" if gpus else None, "gpus": len(gpus)}
    if name == "theano":
        import importlib.util

        return {"build": "gpuarray" if importlib.util.find_spec("pygpu") else None, "gpus": 0}
    return None


if "theano" in sys.argv[1:]:
    # Keras 2.3.1 imports ABCs from collections (gone since Python 3.10); the theano adapter
    # restores the aliases the same way before importing it.
    import collections
    import collections.abc

    for alias in collections.abc.__all__:
        if not hasattr(collections, alias):
            setattr(collections, alias, getattr(collections.abc, alias))
for name in sys.argv[1:]:
    try:
        module = __import__(name)
        version = getattr(module, "__version__", None)
        if version is None:
            import importlib.metadata as md

            try:
                version = md.version(name.replace("_", "-"))
            except Exception:
                version = "?"
        info = {"version": version}
        try:
            info["gpu"] = gpu_info(name, module)
        except Exception as exc:
            info["gpu"] = {"build": None, "gpus": 0, "error": str(exc)}
        out["modules"][name] = info
    except BaseException as exc:
        out["modules"][name] = {
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        }
print("TUI_BENCH_PROBE " + json.dumps(out), flush=True)
atexit._run_exitfuncs()
os._exit(0)  # exit handlers, but no teardown of the imports: ~1 s (adapters/process_end.py)
