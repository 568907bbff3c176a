"""How a worker is started: its environment (an allow-list of the app's, plus the variables that
put a spec's threads, GPU rules and data-parallel set-up in place) and its command line (one
worker; for workers > 1 what the framework's manifest says, ``[data_parallel]``: the ranks under
its launcher, rank 0 starting its peers, or one process driving N devices). Both are pure:
``runner`` starts and supervises the process, ``dry_run`` starts a build-only one.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence

from tui_bench.engine import catalog, datasets
from tui_bench.engine.paths import adapters_dir, cache_home
from tui_bench.engine.spec import RunSpec


def loopback_ports(count: int) -> list[int]:
    """Free TCP ports on 127.0.0.1 (asked of the kernel, then released for the workers)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# The worker's environment is an allow-list (docs/gpu.md): what a framework needs to find its
# libraries and what the user may set on purpose to change its behaviour. Everything else in the
# app's environment stays out, so a stray variable cannot change a figure unseen; the
# performance-relevant ones that do reach the worker are recorded with the run (``perf_env``).
ENV_ALLOWED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "XDG_CACHE_HOME",
    "KERAS_HOME",
    "TORCH_HOME",
    "TUI_BENCH_TESTING",
)
# The machine's and the math libraries' variables, then each framework's own (its manifest's
# ``env_prefixes``).
ENV_ALLOWED_PREFIXES = (
    "LC_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "OMP_",
    "KMP_",
    "MKL_",
    "OPENBLAS_",
    *dict.fromkeys(p for fw in catalog.FRAMEWORKS.values() for p in fw.env_prefixes),
)


def _allowed(name: str) -> bool:
    return name in ENV_ALLOWED or name.startswith(ENV_ALLOWED_PREFIXES)


def gpu_rule_environment(spec: RunSpec, inherited: dict[str, str]) -> dict[str, str]:
    """Variables that put the spec's GPU rules in place before the framework is imported: no
    preallocation, strict fp32 (TF32 off in cuBLAS/cuDNN for every framework), one autotune
    choice. In-process settings (torch flags, TF config) are applied by the adapters."""
    if spec.device == "cpu":
        return {}
    env = {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",  # TF: grow, do not take nearly all memory
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",  # JAX: no 75 % up front
        "TF_CUDNN_USE_AUTOTUNE": "1" if spec.autotune == "on" else "0",
        "MXNET_CUDNN_AUTOTUNE_DEFAULT": "1" if spec.autotune == "on" else "0",
    }
    if spec.autotune == "off":
        flags = inherited.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_gpu_autotune_level=0".strip()
    if spec.precision == "fp32":
        env["NVIDIA_TF32_OVERRIDE"] = "0"
        env["JAX_DEFAULT_MATMUL_PRECISION"] = "float32"
    elif spec.precision == "tf32":
        env["JAX_DEFAULT_MATMUL_PRECISION"] = "tensorfloat32"
    return env


def worker_environment(spec: RunSpec, build_only: bool = False) -> dict[str, str]:
    """The worker's environment: an allow-list of this one's, then what the framework's manifest
    and the spec set. ``build_only`` (a dry run, a build probe) appends the manifest's
    ``build_env``: such a worker times nothing."""
    fw = catalog.framework(spec.framework)
    env = {k: v for k, v in os.environ.items() if _allowed(k)}
    if env.get("TUI_BENCH_TESTING") == "1" and "TUI_BENCH_FAULT" in os.environ:
        env["TUI_BENCH_FAULT"] = os.environ["TUI_BENCH_FAULT"]
    for name in fw.thread_env:
        env[name] = str(spec.threads)
    env.update(fw.api_env.get(spec.api, {}))
    if spec.precision != "fp32":
        env.pop("NVIDIA_TF32_OVERRIDE", None)  # a user's override would silently change it
    env.update(gpu_rule_environment(spec, env))
    # Same GPU numbering as NVML, so the sampler watches the GPU the worker uses.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if spec.device == "cpu":
        # TensorFlow and JAX place work on a visible GPU by default; a CPU run must not.
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if spec.workers > 1:
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo's pairs connect over the loopback only
        if fw.data_parallel.launch == "devices" and spec.device == "cpu":
            # e.g. JAX on a CPU shows one device unless told to split the host into N.
            _append(env, fw.data_parallel.cpu_env, workers=str(spec.workers))
    if build_only:
        _append(env, fw.build_env)
    # Where frameworks that compile at run time (Theano) keep their cache: tui-bench's, not ~.
    env["TUI_BENCH_WORKER_CACHE"] = str(cache_home() / "compiled")
    return env


def _append(env: dict[str, str], flags: dict[str, str], **fill: str) -> None:
    """A manifest's flags appended to what ``env`` already holds (the user's own XLA_FLAGS
    stay), each ``{name}`` in them filled in from ``fill``."""
    for name, value in flags.items():
        for key, text in fill.items():
            value = value.replace("{" + key + "}", text)
        env[name] = f"{env.get(name, '')} {value}".strip()


def worker_command(
    spec: RunSpec,
    python: str,
    events_fd: int,
    events_path: str | None = None,
    build_only: bool = False,
    also_build: Sequence[RunSpec] = (),
) -> list[str]:
    """The worker's command line. ``workers`` > 1, as the framework's manifest says: the ranks
    under its launcher (rank 0 writes events to the named pipe ``events_path``), rank 0
    starting its peers, or one process over N devices; every address is on 127.0.0.1.
    ``build_only``, ``also_build``: see ``dry_run.probe``. The worker imports ``adapter`` from
    the package at ``adapter_package`` (loaded by path when it lies outside ``adapters/``)."""
    fw = catalog.framework(spec.framework)
    payload = {
        **spec.to_dict(),
        "adapter": fw.adapter,
        "adapter_package": str(fw.package_dir),
    }
    # Real datasets: the verified cache unless the user points the run elsewhere.
    cache = str(datasets.cache_root())
    payload["data_dir"] = spec.data_dir or cache
    if build_only:
        payload["build_only"] = True
        payload["also_build"] = [
            {**other.to_dict(), "data_dir": other.data_dir or cache} for other in also_build
        ]
    launch = fw.data_parallel.launch if spec.workers > 1 else None
    if launch == "peers":
        payload["dp_ports"] = loopback_ports(spec.workers)
    payload["dp_launch"] = launch
    worker = [
        python,
        "-I",
        "-u",
        str(adapters_dir() / "worker.py"),
        "--spec-json",
        json.dumps(payload),
    ]
    if launch == "launcher":
        (port,) = loopback_ports(1)
        filled = {"{port}": str(port), "{workers}": str(spec.workers)}
        args = []
        for arg in fw.data_parallel.launcher_args:
            for key, value in filled.items():
                arg = arg.replace(key, value)
            args.append(arg)
        command = [
            python,
            "-I",
            "-u",
            str(fw.data_parallel.launcher),
            *args,  # then the worker, with the runtime's own interpreter flags
            *worker,
            "--events-path",
            str(events_path),
        ]
    else:
        command = [*worker, "--events-fd", str(events_fd)]
        if launch == "peers":
            command.append("--spawn-peers")
    if fw.pins_affinity(spec.api):
        # One process driving every worker's device: its pool gets every worker's threads.
        in_process = launch == "devices"
        cpus = sorted(os.sched_getaffinity(0))[: spec.threads * (spec.workers if in_process else 1)]
        command += ["--affinity", ",".join(map(str, cpus))]
    return command
