"""System: this machine, the framework runtimes, and the framework and hardware cards."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tui_bench.engine import catalog
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.machine import doctor, runtimes, sysinfo
from tui_bench.engine.paths import data_home
from tui_bench.engine.results import cards
from tui_bench.tui.widgets.cut_lines import CutLines
from tui_bench.tui.widgets.mode_bar import ModeBar


def system_report() -> str:
    fp = sysinfo.machine_fingerprint()
    lines = [
        f"host        {fp.get('host')}  ({fp.get('os')}, Python {fp.get('python')})",
        f"CPU         {fp.get('cpu_model')}",
        f"cores       {fp.get('physical_cores')} physical, {fp.get('logical_cores')} logical",
        f"RAM         {fp.get('ram_gib')} GiB",
    ]
    home = data_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        disk = sysinfo.disk_usage(str(home))
        lines.append(
            f"disk        {disk['free_gib']:.1f} GiB free of {disk['total_gib']:.1f} GiB ({home})"
        )
    except OSError as exc:
        lines.append(f"disk        unknown ({exc})")
    gpus = fp.get("gpus") or []
    if not gpus:
        lines.append(f"GPUs        none found (NVML: {fp.get('nvml')})")
    for gpu in gpus:
        mem = gpu.get("memory_total_mib")
        lines.append(
            f"GPU {gpu['index']}       {gpu.get('name')}, {mem / 1024:.1f} GiB"
            if mem
            else f"GPU {gpu['index']}       {gpu.get('name')}"
        )
        lines.append(
            f"            driver {gpu.get('driver')}, CUDA {gpu.get('cuda_driver')}, "
            f"compute capability {gpu.get('compute_capability')}"
        )
    lines.append("")
    lines.append("runtimes (which interpreter runs each framework/API)")
    for fw in catalog.FRAMEWORKS.values():
        for api in fw.apis:
            try:
                rt = runtimes.resolve(fw.name, api)
                where = f"✓ {rt.name}: {rt.python} ({rt.source})"
            except (TuiBenchError, OSError) as exc:  # RuntimeUnavailable, a broken config
                where = f"✗ {exc}"
            lines.append(f"  {fw.label}/{api:<10} {where}")
    lines.append("")
    lines.append(f"textual {fp.get('textual')}, tui-bench {fp.get('tui_bench')}; data in {home}")
    lines.append("framework versions are read by each run's worker and shown with the run")
    return "\n".join(lines)


def framework_card_report(refresh: bool = False) -> str:
    found = cards.framework_card(refresh=refresh)
    return "framework card (Dai & Berleant)\n\n" + cards.text(found, cards.FRAMEWORK_METRICS)


def hardware_card_report() -> str:
    found = cards.hardware_card(sysinfo.machine_fingerprint())
    return "hardware card (Dai & Berleant)\n\n" + cards.text(found, cards.HARDWARE_METRICS)


class SystemScreen(Screen):
    BINDINGS = [
        Binding("r", "refresh_info", "Refresh", id="system_refresh"),
        Binding("m", "measure_hardware", "Measure hardware", id="system_measure"),
    ]

    def compose(self) -> ComposeResult:
        yield ModeBar("system")
        with VerticalScroll():
            # runtimes' interpreters and the data home: paths cut in the middle, never wrapped
            yield CutLines("probing the machine…", id="system-info")
            yield Static("machine check: running…", id="machine-check", markup=False)
            yield Static("framework card: probing each runtime…", id="framework-card", markup=False)
            yield Static(
                "hardware card: press m to measure this machine's devices (a few seconds of "
                "matmul, convolution and batch-1 inference in the hardware probe's runtime)",
                id="hardware-card",
                markup=False,
            )
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.action_refresh_info()

    def action_refresh_info(self) -> None:
        self._probe()

    def action_measure_hardware(self) -> None:
        self.query_one("#hardware-card", Static).update("hardware card: measuring…")
        self._measure()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _probe(self) -> None:
        report: Any = system_report()
        self.app.call_from_thread(self.query_one("#system-info", CutLines).update, report)
        check = "\n" + doctor.text(doctor.check())  # what makes numbers unreliable here
        self.app.call_from_thread(self.query_one("#machine-check", Static).update, check)
        card = framework_card_report()
        self.app.call_from_thread(self.query_one("#framework-card", Static).update, card)

    @work(thread=True, exclusive=True, group="hardware", exit_on_error=False)
    def _measure(self) -> None:
        card = hardware_card_report()
        self.app.call_from_thread(self.query_one("#hardware-card", Static).update, card)
