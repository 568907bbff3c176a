"""GPU verification in one call: what the device is, which runtimes can use it, whether
``pytest -m gpu`` passes, and the GPU figures, driven through tui-bench's own CLI.

    python benchmarks/gpu_check.py --make-bundle .gpu-bundle     # here, with PyPI: wheels to carry
    python benchmarks/gpu_check.py --out gpu-report --bundle .gpu-bundle   # on the GPU machine
    python benchmarks/gpu_check.py --out /tmp/dry --cpu-dry-run  # every step on the CPU (CI)

Steps, each timed and written to DIR/report.json and DIR/report.md as soon as it ends (a check
cut off leaves the steps it finished): ``device`` (nvidia-smi, NVML, torch's and JAX's view),
``runtimes`` (the app interpreter's torch, and Keras-on-torch / Keras-on-JAX venvs made from the
bundle over the system's CUDA torch and JAX, in DIR/runtimes), ``pytest``
(``pytest -m gpu`` with JUnit XML in DIR), ``figures`` (one ``tui-bench run --json`` per
configuration: torch eager and compile, Keras on torch and on JAX; fp32, tf32, amp-fp16, bf16;
synced vs pipelined; host vs device input; the reference CNN, VGG16 and the transformer, whose
record names the attention kernel that ran: torch's SDPA backend, Keras' path and XLA; and the
gpt at GPT-2 small's size in bf16 on torch.compile and Keras on JAX, with tokens/s and MFU against
the nominal bf16 peak, which the report names). ``--model gpt`` runs those rows alone.

A configuration that a runtime cannot run on the device it sees (no runtime, a CPU-only build,
a setting the catalog refuses) is skipped before anything starts, with the reason. The whole
check keeps to ``--budget-s`` (default 510 s: inside 9 minutes with start-up to spare); a step
that would not fit is skipped and says so. History, cache and config live under DIR, never in
the user's home.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUNDLE_LIMIT_MIB = 60
# The dev tools the check never runs (linters, type checker, pandas): not carried.
BUNDLE_SKIPS_DEV = ("ruff", "mypy", "import-linter", "pandas")
# The GPU machine's system Python has these (numpy with torch; scipy, ml_dtypes with JAX).
SYSTEM_WHEELS = ("numpy", "scipy", "ml_dtypes")


def bundle_requirements() -> list[str]:
    """What tui-bench and its GPU tests import (pyproject's own pins), plus Keras and the build
    backend, less what a CUDA machine's system Python already has (numpy, torch, JAX)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    dev = project["project"]["optional-dependencies"]["dev"]
    wanted = [r for r in dev if not r.startswith(BUNDLE_SKIPS_DEV)]
    build = project["build-system"]["requires"]
    return [*project["project"]["dependencies"], *wanted, *build, "keras>=3.5"]


@dataclass
class Config:
    """One figure: a tui-bench run and what it is meant to show."""

    framework: str
    api: str
    model: str = "cnn"
    precision: str = "fp32"
    timing: str = "synced"
    input: str = "host"
    shows: str = ""
    size: str | None = None  # a sized model's size (the gpt)
    mode: str = "train"  # "inference": timed forward requests at ``batch`` (issue 43);
    # "generate": the gpt generating tokens, ``batch`` sequences a request (issue 49)
    batch: int | None = None  # an inference or generation row's batch size

    @property
    def name(self) -> str:
        parts = [f"{self.framework}/{self.api}", self.model, *filter(None, [self.size])]
        parts.append(self.precision)
        parts += [v for v in (self.timing, self.input) if v not in ("synced", "host")]
        if self.mode in ("inference", "generate"):
            parts.append(f"{self.mode} b{self.batch}")
        return " ".join(parts)


# The inference rows: torch's two serving paths and Keras through jax.jit.
INFERENCE_APIS = (
    ("torch", "eager", "serving, eager"),
    ("torch", "compile", "serving, torch.compile"),
    ("keras", "jax", "serving, Keras/JAX"),
)
# A large batch for throughput; batch 1 serves 1,000 requests and the large batch 600, both past
# the 563 that bound p99 (docs/inference.md). Dry run: batch 1 and 8, 20 requests (wiring only).
INFERENCE_BATCH = 256
INFERENCE_REQUESTS = {1: 1000, INFERENCE_BATCH: 600}
DRY_INFERENCE_BATCH, DRY_REQUESTS = 8, 20

# The generation rows (issue 49): gpt2-small generating, a 512-token prompt then 128 new tokens
# (pp512 / tg128), bf16 weights and cache, batch 1 (latency, memory-bound: MBU against the
# datasheet HBM bandwidth) and batch 32 (throughput); torch.compile (CUDA graphs for the decode
# step), Keras on JAX and JAX/Flax where the catalog says they generate (else skipped with its
# reason). Dry run: the tiny gpt, P 16 + N 8, a few requests (wiring only).
GENERATE_APIS = (
    ("torch", "compile", "generation, torch.compile"),
    ("keras", "jax", "generation, Keras/JAX"),
    ("jax", "flax", "generation, JAX/Flax"),
)
GENERATE_REQUESTS = {1: 100, 32: 30}
GENERATE_PROMPT, GENERATE_NEW = 512, 128


def planned_configs() -> list[Config]:
    torch_cnn = [
        Config("torch", "eager", precision=p, shows="precision")
        for p in ("fp32", "tf32", "amp-fp16", "bf16")
    ]
    return [
        *torch_cnn,
        Config("torch", "eager", timing="pipelined", shows="synced vs pipelined"),
        Config("torch", "eager", input="device", shows="host vs device input"),
        Config("torch", "compile", shows="compile vs eager"),
        Config("torch", "compile", precision="bf16", shows="compile, bf16"),
        Config("keras", "torch", shows="Keras on torch"),
        Config("keras", "jax", shows="Keras on JAX"),
        Config("keras", "jax", precision="bf16", shows="Keras on JAX, bf16"),
        Config("torch", "eager", model="vgg16", shows="VGG16"),
        Config("torch", "eager", model="vgg16", precision="amp-fp16", shows="VGG16, amp-fp16"),
        Config("keras", "jax", model="vgg16", shows="VGG16 on Keras/JAX"),
        # Today's workload (issue 27): the SDPA backend that ran is read back (setting_attention).
        Config("torch", "eager", model="transformer", shows="transformer, SDPA"),
        Config("torch", "eager", model="transformer", precision="bf16", shows="transformer, bf16"),
        Config("torch", "compile", model="transformer", precision="bf16", shows="compiled, bf16"),
        Config("keras", "jax", model="transformer", precision="bf16", shows="Keras/JAX, bf16"),
        # Issue 43: serving speed. Each request timed alone (synchronised on the device), p50/p99
        # and samples/s, at batch 1 (latency) and a large batch (throughput), bf16 beside fp32
        # at the large batch; Keras on JAX is skipped with the catalog's reason until its
        # adapter serves inference. `--mode inference` runs these rows alone.
        *(
            Config(fw, api, precision=p, mode="inference", batch=b, shows=shows)
            for fw, api, shows in INFERENCE_APIS
            for p, b in (("fp32", 1), ("fp32", INFERENCE_BATCH), ("bf16", INFERENCE_BATCH))
        ),
        # Issue 42: a model big enough for the device to be measured, MFU beside nanoGPT's. Last,
        # so the figures above keep their order; `--model gpt` runs these two alone.
        *(
            Config(fw, api, model="gpt", size="gpt2-small", precision="bf16", shows=shows)
            for fw, api, shows in (
                ("torch", "compile", "gpt2-small, tokens/s and MFU"),
                ("keras", "jax", "gpt2-small on Keras/JAX, MFU"),
            )
        ),
        # Issue 49: generation rows, after every other; `--mode generate` runs them alone.
        *(
            Config(
                fw,
                api,
                model="gpt",
                size="gpt2-small",
                precision="bf16",
                mode="generate",
                batch=b,
                shows=shows,
            )
            for fw, api, shows in GENERATE_APIS
            for b in GENERATE_REQUESTS
        ),
    ]


# The gpt rows: batch 16 sequences of 1,024 tokens (16,384 tokens a step), the preset gpt2-small's
# smaller batch: tui-bench's training-memory estimate is 28 GB (a third of an 80 GB H100, so it
# fits an H100 or H200 beside the allocator's caching) and nanoGPT's MFU figure is at batch 12.
# 100 steps of about 14 TFLOP each: ~35 ms a step at 40 % of 989 TFLOP/s, windows of a second.
GPT_BATCH, GPT_STEPS, GPT_WARMUP = 16, 100, 10
# torch.compile of GPT-2 small (inductor, cold) and XLA's compile take tens of seconds: the gpt
# rows get at least this long each, whatever --per-run-s says (still within --budget-s).
GPT_RUN_S = 240.0


@dataclass
class Report:
    """report.json and report.md, rewritten after every step so a cut-off check leaves both."""

    out: Path
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, step: dict[str, Any]) -> None:
        self.data.setdefault("steps", []).append(step)
        self.write()

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.data["updated"] = _now()
        for name, text in (
            ("report.json", json.dumps(self.data, indent=2, default=str)),
            ("report.md", render_markdown(self.data)),
        ):
            tmp = self.out / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(self.out / name)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def render_markdown(data: dict[str, Any]) -> str:
    lines = [
        f"# GPU check ({data.get('mode')})",
        "",
        f"started {data.get('started')}, updated {data.get('updated')}, "
        f"budget {data.get('budget_s')} s",
        "",
    ]
    for step in data.get("steps", []):
        lines += [f"## {step['step']}: {step['status']} ({step.get('seconds', 0):.1f} s)", ""]
        if step.get("reason"):
            lines += [step["reason"], ""]
        if step["step"] == "figures":
            figures = step.get("figures", [])
            lines += _figures_table(
                [f for f in figures if f.get("mode") not in ("inference", "generate")]
            )
            serving = [f for f in figures if f.get("mode") == "inference"]
            if serving:
                lines += _inference_table(serving)
            generating = [f for f in figures if f.get("mode") == "generate"]
            if generating:
                lines += _generation_table(generating)
        elif step.get("details") is not None:
            lines += ["```", json.dumps(step["details"], indent=2, default=str), "```", ""]
    return "\n".join(lines) + "\n"


