"""Real datasets without the internet: tiny files in the exact published formats (IDX + gzip,
CIFAR-10's pickled batches in a tar.gz, Keras' imdb.npz), their loaders, every bad-file case,
checksum-gated downloads with a fake fetcher, air-gapped import, and equal batches for every
framework from a real-format file."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import urllib.error
from pathlib import Path

import numpy as np
import pytest
from conftest import require_module, require_runtime

from tui_bench.engine import datasets as cache
from tui_bench.engine.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]


# -- fixtures --------------------------------------------------------------------------------------
# Private home/cache/config directories come from conftest.isolated_home (autouse).
@pytest.fixture
def adapters(adapters_on_path):
    """The worker-side package, loaded by path under the name the worker gives it."""
    from adapters import backend, clock, data, datasets, serve, train  # noqa: F401

    return adapters_on_path


# -- writers of the published formats --------------------------------------------------------------
def idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_mnist(directory: Path, n_train: int = 300, n_test: int = 100, seed: int = 0):
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        (directory / f"{split}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(idx_bytes(images, 0x803), mtime=0)
        )
        (directory / f"{split}-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(idx_bytes(labels, 0x801), mtime=0)
        )
        arrays[split] = (images, labels)
    return arrays


def cifar_batch(rng, n: int, label: bytes) -> tuple[dict, np.ndarray, list[int]]:
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    batch = {
        b"batch_label": label,
        b"labels": labels,
        b"data": data,
        b"filenames": [b"img_%d.png" % i for i in range(n)],
    }
    return batch, data, labels


def _py2_str(text: bytes) -> bytes:
    """A Python 2 ``str`` in a pickle: SHORT_BINSTRING or BINSTRING."""
    if len(text) < 256:
        return b"U" + bytes([len(text)]) + text
    return b"T" + struct.pack("<i", len(text)) + text


def py2_batch_pickle(data: np.ndarray, labels: list[int], label: bytes) -> bytes:
    """A CIFAR-10 batch exactly as the published files hold it: Python 2 cPickle, protocol 2, an
    ndarray reduced through numpy.core.multiarray._reconstruct with its pixels as a py2 str."""
    assert data.ndim == 2 and data.dtype == np.uint8 and max(labels, default=0) < 256
    dtype = (
        b"cnumpy\ndtype\n"
        + _py2_str(b"u1")
        + b"K\x00K\x01\x87R"
        + b"(K\x03"
        + _py2_str(b"|")
        + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
    )
    shape = b"".join(b"J" + struct.pack("<i", d) for d in data.shape) + b"\x86"
    array = (
        b"cnumpy.core.multiarray\n_reconstruct\n"
        + b"cnumpy\nndarray\n"
        + b"K\x00\x85"
        + _py2_str(b"b")
        + b"\x87R"
        + b"(K\x01"
        + shape
        + dtype
        + b"\x89"
        + _py2_str(data.tobytes())
        + b"tb"
    )
    return (
        b"\x80\x02}("
        + _py2_str(b"batch_label")
        + _py2_str(label)
        + _py2_str(b"labels")
        + b"]("
        + b"".join(b"K" + bytes([v]) for v in labels)
        + b"e"
        + _py2_str(b"data")
        + array
        + b"u."
    )


def write_cifar(
    path: Path,
    per_batch: int = 40,
    seed: int = 0,
    skip: str | None = None,
    replace: dict[str, bytes] | None = None,
    python2: bool = True,
):
    rng = np.random.default_rng(seed)
    members: dict[str, bytes] = {}
    truth = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch, data, labels = cifar_batch(rng, per_batch, name.encode())
        if python2:  # as the published archive holds them
            members[name] = py2_batch_pickle(data, labels, name.encode())
        else:  # as Python 3 writes protocol 2 (bytes through _codecs.encode)
            members[name] = pickle.dumps(batch, protocol=2)
        truth[name] = (data, labels)
    meta = {
        b"label_names": [
            b"airplane",
            b"automobile",
            b"bird",
            b"cat",
            b"deer",
            b"dog",
            b"frog",
            b"horse",
            b"ship",
            b"truck",
        ],
        b"num_cases_per_batch": 10000,
    }
    members["batches.meta"] = pickle.dumps(meta, protocol=2)
    members["readme.html"] = b"<html></html>"
    members.update(replace or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as archive:
        for name, payload in members.items():
            if name == skip:
                continue
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return truth


def object_array(items) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


def write_imdb(
    directory: Path, n_train: int = 60, n_test: int = 40, seed: int = 0, word_index: bool = True
):
    """Raw ranks (1 = most frequent word) as in Keras' imdb.npz; lengths straddle maxlen."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)

    def reviews(n):
        lengths = rng.integers(5, 320, n)
        return [[int(w) for w in rng.integers(1, 9000, length)] for length in lengths]

    raw = {
        "x_train": reviews(n_train),
        "y_train": rng.integers(0, 2, n_train),
        "x_test": reviews(n_test),
        "y_test": rng.integers(0, 2, n_test),
    }
    np.savez(
        directory / "imdb.npz",
        x_train=object_array(raw["x_train"]),
        y_train=raw["y_train"],
        x_test=object_array(raw["x_test"]),
        y_test=raw["y_test"],
    )
    if word_index:
        index = {f"word{r}": r for r in range(1, 9000)}
        (directory / "imdb_word_index.json").write_text(json.dumps(index))
    return raw


