"""Generation runs (spec mode ``generate``, docs/generation.md): the spec's fields and refusals,
the float64 reference's greedy generator (cached = recomputed), the timed loop's arithmetic and
contract checks on a fake backend, the decode cost and the bandwidth figures."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tui_bench.engine import catalog, decode_cost, flops, model_manifest
from tui_bench.engine.errors import SpecError
from tui_bench.engine.machine import bandwidth
from tui_bench.engine.results import metrics
from tui_bench.engine.spec import RunSpec


# -- the spec ------------------------------------------------------------------------------------
def test_generate_defaults_fit_the_size() -> None:
    tiny = RunSpec(model="gpt", mode="generate").validate()
    assert (tiny.prompt_tokens, tiny.new_tokens) == (64, 64)
    small = RunSpec(model="gpt", mode="generate", size="gpt2-small").validate()
    assert (small.prompt_tokens, small.new_tokens) == (512, 128)  # llama-bench's pp512 / tg128
    # One named, the other fills the context up to its default.
    assert RunSpec(model="gpt", mode="generate", prompt_tokens=100).validate().new_tokens == 28
    assert RunSpec(model="gpt", mode="generate", new_tokens=8).validate().prompt_tokens == 120
    # Recorded as resolved: the spec round-trips with the numbers that ran.
    again = RunSpec.from_dict(tiny.to_dict())
    assert (again.prompt_tokens, again.new_tokens) == (64, 64)
    # A training run resolves nothing: its key keeps the declared defaults.
    assert RunSpec(model="gpt").validate().prompt_tokens is None


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"model": "cnn"}, "mode", "'gpt' only"),
        ({"model": "gpt", "prompt_tokens": 100, "new_tokens": 64}, "new_tokens", "exceeds"),
        ({"model": "gpt", "seq_len": 16, "prompt_tokens": 16}, "new_tokens", "exceeds"),
        ({"model": "gpt", "workers": 2}, "workers", "one process"),
        ({"model": "gpt", "timing": "pipelined"}, "timing", "alone"),
    ],
)
def test_generate_refusals_name_the_field(fields: dict, field: str, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        RunSpec(mode="generate", **fields).validate()
    assert caught.value.field == field
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_generation_lengths_belong_to_generate_runs() -> None:
    with pytest.raises(SpecError, match="setting of mode 'generate'"):
        RunSpec(model="gpt", mode="inference", prompt_tokens=8).validate()


def test_an_api_that_does_not_generate_is_refused_with_the_mode() -> None:
    not_generating = [
        (fw.name, api)
        for fw in catalog.FRAMEWORKS.values()
        if not fw.unavailable
        for api in fw.apis
        if (fw.name, api) not in catalog.generating_apis()
    ]
    if not not_generating:
        pytest.skip("every API generates")
    framework, api = not_generating[0]
    with pytest.raises(SpecError) as caught:
        RunSpec(framework=framework, api=api, model="gpt", mode="generate").validate()
    assert caught.value.field == "mode"


def test_cli_refuses_a_model_that_does_not_generate_in_one_line(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tui_bench", "run", "--model", "cnn", "--mode", "generate"],
        capture_output=True,
        text=True,
        env={"TUI_BENCH_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "generate" in lines[0] and "Traceback" not in done.stderr


def test_generating_apis_come_from_the_capabilities() -> None:
    assert ("torch", "eager") in catalog.generating_apis()
    assert ("torch", "compile") in catalog.generating_apis()
    for framework, api in catalog.generating_apis():
        assert catalog.GENERATE in catalog.FRAMEWORKS[framework].capabilities_for(api).modes


# -- the reference -------------------------------------------------------------------------------
def _reference_setup(batch: int, prompt: int, seq_len: int = 128):
    from adapters import data, models, shared_init

    dims = models.gpt_dims({"model": "gpt", "size": "tiny", "seq_len": seq_len})
    weights = shared_init.gpt_weights(0, dims, shared_init.GENERATION_SCALE)
    dataset = data.load("synthetic-tokens", test_samples=16, tokens=(dims.seq_len, dims.vocab_size))
    return dims, weights, np.ascontiguousarray(dataset.x_test[:batch, :prompt])


def test_reference_cached_greedy_equals_the_recompute(adapters_on_path) -> None:
    from gpt_reference import greedy_cached, greedy_recompute

    dims, weights, prompt = _reference_setup(2, 12, seq_len=32)
    cached, cached_gaps = greedy_cached(weights, dims.heads, prompt, 6)
    again, gaps = greedy_recompute(weights, dims.heads, prompt, 6)
    np.testing.assert_array_equal(cached, again)
    np.testing.assert_allclose(cached_gaps, gaps, rtol=1e-9, atol=1e-12)


def test_generation_weights_make_tokens_depend_on_the_context(adapters_on_path) -> None:
    """Why generation serves the draw × 5: the plain draw's untrained gpt repeats one token per
    sequence (a broken cache would pass any token test); the scaled one does not."""
    from gpt_reference import greedy_cached

    from adapters import shared_init

    dims, weights, prompt = _reference_setup(4, 64)
    plain = shared_init.gpt_weights(0, dims)
    flat, _ = greedy_cached(plain, dims.heads, prompt, 12)
    assert all(len(set(row)) <= 2 for row in flat.tolist())
    varied, _ = greedy_cached(weights, dims.heads, prompt, 12)
    assert all(len(set(row)) > 4 for row in varied.tolist())


def test_agreeing_prefix_stops_at_a_near_tie(adapters_on_path) -> None:
    from gpt_reference import agreeing_prefix

    ref = np.array([[1, 2, 3, 4]])
    gaps = np.array([[0.5, 0.5, 1e-6, 0.5]])
    count, why = agreeing_prefix(ref, ref, gaps, 1e-4)
    assert count == 2 and "near-tie at token 3" in why
    count, why = agreeing_prefix(ref, ref, np.full((1, 4), 0.5), 1e-4)
    assert count == 4 and "every token" in why


# -- the timed loop, on a fake backend ------------------------------------------------------------
class FakeGenerator:
    """Greedy 'generation' by arithmetic: token t of row r is (prompt[r, -1] + t + 1) % 97, with
    a fixed cost per token from a fake clock."""

    def __init__(self, timing: str = "per-token", calls: int | None = None) -> None:
        self.timing = timing
        self.calls = calls
        self.now = 0
        self.asked: list[int] = []

    def clock(self) -> int:
        return self.now

    def sync(self) -> None:
        pass

    def prepare_generation(self, batch: int, prompt_tokens: int, new_tokens: int) -> dict:
        return {
            "path": "fake",
            "cache": "none",
            "token_timing": self.timing,
            "compile": "no",
            "weights_dtype": "float32",
            "cache_dtype": "float32",
        }

    def generate(self, prompt: np.ndarray, new_tokens: int, clock) -> np.ndarray:
        self.asked.append(new_tokens)
        out = np.empty((len(prompt), new_tokens), dtype=np.int64)
        for t in range(new_tokens):
            self.now += 10_000_000 if t == 0 else 1_000_000  # 10 ms prefill, 1 ms a token
            out[:, t] = (prompt[:, -1] + t + 1) % 97
            if self.timing == "per-token" and (self.calls is None or t < self.calls):
                clock.token(out[:, t])
        return out


def _run(backend, monkeypatch, requests: int = 4, warmup: int = 1, new_tokens: int = 5):
    from adapters import backend as backend_module
    from adapters import data, generate

    monkeypatch.setattr(generate.time, "perf_counter_ns", backend.clock)
    dataset = data.load("synthetic-tokens", test_samples=12, tokens=(32, 97))
    hyper = backend_module.Hyper("gpt", 2, 1e-3, "adam", 0.0, 0)
    events: list[tuple[str, dict]] = []
    summary = generate.run_generation(
        backend,
        dataset,
        hyper,
        prompt_tokens=8,
        new_tokens=new_tokens,
        requests=requests,
        warmup=warmup,
        emit=lambda kind, **fields: events.append((kind, fields)),
        weights="test",
    )
    return summary, events, dataset


def test_per_token_timing_gives_ttft_tpot_and_rates(adapters_on_path, monkeypatch) -> None:
    backend = FakeGenerator()
    summary, events, dataset = _run(backend, monkeypatch)
    assert summary["ttft_p50_s"] == pytest.approx(0.010)
    assert summary["e2e_p50_s"] == pytest.approx(0.014)
    assert summary["tpot_p50_s"] == pytest.approx(0.001)  # (E2E − TTFT) / (N − 1)
    assert summary["itl_p50_s"] == pytest.approx(0.001) and summary["itl_tokens"] == 4 * 4
    assert summary["prefill_tokens_per_s"] == pytest.approx(2 * 8 / 0.010)
    assert summary["decode_tokens_per_s"] == pytest.approx(2 * 4 / 0.004)
    assert summary["generate_requests"] == 4 and summary["warmup_requests"] == 1
    assert "p99 rests on 4 requests" in summary["latency_note"]
    # The first request's first row, prompt and generated ids, as the prompts were drawn.
    from adapters import serve

    first = serve.request_batches(len(dataset.x_test), 2, 0, 1)[0][0]
    assert summary["first_prompt_ids"] == dataset.x_test[first, :8].tolist()
    assert summary["first_generated_ids"] == [
        (int(dataset.x_test[first, 7]) + t + 1) % 97 for t in range(5)
    ]
    sent = [fields for kind, fields in events if kind == "requests"]
    assert sum(len(f.get("latencies", [])) for f in sent) == 4
    assert sum(len(f.get("tpot", [])) for f in sent) == 4
    assert backend.asked == [5] * 5


def test_whole_timing_times_the_prefill_as_a_one_token_generation(
    adapters_on_path, monkeypatch
) -> None:
    backend = FakeGenerator("whole")
    summary, _, _ = _run(backend, monkeypatch)
    assert backend.asked == [1, 5] * 5  # each request: the prefill alone, then the whole
    assert summary["ttft_p50_s"] == pytest.approx(0.010)
    assert summary["tpot_p50_s"] == pytest.approx(0.001)
    assert summary["itl_p50_s"] is None and summary["token_timing"] == "whole"


def test_a_generator_that_breaks_the_contract_fails_the_run(adapters_on_path, monkeypatch) -> None:
    with pytest.raises(RuntimeError, match="token clock 3 times for 5 tokens"):
        _run(FakeGenerator(calls=3), monkeypatch)
    bad = FakeGenerator()
    bad.prepare_generation = lambda *a: {"path": "x"}  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="must state"):
        _run(bad, monkeypatch)

    class Nothing:
        def sync(self) -> None:
            pass

        def clock(self) -> int:
            return 0

    with pytest.raises(RuntimeError, match="not built"):
        _run(Nothing(), monkeypatch)


def test_the_request_loop_keeps_its_frames_under_a_request_short(
    adapters_on_path, monkeypatch
) -> None:
    """TensorFlow captures the Python stack on every eager op, and CPython 3.11 scans each
    frame's line table up to where it stands: the loop's own frames under ``generate`` stay a
    few lines in (``run_generation`` alone once stood 217 entries in; adapters/worker.py)."""
    seen: list[list[tuple[str, int]]] = []

    class Probed(FakeGenerator):
        def generate(self, prompt: np.ndarray, new_tokens: int, clock) -> np.ndarray:
            frame, frames = sys._getframe(1), []
            while frame is not None:
                code = frame.f_code
                stands = sum(1 for start, _, _ in code.co_lines() if start <= frame.f_lasti)
                frames.append((code.co_filename, stands))
                frame = frame.f_back
            seen.append(frames)
            return super().generate(prompt, new_tokens, clock)

    _run(Probed(), monkeypatch)
    loop = [stands for name, stands in seen[-1] if name.endswith("adapters/generate.py")]
    assert len(loop) >= 2 and sum(loop) <= 200, seen[-1]


# -- the decode cost and the bandwidth ------------------------------------------------------------
def test_decode_bytes_and_prefill_flops_of_gpt2_small() -> None:
    dims = model_manifest.gpt_dims("gpt2-small")
    # every parameter but 1,023 of the position table's rows, 4 bytes each
    assert decode_cost.weight_bytes(dims, "fp32") == (124_439_808 - 1023 * 768) * 4
    assert decode_cost.weight_bytes(dims, "bf16") * 2 == decode_cost.weight_bytes(dims, "fp32")
    # k and v, 12 layers, batch 8, 640 positions, d 768, bf16
    assert decode_cost.cache_bytes(dims, 8, 512, 128, "bf16") == 2 * 12 * 8 * 640 * 768 * 2
    # prefill of P: the forward at S = P, less the head on P − 1 positions
    p = 512
    per_token_fwd = 12 * (24 * 768**2 + 4 * p * 768) + 2 * 768 * 50257
    expected = p * per_token_fwd - (p - 1) * 2 * 768 * 50257
    assert decode_cost.prefill_flops(dims, 1, p) == expected
    assert flops.gpt_count(dims).forward_per_sample == 1024 * 284_812_800


def test_nominal_bandwidth_names_its_source() -> None:
    h200 = bandwidth.nominal("gpu", "NVIDIA H200")
    assert h200 is not None and h200.gbps == 4800 and "H200 datasheet" in h200.label
    assert bandwidth.nominal("gpu", "NVIDIA H100 80GB HBM3").gbps == 3350
    assert bandwidth.nominal("gpu", "NVIDIA A100-SXM4-80GB").gbps == 2039
    assert bandwidth.nominal("cpu", "cpu") is None
    assert bandwidth.nominal("gpu", "Some New GPU") is None


def test_mbu_above_one_is_never_a_number() -> None:
    bw = bandwidth.Bandwidth(10.0, "measured", "test")
    assert bandwidth.utilization(5e9, 1.0, bw) == (0.5, None)
    mbu, why = bandwidth.utilization(50e9, 1.0, bw)
    assert mbu is None and "above 1" in why


@pytest.mark.parametrize(
    "content", ["", "{", "[]", '{"k": 1}', json.dumps({"x": {"gbps": "fast"}}), "\x00\xff"]
)
def test_a_damaged_bandwidth_cache_is_measured_again(tmp_path, monkeypatch, content) -> None:
    monkeypatch.setenv("TUI_BENCH_CACHE", str(tmp_path))
    bandwidth.cache_path().parent.mkdir(parents=True, exist_ok=True)
    bandwidth.cache_path().write_bytes(content.encode("utf-8", "surrogateescape"))
    monkeypatch.setattr(bandwidth, "probe", lambda threads: {"copy_gbps": 12.5, "triad_gbps": 11.0})
    found = bandwidth.measured("cpu", 1)
    assert found is not None and found.gbps == 12.5 and found.kind == "measured"
    assert bandwidth.cached("cpu", 1) == found  # stored, read back


def test_the_probe_measures_something(tmp_path) -> None:
    result = bandwidth.probe(1, mib=8, repeats=1)
    assert result["copy_gbps"] > 0 and result["triad_gbps"] > 0


def test_a_generate_run_reads_its_own_figures_for_step_and_samples() -> None:
    assert metrics.in_mode("step_median_s", "generate") == "tpot_p50_s"
    assert metrics.in_mode("samples_per_s", "generate") == "decode_tokens_per_s"
    assert metrics.in_mode("step_median_s", "inference") == "latency_p50_s"
    assert metrics.compared_for(["generate"]) == "tpot_p50_s"


# -- every API that generates: the reference's tokens --------------------------------------------
# Near-tie tolerance: where the float64 reference's top two logits lie closer than this, a float32
# framework may rightly pick either, and the comparison stops there (saying so). float32 logits of
# the tiny gpt differ from float64 by ~1e-5 here; 1e-3 leaves a wide margin.
NEAR_TIE = 1e-3
GENERATE_TINY = {
    "model": "gpt",
    "mode": "generate",
    "batch_size": 2,
    "requests": 3,
    "warmup_steps": 1,
    "prompt_tokens": 32,
    "new_tokens": 24,
    "test_samples": 16,
}


def reference_tokens(fields: dict, seed: int = 0) -> tuple[list[int], list[int], np.ndarray]:
    """The first request's first prompt (the loop's ``request_batches``), its float64 greedy
    tokens from the generation weights and each step's top-two gap."""
    from gpt_reference import greedy_cached

    from adapters import data, models, serve, shared_init

    dims = models.gpt_dims({"model": "gpt", "size": "tiny"})
    dataset = data.load(
        "synthetic-tokens",
        test_samples=fields["test_samples"],
        tokens=(dims.seq_len, dims.vocab_size),
    )
    first = serve.request_batches(len(dataset.x_test), fields["batch_size"], seed, 1)[0]
    prompt = dataset.x_test[first[:1], : fields["prompt_tokens"]]
    weights = shared_init.gpt_weights(seed, dims, shared_init.GENERATION_SCALE)
    ids, gaps = greedy_cached(weights, dims.heads, prompt, fields["new_tokens"])
    return prompt[0].tolist(), ids[0].tolist(), gaps


