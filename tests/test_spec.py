from __future__ import annotations

import json

import pytest

from tui_bench.engine.spec import RunSpec, SpecError


def error_of(**fields) -> SpecError:
    with pytest.raises(SpecError) as info:
        RunSpec.from_dict(fields)
    return info.value


def test_defaults_are_the_offline_reference_run():
    spec = RunSpec().validate()
    assert (spec.framework, spec.api, spec.model, spec.dataset, spec.device) == (
        "torch",
        "eager",
        "cnn",
        "synthetic-mnist",
        "cpu",
    )
    assert (spec.batch_size, spec.lr, spec.optimizer, spec.dropout) == (128, 1e-3, "adam", 0.25)
    assert 1 <= spec.threads <= 64


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"api": "estimator"},
            "api",
            "api 'estimator' is not available for framework 'torch' (choose: eager, compile)",
        ),
        ({"threads": 0}, "threads", "threads must be between 1 and 64, got 0"),
        ({"threads": 65}, "threads", "threads must be between 1 and 64, got 65"),
        ({"threads": 2.5}, "threads", "threads must be a whole number, got 2.5"),
        (
            {"framework": "caffe"},
            "framework",
            "framework 'caffe' is not known (choose: torch, tensorflow, keras, jax, mxnet, theano, cntk)",
        ),
        ({"device": "cuda:0"}, "device", "device must be cpu, gpu or gpu:N, got 'cuda:0'"),
        ({"lr": 0}, "lr", "lr must be in (0.0, 10.0], got 0.0"),
        ({"dropout": 1.0}, "dropout", "dropout must be in [0.0, 1.0), got 1.0"),
        (
            {"optimizer": "rmsprop"},
            "optimizer",
            "optimizer 'rmsprop' is not known (choose: adam, sgd)",
        ),
        (
            {"model": "lstm"},
            "model",
            "model 'lstm' needs a sequence dataset; 'synthetic-mnist' is image data",
        ),
        (
            {"model": "vgg16"},
            "model",
            "model 'vgg16' cannot take dataset 'synthetic-mnist': vgg16 pools 5 times and needs 32×32 "
            "input; 28×28 shrinks to nothing",
        ),
        (
            {"train_samples": 100},
            "train_samples",
            "train_samples 100 leaves 80 training samples after the 20 % validation split, fewer "
            "than one batch of 128",
        ),
        ({"thread": 2}, "thread", None),
    ],
)
def test_validation_names_the_field_in_one_line(fields, field, message):
    err = error_of(**fields)
    assert err.field == field
    text = str(err)
    assert "\n" not in text
    if message is not None:
        assert text == message
    else:
        assert text.startswith("unknown field 'thread' (fields: framework, api,")


def test_boolean_is_not_a_number():
    assert str(error_of(epochs=True)) == "epochs must be a whole number, got True"


def test_json_round_trip():
    spec = RunSpec(threads=2, epochs=3, steps_per_epoch=10, train_samples=1000, seed=7).validate()
    again = RunSpec.from_json(spec.to_json())
    assert again == spec
    assert json.loads(spec.to_json())["threads"] == 2


def test_toml_round_trip_drops_unset_optionals_and_accepts_int_lr():
    spec = RunSpec(threads=1, lr=1.0, target_accuracy=0.9).validate()
    text = spec.to_toml()
    assert "steps_per_epoch" not in text  # TOML has no null
    assert RunSpec.from_toml(text) == spec
    assert RunSpec.from_toml("lr = 1\nthreads = 1").lr == 1.0


def test_bad_toml_is_one_line():
    with pytest.raises(SpecError) as info:
        RunSpec.from_toml("threads = [1, 2")
    assert info.value.field == "toml"
    assert "\n" not in str(info.value)


# -- the settings that decide a GPU number ----------------------------------------------------------
def test_gpu_rule_defaults_are_strict_fp32_host_input_synced():
    spec = RunSpec().validate()
    assert (spec.precision, spec.autotune, spec.input, spec.timing) == (
        "fp32",
        "on",
        "host",
        "synced",
    )


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"precision": "fp16"},
            "precision",
            "precision 'fp16' is not known (choose: fp32, tf32, amp-fp16, bf16)",
        ),
        (
            {"precision": "amp-fp16"},
            "precision",
            "precision 'amp-fp16' is not available for torch/eager on cpu (choose: fp32, bf16)",
        ),
        (
            {"framework": "mxnet", "api": "gluon", "precision": "bf16"},
            "precision",
            "precision 'bf16' is not available for mxnet/gluon on cpu (choose: fp32): MXNet 1.9 "
            "has AMP float16 for Gluon on a GPU only, no bfloat16",
        ),
        (
            {"framework": "tensorflow", "api": "estimator", "timing": "pipelined"},
            "timing",
            "timing 'pipelined' is not available for tensorflow/estimator (choose: synced): every "
            "Estimator step is a session.run that returns its loss",
        ),
        (
            {"framework": "keras", "api": "tensorflow", "input": "device"},
            "input",
            "input 'device' is not available for keras/tensorflow (choose: host): Keras fit on "
            "TensorFlow reads its batches through tf.data, on the host",
        ),
        ({"autotune": "yes"}, "autotune", "autotune 'yes' is not known (choose: on, off)"),
        (
            {"timing_window": 0},
            "timing_window",
            "timing_window must be between 1 and 100000, got 0",
        ),
    ],
)
def test_impossible_settings_are_one_field_named_line(fields, field, message):
    error = error_of(**fields)
    assert error.field == field
    assert str(error) == message


