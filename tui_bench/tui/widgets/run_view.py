"""Everything about one run on screen: spec, progress with ETA, figures, loss plot, epoch-time
bars, fixed-range resource graphs and the worker's log. Used live and for stored runs alike."""

from __future__ import annotations

import psutil
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Collapsible, Label, Log, ProgressBar, Static

from tui_bench.engine.kinds import RunStatus
from tui_bench.engine.results import metrics
from tui_bench.engine.results.stats import quantile
from tui_bench.engine.runs.reducer import BatchView
from tui_bench.engine.spec import RunSpec
from tui_bench.tui.widgets.graphs import FixedRangeGraph
from tui_bench.tui.widgets.plots import (
    PERCENTILES,
    BarPlot,
    DecodeRatePlot,
    LatencyPlot,
    LossPlot,
    RatePlot,
    TokenTimesPlot,
)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def said(key: str, value: float | None) -> str:
    """A figure with its unit, as the metric registry shows it ("12.3 ms", "1,234 tokens/s")."""
    return metrics.get(key).quantity(value)


def latency_text(run: BatchView) -> str | None:
    """An inference run's percentiles and rate as they form (the timed requests so far, each
    timed alone), then the worker's own figures once the run has them; None before the first
    timed request. The rate is the summary's: requests ÷ their summed latency, × batch for
    samples/s."""
    done = run.summary or run.metrics
    times = run.latencies
    if done.get("latency_p50_s") is not None:
        n = int(done.get("latency_requests") or len(times))
        marks = [(name, done.get(f"latency_{name}_s")) for name, _q, _c in PERCENTILES]
        rate = done.get("inference_samples_per_s")
        so_far = ""
    elif times:
        n = len(times)
        ordered = sorted(times)
        marks = [(name, quantile(ordered, q)) for name, q, _c in PERCENTILES]
        total = sum(ordered)
        rate = run.spec.batch_size * n / total if total > 0 else None
        so_far = " so far"
    else:
        return None
    keys = [(name, metrics.get(f"latency_{name}_s"), v) for name, v in marks if v is not None]
    shown = " · ".join(f"{name} {m.text(v)}" for name, m, v in keys)  # one unit for all three
    unit = keys[0][1].shown_unit if keys else ""
    text = f"latency{so_far} {shown} {unit} over {n:,} requests of batch {run.spec.batch_size}"
    if rate:
        served = said("inference_samples_per_s", rate)
        text += f" · {rate / run.spec.batch_size:,.0f} requests/s · {served}"
    if done.get("first_request_s") is not None:
        text += f" · first request {said('first_request_s', done['first_request_s'])} (apart)"
    if done.get("latency_note"):
        text += f" · too few requests: {done['latency_note']}"
    return text


def figures_text(run: BatchView) -> str:
    """Each figure says what was timed."""
    if run.spec.mode == "inference":
        return inference_figures_text(run)
    f = run.latest_figures()
    parts = []
    verdict = run.verdict_line()  # can the numbers beside it be trusted, and why not
    if verdict:
        parts.append(verdict)
    if f.get("step_median_s") is not None:
        # pipelined timing divides windows: its steps were not each synced
        step = said("step_median_s", f["step_median_s"])
        parts.append(f"step {step} (median, steady, {run.spec.timing})")
    elif run.epoch_records:
        parts.append("no steady-state step yet (all were warm-up)")
    settings = settings_text((run.started or {}).get("settings"))
    if settings:  # what decides the number, beside it
        parts.append(settings)
    rate = run.throughput_key  # a gpt's tokens/s, samples/s for the rest
    if f.get(rate) is not None:
        parts.append(f"{said(rate, f[rate])} (steady)")
    limits = run.limits_text()  # how good the number is: FLOP/s and MFU, as they form
    if limits:
        parts.append(limits)
    if f.get("val_accuracy") is not None:
        parts.append(f"val acc {said('val_accuracy', f['val_accuracy'])}")
    if f.get("test_accuracy") is not None:
        parts.append(f"test acc {said('test_accuracy', f['test_accuracy'])}")
    if f.get("warmup_s") is not None:
        parts.append(f"warm-up {said('warmup_s', f['warmup_s'])} (apart)")
    if f.get("train_wall_s") is not None:
        parts.append(f"train {said('train_wall_s', f['train_wall_s'])} (wall, all steps)")
    parts += setup_parts(run)
    if not parts:
        return "figures appear after the first epoch (steady-state steps only)"
    return " · ".join(parts)


def inference_figures_text(run: BatchView) -> str:
    """An inference run's figures: its verdict, latency and rate, settings, limits, setup."""
    parts = [
        part
        for part in (
            run.verdict_line(),
            latency_text(run),
            settings_text((run.started or {}).get("settings")),
            run.limits_text(),
        )
        if part
    ]
    parts += setup_parts(run)
    if not parts:
        return "figures appear with the first timed requests (warm-up requests apart)"
    return " · ".join(parts)


def setup_parts(run: BatchView) -> list[str]:
    st = run.started
    if st and st.get("import_s") is not None:
        return [
            f"setup: import {st['import_s']:.1f} s, data {st.get('data_s', 0):.1f} s, "
            f"build {st.get('build_s', 0):.1f} s"
        ]
    return []


