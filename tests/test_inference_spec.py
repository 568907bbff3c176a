"""The inference mode's spec: its field, its refusals, its place in a configuration, its flags."""

from __future__ import annotations

import pytest

from tui_bench.cli import build_parser
from tui_bench.cli.spec_flags import spec_from_args
from tui_bench.engine.results.identity import configuration_of
from tui_bench.engine.results.record import Run
from tui_bench.engine.spec import RunSpec, SpecError


def test_mode_defaults_to_train_and_accepts_inference() -> None:
    assert RunSpec().mode == "train"
    spec = RunSpec(framework="torch", api="eager", mode="inference").validate()
    assert spec.mode == "inference"
    assert "inference" in spec.label()


def test_an_adapter_without_predict_is_refused_in_one_line(monkeypatch) -> None:
    # An API as it is before its adapter gains predict (tensorflow keras has it now): train only.
    from dataclasses import replace

    from tui_bench.engine import catalog

    tf = catalog.FRAMEWORKS["tensorflow"]
    train_only = replace(tf.capabilities_for("keras"), modes=("train",))
    monkeypatch.setitem(tf.capabilities, "keras", train_only)
    with pytest.raises(SpecError) as err:
        RunSpec(framework="tensorflow", api="keras", mode="inference").validate()
    assert err.value.field == "mode"
    assert str(err.value) == "not offered: inference not built yet for tensorflow keras"
    assert "\n" not in str(err.value)


def test_inference_refuses_what_it_does_not_do() -> None:
    with pytest.raises(SpecError, match="timing"):
        RunSpec(mode="inference", timing="pipelined").validate()


def test_mode_and_model_both_parse_despite_argparse_prefix_matching() -> None:
    argv = ["run", "--mode", "inference", "--model", "mlp", "--requests", "7"]
    args = build_parser(argv).parse_args(argv)
    spec = spec_from_args(args)
    assert (spec.mode, spec.model, spec.requests) == ("inference", "mlp", 7)
    argv = ["run", "--model", "cnn"]
    spec = spec_from_args(build_parser(argv).parse_args(argv))
    assert (spec.mode, spec.model) == ("train", "cnn")


def _run(**spec: object) -> Run:
    return Run.from_record({"id": "r", "status": "finished", "spec": spec, "host": "h"})


def test_mode_decides_the_configuration() -> None:
    train = configuration_of(_run(framework="torch", model="cnn"))
    old = configuration_of(_run(framework="torch", model="cnn", mode="train"))
    inference = configuration_of(_run(framework="torch", model="cnn", mode="inference"))
    assert train == old  # a record from before the field ran in train mode
    assert inference != train
