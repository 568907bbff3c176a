"""Setup: choose what to run. Every option says whether it can run here, and why not."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.types import NoActiveAppError
from textual.widgets import Button, Footer, Input, Label, OptionList, Select, Static
from textual.widgets.select import InvalidSelectValueError

from tui_bench.engine import catalog
from tui_bench.engine.errors import TuiBenchError
from tui_bench.engine.machine import runtimes
from tui_bench.engine.machine.sampler import Nvml
from tui_bench.engine.results import auto_repeats
from tui_bench.engine.spec import (
    GPT_FIELDS,
    SIZED_MODEL,
    DeclaredField,
    RunSpec,
    SpecError,
    declared_fields,
    model_default_text,
)
from tui_bench.tui.keys import key_labels
from tui_bench.tui.messages import PresetRequested, StartRequested, SweepRequested
from tui_bench.tui.presets_io import default_preset_path, save_preset, threads_sweep
from tui_bench.tui.screens.dialogs import PresetPickerScreen, PromptScreen
from tui_bench.tui.widgets.mode_bar import ModeBar

SWEEP = "sweep"
# The Setup form's numbers and choices come from RunSpec's declaration, like the CLI flags: every
# declared number except threads (a choice of this machine's core counts, or a sweep), and the
# data-parallel scaling rule beside the workers count, and the gpt's named size (unset: the gpt's
# default, and no size for the other models) beside its dimensions.
DECLARED = {d.name: d for d in declared_fields()}
NUMBER_FIELDS = {
    name: d for name, d in DECLARED.items() if d.type in (int, float) and name != "threads"
}
CHOICE_FIELDS = {name: DECLARED[name] for name in ("mode", "scaling", "size")}
# Fields that mean something for one choice of another field only: shown for it alone, and
# put back to their declared default when hidden (a hidden field never decides a spec). Which
# mode reads a field is its declaration's (``spec_field(modes=…)``: epochs, lr, dropout… train,
# requests serve); the gpt's dimensions belong to the gpt.
SHOWN_ONLY_FOR = {name: ("model", SIZED_MODEL) for name in GPT_FIELDS}
# Every field of the form that some choice hides: by the model, or by the mode its declaration
# names.
HIDEABLE = [
    name
    for name in (*NUMBER_FIELDS, *CHOICE_FIELDS)
    if name in SHOWN_ONLY_FOR or DECLARED[name].modes is not None
]
# Names longer than the form's label column, abbreviated; every other label is the field's name.
SHORT_LABELS = {"steps_per_epoch": "steps/epoch", "target_accuracy": "target acc."}
UNSET = "unset"  # what an optional number's empty input shows
# repeats may also say "auto" (`tui-bench run --repeats auto`): until the median is known, with
# the CLI's default target and maximum
AUTO = "auto"
AUTO_REPEATS = {
    "max": auto_repeats.DEFAULT_MAX_REPEATS,
    "target_ci": auto_repeats.DEFAULT_TARGET_CI,
}


def field_label(name: str) -> str:
    return SHORT_LABELS.get(name, name.replace("_", " "))


def field_tooltip(declared: DeclaredField) -> str:
    """The declaration's help, range and default, shown on hover."""
    parts = [f"{declared.name}: {declared.help}"]
    if declared.type is int:
        parts.append(f"{int(declared.low)} to {int(declared.high)}")  # type: ignore[arg-type]
    elif declared.type is float:
        lo, hi = ("(" if declared.low_open else "["), (")" if declared.high_open else "]")
        parts.append(f"in {lo}{declared.low}, {declared.high}{hi}")
    elif declared.choices is not None:
        parts.append(", ".join(declared.choices))
    default = model_default_text(declared.name) or declared.default  # 'batch: 128, gpt 8'
    parts.append(f"default {UNSET if default is None else default}")
    if declared.name == "repeats":
        parts.append(
            f"{AUTO}: until the median's 95 % CI is within "
            f"±{100 * AUTO_REPEATS['target_ci']:g} %, at most {AUTO_REPEATS['max']} runs"
        )
    return " · ".join(parts)