def keras_imdb_reference(raw: dict, num_words: int = 5000, maxlen: int = 200):
    """keras.datasets.imdb.load_data(num_words) + pad_sequences(maxlen), written out plainly."""
    rng = np.random.RandomState(113)
    out = []
    for split in ("train", "test"):
        xs = object_array(raw[f"x_{split}"])
        ys = np.asarray(raw[f"y_{split}"])
        order = np.arange(len(xs))
        rng.shuffle(order)
        xs, ys = xs[order], ys[order]
        rows = []
        for seq in xs:
            seq = [1] + [w + 3 for w in seq]
            seq = [w if w < num_words else 2 for w in seq]
            seq = seq[-maxlen:]
            rows.append([0] * (maxlen - len(seq)) + seq)
        out.append((np.array(rows, dtype=np.int32), ys.astype(np.int64)))
    return out


# -- loaders ---------------------------------------------------------------------------------------
def test_mnist_idx_loader_parses_the_published_format(adapters, tmp_path):
    from adapters import data

    truth = write_mnist(tmp_path / "mnist", n_train=300, n_test=100)
    ds = data.load("mnist", data_dir=str(tmp_path))  # finds DIR/mnist
    images, labels = truth["train"]
    assert ds.x_train.shape == (240, 28, 28, 1) and ds.x_train.dtype == np.float32
    np.testing.assert_array_equal(ds.x_train[..., 0], images[:240].astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.y_train, labels[:240].astype(np.int64))
    # validation: the last 20 % of the training pool, in the published order
    np.testing.assert_array_equal(ds.x_val[..., 0], images[240:].astype(np.float32) / 255)
    np.testing.assert_array_equal(ds.y_test, truth["t10k"][1].astype(np.int64))
    assert ds.y_train.dtype == np.int64 and 0.0 <= ds.x_train.min() <= ds.x_train.max() <= 1.0
    assert ds.notes["synthetic"] is False
    assert (
        ds.notes["files"]["train-images-idx3-ubyte.gz"]
        == hashlib.sha256(
            (tmp_path / "mnist" / "train-images-idx3-ubyte.gz").read_bytes()
        ).hexdigest()
    )
    capped = data.load(
        "mnist", train_samples=100, test_samples=30, data_dir=str(tmp_path / "mnist")
    )
    assert (len(capped.x_train), len(capped.x_val), len(capped.x_test)) == (80, 20, 30)
    np.testing.assert_array_equal(capped.x_train, ds.x_train[:80])  # caps take the first N


@pytest.mark.parametrize("python2", [True, False], ids=["python2-pickles", "python3-pickles"])
def test_cifar10_loader_reads_pickled_batches_from_the_tar_gz(adapters, tmp_path, python2):
    from adapters import data

    truth = write_cifar(tmp_path / "cifar-10-python.tar.gz", per_batch=40, python2=python2)
    ds = data.load("cifar10", data_dir=str(tmp_path))
    assert ds.x_train.shape == (160, 32, 32, 3) and len(ds.x_val) == 40 and len(ds.x_test) == 40
    first, labels = truth["data_batch_1"]
    # the published row is 1024 red, 1024 green, 1024 blue values, each row-major 32x32
    i, h, w = 7, 3, 29
    for c in range(3):
        assert ds.x_train[i, h, w, c] == np.float32(first[i, c * 1024 + h * 32 + w]) / 255
    np.testing.assert_array_equal(ds.y_train[:40], labels)
    last = truth["data_batch_5"][0]  # batches 1..5 in order; the validation split is batch 5
    np.testing.assert_array_equal(
        ds.x_val, last.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).astype(np.float32) / 255
    )
    np.testing.assert_array_equal(ds.y_test, truth["test_batch"][1])
    assert ds.notes["class_names"][:2] == ["airplane", "automobile"]