# The APIs whose generation is held to the same reference in-process, by their package's own
# test (the cache against a recompute too): one API of each such package runs through the worker
# below (torch eager, TF graph, Keras on TensorFlow), the loop and the record being the package's
# and the worker's, not the API's. MXNet's, Theano's and JAX's paths meet the reference only here.
# Through the worker as well, these six cost 62 s of a fresh machine's suite.
REFERENCE_IN_PROCESS = {
    ("torch", "compile"): "tests/test_torch_generation.py",
    ("tensorflow", "eager"): "tests/test_tensorflow_generation.py",
    ("tensorflow", "keras"): "tests/test_tensorflow_generation.py",
    ("tensorflow", "xla"): "tests/test_tensorflow_generation.py",
    ("keras", "jax"): "tests/test_keras_generation.py",
    ("keras", "torch"): "tests/test_keras_generation.py",
}


def test_every_generating_api_meets_the_reference_here_or_in_its_package() -> None:
    from test_keras_generation import APIS as KERAS_APIS
    from test_tensorflow_generation import APIS as TF_APIS

    in_process = {("tensorflow", a) for a in TF_APIS}
    in_process |= {("keras", getattr(a, "values", (a,))[0]) for a in KERAS_APIS}
    in_process |= {("torch", "eager"), ("torch", "compile")}  # test_torch_generation's two
    assert set(REFERENCE_IN_PROCESS) <= in_process
    for framework in {f for f, _ in REFERENCE_IN_PROCESS}:  # one of its APIs through the worker
        assert any(f == framework for f, _ in THROUGH_THE_WORKER), framework