def parse_number(declared: DeclaredField, text: str) -> Any:
    """A typed number, None for an optional field left empty, or the text itself when it is not
    a number: RunSpec.validate() then refuses it with the declaration's own one-line message."""
    text = text.strip()
    if not text and declared.optional:
        return None
    try:
        return declared.type(text)
    except ValueError:
        return text


@dataclass
class SetupChoices:
    """Which framework/API pairs and GPUs the Setup form can offer, probed off the UI thread."""

    runtimes: dict[tuple[str, str], str | None]  # (framework, api) -> None or why not (with fix)
    gpus: list[dict[str, Any]]
    probed: bool = True


def probe_choices() -> SetupChoices:
    found: dict[tuple[str, str], str | None] = {}
    for fw in catalog.FRAMEWORKS.values():
        for api in fw.apis:
            try:
                runtime = runtimes.resolve(fw.name, api)
                found[(fw.name, api)] = None if runtime else "no runtime"
            except (TuiBenchError, OSError) as exc:  # RuntimeUnavailable, a broken config file
                found[(fw.name, api)] = str(exc)
    return SetupChoices(found, Nvml().devices())


FORM_FIELDS = {
    "framework",
    "api",
    "model",
    "dataset",
    "device",
    "threads",
    *NUMBER_FIELDS,
    *CHOICE_FIELDS,
}


def field_applies(name: str, values: dict[str, Any]) -> bool:
    """Whether the form shows (and reads) field ``name`` with these values: a run of the chosen
    mode reads it (its declaration's ``modes``), and it belongs to the chosen model
    (``SHOWN_ONLY_FOR``)."""
    declared = DECLARED.get(name)
    mode = values.get("mode") or RunSpec.mode
    if declared is not None and not declared.used_in(str(mode)):
        return False
    if name not in SHOWN_ONLY_FOR:
        return True
    other, value = SHOWN_ONLY_FOR[name]
    return values.get(other) == value


def fields_beyond_form(spec: RunSpec) -> dict[str, Any]:
    """The fields of a loaded spec that the form does not show and that differ from the defaults
    (a preset's warm-up steps, optimizer, target accuracy…): kept, and listed under the form."""
    defaults = RunSpec().to_dict()
    return {
        k: v for k, v in spec.to_dict().items() if k not in FORM_FIELDS and v != defaults.get(k)
    }


def form_auto_repeats(values: dict[str, Any]) -> dict[str, Any] | None:
    """The ``auto_repeats`` of a batch when the repeats field says "auto", else None."""
    if str(values.get("repeats", "")).strip().lower() == AUTO:
        return dict(AUTO_REPEATS)
    return None


def parse_form(
    values: dict[str, Any], sweep_counts: list[int], base: RunSpec | None = None
) -> tuple[RunSpec, list[int] | None]:
    """Form values -> (validated spec, thread counts of a sweep or None). Raises SpecError.
    Fields the form does not show come from ``base`` (the loaded preset or run), else defaults."""
    data: dict[str, Any] = {}
    if base is not None:
        data.update((k, v) for k, v in base.to_dict().items() if k not in FORM_FIELDS)
    for name in ("framework", "api", "model", "dataset", "device"):
        value = values.get(name)
        if value is None or value is Select.BLANK:
            raise SpecError(name, f"choose a {name}")
        data[name] = value
    sweep = None
    threads = values.get("threads")
    if threads == SWEEP:
        sweep = sweep_counts
        data["threads"] = sweep_counts[-1]
    else:
        data["threads"] = int(threads)
    for name, declared in NUMBER_FIELDS.items():
        value = parse_number(declared, str(values.get(name, "")))
        if value is not None:
            data[name] = value
    if form_auto_repeats(values) is not None:
        data["repeats"] = 1  # each run is one repeat; the batch decides how many
    for name, declared in CHOICE_FIELDS.items():
        if name not in values:
            continue  # a choice the values do not carry: the spec's default
        value = values.get(name)
        if value is None or value is Select.BLANK or value is Select.NULL:
            if declared.optional:
                continue  # unset: the spec's own default
            raise SpecError(name, f"choose a {name}")
        data[name] = value
    return RunSpec.from_dict(data), sweep