def settings_text(settings: object) -> str | None:
    """The worker's settings that decide the step time, as one phrase: precision (and an
    emulated bf16), compilation, and the attention kernel where the model has one."""
    if not isinstance(settings, dict) or not settings:
        return None
    said = [f"precision {settings.get('precision', '?')}"]
    if settings.get("bf16_note"):
        said.append(str(settings["bf16_note"]))
    if settings.get("compile"):
        said.append(f"compilation {settings['compile']}")
    if settings.get("attention"):
        said.append(f"attention {settings['attention']}")
    return ", ".join(said)


def header_text(run: BatchView) -> str:
    s = run.spec
    if run.sweep_line:
        lines = [f"sweep {run.sweep_id or ''} · {run.sweep_line}"]
        counts: dict[str, int] = {}
        for _key, reason in run.skipped:
            counts[reason] = counts.get(reason, 0) + 1
        lines += [f"skipped {n}× {reason}" for reason, n in counts.items()]
        lines.append(_settings_text(s))
        return "\n".join(lines)
    most = "≤" if (run.plan or {}).get("auto_repeats") else ""  # --repeats auto: at most
    batch = f" · run {run.run_index + 1}/{most}{run.runs_total}" if run.runs_total > 1 else ""
    return f"{_settings_text(s)}{batch}"


def _settings_text(s: RunSpec) -> str:
    """The run's label, batch and seed, and its learning rate where it trains (an inference run
    serves the initial weights: no lr decides it)."""
    lr = "" if s.mode == "inference" else f" · lr {s.lr:g}"
    return f"{s.label()} · batch {s.batch_size}{lr} · seed {s.seed}"


def status_text(run: BatchView) -> str:
    status = run.status
    if run.done and status == RunStatus.RUNNING:
        status = "ended"
    text = f"[b]{status}[/b]"
    if run.run_id:
        text += f" {run.run_id}"
    st = run.started
    if st:
        text += (
            f" · {st.get('framework', '')} {st.get('framework_version', '')} on "
            f"{st.get('device_name') or st.get('device', '')} · "
            f"threads {st.get('threads_effective', '?')} effective · "
            f"{(st.get('param_count') or 0) / 1e6:.2f} M params"
        )
    if run.reason:
        text += f" — {run.reason}"
    return text


_UNSET = object()


