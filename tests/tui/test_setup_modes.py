"""Setup hides the fields a mode does not use (issue 48 item 8), at 80×24: which mode reads a
field is its declaration's (``spec_field(modes=…)`` in engine/spec.py), never a list in the
screen; a field hidden goes back to its default, so nothing unseen decides the spec."""

from __future__ import annotations

from textual.widgets import Input, Select

from tui_bench.engine.spec import RunSpec, declared_fields
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.screens.setup import NUMBER_FIELDS, SetupScreen

TRAINING_ONLY = [
    d.name for d in declared_fields() if d.modes == ("train",) and d.name in NUMBER_FIELDS
]


def _shown(setup: SetupScreen, name: str) -> bool:
    return setup.query_one(f"#{name}").display and setup.query_one(f"#label-{name}").display


def test_the_declaration_says_inference_reads_no_epochs_lr_or_dropout():
    assert {"epochs", "steps_per_epoch", "lr", "dropout", "target_accuracy"} <= set(TRAINING_ONLY)
    # and what serving does read stays: the batch, the seed, the warm-up, the requests
    inference = {d.name for d in declared_fields() if d.used_in("inference")}
    assert {"batch_size", "seed", "warmup_steps", "requests", "test_samples"} <= inference


async def test_inference_hides_what_only_training_reads_and_training_shows_it_again(tui_home):
    app = TuiBenchApp(machine={"logical_cores": 4, "ram_mib": 16384.0})
    async with app.run_test(size=(80, 24)) as pilot:
        setup = app.screen
        assert isinstance(setup, SetupScreen)
        await pilot.pause()
        assert all(_shown(setup, name) for name in TRAINING_ONLY)
        lr = setup.query_one("#lr", Input)
        lr.value = "0.5"
        await pilot.pause()
        setup.query_one("#mode", Select).value = "inference"
        await pilot.pause()
        await pilot.pause()
        hidden = [name for name in TRAINING_ONLY if not _shown(setup, name)]
        assert hidden == TRAINING_ONLY
        assert _shown(setup, "requests") and _shown(setup, "batch_size")
        assert lr.value == str(RunSpec().lr)  # hidden: back to its default
        spec, _sweep = setup.current()
        assert spec.mode == "inference" and spec.lr == RunSpec().lr
        setup.query_one("#mode", Select).value = "train"
        await pilot.pause()
        await pilot.pause()
        assert all(_shown(setup, name) for name in TRAINING_ONLY)
        assert not _shown(setup, "requests")
