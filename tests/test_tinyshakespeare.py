"""TinyShakespeare through the dataset registry (issue 42): char-rnn's input.txt pinned by its
published size and sha256, imported or checked like MNIST, read by the worker as byte tokens
(V 256) cut into the gpt's sequences. The real file cannot be fetched here: the parser and the
cache are tested on a small file in the same format (ASCII text), pinned in the registry the way
test_datasets pins tiny MNIST files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import require_module

from tui_bench.engine import datasets as cache
from tui_bench.engine.spec import RunSpec

LINES = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n\n"
)
TEXT = (LINES * 40).encode("ascii")  # 4,320 bytes: 3,888 train, 432 test


@pytest.fixture
def adapters(adapters_on_path):
    from adapters import data, datasets  # noqa: F401

    return adapters_on_path


def write_text(directory, payload: bytes = TEXT, name: str = "input.txt"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(payload)
    return directory / name


def pin_small_text(monkeypatch, payload: bytes = TEXT) -> cache.DataFile:
    """Test-only: the registry's TinyShakespeare entry pinned to a small file of the same format
    (the real pins are for the published 1,115,394 bytes)."""
    real = cache.REGISTRY["tinyshakespeare"]
    small = cache.DataFile(
        "input.txt",
        len(payload),
        hashlib.sha256(payload).hexdigest(),
        None,
        real.files[0].urls,
        aliases=real.files[0].aliases,
    )
    monkeypatch.setitem(
        cache.REGISTRY, "tinyshakespeare", cache.RealDataset(real.name, real.label, (small,), "")
    )
    return small


def test_the_manifest_pins_the_published_file():
    """Size and sha256 as TensorFlow Datasets pins them (url_checksums/tiny_shakespeare.txt)."""
    (pinned,) = cache.REGISTRY["tinyshakespeare"].files
    assert pinned.name == "input.txt" and pinned.size == 1_115_394
    assert pinned.sha256 == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    assert pinned.urls[0].startswith("https://raw.githubusercontent.com/karpathy/char-rnn/")
    problem = cache.problem(RunSpec(model="gpt", dataset="tinyshakespeare", vocab_size=256))
    assert problem == (
        "dataset 'tinyshakespeare' is not in the cache: run `tui-bench data download "
        "tinyshakespeare` (1.1 MB) or `tui-bench data import PATH`"
    )


def test_bytes_are_tokens_cut_into_sequences_that_overlap_by_one(adapters, tmp_path):
    from adapters import data, datasets

    write_text(tmp_path / "tinyshakespeare")
    raw = datasets.load_raw("tinyshakespeare", tmp_path, seq_len=16)
    cut = int(len(TEXT) * 0.9)
    stream = np.frombuffer(TEXT, dtype=np.uint8)
    assert raw.x_train.shape == raw.y_train.shape == ((cut - 1) // 16, 16)
    assert raw.x_test.shape == ((len(TEXT) - cut - 1) // 16, 16)
    assert bytes(raw.x_train[0]) == TEXT[:16] and bytes(raw.y_train[0]) == TEXT[1:17]
    assert bytes(raw.x_train[1]) == TEXT[16:32]  # the next sequence starts at the last target
    assert bytes(raw.x_test[0]) == TEXT[cut : cut + 16]
    assert np.array_equal(raw.x_train[:, 1:], raw.y_train[:, :-1])
    assert raw.files == {"input.txt": hashlib.sha256(TEXT).hexdigest()}
    assert int(stream.max()) < 256
    # through the worker's preprocessing: the gpt's S, its V, ids as int, a validation split
    dataset = data.load("tinyshakespeare", data_dir=str(tmp_path), tokens=(16, 256))
    assert dataset.kind == "tokens" and dataset.x_train.dtype == np.int32
    assert dataset.shape.input_shape == (16,) and dataset.shape.vocab_size == 256
    assert len(dataset.x_train) + len(dataset.x_val) == len(raw.x_train)
    assert dataset.notes["synthetic"] is False and dataset.notes["files"] == raw.files
    assert data.load("tinyshakespeare", data_dir=str(tmp_path), tokens=(64, 512)).x_test.shape == (
        (len(TEXT) - cut - 1) // 64,
        64,
    )


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"", "empty file"),
        (b"First Citizen:\x00\x01\x02" + TEXT, "not a text file (a NUL byte at offset 14)"),
        (b"\x89PNG\r\n\x1a\n" + TEXT, "not UTF-8 text (byte 0x89 at offset 0)"),
        (TEXT[:100], "hold no sequence of 17 tokens"),  # truncated below one test sequence
    ],
)
def test_a_damaged_text_is_one_line_naming_the_file(adapters, tmp_path, payload, says):
    from adapters import data, datasets

    path = write_text(tmp_path, payload)
    with pytest.raises(datasets.DatasetError) as caught:
        data.load("tinyshakespeare", data_dir=str(tmp_path), tokens=(16, 256))
    message = str(caught.value)
    assert says in message and str(path) in message and "\n" not in message


def test_a_missing_file_and_a_vocabulary_too_small_are_one_line(adapters, tmp_path):
    from adapters import data, datasets

    with pytest.raises(datasets.DatasetError, match="input.txt: missing$"):
        data.load("tinyshakespeare", data_dir=str(tmp_path), tokens=(16, 256))
    write_text(tmp_path)
    with pytest.raises(datasets.DatasetError, match=r"cannot hold them \(--vocab-size 256\)$"):
        data.load("tinyshakespeare", data_dir=str(tmp_path), tokens=(16, 128))
    # the spec refuses it before any process starts
    from tui_bench.engine.errors import SpecError

    with pytest.raises(SpecError, match="the gpt's vocabulary of 128 cannot hold them"):
        RunSpec(model="gpt", dataset="tinyshakespeare", vocab_size=128).validate()
    assert RunSpec(model="gpt", dataset="synthetic-tokens", vocab_size=128).validate()


def test_a_user_s_copy_is_checked_and_imported_by_its_checksum(monkeypatch, tmp_path, capsys):
    """`tui-bench data import` takes a copy under any name; a truncated or altered copy, given
    as a data directory or to import, is refused in one line."""
    from tui_bench import cli

    pin_small_text(monkeypatch)
    mine = tmp_path / "mine"
    write_text(mine, name="shakespeare-copy.txt")
    spec = RunSpec(model="gpt", dataset="tinyshakespeare", vocab_size=256)
    assert cli.main(["data", "import", str(mine), "-q"]) == 0
    assert cache.status(["tinyshakespeare"])[0].verified
    assert cache.problem(spec) is None
    assert (cache.cache_dir("tinyshakespeare") / "input.txt").read_bytes() == TEXT
    assert cli.main(["data", "list", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert listed["tinyshakespeare"]["verified"]

    own = tmp_path / "own"
    write_text(own, TEXT[:-7])  # truncated
    problem = cache.problem(spec.with_changes(data_dir=str(own)))
    assert "input.txt" in problem and "expected" in problem and "\n" not in problem
    write_text(own, TEXT[:-1] + b"?")  # one byte changed: the size matches, the sha256 not
    problem = cache.problem(spec.with_changes(data_dir=str(own)))
    assert "does not match the pinned" in problem and "\n" not in problem
    report = cache.import_path(own / "input.txt")
    assert report.installed == [] and len(report.rejected) == 1
    assert "does not match the pinned" in report.rejected[0]


def test_the_gpt_trains_on_the_text(adapters, tmp_path):
    """A torch run of the gpt at tiny on the small file (the worker trusts its data directory;
    the checksum gate is the front ends', tested above): first loss near ln 256, provenance."""
    require_module("torch")
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute

    write_text(tmp_path / "data" / "tinyshakespeare")
    spec = RunSpec(
        model="gpt",
        size="tiny",
        vocab_size=256,
        seq_len=32,
        dataset="tinyshakespeare",
        data_dir=str(tmp_path / "data"),
        threads=1,
        epochs=1,
        steps_per_epoch=3,
        batch_size=8,
        warmup_steps=1,
    ).validate()
    result = execute(spec, History(), sample_interval=0.5)
    assert result.status == "finished", result.reason
    notes = result.started["dataset_notes"]
    assert notes["synthetic"] is False and notes["files"] == {
        "input.txt": hashlib.sha256(TEXT).hexdigest()
    }
    assert abs(result.started["initial_loss"] - np.log(256)) < 0.05
    assert result.metrics()["tokens_per_s"] > 0