THROUGH_THE_WORKER = [a for a in catalog.generating_apis() if a not in REFERENCE_IN_PROCESS]


@pytest.mark.slow
@pytest.mark.parametrize(("framework", "api"), THROUGH_THE_WORKER)
def test_every_generating_api_gives_the_reference_tokens(
    bench_env,  # noqa: F811 (the fixture imported below)
    adapters_on_path,
    framework: str,
    api: str,
) -> None:
    from gpt_reference import agreeing_prefix

    result = run(bench_env, framework, api, **GENERATE_TINY)
    summary = result.summary
    prompt, reference, gaps = reference_tokens(GENERATE_TINY)
    assert summary["first_prompt_ids"] == prompt  # the same prompt bytes
    generated = np.array([summary["first_generated_ids"]])
    count, why = agreeing_prefix(generated, np.array([reference]), gaps, NEAR_TIE)
    print(f"{framework}/{api}: {why}")
    assert count >= 8, why  # a near-tie this early would make the test say little
    assert generated[0, :count].tolist() == reference[:count], why
    facts = summary["generation"]
    assert facts["token_timing"] in ("per-token", "whole") and facts["cache"]
    assert summary["generate_requests"] == 3 and summary["tpot_p50_s"] > 0
    assert summary["decode_tokens_per_s"] > 0 and summary["ttft_p50_s"] > 0


