"""How long a worker takes to parse each real dataset at its published size.

The real files cannot be downloaded on every machine, so this builds files of the published
formats *and sizes* (60,000 + 10,000 MNIST images as IDX gzip, CIFAR-10's five 10,000-image pickled
batches + test batch in a tar.gz, IMDb's 25,000 + 25,000 reviews as Keras' npz) in a temporary
directory, then times ``adapters.data.load`` on them: read, sha256, decompress, parse, x/255, and
the validation split, i.e. everything ``data_s`` in a run covers. Pixels are random but mostly
zero, like MNIST's, so the gzip sizes are in the published range.

    python benchmarks/dataset_load.py [--repeats 3] [--real-dir DIR]

``--real-dir`` times the published files instead (a directory laid out like the cache).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import pickle
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def load_adapters():
    here = REPO / "adapters"
    spec = importlib.util.spec_from_file_location(
        "adapters", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["adapters"] = module
    spec.loader.exec_module(module)


def sparse_images(rng, shape) -> np.ndarray:
    images = rng.integers(0, 256, shape, dtype=np.uint8)
    images[rng.random(shape) < 0.8] = 0  # MNIST is ~80 % background
    return images


def idx(array: np.ndarray, magic: int) -> bytes:
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def build(root: Path) -> None:
    rng = np.random.default_rng(0)
    mnist = root / "mnist"
    mnist.mkdir()
    for split, n in (("train", 60_000), ("t10k", 10_000)):
        (mnist / f"{split}-images-idx3-ubyte.gz").write_bytes(
            gzip.compress(idx(sparse_images(rng, (n, 28, 28)), 0x803), compresslevel=6)
        )
        (mnist / f"{split}-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(idx(rng.integers(0, 10, n, dtype=np.uint8), 0x801))
        )
    cifar = root / "cifar10"
    cifar.mkdir()
    with tarfile.open(cifar / "cifar-10-python.tar.gz", "w:gz") as archive:
        names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]
        for name in names:
            if name == "batches.meta":
                obj = {b"label_names": [b"c%d" % i for i in range(10)]}
            else:
                obj = {
                    b"data": rng.integers(0, 256, (10_000, 3072), dtype=np.uint8),
                    b"labels": [int(v) for v in rng.integers(0, 10, 10_000)],
                }
            # Protocol 4 stores the pixels as raw bytes, as the published Python 2 pickles do
            # (protocol 2 from Python 3 would round-trip them through latin-1 text: far slower).
            payload = pickle.dumps(obj, protocol=4)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    imdb = root / "imdb"
    imdb.mkdir()
    arrays = {}
    for split in ("train", "test"):
        # IMDb reviews: median ~174 words, long tail (mean ~235); ranks Zipf-like.
        lengths = np.clip(rng.lognormal(5.2, 0.7, 25_000).astype(int), 10, 2500)
        seqs = np.empty(25_000, dtype=object)
        for i, length in enumerate(lengths):
            seqs[i] = [int(w) for w in np.minimum(rng.zipf(1.3, length), 88_000)]
        arrays[f"x_{split}"] = seqs
        arrays[f"y_{split}"] = rng.integers(0, 2, 25_000)
    np.savez(imdb / "imdb.npz", **arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--real-dir", help="time the published files in this directory instead")
    args = parser.parse_args()
    load_adapters()
    from adapters import data

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.real_dir) if args.real_dir else Path(tmp)
        if not args.real_dir:
            t0 = time.perf_counter()
            build(root)
            print(f"built full-size files in {time.perf_counter() - t0:.1f} s")
        print(f"numpy {np.__version__}, Python {sys.version.split()[0]}, {args.repeats} repeats")
        print(f"{'dataset':<10} {'files MB':>9} {'median s':>9} {'min s':>7}  arrays")
        for name in ("mnist", "cifar10", "imdb"):
            directory = root / name
            if not directory.is_dir():
                continue
            size = sum(p.stat().st_size for p in directory.iterdir()) / 1e6
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                ds = data.load(name, data_dir=str(root))
                times.append(time.perf_counter() - t0)
            shapes = f"train {ds.x_train.shape} val {ds.x_val.shape} test {ds.x_test.shape}"
            print(
                f"{name:<10} {size:9.1f} {statistics.median(times):9.2f} {min(times):7.2f}  "
                f"{shapes}"
            )
            del ds


if __name__ == "__main__":
    main()