def _figures_table(figures: list[dict[str, Any]]) -> list[str]:
    rows = [
        "| configuration | shows | status | step median ms | samples/s | tokens/s "
        "| MFU % (nominal peak) | allocator peak MiB | NVML peak MiB | J/sample | reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(value: Any, scale: float = 1.0, digits: int = 1) -> str:
        return "" if value is None else f"{value * scale:.{digits}f}"

    for f in figures:
        m = f.get("metrics") or {}
        rows.append(
            f"| {f['name']} | {f['shows']} | {f['status']} | {fmt(m.get('step_median_s'), 1e3, 2)} "
            f"| {fmt(m.get('samples_per_s'))} | {fmt(m.get('tokens_per_s'), 1, 0)} "
            f"| {fmt(m.get('mfu_nominal'), 100)} | {fmt(m.get('allocator_peak_mib'))} "
            f"| {fmt(m.get('res_peak_gpu_mem_mib'))} | {fmt(f.get('joules_per_sample'), 1, 4)} "
            f"| {(f.get('reason') or '').replace('|', '/')[:200]} |"
        )
    # An MFU means nothing without its peak: each one named once, under the table.
    peaks = sorted(
        {
            (f.get("metrics") or {}).get("mfu_nominal_peak")
            or (f.get("metrics") or {}).get("mfu_nominal_error")
            for f in figures
            if (f.get("metrics") or {}).get("tokens_per_s") is not None
        }
        - {None}
    )
    notes = [f"MFU counts model FLOPs (engine/flops.py) against the {p}" for p in peaks]
    return [*rows, "", *(f"- {n}" for n in notes), *([""] if notes else [])]


def _inference_table(figures: list[dict[str, Any]]) -> list[str]:
    """The serving rows: each request timed alone, synchronised on the device; samples/s is
    batch × requests ÷ their summed latency; the first request (compilation) apart."""
    rows = [
        "Inference (each request timed alone, synchronised; warm-up requests apart):",
        "",
        "| configuration | shows | status | batch | requests | p50 ms | p90 ms | p99 ms "
        "| samples/s | first request ms | reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def ms(value: Any) -> str:
        return "" if value is None else f"{value * 1e3:.3f}"

    for f in figures:
        m = f.get("metrics") or {}
        rate = m.get("inference_samples_per_s")
        n = m.get("latency_requests")
        why = f.get("reason") or m.get("latency_note") or ""  # a tail too few requests bound
        rows.append(
            f"| {f['name']} | {f['shows']} | {f['status']} | {f.get('batch') or ''} "
            f"| {'' if n is None else f'{n:.0f}'} | {ms(m.get('latency_p50_s'))} "
            f"| {ms(m.get('latency_p90_s'))} | {ms(m.get('latency_p99_s'))} "
            f"| {'' if rate is None else f'{rate:.1f}'} | {ms(m.get('first_request_s'))} "
            f"| {why.replace('|', '/')[:200]} |"
        )
    return [*rows, ""]


class Budget:
    """The check's whole time budget; each step asks for what it needs and gets what is left."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit status, combined output); a timeout or a missing program is a status, not a raise."""
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=max(timeout, 1),
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return 124, out + f"\n(timed out after {timeout:.0f} s)"
    except OSError as exc:
        return 127, str(exc)
    return done.returncode, done.stdout + done.stderr


PROBE_TORCH = (
    "import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': "
    "torch.__version__, 'cuda_build': torch.version.cuda, 'devices': [torch.cuda.get_device_name(i)"
    " for i in range(torch.cuda.device_count())] if c else []}))"
)
PROBE_JAX = (
    "import json, jax; print(json.dumps({'jax': jax.__version__, 'devices': "
    "[f'{d.platform}:{d.device_kind}' for d in jax.devices()]}))"
)


def _probe(python: str, code: str, timeout: float = 90) -> dict[str, Any]:
    status, out = _run([python, "-c", code], timeout)
    if status != 0:
        return {"error": out.strip().splitlines()[-1] if out.strip() else f"exit {status}"}
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"unreadable probe output: {out[-200:]}"}


def step_device() -> dict[str, Any]:
    """NVML, the driver, and what torch and JAX see from this interpreter (the wrapper makes it
    a venv over the system's CUDA packages)."""
    from tui_bench.engine.machine import sampler

    details: dict[str, Any] = {"python": sys.executable}
    smi = shutil.which("nvidia-smi")
    if smi:
        status, out = _run(
            [smi, "--query-gpu=name,driver_version,memory.total,power.limit", "--format=csv"], 30
        )
        details["nvidia_smi"] = out.strip() if status == 0 else f"failed: {out.strip()[-300:]}"
    else:
        details["nvidia_smi"] = "not on PATH"
    nvml = sampler.Nvml()
    details["nvml"] = (
        {"devices": nvml.devices()} if nvml.available else {"unavailable": str(nvml.error)}
    )
    details["torch"] = _probe(sys.executable, PROBE_TORCH)
    details["jax"] = _probe(sys.executable, PROBE_JAX)
    seen = bool(details["torch"].get("devices")) or any(
        not d.startswith("cpu") for d in details["jax"].get("devices", [])
    )
    details["cuda_seen"] = seen
    return {"status": "ok", "details": details}


def step_runtimes(
    out: Path,
    bundle: Path | None,
    dry_run: bool,
    budget: Budget,
    env: dict[str, str],
    only: str | None = None,
) -> dict[str, Any]:
    """Make the runtimes this machine can have, laid out as managed runtimes in DIR/runtimes
    (what both the CLI and the tests' conftest read through TUI_BENCH_RUNTIMES_DIR): Keras
    venvs over the app interpreter's packages (its CUDA torch and JAX), with the Keras wheels
    from the bundle, since there is no network there. torch runs in the app interpreter itself.
    Probes what the figures use: with ``--only``, that API's runtime alone (a probe imports
    the framework: seconds each)."""
    from tui_bench.engine.machine import runtimes

    if budget.left() < 20:
        # The probes import every framework (seconds each), for figures that could not run.
        return {"status": "skipped", "reason": "out of time budget"}
    notes: dict[str, str] = {}
    if dry_run:
        notes["all"] = f"dry run: this machine's runtimes in {env.get('TUI_BENCH_RUNTIMES_DIR')}"
    else:
        env["TUI_BENCH_RUNTIMES_DIR"] = os.environ["TUI_BENCH_RUNTIMES_DIR"] = str(out / "runtimes")
        for name in ("keras-torch", "keras-jax"):
            if bundle is None or not bundle.is_dir():
                notes[name] = "not made: no --bundle of wheels (make one with --make-bundle)"
                continue
            venv = out / "runtimes" / name
            status, text = _run(
                [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], budget.left()
            )
            if status == 0:
                _see_our_sites(venv)
                status, text = _run(
                    [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index",
                     "--find-links", str(bundle.resolve()), "keras"],
                    budget.left(),
                )  # fmt: skip
            notes[name] = f"made in {venv}" if status == 0 else f"failed: {text.strip()[-400:]}"
    seen = {}
    for framework, api in (("torch", "eager"), ("keras", "torch"), ("keras", "jax")):
        if only and f"{framework}/{api}" != only:
            continue
        found = runtimes.availability(framework, api)
        seen[f"{framework}/{api}"] = found.python if found.ok else f"unavailable: {found.problem}"
    failed = [name for name, note in notes.items() if note.startswith("failed")]
    return {
        "status": "failed" if failed else "ok",
        "reason": f"could not make {', '.join(failed)}" if failed else None,
        "details": {"notes": notes, "runtimes": seen},
    }


def _see_our_sites(venv: Path) -> None:
    """--system-site-packages reaches only the base interpreter's packages; where ours is a venv
    itself (the lent GPU image's torch lives in /opt/torch/.venv), the new venv must also see
    every site directory this interpreter sees, after its own."""
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(found) / "_tui_bench_gpu_check.pth").write_text("\n".join(ours) + "\n")


