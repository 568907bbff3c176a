"""Parsers of the real datasets' published files: MNIST and Fashion-MNIST (IDX, gzip), CIFAR-10
(python version: pickled batches in a tar.gz), IMDb (Keras' word-id ``imdb.npz``) and
TinyShakespeare (char-rnn's ``input.txt``, read as byte tokens).

Runs inside the worker: stdlib + numpy only (numpy 1.23 to 2.x), no ``tui_bench`` import. Every
problem with a file becomes one ``DatasetError`` that names the file and what is wrong with it; a
parser never returns part of a dataset. Checksums are checked app-side when files are downloaded or
imported (``tui_bench.engine.datasets``); here each file's sha256 is recorded as provenance.

Pickles (CIFAR batches, IMDb's object arrays) are read with an unpickler that accepts only the
numpy reconstruction functions such files contain, so a tampered file cannot run code.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import json
import os
import pickle
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Every dataset fact (shapes, classes, sizes, published file names and aliases, checksums) lives
# in one manifest beside this file, read by the app too. Plain JSON: every worker Python reads it.
MANIFEST: dict[str, dict] = json.loads(
    Path(__file__).with_name("datasets.json").read_text(encoding="utf-8")
)["datasets"]


def _file_names(required: bool) -> dict[str, dict[str, str]]:
    """Dataset -> {role: published file name}, e.g. mnist -> {"train_images": "train-images…"}."""
    out: dict[str, dict[str, str]] = {}
    for name, entry in MANIFEST.items():
        for f in entry.get("files", ()):
            if f.get("required", True) == required:
                out.setdefault(name, {})[f["role"]] = f["name"]
    return out


FILES = _file_names(required=True)
OPTIONAL_FILES = _file_names(required=False)
# The same bytes under another published name (Keras caches the CIFAR-10 archive under its own).
ALIASES: dict[str, tuple[str, ...]] = {
    f["name"]: tuple(f["aliases"])
    for entry in MANIFEST.values()
    for f in entry.get("files", ())
    if f.get("aliases")
}

CIFAR_MEMBERS = tuple(f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)) + (
    "cifar-10-batches-py/test_batch",
)
CIFAR_META = "cifar-10-batches-py/batches.meta"

# IMDb as the studies used it: keras.datasets.imdb.load_data(num_words=5000) then
# pad_sequences(maxlen=200), both with Keras' defaults.
IMDB_NUM_WORDS = MANIFEST["imdb"]["vocab_size"]
(IMDB_MAXLEN,) = MANIFEST["imdb"]["input_shape"]
IMDB_START, IMDB_OOV, IMDB_INDEX_FROM = 1, 2, 3
IMDB_SHUFFLE_SEED = 113  # Keras' load_data(seed=113): RandomState streams are frozen by numpy

IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension


class DatasetError(ValueError):
    """A dataset file is missing or not what it should be. ``str()`` is one line naming the file."""


@dataclass
class RawSplits:
    """A real dataset as published, before the common preprocessing in ``data.finish``."""

    x_train: np.ndarray  # uint8 NHWC images or int32 (N, maxlen) word ids
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    files: dict[str, str]  # file name -> sha256 of the bytes parsed
    source: str
    vocabulary: list[str] | None = None  # IMDb: word of each id below num_words, when known
    class_names: list[str] | None = None  # CIFAR-10: from batches.meta


# -- locating files -------------------------------------------------------------------------------
def dataset_dir(data_dir: str | os.PathLike, name: str) -> Path:
    """``DIR/NAME`` when it is a directory (the cache's layout), else ``DIR`` itself.
    ``tui_bench.engine.datasets.locate`` applies the same rule."""
    base = Path(data_dir).expanduser()
    nested = base / name
    return nested if nested.is_dir() else base


def _find(directory: Path, file_name: str) -> Path | None:
    for candidate in (file_name, *ALIASES.get(file_name, ())):
        path = directory / candidate
        if path.is_file():
            return path
    return None


def _read(path: Path, files: dict[str, str]) -> bytes:
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    files[path.name] = hashlib.sha256(payload).hexdigest()
    return payload


# -- IDX (MNIST, Fashion-MNIST) -------------------------------------------------------------------
def _gunzip(path: Path, payload: bytes) -> bytes:
    # zlib in one call (no copy of the member loop); when it refuses, or more data follows (a
    # multi-member file), gzip decides and gives its precise error.
    try:
        inflater = zlib.decompressobj(wbits=31)
        data = inflater.decompress(payload)
        if inflater.eof and not inflater.unused_data:
            return data
    except zlib.error:
        pass
    try:
        return gzip.decompress(payload)
    except EOFError:
        raise DatasetError(f"{path}: truncated gzip file (it ends before its data does)") from None
    except (OSError, zlib.error) as exc:
        raise DatasetError(f"{path}: not a valid gzip file ({exc})") from None


def parse_idx(path: Path, payload: bytes, magic: int, item_shape: tuple[int, ...]) -> np.ndarray:
    """One IDX file (gzip-compressed): big-endian header, then unsigned bytes."""
    raw = _gunzip(path, payload)
    dims = len(item_shape) + 1
    header = 4 + 4 * dims
    if len(raw) < header:
        raise DatasetError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        what = "images" if magic == IDX_IMAGES_MAGIC else "labels"
        raise DatasetError(
            f"{path}: wrong magic number 0x{found:08x} (IDX {what} start with 0x{magic:08x})"
        )
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    if shape[1:] != item_shape:
        raise DatasetError(
            f"{path}: items are {'x'.join(map(str, shape[1:]))}, "
            f"expected {'x'.join(map(str, item_shape))}"
        )
    expected = int(np.prod(shape))
    if len(raw) - header != expected:
        raise DatasetError(
            f"{path}: header announces {shape[0]} items ({expected} bytes) "
            f"but the file holds {len(raw) - header} bytes"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _idx_split(directory: Path, names: dict[str, str], split: str, files: dict[str, str]):
    images_path = _require(directory, names[f"{split}_images"])
    labels_path = _require(directory, names[f"{split}_labels"])
    images = parse_idx(images_path, _read(images_path, files), IDX_IMAGES_MAGIC, (28, 28))
    labels = parse_idx(labels_path, _read(labels_path, files), IDX_LABELS_MAGIC, ())
    if len(images) != len(labels):
        raise DatasetError(
            f"{labels_path}: {len(labels)} labels for {len(images)} images in {images_path.name}"
        )
    _check_labels(labels_path, labels, 10)
    return images[:, :, :, None], labels.astype(np.int64)


def _check_labels(path: Path, labels: np.ndarray, classes: int) -> None:
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise DatasetError(
            f"{path}: labels must be 0..{classes - 1}, found {int(labels.min())}..{int(labels.max())}"
        )


def _require(directory: Path, file_name: str) -> Path:
    path = _find(directory, file_name)
    if path is None:
        raise DatasetError(f"{directory / file_name}: missing")
    return path


def load_idx(name: str, directory: Path) -> RawSplits:
    files: dict[str, str] = {}
    names = FILES[name]
    x_train, y_train = _idx_split(directory, names, "train", files)
    x_test, y_test = _idx_split(directory, names, "test", files)
    return RawSplits(x_train, y_train, x_test, y_test, files, str(directory))


# -- restricted unpickling ------------------------------------------------------------------------
_PICKLE_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how protocol-2 pickles written by Python 3 carry bytes
    ("copy_reg", "_reconstructor"),
    ("copyreg", "_reconstructor"),
    ("__builtin__", "object"),
    ("builtins", "object"),
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _PICKLE_ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        try:
            return super().find_class(module, name)
        except ModuleNotFoundError:
            if not module.startswith("numpy._core"):
                raise
            # Written by numpy 2, read by numpy < 1.26 (which has only numpy.core).
            return super().find_class("numpy.core" + module[len("numpy._core") :], name)


def _unpickle(label: str, payload: bytes, encoding: str):
    try:
        return _NumpyOnlyUnpickler(io.BytesIO(payload), encoding=encoding).load()
    except Exception as exc:  # noqa: BLE001 - any failure means a corrupt file
        raise DatasetError(f"{label}: corrupt pickle ({type(exc).__name__}: {exc})") from None


# -- CIFAR-10 -------------------------------------------------------------------------------------
def _cifar_batch(label: str, payload: bytes) -> tuple[np.ndarray, np.ndarray]:
    batch = _unpickle(label, payload, "bytes")
    if not isinstance(batch, dict):
        raise DatasetError(f"{label}: expected a pickled dict, found {type(batch).__name__}")
    data, labels = batch.get(b"data"), batch.get(b"labels")
    if data is None or labels is None:
        raise DatasetError(f"{label}: the batch has no b'data' or no b'labels' entry")
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DatasetError(f"{label}: data is {data.dtype} {data.shape}, expected uint8 (N, 3072)")
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (len(data),):
        raise DatasetError(f"{label}: {labels.size} labels for {len(data)} images")
    _check_labels(Path(label), labels, 10)
    # Stored as N x (1024 red, 1024 green, 1024 blue), row-major: NCHW, made NHWC as everywhere.
    # One copy into C order here keeps every later step (x / 255, batch gathers) contiguous.
    return np.ascontiguousarray(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)), labels


def load_cifar10(directory: Path) -> RawSplits:
    files: dict[str, str] = {}
    path = _require(directory, FILES["cifar10"]["archive"])
    # One zlib pass, then tarfile on memory: a bit faster than "r:gz", and a truncated archive
    # gets the same precise error as a truncated IDX file.
    tar_bytes = _gunzip(path, _read(path, files))
    try:
        archive = tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:")
        members = {m.name: m for m in archive.getmembers() if m.isfile()}
    except tarfile.TarError as exc:
        raise DatasetError(f"{path}: not a valid tar archive ({exc})") from None
    missing = [m for m in (*CIFAR_MEMBERS, CIFAR_META) if m not in members]
    if missing:
        raise DatasetError(f"{path}: member {missing[0]} is missing from the archive")
    parts = []
    for member in CIFAR_MEMBERS:
        payload = archive.extractfile(members[member]).read()
        parts.append(_cifar_batch(f"{path}:{member}", payload))
    meta = _unpickle(
        f"{path}:{CIFAR_META}", archive.extractfile(members[CIFAR_META]).read(), "bytes"
    )
    names = meta.get(b"label_names") if isinstance(meta, dict) else None
    del archive, members, tar_bytes  # 180 MB less at the peak, before the arrays are joined
    x_train = np.concatenate([x for x, _ in parts[:5]])
    y_train = np.concatenate([y for _, y in parts[:5]])
    x_test, y_test = parts[5]
    splits = RawSplits(x_train, y_train, x_test, y_test, files, str(directory))
    if names:
        splits.class_names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return splits


# -- IMDb -----------------------------------------------------------------------------------------
def _npz_arrays(path: Path, payload: bytes, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read an .npz without numpy's unrestricted pickle: object arrays go through our unpickler."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
        names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise DatasetError(f"{path}: not a valid npz (zip) file ({exc})") from None
    out = {}
    for key in keys:
        if f"{key}.npy" not in names:
            raise DatasetError(f"{path}: array {key!r} is missing")
        label = f"{path}:{key}"
        try:
            member = io.BytesIO(archive.read(f"{key}.npy"))
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError(f"npy format version {version} is not supported")
        except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError) as exc:
            raise DatasetError(f"{label}: corrupt array ({exc})") from None
        body = member.read()
        if dtype.hasobject:
            array = _unpickle(label, body, "latin1")
            if not isinstance(array, np.ndarray):
                raise DatasetError(f"{label}: expected an array, found {type(array).__name__}")
        else:
            count = int(np.prod(shape))
            if len(body) != count * dtype.itemsize:
                raise DatasetError(f"{label}: truncated array ({len(body)} bytes for {shape})")
            array = np.frombuffer(body, dtype=dtype, count=count)
            array = array.reshape(shape, order="F" if fortran else "C")
        out[key] = array
    return out


def _sequences_to_matrix(label: str, sequences: np.ndarray) -> np.ndarray:
    """Keras' preprocessing, vectorised: start mark, ids + 3, ids >= num_words -> OOV (2), then
    pad_sequences(maxlen=200): pad with 0 in front, and keep the *last* 200 ids of longer ones."""
    try:
        lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
        # chain.from_iterable iterates in C: twice as fast as a generator expression here.
        flat = np.fromiter(
            itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(lengths.sum())
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise DatasetError(f"{label}: not sequences of word ids ({exc})") from None
    if len(flat) and flat.min() < 0:
        raise DatasetError(f"{label}: negative word id {int(flat.min())}")
    words = flat + IMDB_INDEX_FROM
    words[words >= IMDB_NUM_WORDS] = IMDB_OOV
    n = len(sequences)
    total = lengths + 1  # with the start mark
    out = np.zeros((n, IMDB_MAXLEN), dtype=np.int32)
    # The start mark survives only when the whole review fits.
    fits = total <= IMDB_MAXLEN
    rows = np.arange(n)
    out[rows[fits], IMDB_MAXLEN - total[fits]] = IMDB_START
    # Word j of review i lands in column maxlen - length_i + j, i.e. flat position p goes to
    # p + (maxlen - end_i) where end_i is where review i ends in the flat array; < 0 is cut off.
    column = np.arange(len(flat)) + np.repeat(IMDB_MAXLEN - np.cumsum(lengths), lengths)
    keep = column >= 0
    out[np.repeat(rows, lengths)[keep], column[keep]] = words[keep]
    return out


def load_imdb(directory: Path) -> RawSplits:
    files: dict[str, str] = {}
    path = _require(directory, FILES["imdb"]["sequences"])
    arrays = _npz_arrays(path, _read(path, files), ("x_train", "y_train", "x_test", "y_test"))
    splits = []
    # Keras shuffles train, then test, with one RandomState(113): same order as the studies.
    rng = np.random.RandomState(IMDB_SHUFFLE_SEED)
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 1 or y.shape != x.shape:
            raise DatasetError(f"{path}: x_{split} {x.shape} and y_{split} {y.shape} do not match")
        y = y.astype(np.int64)
        _check_labels(Path(f"{path}:y_{split}"), y, 2)
        order = np.arange(len(x))
        rng.shuffle(order)
        splits.append((_sequences_to_matrix(f"{path}:x_{split}", x[order]), y[order]))
    result = RawSplits(*splits[0], *splits[1], files, str(directory))
    index_path = _find(directory, OPTIONAL_FILES["imdb"]["word_index"])
    if index_path is not None:
        result.vocabulary = _vocabulary(index_path, _read(index_path, files))
    return result


def _vocabulary(path: Path, payload: bytes) -> list[str]:
    """Word of each model id (< num_words); 0 pad, 1 start, 2 out-of-vocabulary."""
    try:
        index = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not a valid JSON word index ({exc})") from None
    if not isinstance(index, dict) or not all(isinstance(v, int) for v in index.values()):
        raise DatasetError(f"{path}: expected a JSON object mapping words to ranks")
    words = ["<pad>", "<start>", "<oov>"] + [""] * (IMDB_NUM_WORDS - 3)
    for word, rank in index.items():
        model_id = rank + IMDB_INDEX_FROM
        if 3 <= model_id < IMDB_NUM_WORDS:
            words[model_id] = word
    return words


# -- TinyShakespeare ------------------------------------------------------------------------------
SHAKESPEARE = MANIFEST["tinyshakespeare"]
SHAKESPEARE_VOCAB = SHAKESPEARE["vocab_size"]  # byte tokens: 0..255


def byte_sequences(label: str, stream: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), each (n, S): sequences of S + 1 tokens at every S-th position, so
    consecutive sequences overlap by one token and every byte after the first is a target once;
    a last partial sequence is left out. n = (len - 1) // S."""
    count = (len(stream) - 1) // seq_len
    if count < 1:
        raise DatasetError(
            f"{label}: {len(stream)} bytes hold no sequence of {seq_len + 1} tokens (S {seq_len})"
        )
    starts = np.arange(count, dtype=np.int64)[:, None] * seq_len
    windows = stream[starts + np.arange(seq_len + 1, dtype=np.int64)[None, :]]
    return windows[:, :-1], windows[:, 1:]


def load_tinyshakespeare(directory: Path, seq_len: int | None = None) -> RawSplits:
    """The text's bytes as tokens (V 256): the first ``train_fraction`` of them train, the rest
    test (nanoGPT's shakespeare_char split, 90 / 10), each cut by ``byte_sequences``. The
    published file is ASCII text: an empty file, NUL bytes or bytes that are not UTF-8 mean a
    wrong file, named in one line (its checksum is checked app-side before a run)."""
    files: dict[str, str] = {}
    seq_len = seq_len or SHAKESPEARE["input_shape"][0]
    path = _require(directory, FILES["tinyshakespeare"]["text"])
    payload = _read(path, files)
    if not payload:
        raise DatasetError(
            f"{path}: empty file (the text is {SHAKESPEARE['files'][0]['size']:,} bytes)"
        )
    nul = payload.find(b"\x00")
    if nul >= 0:
        raise DatasetError(f"{path}: not a text file (a NUL byte at offset {nul:,})")
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"{path}: not UTF-8 text (byte 0x{payload[exc.start]:02x} at offset {exc.start:,})"
        ) from None
    stream = np.frombuffer(payload, dtype=np.uint8)
    cut = int(len(stream) * SHAKESPEARE["train_fraction"])
    x_train, y_train = byte_sequences(f"{path} (its first {cut:,} bytes)", stream[:cut], seq_len)
    x_test, y_test = byte_sequences(
        f"{path} (its last {len(stream) - cut:,} bytes)", stream[cut:], seq_len
    )
    return RawSplits(x_train, y_train, x_test, y_test, files, str(directory))


LOADERS = {
    "mnist": lambda d, _s: load_idx("mnist", d),
    "fashion-mnist": lambda d, _s: load_idx("fashion-mnist", d),
    "cifar10": lambda d, _s: load_cifar10(d),
    "imdb": lambda d, _s: load_imdb(d),
    "tinyshakespeare": load_tinyshakespeare,
}


def load_raw(
    name: str, data_dir: str | os.PathLike | None, seq_len: int | None = None
) -> RawSplits:
    """Parse dataset ``name`` from ``data_dir`` (or ``data_dir/name``). ``seq_len``: the context
    S a token dataset is cut for (its manifest shape otherwise)."""
    if not data_dir:
        raise DatasetError(f"dataset '{name}': no data directory was given")
    directory = dataset_dir(data_dir, name)
    if not directory.is_dir():
        raise DatasetError(f"{directory}: the data directory does not exist")
    return LOADERS[name](directory, seq_len)