from test_frameworks import bench_env, run  # noqa: E402, F401 (fixture)


# -- a generation record in the views --------------------------------------------------------------
def _generated(index: int, summary: dict, **spec) -> dict:
    from tests.histories import record

    made = RunSpec(model="gpt", mode="generate", threads=1, seed=index, **spec)
    return record(index, 10.0, spec=made.to_dict(), label=made.label(), metrics=summary)


def test_a_generation_run_reads_as_one_sentence_and_its_own_figures(adapters_on_path) -> None:
    from adapters.generate import generation_stats
    from tests.histories import as_runs
    from tui_bench.engine.results import identity, latency

    stats = generation_stats([0.002] * 60, [0.065] * 60, [], 1, 64, 64)
    summary = {**stats, "token_timing": "per-token", "decode_gbps": 1.5, "mbu": 0.3}
    (run,) = as_runs([_generated(1, summary, batch_size=1)])
    text = latency.line(run)
    assert text.startswith("TTFT p50 2.00 · p90 2.00 · p99 2.00 ms; TPOT p50 1.000")
    assert "over 60 requests of batch 1 (P 64 + N 64 tokens, per-token)" in text
    assert "1000 decode tokens/s" in text and "MBU % 30.0" in text
    assert "p99 rests on 60 requests" in text
    assert run.figure("step_median_s") == pytest.approx(0.001)  # TPOT p50 stands for the step
    assert run.figure("samples_per_s") == pytest.approx(1000.0)
    # P and N decide a generation configuration; they split nothing in a training one.
    other = as_runs([_generated(2, summary, batch_size=1, new_tokens=32)])[0]
    groups = identity.group_by_configuration([run, other])
    assert len(groups) == 2