def _junit_counts(path: Path) -> dict[str, int]:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    keys = ("tests", "failures", "errors", "skipped")
    return {k: sum(int(s.get(k, 0)) for s in suites) for k in keys}


def step_pytest(
    out: Path, env: dict[str, str], budget: Budget, limit_s: float, dry_run: bool = False
) -> dict[str, Any]:
    xml = out / "pytest-gpu.xml"
    timeout = min(limit_s, budget.left() - 60)
    if timeout < 30:
        return {"status": "skipped", "reason": "out of time budget"}
    # The dry run collects tests/test_gpu.py alone: the suite collects every file's GPU tests
    # (and skips them) itself; all of tests/ took 14 CPU-s here against 8.5.
    where = "tests/test_gpu.py" if dry_run else "tests/"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu"]
    cmd += ["--junitxml", str(xml), "-rfE", where]
    if dry_run:
        # Every GPU test skips on a CPU: one test process, not the suite's two that would each
        # collect the whole suite (49 s against 23 s here), and no assertion rewriting, as no
        # test body runs (rewriting every test module was 5 of its 21 CPU seconds).
        cmd += ["-n", "0", "--assert=plain"]
    else:
        # Tests that compare timings or read the device's energy counter run after the others,
        # alone: a second test process on the same GPU time-slices it and adds its joules (on
        # the H200, pipelined came out 0.87x synced beside one).
        cmd[cmd.index("gpu")] = "gpu and not gpu_alone"
        # Four test processes: with both Keras runtimes the suite's two ran past 230 s on the
        # H200 (16 cores, the runs mostly wait on process starts and imports).
        cmd += ["-n", "4"]
    status, text = _run(cmd, timeout, env)
    if not dry_run and budget.left() > 60:
        alone = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
        alone += ["-m", "gpu and gpu_alone", "--junitxml", str(out / "pytest-gpu-alone.xml")]
        more_status, more = _run([*alone, "-rfE", "tests/"], budget.left() - 30, env)
        status = status if more_status == 5 else max(status, more_status)  # 5: none collected
        text = f"{text}\n--- gpu_alone, one process ---\n{more}"
    (out / "pytest-gpu.log").write_text(text)
    details: dict[str, Any] = {"exit": status, "log": "pytest-gpu.log", "junit": xml.name}
    xmls = [x for x in (xml, out / "pytest-gpu-alone.xml") if x.exists()]
    for part in xmls:
        for key, count in _junit_counts(part).items():
            details[key] = details.get(key, 0) + count
        details.setdefault("failed", []).extend(
            f"{case.get('classname')}::{case.get('name')}"
            for case in ET.parse(part).getroot().iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        )
    ok = status == 0 or (status == 5 and xml.exists())  # 5: nothing collected
    reason = None if ok else text.strip().splitlines()[-1] if text.strip() else f"exit {status}"
    return {"status": "ok" if ok else "failed", "reason": reason, "details": details}