def test_gpu_accepts_every_precision_the_catalog_lists():
    for precision in ("fp32", "tf32", "amp-fp16", "bf16"):
        RunSpec(device="gpu", precision=precision).validate()
    RunSpec(framework="mxnet", api="hybrid", device="gpu:0", precision="amp-fp16").validate()
    with pytest.raises(SpecError) as info:
        RunSpec(framework="mxnet", api="module", device="gpu", precision="amp-fp16").validate()
    assert info.value.field == "precision"


def test_gpu_settings_round_trip_through_toml_and_json():
    spec = RunSpec(device="gpu", precision="bf16", input="device", timing="pipelined").validate()
    assert RunSpec.from_toml(spec.to_toml()) == spec
    assert RunSpec.from_json(spec.to_json()) == spec


def test_workers_refused_where_no_data_parallel_engine_is_declared():
    from tui_bench.engine import catalog

    catalog_without = [
        (fw, api)
        for fw, f in catalog.FRAMEWORKS.items()
        for api in f.apis
        if not f.capabilities_for(api).data_parallel and not f.unavailable
    ]
    assert catalog_without, "every API claims a data-parallel engine; pick a test case"
    fw, api = catalog_without[0]
    with pytest.raises(SpecError) as err:
        RunSpec(framework=fw, api=api, workers=2).validate()
    assert err.value.field == "workers"


def test_strong_scaling_needs_a_batch_that_splits_evenly():
    with pytest.raises(SpecError) as err:
        RunSpec(batch_size=127, workers=1, scaling="strong").with_changes(workers=2).validate()
    assert err.value.field in ("batch_size", "workers")
    with pytest.raises(SpecError) as err:
        RunSpec(scaling="sideways").validate()
    assert err.value.field == "scaling"


def test_every_user_facing_error_derives_from_the_one_root():
    from tui_bench.engine import config, datasets, errors
    from tui_bench.engine.machine import runtimes
    from tui_bench.engine.results import history
    from tui_bench.engine.runs import presets, supervisor

    for cls in (
        SpecError,
        presets.PresetError,
        history.HistoryError,
        config.ConfigError,
        datasets.DatasetError,
        runtimes.RuntimeUnavailable,
        runtimes.RuntimeSetupError,
        supervisor.SupervisorError,
    ):
        assert issubclass(cls, errors.TuiBenchError), cls
        assert cls.title and cls.title != errors.TuiBenchError.title, cls
    err = SpecError("lr", "lr must be a number")
    assert (err.field, str(err), err.exit_code) == ("lr", "lr must be a number", 2)


# -- the declaration ------------------------------------------------------------------------------
def test_every_field_is_declared_with_help_and_the_rules_it_is_checked_by():
    from dataclasses import fields

    from tui_bench.engine.spec import declared_fields

    declared = {d.name: d for d in declared_fields()}
    assert list(declared) == [f.name for f in fields(RunSpec)]
    for d in declared.values():
        assert d.help, d.name
        if d.type in (int, float):
            assert d.low is not None and d.high is not None, d.name
    defaults = RunSpec()
    # dataset, batch and dropout default per model, requests per mode: declared unset, resolved
    # when the spec is made.
    resolved = {"dataset": "synthetic-mnist", "batch_size": 128, "dropout": 0.25, "requests": 1000}
    assert all(declared[name].default is None for name in resolved)
    assert all(
        getattr(defaults, name) == resolved.get(name, d.default) for name, d in declared.items()
    )
    assert declared["threads"].high == 64 and declared["lr"].low_open
    assert declared["optimizer"].choices == ("adam", "sgd")
    assert declared["steps_per_epoch"].optional and not declared["epochs"].optional


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lr": float("nan")}, "lr must be in (0.0, 10.0], got nan"),
        ({"target_accuracy": float("nan")}, "target_accuracy must be in (0.0, 1.0], got nan"),
        ({"dropout": float("inf")}, "dropout must be in [0.0, 1.0), got inf"),
        (
            {"model": "a\nb"},
            "model 'a\\nb' is not known (choose: cnn, mlp, vgg16, lstm, transformer, gpt)",
        ),
        ({"optimizer": ["adam"]}, "optimizer ['adam'] is not known (choose: adam, sgd)"),
        ({"api": 3}, "api must be text, got 3"),
        ({"device": None}, "device must be cpu, gpu or gpu:N, got None"),
        ({"data_dir": 3}, "data_dir must be a path, got 3"),
    ],
)
def test_values_that_slipped_through_or_broke_the_line_are_refused_in_one_line(fields, message):
    assert str(error_of(**fields)) == message


def test_specs_that_are_not_tables_are_one_line_errors():
    with pytest.raises(SpecError) as info:
        RunSpec.from_json("[1, 2]")
    assert str(info.value) == "a spec is a table of fields, got list"
    with pytest.raises(SpecError) as info:
        RunSpec.from_json("{")
    assert info.value.field == "json" and "\n" not in str(info.value)
