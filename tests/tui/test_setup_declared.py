"""The Setup form is built from RunSpec's declaration, as the CLI flags are: an input per declared
number with its default and help, the declaration's own one-line messages, the workers fields."""

from __future__ import annotations

import pytest
from textual.message import Message
from textual.widgets import Input, Select, Static

from tests.tui.helpers import wait_for
from tui_bench.engine.spec import RunSpec, SpecError, declared_fields, model_default_text
from tui_bench.tui.app import TuiBenchApp
from tui_bench.tui.messages import StartRequested
from tui_bench.tui.screens.setup import SetupScreen

# Every declared number but threads, which the form offers as this machine's core counts.
DECLARED_NUMBERS = [d for d in declared_fields() if d.type in (int, float) and d.name != "threads"]


async def _ready_setup(pilot, app) -> SetupScreen:
    setup = app.screen
    assert isinstance(setup, SetupScreen)
    await wait_for(pilot, lambda: setup.available is not None, 30, "runtime probe")
    await pilot.pause()
    return setup


async def _type(pilot, setup: SetupScreen, field: str, text: str) -> None:
    widget = setup.query_one(f"#{field}", Input)
    widget.focus()
    widget.value = ""
    await pilot.press(*text)
    await pilot.pause()


def _problem(setup: SetupScreen) -> str:
    return str(setup.query_one("#setup-problem", Static).render())


async def test_setup_has_an_input_per_declared_number_with_its_default_and_help(tui_home):
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = await _ready_setup(pilot, app)
        inputs = {widget.id: widget for widget in setup.query("#setup-grid Input")}
        assert sorted(inputs) == sorted(d.name for d in DECLARED_NUMBERS)
        for declared in DECLARED_NUMBERS:
            widget = inputs[declared.name]
            expected = "" if declared.default is None else str(declared.default)
            assert widget.value == expected, declared.name
            assert declared.help in str(widget.tooltip), declared.name
            if declared.optional:  # left empty: the model's default, or unset
                assert widget.placeholder == (model_default_text(declared.name) or "unset")
        assert setup.query_one("#workers", Input).value == "1"
        scaling = setup.query_one("#scaling", Select)
        (declared_scaling,) = [d for d in declared_fields() if d.name == "scaling"]
        assert scaling.value == declared_scaling.default == "weak"
        assert declared_scaling.choices == ("weak", "strong")
        scaling.value = "strong"  # each declared choice is an option of the Select
        assert scaling.value == "strong"
        # The form as it stands is the declared defaults (threads aside).
        spec, _sweep = setup.current()
        assert spec == RunSpec(threads=spec.threads, scaling="strong")


@pytest.mark.needs_runtime("torch")
@pytest.mark.parametrize(
    ("field", "typed", "value", "bounds"),
    [
        ("batch_size", "0", 0, "between 1 and 65536, got 0"),
        ("workers", "65", 65, "between 1 and 64, got 65"),
        ("dropout", "1", 1.0, "in [0.0, 1.0), got 1.0"),
        ("timing_window", "0", 0, "between 1 and 100000, got 0"),
        ("lr", "fast", "fast", "must be a number, got 'fast'"),
        ("epochs", "1.5", "1.5", "must be a whole number, got '1.5'"),
    ],
)
async def test_out_of_range_value_says_the_declared_bounds_and_blocks_start(
    tui_home, field, typed, value, bounds
):
    seen: list[Message] = []
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        setup = await _ready_setup(pilot, app)
        assert not setup.query_one("#start").disabled, _problem(setup)
        await _type(pilot, setup, field, typed)
        # The message is RunSpec.validate()'s own, word for word, on one line.
        with pytest.raises(SpecError) as refused:
            RunSpec.from_dict({**RunSpec().to_dict(), field: value})
        problem = _problem(setup)
        assert f"{field}: {refused.value}" in problem and bounds in problem
        assert "\n" not in str(refused.value)
        assert setup.query_one("#start").disabled
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert not [m for m in seen if isinstance(m, StartRequested)]
        assert app.live is None


@pytest.mark.needs_runtime("torch")
async def test_two_workers_with_torch_eager_reach_start_requested(tui_home, monkeypatch):
    from tui_bench.engine.errors import SupervisorError
    from tui_bench.engine.runs import supervisor

    def refuse(request):  # the spec is what this test is about: no worker is started
        raise SupervisorError("not started by this test")

    monkeypatch.setattr(supervisor, "launch", refuse)
    seen: list[Message] = []
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        setup = await _ready_setup(pilot, app)
        assert setup.query_one("#framework", Select).value == "torch"
        assert setup.query_one("#api", Select).value == "eager"
        await _type(pilot, setup, "workers", "2")
        setup.query_one("#scaling", Select).value = "strong"
        await pilot.pause()
        assert not setup.query_one("#start").disabled, _problem(setup)
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: any(isinstance(m, StartRequested) for m in seen), 5, "StartRequested"
        )
        # The hook sees a message at each node it bubbles through: one request, seen there.
        (request,) = {id(m): m for m in seen if isinstance(m, StartRequested)}.values()
        assert request.spec.workers == 2 and request.spec.scaling == "strong"
        assert (request.spec.framework, request.spec.api) == ("torch", "eager")