@functools.cache
def gpu_problem(python: str, api: str) -> str | None:
    """Why this interpreter's torch (or JAX, for keras/jax) sees no CUDA device, or None."""
    probe = _probe(python, PROBE_JAX if api == "jax" else PROBE_TORCH)
    if "error" in probe:
        return f"GPU probe failed in {python}: {probe['error']}"
    devices = [d for d in probe.get("devices", []) if not str(d).startswith("cpu")]
    if devices:
        return None
    build = f"jax {probe.get('jax')}" if api == "jax" else f"torch {probe.get('torch')}"
    return f"{build} in {python} sees no CUDA GPU (a CPU-only build?)"


def _generation_table(figures: list[dict[str, Any]]) -> list[str]:
    """The generation rows: TTFT, TPOT, decode tokens/s and MBU against the datasheet HBM."""
    rows = [
        "Generation (each request timed alone; TPOT = (E2E − TTFT) / (N − 1); MBU = decode "
        "bytes per step / p50 TPOT / the nominal HBM bandwidth):",
        "",
        "| configuration | shows | status | batch | requests | TTFT p50 ms | TPOT p50 ms "
        "| TPOT p99 ms | decode tokens/s | decode GB/s | MBU nominal % | first request s "
        "| reason |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def num(value: Any, scale: float = 1.0, digits: int = 3) -> str:
        return "" if value is None else f"{value * scale:.{digits}f}"

    for f in figures:
        m = f.get("metrics") or {}
        why = f.get("reason") or m.get("mbu_nominal_error") or m.get("latency_note") or ""
        rows.append(
            f"| {f['name']} | {f['shows']} | {f['status']} | {f.get('batch') or ''} "
            f"| {num(m.get('generate_requests'), digits=0)} | {num(m.get('ttft_p50_s'), 1e3)} "
            f"| {num(m.get('tpot_p50_s'), 1e3)} | {num(m.get('tpot_p99_s'), 1e3)} "
            f"| {num(m.get('decode_tokens_per_s'), digits=0)} | {num(m.get('decode_gbps'), digits=1)} "
            f"| {num(m.get('mbu_nominal'), 100, 1)} | {num(m.get('first_request_s'), digits=2)} "
            f"| {str(why).replace('|', '/')[:200]} |"
        )
    return [*rows, ""]


def plan_figure(config: Config, device: str, dry_run: bool) -> str | None:
    """Why this configuration is skipped before it starts, or None."""
    from tui_bench.engine import catalog
    from tui_bench.engine.machine import runtimes

    if config.framework not in catalog.FRAMEWORKS:  # a framework not built yet (JAX/Flax)
        return f"framework '{config.framework}' is not in this installation's catalog"
    available = runtimes.availability(config.framework, config.api)
    if not available.ok:
        fix = available.fix if available.fix and available.fix not in available.problem else ""
        return f"runtime: {available.problem}" + (f" ({fix})" if fix else "")
    if not dry_run and (why := gpu_problem(str(available.python), config.api)):
        return why
    refused = catalog.setting_problem(
        config.framework, config.api, device, "fp32", "host", "synced", mode=config.mode
    )
    if refused and refused[0] == "mode":  # an API that does not serve: its reason, GPU or not
        return refused[1]
    if dry_run and config.mode == "generate":  # the wiring, on the CPU: fp32
        problem = catalog.setting_problem(
            config.framework, config.api, device, "fp32", "host", "synced", mode="generate"
        )
        return problem[1] if problem else None
    if dry_run and (config.precision not in ("fp32",) or config.timing != "synced"):
        return "a GPU mode: the dry run keeps to fp32, synced, on the CPU"
    if dry_run and config.input != "host":
        return "a GPU mode: device-resident input is not run on the CPU"
    if dry_run and config.model == "vgg16":
        # The dry run proves the wiring: the CNN and the transformer cover both input kinds, and
        # VGG16 trains on the CPU in tests/test_cli_presets.py (kabakus-2020-quick).
        return "the dry run trains one image model (the CNN): VGG16 runs on the GPU"
    problem = catalog.setting_problem(
        config.framework, config.api, device, config.precision, config.input, config.timing,
        mode=config.mode,
    )  # fmt: skip
    return problem[1] if problem else None


def inference_args(config: Config, device: str, dry_run: bool) -> list[str]:
    """An inference row: warm-up requests apart, then requests each timed alone."""
    batch = config.batch or 1
    if dry_run:
        batch, requests, warmup = min(batch, DRY_INFERENCE_BATCH), DRY_REQUESTS, 2
    else:
        requests, warmup = INFERENCE_REQUESTS.get(batch, 600), 10
    dataset = "synthetic-imdb" if config.model == "transformer" else "synthetic-mnist"
    return [
        *("--framework", config.framework, "--api", config.api, "--model", config.model),
        *("--mode", "inference", "--dataset", dataset, "--device", device),
        *("--precision", config.precision, "--batch-size", str(batch)),
        *("--requests", str(requests), "--warmup-steps", str(warmup)),
        *("--threads", "1" if dry_run else "4", "--test-samples", str(max(64, batch))),
        *("--sample-interval", "0.2", "--json", "--quiet"),
    ]


def generate_args(config: Config, device: str, dry_run: bool) -> list[str]:
    """A generation row: warm-up requests apart, then requests each timed alone."""
    batch = config.batch or 1
    size, prompt, new = config.size or "gpt2-small", GENERATE_PROMPT, GENERATE_NEW
    requests, warmup = GENERATE_REQUESTS.get(batch, 30), 5
    if dry_run:
        size, prompt, new, batch, requests, warmup = "tiny", 16, 8, min(batch, 2), 5, 1
    return [
        *("--framework", config.framework, "--api", config.api, "--model", "gpt"),
        *("--size", size, "--mode", "generate", "--dataset", "synthetic-tokens"),
        *("--device", device, "--precision", "fp32" if dry_run else config.precision),
        *("--batch-size", str(batch), "--prompt-tokens", str(prompt), "--new-tokens", str(new)),
        *("--requests", str(requests), "--warmup-steps", str(warmup)),
        *("--threads", "1" if dry_run else "4", "--test-samples", str(max(64, batch))),
        *("--train-samples", "100", "--sample-interval", "0.2", "--json", "--quiet"),
    ]


def figure_args(config: Config, device: str, dry_run: bool) -> list[str]:
    if config.mode == "inference":
        return inference_args(config, device, dry_run)
    if config.mode == "generate":
        return generate_args(config, device, dry_run)
    vgg, sequence = config.model == "vgg16", config.model == "transformer"
    gpt = config.model == "gpt"
    # Enough steps for steady windows of about a second on an H200 (the CNN's 2 ms steps): the
    # NVML energy counter moves every ~0.1 s and is not read over shorter windows, and 25 steps
    # made a weak median. The caps fit the synthetic sets (60,000 / 50,000 / 25,000 samples).
    batch, steps = (8, 3) if dry_run else ((64, 300) if vgg or sequence else (128, 360))
    warmup = "1" if dry_run else "5"
    if gpt and not dry_run:
        batch, steps, warmup = GPT_BATCH, GPT_STEPS, str(GPT_WARMUP)
    dataset = {
        "vgg16": "synthetic-cifar10",
        "transformer": "synthetic-imdb",
        "gpt": "synthetic-tokens",
    }.get(config.model, "synthetic-mnist")
    # On the CPU a sized model runs at its CI size (tiny): gpt2-small's step is minutes there.
    size = ["--size", "tiny" if dry_run else config.size] if config.size else []
    return [
        *("--framework", config.framework, "--api", config.api, "--model", config.model, *size),
        *("--dataset", dataset, "--device", device),
        *("--precision", config.precision, "--timing", config.timing, "--input", config.input),
        *("--batch-size", str(batch), "--epochs", "1", "--steps-per-epoch", str(steps)),
        *("--warmup-steps", warmup, "--threads", "1" if dry_run else "4"),
        *("--train-samples", str(int(batch * steps / 0.8) + batch), "--test-samples", "64"),
        *("--sample-interval", "0.2", "--json", "--quiet"),
    ]


def run_figure(
    config: Config, device: str, dry_run: bool, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tui_bench", "run", *figure_args(config, device, dry_run)]
    started = time.monotonic()
    status, text = _run(cmd, timeout, env)
    entry: dict[str, Any] = {"seconds": round(time.monotonic() - started, 1)}
    # --json prints the records on stdout: the first line that opens a JSON list.
    start = text.find("[\n")
    try:
        record = json.JSONDecoder().raw_decode(text[start:])[0][0] if start >= 0 else None
    except (ValueError, IndexError):
        record = None
    if record is None:
        tail = text.strip().splitlines()[-3:] if text.strip() else [f"exit {status}"]
        return {**entry, "status": "failed", "reason": " / ".join(tail)}
    metrics = record.get("metrics") or {}
    entry["metrics"] = {
        k: metrics.get(k)
        for k in (
            "step_median_s",
            "step_iqr_s",
            "samples_per_s",
            "steady_steps",
            "global_batch",
            "tokens_per_s",
            "flops_per_step",
            "achieved_tflops",
            "mfu",
            "mfu_peak",
            "mfu_nominal",
            "mfu_nominal_peak",
            "mfu_nominal_error",
            "allocator",
            "allocator_peak_mib",
            "res_peak_gpu_mem_mib",
            "res_steady_energy_j",
            "res_steady_energy_problem",
            "res_energy_source",
            "device_name",
            "framework_version",
            "setting_precision",
            "setting_timing",
            "setting_input",
            "setting_compile",
            "setting_attention",
            # an inference row's figures (docs/inference.md)
            "latency_requests",
            "latency_p50_s",
            "latency_p90_s",
            "latency_p99_s",
            "latency_max_s",
            "inference_samples_per_s",
            "first_request_s",
            "latency_note",
            # a generation row's (docs/generation.md)
            "generate_requests",
            "ttft_p50_s",
            "tpot_p50_s",
            "tpot_p99_s",
            "decode_tokens_per_s",
            "prefill_tokens_per_s",
            "decode_gbps",
            "mbu_nominal",
            "mbu_nominal_bandwidth",
            "mbu_nominal_error",
            "token_timing",
            "generation",
        )
    }
    energy, steps, batch = (
        metrics.get(k) for k in ("res_steady_energy_j", "steady_steps", "global_batch")
    )
    if energy is not None and steps and batch:
        entry["joules_per_sample"] = energy / (steps * batch)
    ok = record.get("status") == "finished"
    return {
        **entry,
        "status": "ok" if ok else "failed",
        "reason": metrics.get("res_steady_energy_problem") if ok else record.get("reason"),
        "run_id": record.get("id"),
    }


def step_figures(
    report: Report, env: dict[str, str], device: str, dry_run: bool, only: str | None,
    budget: Budget, per_run_s: float, model: str | None = None, mode: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    step: dict[str, Any] = {"step": "figures", "status": "running", "figures": []}
    report.add(step)
    configs = [
        c
        for c in planned_configs()
        if (not only or f"{c.framework}/{c.api}" == only)
        and (not model or c.model == model)
        and (not mode or c.mode == mode)
    ]
    started = time.monotonic()
    for config in configs:
        entry: dict[str, Any] = {"name": config.name, "shows": config.shows}
        if config.mode in ("inference", "generate"):
            entry.update(mode=config.mode, batch=config.batch)
        if budget.left() < 20:
            entry.update(status="skipped", reason="out of time budget")
        elif why := plan_figure(config, device, dry_run):
            entry.update(status="skipped", reason=why)
        else:
            limit = (
                max(per_run_s, GPT_RUN_S) if config.model == "gpt" and not dry_run else per_run_s
            )
            entry.update(run_figure(config, device, dry_run, env, min(limit, budget.left())))
        step["figures"].append(entry)
        step["seconds"] = time.monotonic() - started
        report.write()
    failed = [f["name"] for f in step["figures"] if f["status"] == "failed"]
    step["status"] = "failed" if failed else "ok"
    step["reason"] = f"failed: {', '.join(failed)}" if failed else None
    report.write()
    return step


def make_bundle(target: Path, python_version: str) -> int:
    """Wheels for the GPU machine (no network there): tui-bench's and its tests' dependencies
    and Keras, for that machine's Python, checked against the carry limit."""
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(target)]
    cmd += ["--only-binary=:all:", "--python-version", python_version]
    cmd += ["--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64"]
    status, text = _run([*cmd, *bundle_requirements()], 900)
    if status != 0:
        print(f"gpu_check: pip download failed: {text.strip()[-500:]}", file=sys.stderr)
        return 1
    # numpy, torch and JAX come with the GPU machine's system Python, and JAX brings scipy and
    # ml_dtypes (ruptures' and Keras' heavy dependencies: 40 MiB of the 64 MiB carry): not carried.
    for heavy in SYSTEM_WHEELS:
        for wheel in target.glob(f"{heavy}-*.whl"):
            wheel.unlink()
    size = sum(p.stat().st_size for p in target.glob("*.whl")) / 2**20
    print(f"bundle: {len(list(target.glob('*.whl')))} wheels, {size:.1f} MiB in {target}")
    if size > BUNDLE_LIMIT_MIB:
        print(f"gpu_check: bundle is over {BUNDLE_LIMIT_MIB} MiB", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="directory for report.md/report.json")
    parser.add_argument("--cpu-dry-run", action="store_true", help="every step on the CPU")
    parser.add_argument("--make-bundle", type=Path, metavar="DIR", help="download the wheels")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python")
    parser.add_argument("--bundle", type=Path, help="wheels made by --make-bundle")
    parser.add_argument("--budget-s", type=float, default=510.0)
    parser.add_argument("--pytest-limit-s", type=float, default=180.0)
    parser.add_argument("--per-run-s", type=float, default=90.0)
    parser.add_argument(
        "--only", metavar="FRAMEWORK/API", help="figures (and runtime probes) for one API only"
    )
    parser.add_argument(
        "--model",
        choices=sorted({c.model for c in planned_configs()}),
        help="figures for one model only (gpt: the gpt2-small MFU rows)",
    )
    parser.add_argument(
        "--mode",
        choices=("train", "inference", "generate"),
        help="figures of one mode only (inference: the serving rows, p50/p99 and samples/s; "
        "generate: the gpt2-small generation rows, TTFT/TPOT, decode tokens/s, MBU)",
    )
    parser.add_argument("--skip-pytest", action="store_true", help="no `pytest -m gpu` step")
    args = parser.parse_args(argv)
    if args.make_bundle:
        return make_bundle(args.make_bundle, args.python_version)
    if args.out is None:
        parser.error("--out DIR is required (or --make-bundle DIR)")
    if args.budget_s <= 0 or args.per_run_s <= 0:
        parser.error("--budget-s and --per-run-s must be positive")

    from tui_bench.engine.paths import runtimes_home

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s)
    env = {
        **os.environ,
        # Read before the data home moves into DIR: where this machine's runtimes are.
        "TUI_BENCH_RUNTIMES_DIR": str(runtimes_home()),
        "TUI_BENCH_HOME": str(out / "home"),
        "TUI_BENCH_CACHE": str(out / "cache"),
        "TUI_BENCH_CONFIG": str(out / "config.toml"),
    }
    os.environ.update({k: v for k, v in env.items() if k.startswith("TUI_BENCH_")})
    mode = "cpu-dry-run" if args.cpu_dry_run else "gpu"
    report = Report(out, {"mode": mode, "started": _now(), "budget_s": args.budget_s})

    def timed(name: str, work) -> dict[str, Any]:
        started = time.monotonic()
        try:
            result = work()
        except Exception as exc:  # a step that breaks is reported, and the next still runs
            result = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        step = {"step": name, **result, "seconds": round(time.monotonic() - started, 1)}
        report.add(step)
        return step

    device_step = timed("device", step_device)
    cuda = bool(device_step.get("details", {}).get("cuda_seen"))
    if not args.cpu_dry_run and not cuda:
        report.data["verdict"] = "no CUDA device seen: use --cpu-dry-run on a CPU machine"
        report.write()
        print(f"gpu_check: no CUDA device seen; report in {out}", file=sys.stderr)
        return 1
    timed(
        "runtimes",
        lambda: step_runtimes(out, args.bundle, args.cpu_dry_run, budget, env, args.only),
    )
    if args.skip_pytest:
        report.add({"step": "pytest", "status": "skipped", "reason": "--skip-pytest"})
    else:
        timed(
            "pytest",
            lambda: step_pytest(out, env, budget, args.pytest_limit_s, args.cpu_dry_run),
        )
    device = "cpu" if args.cpu_dry_run else "gpu"
    try:
        step_figures(
            report, env, device, args.cpu_dry_run, args.only, budget, args.per_run_s,
            args.model, args.mode,
        )  # fmt: skip
    except Exception as exc:
        report.add(
            {"step": "figures", "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        )
    failed = [s["step"] for s in report.data["steps"] if s["status"] == "failed"]
    report.data["verdict"] = f"failed: {', '.join(failed)}" if failed else "ok"
    report.data["finished"] = _now()
    report.write()
    print(f"gpu_check: {report.data['verdict']}; report in {out / 'report.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