def test_history_summaries_keep_a_generation_runs_step_and_rate(tmp_path, monkeypatch) -> None:
    """History's list reads summaries (the cache), not records: a generation run's TPOT p50 and
    decode tokens/s must be in them, or its row shows '—'."""
    from tests.histories import fill

    monkeypatch.setenv("TUI_BENCH_HOME", str(tmp_path))
    summary = {"tpot_p50_s": 0.0035, "decode_tokens_per_s": 259.0, "ttft_p50_s": 0.002}
    history = fill([_generated(1, summary, batch_size=1)])
    (run,) = history.summaries()
    assert run.figure("step_median_s") == 0.0035
    assert run.figure("samples_per_s") == 259.0


def test_the_reducer_keeps_a_generation_runs_ttft_and_tpot() -> None:
    from tui_bench.engine.runs.reducer import BatchView

    view = BatchView()
    view.apply({"type": "record", "record": {"id": "one"}})
    view.apply({"type": "requests", "done": 3, "latencies": [0.2, 0.3], "ttft": [0.01, 0.02],
                "tpot": [0.003, 0.004], "t": 1.0})  # fmt: skip
    assert view.latencies == [0.2, 0.3] and view.ttfts == [0.01, 0.02]
    assert view.tpots == [0.003, 0.004]
    view.apply({"type": "record", "record": {"id": "two"}})
    assert view.ttfts == [] and view.tpots == []  # a new run starts empty
