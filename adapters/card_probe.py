"""What a runtime can tell about its frameworks, for the framework card (Dai & Berleant's metrics).

Run by the app as ``python -I adapters/card_probe.py MODULE...`` in a framework's runtime (stdlib +
the framework; never in the UI process). Prints one line, ``TUI_BENCH_CARD {json}``:
- per module, its installed distribution's version and license, read from the distribution's
  metadata (``importlib.metadata``), not from the import;
- what hardware the imported build supports here: CUDA/ROCm build, GPUs it sees, its CPU math
  libraries (BLAS, oneDNN);
- which multi-node backends the runtime has (NCCL, gloo, MPI, gRPC, parameter server, Horovod).
A failure to import or to query a module is reported in its entry, never raised.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any


def _keep_adapters_off_path(root: Path) -> None:
    """Drop the adapters tree from sys.path. A plain ``python adapters/card_probe.py`` (no ``-I``) puts
    the script's directory first on it, where ``adapters/torch/`` would stand in for the real
    ``torch`` (tests/test_framework_packages.py)."""

    def inside(entry: str) -> bool:
        where = Path(entry or ".").resolve()
        return where == root or root in where.parents

    sys.path[:] = [entry for entry in sys.path if not inside(entry)]


if __name__ == "__main__":
    _keep_adapters_off_path(Path(__file__).resolve().parent)


def distribution(module: str) -> dict[str, Any]:
    """Version and license of the distribution that installs ``module``."""
    names = md.packages_distributions().get(module) or [module]
    for name in names:
        try:
            meta = md.metadata(name)
        except md.PackageNotFoundError:
            continue
        license_ = meta.get("License-Expression") or ""
        if not license_:
            text = (meta.get("License") or "").strip()
            license_ = text.splitlines()[0][:80] if text else ""
        classifiers = [
            c.split("::")[-1].strip()
            for c in meta.get_all("Classifier") or []
            if c.startswith("License ::")
        ]
        if not license_ and classifiers:
            license_ = "; ".join(classifiers)
        return {"distribution": meta["Name"], "version": meta["Version"], "license": license_}
    return {"distribution": None, "version": None, "license": None}


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def torch_facts(torch) -> dict[str, Any]:
    build = (
        f"CUDA {torch.version.cuda}"
        if torch.version.cuda
        else f"ROCm {torch.version.hip}"
        if getattr(torch.version, "hip", None)
        else "CPU-only"
    )
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    config = torch.__config__.show()
    blas = next(
        (
            part.split("=", 1)[1]
            for part in config.replace(",", " ").split()
            if "BLAS_INFO=" in part
        ),
        None,
    )
    cpu = []
    if blas:
        cpu.append(f"BLAS {blas}")
    if torch.backends.mkldnn.is_available():
        cpu.append("oneDNN")
    if torch.backends.openmp.is_available():
        cpu.append("OpenMP")
    dist = torch.distributed
    multinode = []
    if dist.is_available():
        for name in ("nccl", "gloo", "mpi", "ucc"):
            check = getattr(dist, f"is_{name}_available", None)
            if check is not None and check():
                multinode.append(name)
    return {
        "build": build,
        "gpus": gpus,
        "gpu_names": [torch.cuda.get_device_name(i) for i in range(gpus)],
        "cpu": cpu,
        "multinode": multinode,
    }


def tensorflow_facts(tf) -> dict[str, Any]:
    info = dict(tf.sysconfig.get_build_info())
    if info.get("is_cuda_build"):
        build = f"CUDA {info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}"
    elif info.get("is_rocm_build"):
        build = "ROCm"
    else:
        build = "CPU-only"
    gpus = tf.config.list_physical_devices("GPU")
    cpu = []
    try:
        from tensorflow.python.util import _pywrap_util_port

        if _pywrap_util_port.IsMklEnabled():
            cpu.append("oneDNN")
    except (ImportError, AttributeError):
        pass
    # MultiWorkerMirroredStrategy's collectives run over gRPC; NCCL only in CUDA builds.
    multinode = (
        ["gRPC collectives"] if hasattr(tf.distribute, "MultiWorkerMirroredStrategy") else []
    )
    if info.get("is_cuda_build"):
        multinode.append("nccl")
    return {
        "build": build,
        "gpus": len(gpus),
        "gpu_names": [g.name for g in gpus],
        "cpu": cpu,
        "multinode": multinode,
    }


def mxnet_facts(mx) -> dict[str, Any]:
    features = mx.runtime.Features()
    cuda = features.is_enabled("CUDA")
    gpus = mx.context.num_gpus() if cuda else 0
    blas = [
        label
        for key, label in (
            ("BLAS_OPEN", "BLAS OpenBLAS"),
            ("BLAS_MKL", "BLAS MKL"),
            ("BLAS_ATLAS", "BLAS ATLAS"),
            ("BLAS_APPLE", "BLAS Accelerate"),
        )
        if features.is_enabled(key)
    ]
    cpu = blas + [
        n for k, n in (("MKLDNN", "oneDNN"), ("OPENMP", "OpenMP")) if features.is_enabled(k)
    ]
    multinode = [
        n
        for k, n in (("DIST_KVSTORE", "parameter-server kvstore"), ("NCCL", "nccl"))
        if features.is_enabled(k)
    ]
    return {
        "build": "CUDA" + (", cuDNN" if features.is_enabled("CUDNN") else "")
        if cuda
        else "CPU-only",
        "gpus": gpus,
        "gpu_names": [],
        "cpu": cpu,
        "multinode": multinode,
    }


def jax_facts(jax) -> dict[str, Any]:
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    multinode = ["gRPC coordination (jax.distributed)"] if hasattr(jax, "distributed") else []
    try:
        from jax._src.lib import xla_client

        extension = getattr(xla_client, "_xla", None)
        for name, label in (("make_gloo_tcp_collectives", "gloo"), ("make_mpi_collectives", "mpi")):
            if extension is not None and hasattr(extension, name):
                multinode.append(label)
    except ImportError:
        pass
    return {
        "build": "CUDA" if gpus else "CPU-only (no GPU plugin)",
        "gpus": len(gpus),
        "gpu_names": [getattr(d, "device_kind", str(d)) for d in gpus],
        "cpu": ["XLA:CPU"],
        "multinode": multinode,
    }


def theano_facts(theano) -> dict[str, Any]:
    blas = distribution("scipy_openblas32")
    cpu = [f"BLAS OpenBLAS {blas['version']} (scipy-openblas32)"] if blas["version"] else []
    cpu.append("OpenMP (Theano's own loops, flag openmp)")
    return {
        "build": "gpuarray" if _has("pygpu") else "CPU-only (no pygpu/libgpuarray)",
        "gpus": 0,
        "gpu_names": [],
        "cpu": cpu,
        "multinode": ["platoon"] if _has("platoon") else [],
    }


FACTS = {
    "torch": torch_facts,
    "tensorflow": tensorflow_facts,
    "mxnet": mxnet_facts,
    "jax": jax_facts,
    "theano": theano_facts,
}


def main(modules: list[str]) -> dict[str, Any]:
    if "keras" in modules and "theano" in modules:
        import collections
        import collections.abc

        for alias in collections.abc.__all__:  # Keras 2.3.1 on Python >= 3.10
            if not hasattr(collections, alias):
                setattr(collections, alias, getattr(collections.abc, alias))
    out: dict[str, Any] = {"python": sys.version.split()[0], "modules": {}}
    for name in modules:
        entry: dict[str, Any] = distribution(name)
        try:
            module = __import__(name)
            if name in FACTS:
                entry.update(FACTS[name](module))
            if name == "keras":
                entry["keras_backend"] = module.backend.backend()
        except BaseException as exc:  # noqa: BLE001 - a broken framework is a fact to report
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if _has("horovod"):
            entry.setdefault("multinode", []).append("horovod")
        out["modules"][name] = entry
    return out


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print("TUI_BENCH_CARD " + json.dumps(main(sys.argv[1:])), flush=True)
    # Its one line is out: exit handlers, but no teardown of the imports (~1 s; see
    # process_end.leave, which -I keeps off sys.path here).
    import atexit

    atexit._run_exitfuncs()
    os._exit(0)