def test_imdb_loader_matches_keras_load_data_and_pad_sequences(adapters, tmp_path):
    from adapters import data

    raw = write_imdb(tmp_path / "imdb", n_train=60, n_test=40)
    (x_train, y_train), (x_test, y_test) = keras_imdb_reference(raw)
    ds = data.load("imdb", data_dir=str(tmp_path))
    assert ds.x_train.dtype == np.int32 and ds.x_train.shape == (48, 200)
    np.testing.assert_array_equal(ds.x_train, x_train[:48])
    np.testing.assert_array_equal(ds.x_val, x_train[48:])
    np.testing.assert_array_equal(ds.y_train, y_train[:48])
    np.testing.assert_array_equal(ds.x_test, x_test)
    np.testing.assert_array_equal(ds.y_test, y_test)
    assert ds.x_train.max() < 5000 and ds.shape.vocab_size == 5000
    # the word index, when present, names the model's ids (rank r is id r + 3)
    assert ds.vocabulary[:3] == ["<pad>", "<start>", "<oov>"] and ds.vocabulary[4] == "word1"
    os.remove(tmp_path / "imdb" / "imdb_word_index.json")
    assert data.load("imdb", data_dir=str(tmp_path)).vocabulary is None


# -- bad files: one line, naming the file and the problem ------------------------------------------
def _mnist_error(adapters, directory: Path) -> str:
    from adapters import data
    from adapters.datasets import DatasetError

    with pytest.raises(DatasetError) as info:
        data.load("mnist", data_dir=str(directory))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_truncated_gzip_is_named(adapters, tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(path.read_bytes()[:5000])
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "truncated gzip" in message


def test_not_gzip_at_all_is_named(adapters, tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(b"<html>mirror error page</html>")
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "not a valid gzip" in message


def test_wrong_magic_number_is_named(adapters, tmp_path):
    write_mnist(tmp_path)
    # labels where images belong: a real IDX file, the wrong one
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes((tmp_path / "train-labels-idx1-ubyte.gz").read_bytes())
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "wrong magic number 0x00000801" in message


def test_wrong_image_shape_is_named(adapters, tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((300, 32, 32), np.uint8), 0x803)))
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "items are 32x32, expected 28x28" in message


def test_header_and_payload_disagree(adapters, tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    payload = idx_bytes(np.zeros((300, 28, 28), np.uint8), 0x803)
    path.write_bytes(gzip.compress(payload[:-784]))  # a complete gzip of a short IDX
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "announces 300 items" in message


def test_label_count_must_match_image_count(adapters, tmp_path):
    write_mnist(tmp_path)
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros(299, np.uint8), 0x801)))
    message = _mnist_error(adapters, tmp_path)
    assert str(path) in message and "299 labels for 300 images" in message


def test_missing_file_is_named(adapters, tmp_path):
    write_mnist(tmp_path)
    os.remove(tmp_path / "t10k-images-idx3-ubyte.gz")
    message = _mnist_error(adapters, tmp_path)
    assert "t10k-images-idx3-ubyte.gz: missing" in message


