"""Each model's dimensions have one home, ``adapters/models.json``: the FLOP count, the shared
initial weights and the adapters' builders follow it. A change to the manifest (in a copy) moves
every reader; a dimension written as a literal in a model's code is caught by a scan."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
from conftest import require_module

from tui_bench.engine import flops, model_manifest
from tui_bench.engine.paths import adapters_dir

# A transformer of another shape: every reader must build this one from the copy.
OTHER = {"d_model": 64, "heads": 2, "d_ff": 96, "blocks": 3}


def _copy_with(tmp_path: Path, **changes: dict) -> Path:
    """The worker package copied, its model manifest changed."""
    copy = tmp_path / "adapters"
    shutil.copytree(adapters_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((copy / "models.json").read_text())
    manifest["models"].update(changes)
    (copy / "models.json").write_text(json.dumps(manifest))
    return copy


def test_flops_follow_the_manifest(tmp_path, monkeypatch) -> None:
    declared = flops.count("transformer", (200,), 2).forward_per_sample
    copy = _copy_with(tmp_path, transformer=OTHER)
    monkeypatch.setattr(model_manifest, "adapters_dir", lambda: copy)
    model_manifest.manifest.cache_clear()
    try:
        count = flops.count("transformer", (200,), 2)
        mlp = flops.count("mlp", (28, 28, 1), 10)
    finally:
        model_manifest.manifest.cache_clear()
    d, ff, seq = OTHER["d_model"], OTHER["d_ff"], 200
    per_block = 2 * seq * (3 * d * d + d * d + 2 * d * ff) + 2 * 2 * seq * seq * d
    assert count.forward_per_sample == OTHER["blocks"] * per_block + 2 * d
    assert count.forward_per_sample != declared
    assert mlp.forward_per_sample == 2 * (784 * 512 + 512 * 512 + 512 * 10)


def _in_copy(copy: Path, code: str) -> dict:
    """Run ``code`` against the copied worker package (as the worker imports it); it prints JSON."""
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(copy.parent)!r})\n{code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_shared_init_follows_the_manifest(tmp_path) -> None:
    copy = _copy_with(tmp_path, transformer=OTHER)
    got = _in_copy(
        copy,
        "import json\nfrom adapters import shared_init\n"
        "w = shared_init.transformer_weights(0, 50, 10)\n"
        "print(json.dumps({k: list(v.shape) for k, v in w.items()}))",
    )
    d, ff = OTHER["d_model"], OTHER["d_ff"]
    assert got["tokens"] == [50, d] and got["block0.hidden.kernel"] == [d, ff]
    assert f"block{OTHER['blocks'] - 1}.norm2.gamma" in got
    assert f"block{OTHER['blocks']}.norm2.gamma" not in got


def test_torch_builds_the_manifests_transformer(tmp_path) -> None:
    """The torch adapter's transformer from a changed manifest holds exactly the parameters the
    shared draw makes for it (its loader refuses any other shape), and as many as the count."""
    require_module("torch")
    copy = _copy_with(tmp_path, transformer=OTHER)
    got = _in_copy(
        copy,
        "import json\nfrom adapters import shared_init\nfrom adapters.torch import adapter as torch_adapter\n"
        "m = torch_adapter.build_model('transformer', (10,), 2, 0.0, 50)\n"
        "w = shared_init.transformer_weights(0, 50, 10)\n"
        "torch_adapter.load_shared_weights(m, w)\n"
        "print(json.dumps([sum(p.numel() for p in m.parameters() if p.requires_grad),"
        " sum(v.size for v in w.values())]))",
    )
    d, ff, blocks = OTHER["d_model"], OTHER["d_ff"], OTHER["blocks"]
    per_block = 4 * (d * d + d) + 2 * 2 * d + (d * ff + ff) + (ff * d + d)
    assert got == [(50 + 10) * d + blocks * per_block + d + 1] * 2


# The model code scanned for dimension literals: file -> the models whose blocks must hold none.
# (tests/test_model_declaration.py builds each from a changed declaration in every runtime.)
EVERY_MODEL = ("cnn", "mlp", "vgg16", "lstm", "transformer")
SCANNED = {
    "keras_models.py": EVERY_MODEL,
    "torch/adapter.py": EVERY_MODEL,
    "mxnet/adapter.py": EVERY_MODEL,
    "theano/graph.py": EVERY_MODEL,
    "theano/keras2.py": EVERY_MODEL,
}


def _dimensions(model: str) -> set[int]:
    """The manifest's numbers for a model that a literal could stand for (sizes over 8: kernel
    sizes and small counts collide with axes and pool factors), the transformer's per-head width
    among them."""
    numbers: set[int] = set()

    def walk(value: object) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            numbers.add(value)
        elif isinstance(value, list | dict):
            for item in value.values() if isinstance(value, dict) else value:
                walk(item)

    entry = model_manifest.dims(model)
    walk(entry)
    if model == "transformer":
        numbers.add(entry["d_model"] // entry["heads"])
    return {n for n in numbers if n > 8}


def _literals_in_blocks(source: str, model: str) -> list[tuple[int, str]]:
    """Integer literals on the lines of the blocks scoped to ``model``."""
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("# tui-bench:begin model"):
            inside = model in stripped.split()[3:]
        elif stripped.startswith("# tui-bench:end model"):
            inside = False
        elif inside:
            lines.add(number)
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NUMBER and token.start[0] in lines:
            found.append((token.start[0], token.string))
    return found


@pytest.mark.parametrize("name", sorted(SCANNED))
def test_model_code_takes_its_sizes_from_the_manifest(name: str) -> None:
    source = (adapters_dir() / name).read_text(encoding="utf-8")
    for model in SCANNED[name]:
        assert "tui-bench:begin model" in source and f" {model}" in source, (name, model)
        literals = _literals_in_blocks(source, model)
        sizes = _dimensions(model)
        wrong = [(line, text) for line, text in literals if text.isdigit() and int(text) in sizes]
        assert not wrong, f"{name}: {model} writes manifest sizes as literals: {wrong}"


def test_the_scan_catches_a_literal() -> None:
    source = (adapters_dir() / "keras_models.py").read_text(encoding="utf-8")
    leaked = source.replace("layers.Embedding(vocab, WIDTH)", "layers.Embedding(vocab, 128)")
    assert leaked != source
    assert "128" in [text for _, text in _literals_in_blocks(leaked, "transformer")]
    assert "128" not in [text for _, text in _literals_in_blocks(source, "transformer")]
