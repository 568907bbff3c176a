"""Every framework × API that offers inference serves the same model: from the shared draw, on the
same request bytes, its outputs give the float64 reference's loss (``served_loss``, computed by
the loop from what ``predict`` returned, untimed). Dropout left on, a weight mapped wrongly, a
training-mode layer or a different input layout moves it far outside fp32 rounding. The APIs that
do not offer inference are refused in one line that says why.

The runs are real workers in each framework's runtime (tests/test_frameworks.py's ``run``)."""

from __future__ import annotations

import pytest
from test_frameworks import BUILD_PATHS, INITIAL_LOSS_RTOL, bench_env, run  # noqa: F401 (fixture)

from tui_bench.engine import catalog

pytestmark = pytest.mark.slow

SERVING = [
    (fw.name, api)
    for fw in catalog.FRAMEWORKS.values()
    if not fw.unavailable
    for api in fw.apis
    if "inference" in fw.capabilities_for(api).modes
]

# The transformer with its default dropout (0.1): an API that serves in training mode drops
# activations and misses the reference. Batch 4, a few requests.
SERVE_TRANSFORMER = {
    "model": "transformer",
    "mode": "inference",
    "batch_size": 4,
    "requests": 6,
    "warmup_steps": 1,
    "epochs": 1,
    "train_samples": 40,
    "test_samples": 16,
}


def reference_served_loss(fields: dict, seed: int = 0) -> tuple[float, str]:
    """The float64 reference's mean loss on the first request (the test split's seeded epoch-1
    order, the loop's ``request_batches``) from the shared weights, and the request's sha256."""
    import hashlib

    import numpy as np
    from transformer_reference import transformer_loss

    from adapters import data, shared_init
    from adapters import serve as serving

    dataset = data.load(
        "synthetic-imdb", train_samples=fields["train_samples"], test_samples=fields["test_samples"]
    )
    first = serving.request_batches(len(dataset.x_test), fields["batch_size"], seed, 1)[0]
    shape = dataset.shape
    weights = shared_init.transformer_weights(seed, shape.vocab_size, shape.input_shape[0])
    x = dataset.x_test[first]
    loss = transformer_loss(weights, x, dataset.y_test[first])
    return loss, hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


@pytest.mark.parametrize(("framework", "api"), SERVING)
def test_every_api_serves_the_shared_transformer(
    bench_env,  # noqa: F811 (the fixture imported above)
    adapters_on_path,
    framework: str,
    api: str,
) -> None:
    result = run(bench_env, framework, api, **SERVE_TRANSFORMER)
    summary = result.summary
    loss, sha = reference_served_loss(SERVE_TRANSFORMER)
    assert summary["first_request_sha256"] == sha
    assert summary["served_loss"] == pytest.approx(loss, rel=INITIAL_LOSS_RTOL)
    assert summary["requests"] == 6 and summary["latency_p50_s"] > 0
    assert summary["serving"]["path"]  # each API names the path it served through


# The reference CNN at batch 1 (inference-quick's other model): no shared draw (each framework
# draws its own weights), so its served loss is only held near ln 10, what ten near-equal logits
# give; the request bytes are the same everywhere. This serves the image path (NHWC bytes into
# each framework's layout) that the transformer's token ids never take. The layout is the built
# model's (its builder's), so the image path is served once per model-building code path; each
# API's own serving path is the transformer's test above (torch.compile's CNN alone was 16 s of
# a fresh machine's suite, and TensorFlow's keras/eager/xla, Keras 3 on torch/jax and MXNet's
# hybrid blocks build with another API's builder: tests/test_model_declaration.py's BUILT_AS).
SERVING_IMAGES = [combo for combo in SERVING if combo in BUILD_PATHS]


def test_every_serving_api_builds_its_cnn_through_a_path_that_serves_images() -> None:
    from test_model_declaration import BUILT_AS

    for combo in SERVING:
        assert BUILT_AS.get(combo, combo) in SERVING_IMAGES, combo


SERVE_CNN = {
    "model": "cnn",
    "mode": "inference",
    "batch_size": 1,
    "requests": 6,
    "warmup_steps": 1,
    "epochs": 1,
    "train_samples": 40,
    "test_samples": 16,
}


@pytest.mark.parametrize(("framework", "api"), SERVING_IMAGES)
def test_every_build_path_serves_the_reference_cnn_on_the_same_bytes(
    bench_env,  # noqa: F811 (the fixture imported above)
    adapters_on_path,
    framework: str,
    api: str,
) -> None:
    import math

    result = run(bench_env, framework, api, **SERVE_CNN)
    summary = result.summary
    reference = run(bench_env, "torch", "eager", **SERVE_CNN).summary
    assert summary["first_request_sha256"] == reference["first_request_sha256"]
    assert summary["served_loss"] == pytest.approx(math.log(10), abs=0.5)
    assert result.started["param_count"] == 1_669_002
    assert summary["requests"] == 6 and summary["latency_p50_s"] > 0


def test_the_apis_without_inference_say_why() -> None:
    from tui_bench.engine.errors import SpecError
    from tui_bench.engine.spec import RunSpec

    for fw in catalog.FRAMEWORKS.values():
        if fw.unavailable:
            continue
        for api in fw.apis:
            if (fw.name, api) in SERVING:
                continue
            with pytest.raises(SpecError, match="not offered"):
                RunSpec(framework=fw.name, api=api, mode="inference", threads=1).validate()