def _cifar_error(adapters, tmp_path: Path, **kwargs) -> str:
    from adapters import data
    from adapters.datasets import DatasetError

    write_cifar(tmp_path / "cifar-10-python.tar.gz", **kwargs)
    with pytest.raises(DatasetError) as info:
        data.load("cifar10", data_dir=str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and "cifar-10-python.tar.gz" in message
    return message


def test_missing_tar_member_is_named(adapters, tmp_path):
    message = _cifar_error(adapters, tmp_path, skip="data_batch_3")
    assert "member cifar-10-batches-py/data_batch_3 is missing" in message


def test_corrupt_pickle_is_named(adapters, tmp_path):
    good = pickle.dumps({b"data": np.zeros((4, 3072), np.uint8), b"labels": [0] * 4}, protocol=2)
    message = _cifar_error(adapters, tmp_path, replace={"test_batch": good[: len(good) // 2]})
    assert "cifar-10-batches-py/test_batch: corrupt pickle" in message


def test_pickle_that_would_run_code_is_refused(adapters, tmp_path):
    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    evil = pickle.dumps({b"data": Exploit(), b"labels": []}, protocol=2)
    message = _cifar_error(adapters, tmp_path, replace={"data_batch_2": evil})
    assert "data_batch_2: corrupt pickle" in message and "refusing to load" in message


def test_cifar_batch_of_the_wrong_shape_is_named(adapters, tmp_path):
    bad = pickle.dumps({b"data": np.zeros((4, 1024), np.uint8), b"labels": [0] * 4}, protocol=2)
    message = _cifar_error(adapters, tmp_path, replace={"data_batch_1": bad})
    assert "data_batch_1: data is uint8 (4, 1024), expected uint8 (N, 3072)" in message


def test_cifar_archive_truncated(adapters, tmp_path):
    from adapters import data
    from adapters.datasets import DatasetError

    path = tmp_path / "cifar-10-python.tar.gz"
    write_cifar(path)
    path.write_bytes(path.read_bytes()[:-400])
    with pytest.raises(DatasetError, match=r"cifar-10-python.tar.gz: truncated gzip"):
        data.load("cifar10", data_dir=str(tmp_path))


def test_corrupt_npz_and_missing_array_are_named(adapters, tmp_path):
    from adapters import data
    from adapters.datasets import DatasetError

    write_imdb(tmp_path)
    path = tmp_path / "imdb.npz"
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 3])
    with pytest.raises(DatasetError, match=r"imdb.npz: not a valid npz \(zip\) file"):
        data.load("imdb", data_dir=str(tmp_path))
    np.savez(path, x_train=object_array([[1, 2]]), y_train=np.array([0]))
    with pytest.raises(DatasetError, match=r"imdb.npz: array 'x_test' is missing"):
        data.load("imdb", data_dir=str(tmp_path))
    (tmp_path / "imdb_word_index.json").write_text("{not json")
    write_imdb(tmp_path, word_index=False)
    with pytest.raises(DatasetError, match=r"imdb_word_index.json: not a valid JSON word index"):
        data.load("imdb", data_dir=str(tmp_path))


# -- equity: every framework receives the same batches from a real-format file ---------------------
class RecordingBackend:
    """What any adapter receives from the one loop: record it, train nothing."""

    def __init__(self) -> None:
        self.batches: list[tuple[np.ndarray, np.ndarray]] = []

    def sync(self) -> None:
        pass

    def train_epoch(self, x, y, batch_indices, clock) -> None:
        for idx in batch_indices:
            clock.begin()
            self.batches.append((x[idx].copy(), y[idx].copy()))
            clock.end(0.0)

    def evaluate(self, x, y, batch_size):
        return 0.0, 0.0


def test_two_backends_get_identical_first_batches_and_torch_only_changes_layout(adapters, tmp_path):
    from adapters import backend as contract
    from adapters import data
    from adapters import train as training

    write_mnist(tmp_path, n_train=400, n_test=50)
    hyper = contract.Hyper("cnn", 32, 1e-3, "adam", 0.25, seed=3)
    seen = []
    for _ in range(2):  # each backend loads the dataset itself, as each worker does
        ds = data.load("mnist", data_dir=str(tmp_path))
        backend = RecordingBackend()
        training.run_training(backend, ds, hyper, 1, 2, 0, emit=lambda *a, **k: None)
        seen.append((backend.batches, ds.notes["fingerprint"]))
    (first, print_a), (second, print_b) = seen
    assert print_a == print_b
    for (xa, ya), (xb, yb) in zip(first, second, strict=True):
        assert xa.tobytes() == xb.tobytes() and ya.tobytes() == yb.tobytes()
    order = data.epoch_order(len(ds.x_train), 3, 1)[:32]
    np.testing.assert_array_equal(first[0][0], ds.x_train[order])  # shuffled, seeded, not raw

    torch = require_module("torch")
    from adapters.torch import adapter as torch_adapter

    backend = torch_adapter.TorchBackend("eager", "cpu", 1)
    backend.build(hyper, ds)
    xt, yt = backend._tensors(*first[0])
    assert xt.dtype == torch.float32 and tuple(xt.shape) == (32, 1, 28, 28)
    np.testing.assert_array_equal(xt.permute(0, 2, 3, 1).numpy(), first[0][0])  # NCHW only
    np.testing.assert_array_equal(yt.numpy(), first[0][1])


def test_workers_train_on_a_real_format_file_and_report_its_provenance(adapters, tmp_path):
    require_module("torch")
    from tui_bench.engine.results.history import History
    from tui_bench.engine.runs.runner import execute

    write_mnist(tmp_path / "data" / "mnist", n_train=400, n_test=64)
    spec = RunSpec(
        dataset="mnist",
        data_dir=str(tmp_path / "data"),
        threads=1,
        epochs=1,
        steps_per_epoch=3,
        batch_size=32,
        warmup_steps=1,
    ).validate()
    assert cache.problem(spec) is not None  # tiny files are not the published ones...
    # ...so this test runs the worker directly: the worker trusts its data directory and the
    # front ends' checksum gate (cache.problem) is bypassed on purpose.
    results = [execute(spec, History(), sample_interval=0.5) for _ in range(2)]
    for result in results:
        assert result.status == "finished", result.reason
        notes = result.started["dataset_notes"]
        assert notes["synthetic"] is False and notes["source"].endswith("mnist")
        assert result.started["train_samples"] == 320
    assert {r.started["dataset_notes"]["fingerprint"] for r in results} == {
        results[0].started["dataset_notes"]["fingerprint"]
    }
    # a bad file fails the run with one line naming the file, before any training
    (tmp_path / "data" / "mnist" / "train-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b\x08junk")
    failed = execute(spec, History(), sample_interval=0.5)
    assert failed.status == "failed" and failed.error["phase"] == "data"
    assert (
        failed.reason.startswith("DatasetError: ") and "train-labels-idx1-ubyte.gz" in failed.reason
    )
    assert "\n" not in failed.reason


def test_cache_directory_is_passed_to_the_worker_by_default():
    from tui_bench.engine.runs.worker_launch import worker_command

    spec = RunSpec(dataset="mnist").validate()
    payload = json.loads(worker_command(spec, sys.executable, 9)[5])
    assert payload["data_dir"] == str(cache.cache_root())
    given = json.loads(worker_command(spec.with_changes(data_dir="/data"), sys.executable, 9)[5])
    assert given["data_dir"] == "/data"


MANIFEST_READER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location(
    "adapters", sys.argv[1] + "/__init__.py", submodule_search_locations=[sys.argv[1]])
module = importlib.util.module_from_spec(spec); sys.modules["adapters"] = module
spec.loader.exec_module(module)
from adapters import data, datasets
print(json.dumps({"shape": list(data.REAL_SHAPES["mnist"].input_shape),
                  "train": data.REAL_SHAPES["mnist"].train_size,
                  "synthetic_classes": data.SYNTHETIC_SHAPES["synthetic-imdb"].num_classes,
                  "files": datasets.FILES["mnist"], "aliases": datasets.ALIASES,
                  "imdb_words": datasets.IMDB_NUM_WORDS}))
"""


def edited_manifest_copy(tmp_path: Path) -> Path:
    """A copy of adapters/ whose manifest says different things about MNIST and IMDb."""
    import shutil

    copy = tmp_path / "adapters"
    shutil.copytree(REPO / "adapters", copy, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((copy / "datasets.json").read_text(encoding="utf-8"))
    mnist = manifest["datasets"]["mnist"]
    mnist["train_size"], mnist["label"] = 12_345, "MNIST (edited)"
    mnist["files"][0]["name"] = "renamed-train-images.gz"
    mnist["files"][0]["aliases"] = ["other-name.gz"]
    mnist["files"][0]["size"] = 7_000_000
    manifest["datasets"]["imdb"]["vocab_size"] = 777
    manifest["datasets"]["synthetic-imdb"]["num_classes"] = 3
    (copy / "datasets.json").write_text(json.dumps(manifest), encoding="utf-8")
    return copy


def test_the_worker_takes_every_dataset_fact_from_the_manifest(tmp_path):
    copy = edited_manifest_copy(tmp_path)
    out = subprocess.run(
        [sys.executable, "-I", "-c", MANIFEST_READER, str(copy)],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(out.stdout)
    assert seen["train"] == 12_345 and seen["shape"] == [28, 28, 1]
    assert seen["files"]["train_images"] == "renamed-train-images.gz"
    assert seen["aliases"]["renamed-train-images.gz"] == ["other-name.gz"]
    assert seen["imdb_words"] == 777 and seen["synthetic_classes"] == 3


def test_the_app_takes_every_dataset_fact_from_the_manifest(monkeypatch, tmp_path):
    from tui_bench.engine import catalog, dataset_manifest
    from tui_bench.engine.datasets import registry

    copy = edited_manifest_copy(tmp_path)
    monkeypatch.setattr(dataset_manifest, "adapters_dir", lambda: copy)
    dataset_manifest.manifest.cache_clear()
    try:
        datasets_seen = catalog._datasets()
        registry_seen = registry._registry()
    finally:
        dataset_manifest.manifest.cache_clear()
    assert datasets_seen["mnist"].label == "MNIST (edited)"
    # The download size in the description is computed from the manifest's file sizes.
    assert datasets_seen["mnist"].description.endswith("(8.7 MB download)")
    first = registry_seen["mnist"].files[0]
    assert first.name == "renamed-train-images.gz" and first.aliases == ("other-name.gz",)
    assert registry_seen["mnist"].label == "MNIST (edited)"
    assert set(registry_seen) == {"mnist", "fashion-mnist", "cifar10", "imdb", "tinyshakespeare"}


def test_manifest_pins_every_real_file_and_names_what_the_parsers_read(adapters):
    from adapters import data, datasets
    from tui_bench.engine import catalog

    manifest = json.loads((REPO / "adapters" / "datasets.json").read_text(encoding="utf-8"))
    assert list(catalog.DATASETS) == list(manifest["datasets"])
    # The roles each parser asks for exist (a renamed role would leave a parser without its file).
    assert set(datasets.FILES["mnist"]) == {
        "train_images",
        "train_labels",
        "test_images",
        "test_labels",
    }
    assert datasets.FILES["fashion-mnist"].keys() == datasets.FILES["mnist"].keys()
    assert datasets.FILES["cifar10"] == {"archive": "cifar-10-python.tar.gz"}
    assert datasets.FILES["imdb"] == {"sequences": "imdb.npz"}
    assert datasets.FILES["tinyshakespeare"] == {"text": "input.txt"}
    assert datasets.OPTIONAL_FILES == {"imdb": {"word_index": "imdb_word_index.json"}}
    assert data.REAL_SHAPES["imdb"].input_shape == (datasets.IMDB_MAXLEN,) == (200,)
    for dataset in cache.REGISTRY.values():
        for f in dataset.files:
            assert f.sha256 or f.md5
            assert f.sha256 is None or len(f.sha256) == 64
            assert f.md5 is None or len(f.md5) == 32
            assert f.urls and all(u.endswith(f.name) for u in f.urls)


def test_models_refuse_datasets_of_the_wrong_kind_or_size():
    from tui_bench.engine import catalog

    assert catalog.combination_problem("torch", "eager", "vgg16", "mnist")
    assert catalog.combination_problem("torch", "eager", "lstm", "cifar10")
    assert catalog.combination_problem("torch", "eager", "lstm", "imdb") is None


# -- the cache: pinned checksums, atomic installs --------------------------------------------------
def pin_tiny_mnist(monkeypatch, directory: Path) -> dict[str, bytes]:
    """Test-only: pin the registry's MNIST entry to tiny files (the real checksums are for the
    published 11.6 MB files, which cannot be fetched here)."""
    write_mnist(directory)
    blobs = {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
    files = tuple(
        cache.DataFile(
            name,
            len(blob),
            hashlib.sha256(blob).hexdigest(),
            hashlib.md5(blob).hexdigest(),
            (f"https://mirror-a.example/{name}", f"https://mirror-b.example/{name}"),
        )
        for name, blob in blobs.items()
    )
    dataset = cache.RealDataset("mnist", "MNIST", files, "test")
    monkeypatch.setitem(cache.REGISTRY, "mnist", dataset)
    return blobs


def chunks(blob: bytes, size: int = 997):
    for i in range(0, len(blob), size):
        yield blob[i : i + size]


def cache_listing() -> list[str]:
    root = cache.cache_root()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_download_verifies_then_renames_and_reports_progress(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    fetched, progress = [], []

    def fetch(url):
        fetched.append(url)
        return chunks(blobs[url.rsplit("/", 1)[1]])

    state = cache.download("mnist", progress=lambda *a: progress.append(a), fetch=fetch)
    assert state.present and state.verified and state.download_size == 0
    for name, blob in blobs.items():
        assert (cache.cache_dir("mnist") / name).read_bytes() == blob
    assert not list(cache.cache_dir("mnist").glob(".part-*"))
    assert progress[-1][1] == progress[-1][2]
    assert all(u.startswith("https://mirror-a") for u in fetched)
    assert cache.problem(RunSpec(dataset="mnist")) is None
    assert cache.choice_note("mnist").startswith("present, verified")
    assert cache.choice_note("cifar10") == "not downloaded: 170.5 MB to download"
    assert cache.choice_note("synthetic-mnist") == "generated on the fly, no download"
    # nothing to do the second time
    fetched.clear()
    cache.download("mnist", fetch=fetch)
    assert fetched == []


def test_partial_mismatching_or_failed_downloads_leave_nothing(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    name = "train-images-idx3-ubyte.gz"

    def broken(url):
        blob = blobs[url.rsplit("/", 1)[1]]
        if url.endswith(name) and "mirror-a" in url:
            yield blob[:1000]
            raise ConnectionResetError(104, "Connection reset by peer")
        if url.endswith(name):
            yield blob[:-10] + b"0123456789"  # right size, wrong bytes
            return
        yield from chunks(blob)

    with pytest.raises(cache.DatasetError) as info:
        cache.download("mnist", fetch=broken)
    message = str(info.value)
    assert "\n" not in message and f"could not download mnist/{name}" in message
    assert "mirror-a.example" in message and "Connection reset by peer" in message
    assert "mirror-b.example" in message and "sha256" in message and "does not match" in message
    listing = cache_listing()
    assert f"mnist/{name}" not in listing and not [p for p in listing if ".part-" in p]
    state = cache.status(["mnist"])[0]
    assert not state.present and state.download_size == len(blobs[name])

    def short(url):
        yield blobs[url.rsplit("/", 1)[1]][:100]

    with pytest.raises(cache.DatasetError, match="incomplete: 100 of"):
        cache.download("mnist", fetch=short)

    def offline(url):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    with pytest.raises(cache.DatasetError, match="network error: .*name resolution"):
        cache.download("mnist", fetch=offline)
    assert f"mnist/{name}" not in cache_listing()
    assert not [p for p in cache_listing() if ".part-" in p]


def test_a_failing_mirror_falls_back_to_the_next(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")

    def first_mirror_404(url):
        if "mirror-a" in url:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return chunks(blobs[url.rsplit("/", 1)[1]])

    assert cache.download("mnist", fetch=first_mirror_404).verified
    assert not [p for p in cache_listing() if ".part-" in p]


def test_oversized_download_is_cut_off(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")

    def endless(url):
        while True:
            yield b"\0" * 4096

    with pytest.raises(cache.DatasetError, match="more than the expected"):
        cache.download("mnist", fetch=endless)
    assert not [p for p in cache_listing() if ".part-" in p]
    assert blobs  # the fixture ran


def test_status_notices_a_file_changed_after_verification(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    cache.download("mnist", fetch=lambda url: chunks(blobs[url.rsplit("/", 1)[1]]))
    path = cache.cache_dir("mnist") / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(1, 1))  # a new mtime: the stamp no longer vouches for it
    state = cache.status(["mnist"])[0]
    assert state.present and not state.verified
    problem = cache.problem(RunSpec(dataset="mnist"))
    assert str(path) in problem and "does not match" in problem and "\n" not in problem


def test_missing_real_dataset_is_one_line_before_any_process(tmp_path):
    problem = cache.problem(RunSpec(dataset="mnist"))
    assert problem == (
        "dataset 'mnist' is not in the cache: run `tui-bench data download mnist` (11.6 MB) "
        "or `tui-bench data import PATH`"
    )
    assert cache.problem(RunSpec(dataset="synthetic-mnist")) is None
    assert "is not a directory" in cache.problem(
        RunSpec(dataset="cifar10", data_dir="/nonexistent")
    )
    out = subprocess.run(
        [sys.executable, "-m", "tui_bench", "run", "--dataset", "imdb", "--model", "lstm"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ,
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "tui-bench: error: dataset 'imdb' is not in the cache: run `tui-bench data download imdb`"
        " (17.5 MB) or `tui-bench data import PATH`"
    )
    assert not (Path(os.environ["TUI_BENCH_HOME"]) / "runs").exists()  # nothing was started


def test_data_dir_files_are_checked_against_the_pinned_checksums(monkeypatch, tmp_path):
    pin_tiny_mnist(monkeypatch, tmp_path / "mine" / "mnist")
    spec = RunSpec(dataset="mnist", data_dir=str(tmp_path / "mine"))
    assert cache.problem(spec) is None  # DIR/mnist holds the published (pinned) files
    assert cache.problem(spec.with_changes(data_dir=str(tmp_path / "mine" / "mnist"))) is None
    path = tmp_path / "mine" / "mnist" / "train-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes() + b"x")
    problem = cache.problem(spec)
    assert str(path) in problem and "expected" in problem and "\n" not in problem
    path.unlink()
    problem = cache.problem(spec)
    assert "is not in" in problem and "train-labels-idx1-ubyte.gz" in problem
    assert not cache.cache_root().exists()  # checking a user's directory writes nothing


def test_import_recognises_files_by_checksum_from_any_layout(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    # torchvision's layout, one file renamed, plus unrelated files
    copied = tmp_path / "usb" / "MNIST" / "raw"
    copied.mkdir(parents=True)
    for name, blob in blobs.items():
        target = copied / ("renamed.gz" if name.startswith("t10k-labels") else name)
        target.write_bytes(blob)
    (copied / "notes.txt").write_text("hello")
    report = cache.import_path(tmp_path / "usb")
    assert sorted(report.installed) == sorted(f"mnist/{n}" for n in blobs)
    assert report.rejected == [] and report.ignored == [str(copied / "notes.txt")]
    assert cache.status(["mnist"])[0].verified
    again = cache.import_path(tmp_path / "usb")
    assert again.installed == [] and len(again.already) == 4


def test_import_rejects_a_known_file_with_the_wrong_bytes(monkeypatch, tmp_path):
    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    name = "train-labels-idx1-ubyte.gz"
    bad = tmp_path / "copy" / name
    bad.parent.mkdir()
    bad.write_bytes(blobs[name][:-1] + bytes([blobs[name][-1] ^ 1]))
    report = cache.import_path(bad)
    assert report.installed == [] and len(report.rejected) == 1
    assert str(bad) in report.rejected[0] and "does not match" in report.rejected[0]
    assert cache_listing() == [] or f"mnist/{name}" not in cache_listing()
    with pytest.raises(cache.DatasetError, match="no such file or directory"):
        cache.import_path(tmp_path / "nowhere")


def test_import_tells_mnist_from_fashion_mnist_by_checksum(monkeypatch, tmp_path):
    pin_tiny_mnist(monkeypatch, tmp_path / "published")
    fashion_dir = tmp_path / "fashion"
    write_mnist(fashion_dir, seed=1)  # same names, other bytes (sizes differ from MNIST's)
    blobs = {p.name: p.read_bytes() for p in fashion_dir.iterdir()}
    files = tuple(
        cache.DataFile(n, len(b), hashlib.sha256(b).hexdigest(), None, ("https://x/" + n,))
        for n, b in blobs.items()
    )
    monkeypatch.setitem(
        cache.REGISTRY, "fashion-mnist", cache.RealDataset("fashion-mnist", "F", files, "")
    )
    report = cache.import_path(fashion_dir)
    assert sorted(report.installed) == sorted(f"fashion-mnist/{n}" for n in blobs)
    assert not cache.status(["mnist"])[0].present


def test_cli_data_list_download_and_import(monkeypatch, tmp_path, capsys):
    from tui_bench import cli

    blobs = pin_tiny_mnist(monkeypatch, tmp_path / "published")
    assert cli.main(["data", "list", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"mnist", "fashion-mnist", "cifar10", "imdb", "tinyshakespeare"}
    assert listed["cifar10"]["download_size"] == 170_498_071 and not listed["cifar10"]["present"]

    assert cli.main(["data", "download", "nonsense"]) == 2
    assert "unknown dataset 'nonsense'" in capsys.readouterr().err

    def no_network(url, timeout=60.0):
        raise urllib.error.URLError("no route to host")

    monkeypatch.setattr(cache.downloads, "urllib_fetch", no_network)
    assert cli.main(["data", "download", "mnist", "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tui-bench: error: could not download mnist/")

    assert cli.main(["data", "import", str(tmp_path / "published"), "-q"]) == 0
    assert cli.main(["data", "list", "--json"]) == 0
    listed = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    assert listed["mnist"]["verified"] and listed["mnist"]["size_on_disk"] == sum(
        map(len, blobs.values())
    )
    assert cli.main(["data", "list"]) == 0
    assert "mnist" in capsys.readouterr().out


CROSS_NUMPY = """
import hashlib, importlib.util, json, sys
spec = importlib.util.spec_from_file_location(
    "adapters", sys.argv[1] + "/__init__.py", submodule_search_locations=[sys.argv[1]])
module = importlib.util.module_from_spec(spec); sys.modules["adapters"] = module
spec.loader.exec_module(module)
import numpy
from adapters import data
out = {"numpy": numpy.__version__}
for name in ("mnist", "cifar10", "imdb", "synthetic-imdb"):
    ds = data.load(name, data_dir=sys.argv[2], train_samples=2000, test_samples=500)
    digest = hashlib.sha256()
    for a in (ds.x_train, ds.y_train, ds.x_val, ds.y_val, ds.x_test, ds.y_test):
        digest.update(numpy.ascontiguousarray(a).tobytes())
    out[name] = [ds.notes["fingerprint"], digest.hexdigest()]
print(json.dumps(out))
"""


def test_other_numpy_runtime_parses_the_same_bytes(adapters, tmp_path):
    """An interpreter with another numpy (TUI_BENCH_OTHER_NUMPY_PYTHON, else the MXNet runtime's
    numpy 1.23) must build bit-identical arrays from the same files."""
    other = os.environ.get("TUI_BENCH_OTHER_NUMPY_PYTHON")
    if not other:  # the MXNet runtime, where it is set up (CI sets every runtime up)
        require_runtime("mxnet", "gluon")
        from tui_bench.engine.machine import runtimes

        other = runtimes.resolve("mxnet", "gluon").python
    write_mnist(tmp_path / "mnist")
    write_cifar(tmp_path / "cifar10" / "cifar-10-python.tar.gz")
    write_imdb(tmp_path / "imdb")
    script = tmp_path / "cross.py"
    script.write_text(CROSS_NUMPY)
    results = []
    for python in (sys.executable, other):
        out = subprocess.run(
            [python, "-I", str(script), str(REPO / "adapters"), str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    here, there = results
    assert here.pop("numpy") != there.pop("numpy")  # really two numpy versions
    assert here == there