def sweep_thread_counts(logical: int) -> list[int]:
    """1, 2, 4, … and all cores."""
    counts, n = [], 1
    while n < logical:
        counts.append(n)
        n *= 2
    counts.append(logical)
    return counts


def _short_note(note: str) -> str:
    """'not downloaded: 11.6 MB to download' -> ' ↓11.6 MB' (a download of that size): option
    labels fit 80 columns; the whole note is shown under the form."""
    if note.startswith("not downloaded"):
        return " ↓" + note.split(": ", 1)[-1].removesuffix(" to download")
    return " ✗ unverified" if note.startswith("present") else " ✗ cannot check"


def replace_options(select: Select, options: list[tuple[str, Any]], value: Any) -> None:
    """New option labels, same value if still offered. Select does not redraw its current label
    when the value is unchanged, so force the value's watcher."""
    select.set_options(options)
    if value in [v for _, v in options]:
        select.value = value
    select.mutate_reactive(Select.value)


def disable_unavailable(select: Select) -> None:
    """Frameworks no runtime can exist for (CNTK) stay listed, with their reason, but cannot be
    picked: their options in the drop-down are disabled."""
    overlay = select.query_one(OptionList)
    # The framework options are built in catalog order, one per framework.
    for index, fw in enumerate(catalog.FRAMEWORKS.values()):
        if fw.unavailable and index < overlay.option_count:
            overlay.disable_option_at_index(index)