async def test_workers_refused_by_the_api_say_why_before_start(tui_home):
    """theano has no data-parallel engine: the form shows the spec's own reason."""
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = await _ready_setup(pilot, app)
        await _type(pilot, setup, "workers", "2")
        setup.query_one("#framework", Select).value = "theano"
        await pilot.pause()
        await pilot.pause()
        spec = RunSpec(framework="theano", api="theano", workers=2)
        with pytest.raises(SpecError) as refused:
            spec.validate()
        assert f"workers: {refused.value}" in _problem(setup)
        assert setup.query_one("#start").disabled


@pytest.mark.needs_runtime("torch")
async def test_repeats_auto_starts_a_batch_that_repeats_until_the_median_is_known(
    tui_home, monkeypatch
):
    from tui_bench.engine.errors import SupervisorError
    from tui_bench.engine.runs import supervisor

    handed = []

    def refuse(request):  # the request is what this test is about: no worker is started
        handed.append(request)
        raise SupervisorError("not started by this test")

    monkeypatch.setattr(supervisor, "launch", refuse)
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24)) as pilot:
        setup = await _ready_setup(pilot, app)
        await _type(pilot, setup, "repeats", "auto")
        assert not setup.query_one("#start").disabled, _problem(setup)
        notes = str(setup.query_one("#option-notes", Static).render())
        assert "repeats: auto — until the median's 95 % CI is within ±2 %, at most 20" in notes
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: handed, 5, "the batch request")
        (request,) = handed
        assert request.auto_repeats == {"max": 20, "target_ci": 0.02}
        assert request.spec["repeats"] == 1


def _shown(setup: SetupScreen, name: str) -> bool:
    return setup.query_one(f"#{name}").display and setup.query_one(f"#label-{name}").display


@pytest.mark.needs_runtime("torch")
async def test_setup_offers_the_mode_and_shows_requests_and_gpt_sizes_only_where_they_apply(
    tui_home, monkeypatch
):
    from tui_bench.engine.errors import SupervisorError
    from tui_bench.engine.runs import supervisor
    from tui_bench.engine.spec import GPT_FIELDS

    def refuse(request):  # the spec is what this test is about: no worker is started
        raise SupervisorError("not started by this test")

    monkeypatch.setattr(supervisor, "launch", refuse)
    seen: list[Message] = []
    app = TuiBenchApp()
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        setup = await _ready_setup(pilot, app)
        mode = setup.query_one("#mode", Select)
        assert mode.value == "train"
        assert not _shown(setup, "requests")
        assert not any(_shown(setup, name) for name in GPT_FIELDS)
        # The cnn's training form fits 80×24 without scrolling (the gpt's six fields hidden).
        form = setup.query_one("#setup-form")
        assert form.virtual_size.height <= form.size.height, (form.virtual_size, form.size)

        setup.query_one("#model", Select).value = "gpt"
        await pilot.pause()
        await pilot.pause()
        assert all(_shown(setup, name) for name in GPT_FIELDS)
        setup.query_one("#size", Select).value = "gpt2-small"
        await _type(pilot, setup, "layers", "4")
        setup.query_one("#model", Select).value = "cnn"
        await pilot.pause()
        await pilot.pause()
        assert not any(_shown(setup, name) for name in GPT_FIELDS)
        # The gpt's settings, now hidden, went back to unset: nothing unseen blocks Start.
        assert setup.query_one("#layers", Input).value == ""
        assert setup.query_one("#size", Select).value is Select.NULL
        assert "✓ ready to start" in _problem(setup), _problem(setup)

        mode.value = "inference"
        await pilot.pause()
        await pilot.pause()
        assert _shown(setup, "requests")
        await _type(pilot, setup, "requests", "700")
        await _type(pilot, setup, "batch_size", "1")
        assert not setup.query_one("#start").disabled, _problem(setup)
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: any(isinstance(m, StartRequested) for m in seen), 5, "StartRequested"
        )
        (request,) = {id(m): m for m in seen if isinstance(m, StartRequested)}.values()
        assert request.spec.mode == "inference"
        assert (request.spec.requests, request.spec.batch_size) == (700, 1)

        # Back to training: the hidden request count no longer decides the spec.
        mode.value = "train"
        await pilot.pause()
        await pilot.pause()
        assert not _shown(setup, "requests")
        assert setup.query_one("#requests", Input).value == str(RunSpec().requests)
        spec, _sweep = setup.current()
        assert spec.mode == "train" and spec.requests == RunSpec().requests
