"""Modal dialogs: confirm, choose one of several answers, prompt for a line of text, show a
message, help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tui_bench.tui.keys import KeyLabels, key_labels
from tui_bench.tui.presets_io import list_presets


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("n,escape", "answer(False)", "No", id="dialog_no"),
        Binding("y", "answer(True)", "Yes", id="dialog_yes"),
    ]

    def __init__(self, title: str, detail: str = "", yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.title_text, self.detail, self.yes, self.no = title, detail, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            if self.detail:
                yield Static(self.detail, classes="dialog-detail", markup=False)
            with Horizontal(classes="dialog-buttons"):
                keys = key_labels(self)
                yield Button(f"{self.yes} ({keys.label('dialog_yes')})", variant="error", id="yes")
                yield Button(f"{self.no} ({keys.label('dialog_no')})", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ChoiceScreen(ModalScreen[str | None]):
    """A question with several answers. The first is the default (focused: enter picks it);
    each answer's key is the first letter of its label; escape picks none (None)."""

    BINDINGS = [Binding("escape", "choose('')", "Close", id="dialog_close")]

    def __init__(self, title: str, detail: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text, self.detail, self.choices = title, detail, choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.detail, classes="dialog-detail", markup=False)
            with Horizontal(classes="dialog-buttons"):
                for index, (value, label) in enumerate(self.choices):
                    variant = "primary" if index == 0 else "default"
                    yield Button(f"{label} ({label[0].lower()})", variant=variant, id=value)

    def on_mount(self) -> None:
        self.query_one(f"#{self.choices[0][0]}", Button).focus()

    def on_key(self, event) -> None:
        for value, label in self.choices:
            if event.key == label[0].lower():
                event.stop()
                self.dismiss(value)
                return

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)

    def action_choose(self, value: str) -> None:
        self.dismiss(value or None)


class _TextAnswerScreen(ModalScreen[str | None]):
    """A dialog answered by the text in its Input: enter or OK gives it, esc or Cancel gives None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self.dismiss(self.query_one(Input).value.strip() or None)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PromptScreen(_TextAnswerScreen):
    def __init__(self, title: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder = title, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK (enter)", variant="primary", id="ok")
                yield Button(f"Cancel ({key_labels(self).label('dialog_cancel')})", id="cancel")


class PresetPickerScreen(_TextAnswerScreen):
    """Pick a shipped or user preset by name, or type a preset file's path. Returns the name or
    path; the list is read off the UI thread."""

    def __init__(self, directory_hint: str = "") -> None:
        super().__init__()
        self.directory_hint = directory_hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(
                "Load preset: pick one, or type a name or TOML file", classes="dialog-title"
            )
            yield OptionList(id="preset-list", classes="dialog-scroll")
            yield Input(
                self.directory_hint, placeholder="name or path/to/preset.toml", id="prompt-input"
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK (enter)", variant="primary", id="ok")
                yield Button(f"Cancel ({key_labels(self).label('dialog_cancel')})", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self.run_worker(self._list, thread=True, exit_on_error=False)

    def _list(self) -> None:
        names = list(list_presets())
        self.app.call_from_thread(self._show, names)

    def _show(self, names: list[str]) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(name, id=name) for name in names])
        if not names:
            options.add_option(Option("no presets found", disabled=True))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class _ClosingScreen(ModalScreen[None]):
    """A modal that only shows something: any button or its close key dismisses it."""

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class MessageScreen(_ClosingScreen):
    BINDINGS = [Binding("escape,enter", "close", "Close", id="dialog_close")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text, self.message = title, message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(self.title_text, classes="dialog-title")
            with VerticalScroll(classes="dialog-scroll"):
                yield Static(self.message, markup=False)
            with Horizontal(classes="dialog-buttons"):
                close = key_labels(self).label("dialog_close")
                yield Button(f"Close ({close})", id="close", variant="primary")


HELP_INTRO = """\
tui-bench trains models in worker processes owned by a run supervisor,
not by this window: closing it, or losing the SSH link, never stops a run.
"""
HELP_OUTRO = """\
Remap any key in config.toml by binding id (listed below), e.g.
  [keys]
  start_run = "ctrl+g"
Step times: device-synchronised medians of steady-state steps; warm-up
(tracing, compilation) is timed apart; samples/s is steady state."""


def help_text(keys: KeyLabels) -> str:
    """What each screen does and its keys, as the user has them bound."""
    k = keys.label

    def row(head: str, text: str) -> str:
        return f"{head:<11} {text}"

    def screen(binding_id: str) -> str:
        return f"{k(binding_id)} {keys.binding(binding_id).description}"

    lines = [
        row(
            screen("show_setup"),
            f"what to run; {k('start_run')} starts, {k('load_preset')} loads a preset, "
            f"{k('save_preset')} saves one",
        ),
        row(screen("show_live"), "the running benchmark: loss, epoch times, CPU/RSS/GPU;"),
        row(
            "", f"{k('cancel_run')} cancels (asks first), {k('toggle_log')} shows the worker's log"
        ),
        row(
            screen("show_history"),
            f"every run: {k('history_filter')} filter, {k('history_sort')} sort (or click a "
            f"header), {k('history_open')} open,",
        ),
        row(
            "",
            f"{k('history_mark')} mark, {k('history_compare')} compare marked, "
            f"{k('history_delete')} delete, {k('history_export')} export CSV, "
            f"{k('history_run_again')} again",
        ),
        row(
            screen("show_compare"), "marked runs side by side, ratios to the first, thread scaling"
        ),
        row(screen("show_system"), "this machine and the framework runtimes"),
        row(k("show_trends"), "Trends: each configuration over time, its change points;"),
        row("", f"{k('trends_open')} opens the run under the cursor"),
        row(k("command_palette"), "command palette: every action and the presets"),
        row(k("cycle_theme"), "next theme; ansi-dark works without truecolor; NO_COLOR is"),
        row("", f"honoured. {k('quit')} quits: a run in progress is left running"),
        row("", "(or cancelled, if you choose); `tui-bench` reattaches."),
    ]
    return HELP_INTRO + "\n" + "\n".join(lines) + "\n\n" + HELP_OUTRO


class HelpScreen(_ClosingScreen):
    BINDINGS = [Binding("escape,f1,question_mark,q", "close", "Close", id="help_close")]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        rows = []
        for _key, active in sorted(
            self.under.active_bindings.items(), key=lambda kv: kv[1].binding.id or ""
        ):
            binding = active.binding
            if not binding.description:
                continue
            shown = self.app.get_key_display(binding)
            rows.append(f"  {shown:<12} {binding.description:<14} id {binding.id or '—'}")
        with Vertical(classes="dialog dialog-wide"):
            yield Label("tui-bench help", classes="dialog-title")
            with VerticalScroll(classes="dialog-scroll"):
                yield Static(help_text(key_labels(self)), markup=False)
                yield Static(
                    "\nKeys here (binding ids for [keys] remapping):\n" + "\n".join(rows),
                    markup=False,
                )
            with Horizontal(classes="dialog-buttons"):
                close = key_labels(self).label("help_close")
                yield Button(f"Close ({close})", id="close", variant="primary")