class SetupScreen(Screen):
    @dataclass
    class Probed(Message):
        """What the installation can run, probed off the UI thread."""

        choices: SetupChoices

    @dataclass
    class MachineChecked(Message):
        """The machine check's one line (``doctor``), taken off the UI thread (~0.5 s)."""

        banner: str
        failing: bool

    @dataclass
    class DatasetChecked(Message):
        """A real dataset's state in the cache: the picker's note, and why a run would fail."""

        name: str
        note: str
        problem: str | None

    BINDINGS = [
        Binding("ctrl+r", "start", "Start", id="start_run"),
        Binding("f7", "load_preset", "Load preset", id="load_preset"),
        Binding("f8", "save_preset", "Save preset", id="save_preset"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.available: SetupChoices | None = None
        try:
            machine = getattr(self.app, "machine", None) or {}
        except NoActiveAppError:  # constructed outside a running app
            machine = {}
        self.logical = int(machine.get("logical_cores") or psutil.cpu_count() or 1)
        self.problem: str | None = "checking what this installation can run…"
        self._revalidate_pending = False
        # Real dataset name -> (choice note, problem or None), checked off the UI thread (hashing).
        self.dataset_checks: dict[str, tuple[str, str | None]] = {}
        self._dataset_checking: set[str] = set()
        self.loaded: RunSpec | None = None  # the last preset or run put into the form

    def _catalog_selects(self) -> list[tuple[str, str, list[tuple[str, str]], str]]:
        """The selects whose choices come from the catalog, declared once: (id, label, options,
        initial value). Device choices are refined once the runtimes are known."""
        d = RunSpec()
        fw = catalog.FRAMEWORKS.get(d.framework) or next(iter(catalog.FRAMEWORKS.values()))
        return [
            (
                "framework",
                "framework",
                [
                    (f"{f.label} ✗ {f.unavailable}" if f.unavailable else f.label, f.name)
                    for f in catalog.FRAMEWORKS.values()
                ],
                fw.name,
            ),
            (
                "api",
                "API",
                [(fw.api_labels.get(a, a), a) for a in fw.apis],
                d.api if d.api in fw.apis else fw.apis[0],
            ),
            ("model", "model", [(m.label, m.name) for m in catalog.MODELS.values()], d.model),
            (
                "dataset",
                "dataset",
                [(x.name, x.name) for x in catalog.DATASETS.values()],
                d.dataset,
            ),
            ("device", "device", [("CPU", "cpu")], "cpu"),
            ("threads", "threads", self._thread_options(), str(min(d.threads, self.logical))),
        ]

    def compose(self) -> ComposeResult:
        yield ModeBar("setup")
        with VerticalScroll(id="setup-form"):
            with Grid(id="setup-grid"):
                for select_id, label, options, value in self._catalog_selects():
                    yield Label(label)
                    yield Select(
                        options, value=value, allow_blank=False, compact=True, id=select_id
                    )
                # Train or serve: beside what runs, before the numbers it decides between.
                yield from self._choice("mode")
                for name, declared in NUMBER_FIELDS.items():
                    tooltip = field_tooltip(declared)
                    yield Label(field_label(name), id=f"label-{name}").with_tooltip(tooltip)
                    yield Input(
                        "" if declared.default is None else str(declared.default),
                        placeholder=model_default_text(name)
                        or (UNSET if declared.optional else str(declared.default)),
                        compact=True,
                        tooltip=tooltip,
                        id=name,
                    )
                for name in CHOICE_FIELDS:
                    if name != "mode":
                        yield from self._choice(name)
            yield Static("", id="option-notes", markup=False)
        with Vertical(id="setup-bottom"):
            # what `doctor` finds, before a run: a loaded box makes every number noisy
            yield Static("machine: checking…", id="machine-banner", markup=False)
            yield Static("", id="setup-problem", markup=False)
            with Horizontal(id="setup-buttons"):
                keys = key_labels(self)
                yield Button(
                    f"Start ({keys.label('start_run')})",
                    variant="success",
                    id="start",
                    disabled=True,
                )
                yield Button(f"Load ({keys.label('load_preset')})", id="load")
                yield Button(f"Save ({keys.label('save_preset')})", id="save")
        yield Footer(compact=True, show_command_palette=False)

    def _choice(self, name: str) -> ComposeResult:
        declared = CHOICE_FIELDS[name]
        tooltip = field_tooltip(declared)
        yield Label(field_label(name), id=f"label-{name}").with_tooltip(tooltip)
        select = Select(
            [(choice, choice) for choice in declared.choices or ()],
            value=Select.NULL if declared.default is None else declared.default,
            allow_blank=declared.optional,
            prompt=UNSET,
            compact=True,
            id=name,
        )
        select.tooltip = tooltip
        yield select

    def _show_applicable(self, values: dict[str, Any]) -> None:
        """Hide the fields the chosen model and mode have no use for (``field_applies``): the
        gpt's size for other models, the request count for training, the epochs, learning
        rate, dropout… for inference. A hidden field goes back to its default, so nothing
        unseen can decide the spec or block Start."""
        for name in HIDEABLE:
            shown = field_applies(name, values)
            for widget in self.query(f"#label-{name}, #{name}"):
                widget.display = shown
            if shown:
                continue
            declared = DECLARED[name]
            with self.prevent(Input.Changed, Select.Changed):
                if name in CHOICE_FIELDS:
                    select = self.query_one(f"#{name}", Select)
                    default = Select.NULL if declared.default is None else declared.default
                    if select.value != default:
                        select.value = default
                else:
                    field = self.query_one(f"#{name}", Input)
                    default = "" if declared.default is None else str(declared.default)
                    if field.value != default:
                        field.value = default

    def _thread_options(self) -> list[tuple[str, str]]:
        counts = sweep_thread_counts(self.logical)
        options = [(str(n), str(n)) for n in range(1, self.logical + 1)]
        options.append((f"sweep {','.join(map(str, counts))}", SWEEP))
        return options

    def on_mount(self) -> None:
        self._show_applicable(self.form_values())
        self._show_problem()
        disable_unavailable(self.query_one("#framework", Select))
        self.call_after_refresh(self.probe)

    @work(thread=True, exclusive=True, group="probe", exit_on_error=False)
    def probe(self) -> None:
        self.post_message(self.Probed(probe_choices()))

    @on(Probed)
    def _probed(self, message: Probed) -> None:
        message.stop()
        self.available = message.choices
        self._refresh_options()
        self.revalidate()
        # After the runtime probe, not beside it: engine.datasets imports urllib (ssl, email),
        # which would compete with the first frames for the GIL.
        self.check_datasets()
        self.check_machine()

    @work(thread=True, exclusive=True, group="machine-check", exit_on_error=False)
    def check_machine(self) -> None:
        from tui_bench.engine.machine import doctor

        report = doctor.check()
        self.post_message(self.MachineChecked(report.banner(), bool(report.failures)))

    @on(MachineChecked)
    def _machine_checked(self, message: MachineChecked) -> None:
        message.stop()
        system = key_labels(self).label("show_system")
        banner = self.query_one("#machine-banner", Static)
        ok = message.banner == "machine: ok"
        banner.update(message.banner if ok else f"{message.banner} — {system} System")
        banner.set_class(message.failing, "failing")
        banner.set_class(not ok and not message.failing, "warning")

    def on_screen_resume(self) -> None:
        if self.available is not None:
            self.check_machine()  # the load has changed since: a run just ended, for one
        # Files may have been downloaded or imported meanwhile (`tui-bench data …`): check again.
        if self.dataset_checks:
            self.dataset_checks.clear()
            self.check_datasets()

    def check_datasets(self, names: list[str] | None = None) -> None:
        from tui_bench.engine.datasets import REGISTRY

        todo = [n for n in (names or list(REGISTRY)) if n not in self._dataset_checking]
        if todo:
            self._dataset_checking.update(todo)
            self._check_datasets(todo)

    @work(thread=True, group="dataset-check", exit_on_error=False)
    def _check_datasets(self, names: list[str]) -> None:
        """What picking each real dataset means now: present (verified) or a download, with its
        size, and why a run could not start. Off the UI thread: a new file is hashed (~1 s)."""
        from tui_bench.engine import datasets

        for name in names:
            try:
                note = datasets.choice_note(name)
                problem = datasets.problem(RunSpec(dataset=name))
            except (TuiBenchError, OSError) as exc:  # an unreadable cache: one line, app stays up
                note, problem = f"cannot check: {exc}", f"dataset '{name}': {exc}"
            self.post_message(self.DatasetChecked(name, note, problem))

    @on(DatasetChecked)
    def _dataset_checked(self, message: DatasetChecked) -> None:
        message.stop()
        name, note, problem = message.name, message.note, message.problem
        self._dataset_checking.discard(name)
        self.dataset_checks[name] = (note, problem)
        select = self.query_one("#dataset", Select)
        options = []
        for x in catalog.DATASETS.values():
            label = x.name
            if x.name in self.dataset_checks:
                ok = self.dataset_checks[x.name][1] is None
                label += " ✓" if ok else _short_note(self.dataset_checks[x.name][0])
            options.append((label, x.name))
        with self.prevent(Select.Changed):
            replace_options(select, options, select.value)
        self.revalidate()

    # -- options and availability --------------------------------------------------------------
    def _refresh_options(self) -> None:
        """Option labels carry their availability: '✓' or '✗ why'."""
        avail = self.available
        if avail is None:
            return
        fw_select = self.query_one("#framework", Select)
        current_fw = fw_select.value
        options = []
        for fw in catalog.FRAMEWORKS.values():
            ok = any(avail.runtimes.get((fw.name, a)) is None for a in fw.apis)
            mark = "✓" if ok else f"✗ {fw.unavailable}" if fw.unavailable else "✗ not installed"
            options.append((f"{fw.label} {mark}", fw.name))
        with self.prevent(Select.Changed):
            replace_options(fw_select, options, current_fw)
        disable_unavailable(fw_select)
        self._set_api_options(str(current_fw), keep=self.query_one("#api", Select).value)
        device = self.query_one("#device", Select)
        current = device.value
        dev_options = [("CPU ✓", "cpu")] + [
            (f"GPU {g['index']}: {g.get('name')} ✓", f"gpu:{g['index']}") for g in avail.gpus
        ]
        if not avail.gpus:
            dev_options.append(("GPU ✗ none found (NVML)", "gpu:none"))
        with self.prevent(Select.Changed):
            replace_options(device, dev_options, current)

    def _set_api_options(self, framework: str, keep: Any = None) -> None:
        fw = catalog.FRAMEWORKS[framework]
        avail = self.available
        options = []
        for api in fw.apis:
            why = avail.runtimes.get((framework, api)) if avail else None
            mark = "" if avail is None else (" ✓" if why is None else " ✗")
            options.append((f"{fw.api_labels.get(api, api)}{mark}", api))
        api_select = self.query_one("#api", Select)
        with self.prevent(Select.Changed):
            replace_options(api_select, options, keep)

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "framework" and event.value is not Select.BLANK:
            self._set_api_options(str(event.value), keep=self.query_one("#api", Select).value)
        self.revalidate()

    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        self.revalidate()

    def form_values(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for select in self.query(Select):
            values[select.id] = select.value
        for field in self.query(Input):
            values[field.id] = field.value
        return values

    def current(self) -> tuple[RunSpec, list[int] | None]:
        """The form as a validated spec (raises SpecError)."""
        values = self.form_values()
        if values.get("device") == "gpu:none":
            raise SpecError("device", "no GPU was found (NVML reports none); choose CPU")
        return parse_form(values, sweep_thread_counts(self.logical), self.loaded)

    def revalidate(self) -> None:
        """Re-check the form once per refresh, however many fields changed meanwhile."""
        if not self._revalidate_pending:
            self._revalidate_pending = True
            self.call_after_refresh(self._revalidate_now)

    def _revalidate_now(self) -> None:
        """Field errors and impossible combinations (spec) and missing runtimes, on screen."""
        self._revalidate_pending = False
        self._show_applicable(self.form_values())
        notes = []
        try:
            spec, sweep = self.current()
            problem = None
        except SpecError as exc:
            spec, sweep, problem = None, None, f"{exc.field}: {exc}"
        values = self.form_values()
        fw_name, api = str(values.get("framework")), str(values.get("api"))
        if self.available is None:
            problem = problem or "checking what this installation can run…"
        else:
            why = self.available.runtimes.get((fw_name, api))
            if why:
                problem = problem or f"runtime: {why}"
        model = catalog.MODELS.get(str(values.get("model")))
        dataset = catalog.DATASETS.get(str(values.get("dataset")))
        if model:
            notes.append(f"model: {model.description}")
        if dataset:
            if dataset.synthetic:
                source = "synthetic, always available"
            elif dataset.name in self.dataset_checks:
                source, data_problem = self.dataset_checks[dataset.name]
                problem = problem or data_problem
            else:
                source = "checking the cache…"
                problem = problem or f"checking dataset '{dataset.name}' in the cache…"
                self.check_datasets([dataset.name])
            notes.append(f"dataset: {dataset.description} — {source}")
        if sweep:
            notes.append(
                f"sweep: one run per thread count {sweep} × repeats, interleaved; "
                "resumable with tui-bench run --resume"
            )
        if form_auto_repeats(values) is not None:
            notes.append(
                f"repeats: auto — until the median's 95 % CI is within "
                f"±{100 * AUTO_REPEATS['target_ci']:g} %, at most {AUTO_REPEATS['max']} runs "
                "(tui-bench run --max-repeats/--target-ci for others)"
            )
        beyond = fields_beyond_form(self.loaded) if self.loaded is not None else {}
        if beyond:
            notes.append(
                "also from the loaded preset/run: "
                + ", ".join(f"{k} = {v}" for k, v in beyond.items())
            )
        if (
            spec is not None
            and spec.mode == "train"  # an inference run's length is its requests
            and spec.steps_per_epoch is None
            and spec.train_samples is None
        ):
            notes.append("tip: set steps/epoch or train samples for a quick run")
        self.query_one("#option-notes", Static).update("\n".join(notes))
        self.problem = problem
        self._show_problem()

    def _show_problem(self) -> None:
        problem_widget = self.query_one("#setup-problem", Static)
        start = self.query_one("#start", Button)
        if self.problem:
            problem_widget.update(f"✗ cannot start — {self.problem}")
            problem_widget.set_class(True, "problem")
            start.disabled = True
            start.tooltip = self.problem
        else:
            problem_widget.update("✓ ready to start")
            problem_widget.set_class(False, "problem")
            start.disabled = False
            start.tooltip = None

    def set_form(self, spec: RunSpec) -> None:
        """Fill the form from a spec (preset, or a run from History)."""
        self.loaded = spec
        with self.prevent(Select.Changed, Input.Changed):
            self.query_one("#framework", Select).value = spec.framework
        self._set_api_options(spec.framework, keep=spec.api)
        with self.prevent(Select.Changed, Input.Changed):
            for name in ("model", "dataset"):
                self.query_one(f"#{name}", Select).value = getattr(spec, name)
            device = self.query_one("#device", Select)
            try:
                device.value = spec.device if spec.device != "gpu" else "gpu:0"
            except InvalidSelectValueError:
                self.notify(
                    f"device {spec.device} is not available here; using CPU", severity="warning"
                )
                device.value = "cpu"
            threads = self.query_one("#threads", Select)
            threads.value = str(min(spec.threads, self.logical))
            if spec.threads > self.logical:
                self.notify(
                    f"{spec.threads} threads > {self.logical} cores here; using {self.logical}",
                    severity="warning",
                )
            for name in NUMBER_FIELDS:
                value = getattr(spec, name)
                self.query_one(f"#{name}", Input).value = "" if value is None else str(value)
            for name in CHOICE_FIELDS:
                value = getattr(spec, name)
                self.query_one(f"#{name}", Select).value = Select.NULL if value is None else value
        self.revalidate()

    # -- actions ------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {
            "start": self.action_start,
            "load": self.action_load_preset,
            "save": self.action_save_preset,
        }
        if event.button.id in actions:
            actions[event.button.id]()

    def action_start(self) -> None:
        if self.problem:
            self.notify(self.problem, title="cannot start", severity="error")
            return
        spec, sweep = self.current()
        auto = form_auto_repeats(self.form_values())
        if sweep:
            self.post_message(SweepRequested(threads_sweep(spec, sweep), auto))
        else:
            self.post_message(StartRequested(spec, auto))

    def action_load_preset(self) -> None:
        def chosen(name_or_path: str | None) -> None:
            if name_or_path:
                self.post_message(PresetRequested(name_or_path))

        self.app.push_screen(PresetPickerScreen(), chosen)

    def action_save_preset(self) -> None:
        try:
            spec, _sweep = self.current()
        except SpecError as exc:
            self.notify(f"{exc.field}: {exc}", title="fix the form first", severity="error")
            return

        if form_auto_repeats(self.form_values()) is not None:
            self.notify(  # a preset file's repeats is a number; auto is asked for at run time
                "a preset keeps repeats = 1; run it with --repeats auto",
                title="repeats auto is not saved",
                severity="warning",
            )

        def chosen(path: str | None) -> None:
            if path:
                self._save(spec, Path(path))

        self.app.push_screen(
            PromptScreen("Save form as preset", str(default_preset_path(spec))), chosen
        )

    @work(thread=True, exit_on_error=False, group="preset")
    def _save(self, spec: RunSpec, path: Path) -> None:
        try:
            written = save_preset(spec, path)
        except OSError as exc:
            self.app.call_from_thread(
                self.notify, f"{path}: {exc}", title="not saved", severity="error"
            )
            return
        self.app.call_from_thread(self.notify, f"saved {written}")