class RunView(Vertical):
    DEFAULT_CSS = """
    RunView { height: 1fr; }
    """

    def __init__(self, show_log: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.show_log = show_log
        self._log_lines = 0
        self._drawn: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        machine = getattr(self.app, "machine", None) or {
            "logical_cores": psutil.cpu_count() or 1,
            "ram_mib": psutil.virtual_memory().total / 2**20,
        }
        yield Static(
            "no run yet: start one on the Setup screen (F2)", id="run-header", markup=False
        )
        yield Static("", id="run-status", markup=True)
        with Horizontal(id="progress-row"):
            yield Label("epoch —", id="epoch-label")
            yield ProgressBar(total=1, show_eta=False, show_percentage=False, id="epoch-progress")
            yield Label("all   0%", id="overall-label")
            yield ProgressBar(total=1, show_eta=False, show_percentage=False, id="overall-progress")
            yield Label("ETA —", id="eta-label")
        yield Static("", id="figures", markup=False)
        with Horizontal(id="plots"):
            yield LossPlot(id="loss-plot")
            yield BarPlot("epoch time (s, wall)", id="epoch-bars")
            # An inference run has no loss or epochs: its latency histogram and request rate.
            yield LatencyPlot(id="latency-plot")
            yield RatePlot(id="rate-plot")
            # A generation run: its TPOT histogram (TTFT beside) and decode tokens/s.
            yield TokenTimesPlot(id="token-times-plot")
            yield DecodeRatePlot(id="decode-rate-plot")
        with Vertical(id="graphs"):
            yield FixedRangeGraph("CPU %", maximum=100.0 * machine["logical_cores"], id="g-cpu")
            yield FixedRangeGraph("RSS MiB", maximum=machine["ram_mib"], unit="", id="g-rss")
            yield FixedRangeGraph("GPU util", id="g-gpu-util")
            yield FixedRangeGraph("GPU mem %", id="g-gpu-mem")
            yield FixedRangeGraph("GPU W", unit="", id="g-gpu-power")
        if self.show_log:
            with Collapsible(title="worker log", id="log-pane", collapsed=True):
                yield Log(id="worker-log", max_lines=2000)

    def _changed(self, name: str, key: object) -> bool:
        """True (and remembered) when ``key`` differs from the last drawn one: widgets whose
        input did not change are not touched, so a redraw tick costs only what changed."""
        if self._drawn.get(name, _UNSET) == key:
            return False
        self._drawn[name] = key
        return True

    def show(self, run: BatchView) -> None:
        header, status = header_text(run), status_text(run)
        if self._changed("header", header):
            self.query_one("#run-header", Static).update(header)
        if self._changed("status", status):
            self.query_one("#run-status", Static).update(status)
        steps = max(run.epoch_steps or run.steps_per_epoch, 1)
        if run.epoch_steps:
            epoch_fraction = run.epoch_step / steps
        elif run.epoch_records:
            epoch_fraction = 1.0
        else:
            epoch_fraction = 0.0
        overall = run.overall_fraction()
        eta = None if run.done else run.eta_s()
        inference = run.spec.mode == "inference"
        generating = run.spec.mode == "generate"
        served = inference or generating  # counted in requests, not epochs
        progress = (
            round(epoch_fraction * 1000),
            round(overall * 1000),
            run.epoch,
            run.epochs,
            run.step if served else None,
        )
        if self._changed("progress", progress):
            self.query_one("#epoch-progress", ProgressBar).update(total=1000, progress=progress[0])
            self.query_one("#overall-progress", ProgressBar).update(
                total=1000, progress=progress[1]
            )
            # Percentages in fixed-width labels: the bars never change width.
            self.query_one("#epoch-label", Label).update(
                f"req {run.step}/{run.epoch_steps or run.steps_per_epoch}"
                if served
                else f"epoch {run.epoch or '—'}/{run.epochs} {epoch_fraction:4.0%}"
            )
            self.query_one("#overall-label", Label).update(f"all {overall:4.0%}")
        eta_text = f"ETA {fmt_duration(eta)}"
        if self._changed("eta", eta_text):
            self.query_one("#eta-label", Label).update(eta_text)
        figures = figures_text(run)
        if self._changed("figures", figures):
            self.query_one("#figures", Static).update(figures)
        if self._changed("mode", (inference, generating)):
            for plot in (LossPlot, BarPlot):
                self.query_one(plot).display = not served
            for plot in (LatencyPlot, RatePlot):
                self.query_one(plot).display = inference
            for plot in (TokenTimesPlot, DecodeRatePlot):
                self.query_one(plot).display = generating
        if generating:
            if self._changed("token-times", (run.run_id, len(run.ttfts), len(run.tpots))):
                self.query_one(TokenTimesPlot).set_times(run.ttfts, run.tpots)
                self.query_one(DecodeRatePlot).set_tpots(run.tpots, run.spec.batch_size)
        elif inference:
            if self._changed("latencies", (run.run_id, len(run.latencies))):
                self.query_one(LatencyPlot).set_latencies(run.latencies)
                self.query_one(RatePlot).set_latencies(run.latencies)
        elif self._changed("losses", (run.run_id, len(run.losses))):
            self.query_one(LossPlot).set_losses(run.losses)
        records = run.epoch_records
        if not served and self._changed("epochs", (run.run_id, len(records))):
            self.query_one(BarPlot).set_bars(
                [str(r.get("epoch")) for r in records],
                [float(r.get("wall_s") or 0) for r in records],
            )
        if self._changed("samples", (run.run_id, len(run.samples), run.spec.device)):
            self._show_samples(run)

    def _show_samples(self, run: BatchView) -> None:
        samples = run.samples
        # The sampler's last reading after the worker exited is an empty process tree: drop it.
        while samples and not samples[-1].get("rss_mib"):
            samples = samples[:-1]
        width = max(self.size.width, 80)
        recent = samples[-width:]
        self.query_one("#g-cpu", FixedRangeGraph).set_values(
            [s.get("cpu_pct", 0.0) for s in recent]
        )
        self.query_one("#g-rss", FixedRangeGraph).set_values(
            [s.get("rss_mib", 0.0) for s in recent]
        )
        gpu = run.spec.device != "cpu"
        has_gpu_data = any("gpu_util" in s for s in recent)
        if self._changed("gpu-rows", gpu):
            # A CPU run folds the three GPU graphs into one line: space matters at 80×24.
            for wid in ("#g-gpu-mem", "#g-gpu-power"):
                self.query_one(wid, FixedRangeGraph).display = gpu
            util = self.query_one("#g-gpu-util", FixedRangeGraph)
            util.label = "GPU util" if gpu else "GPU"
            if not gpu:
                util.set_message("none: CPU run")
        if not gpu:
            return
        for wid, key, maximum in (
            ("#g-gpu-util", "gpu_util", 100.0),
            ("#g-gpu-mem", "gpu_mem_pct", 100.0),
            ("#g-gpu-power", "gpu_power_w", None),
        ):
            graph = self.query_one(wid, FixedRangeGraph)
            if not has_gpu_data:
                graph.set_message("no GPU samples (NVML unavailable?)" if recent else "waiting")
                continue
            values = [s.get(key, 0.0) for s in recent]
            if maximum is None:  # watts: scale to the highest seen, rounded up to 50 W
                maximum = max(50.0, -(-max(values) // 50) * 50)
            graph.set_values(values, maximum)

    def append_log(self, text: str) -> None:
        if self.show_log and text:
            self.query_one("#worker-log", Log).write(text)

    def clear_log(self) -> None:
        if self.show_log:
            log = self.query_one("#worker-log", Log)
            log.clear()
            log.write_line("[worker log: the framework's warnings and errors appear here]")
