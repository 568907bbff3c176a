"""Datasets as numpy arrays, identical bytes for every framework.

Runs inside the worker (stdlib + numpy only). Frameworks receive the arrays built here and change
only layout (NCHW/NHWC) and dtype, so a comparison never differs by data.

Why no ``np.random.Generator`` methods: their streams may change between numpy releases, and
workers of different frameworks run different numpy versions (MXNet needs numpy<1.24). Bit
generators' raw streams and ``SeedSequence`` are stable, and only exactly rounded float operations
(+, -, *, /) are used on top of them, so every runtime builds the same bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from adapters import datasets as real_files

# The dataset itself is fixed; the run's seed only drives initialisation and shuffling.
DATA_SEED = 20_190_715
CHUNK = 1024  # samples per independently seeded chunk: a prefix never depends on the cap
VALIDATION_FRACTION = 0.2
# Difficulty of the synthetic images: chosen so a small CNN needs an epoch or two to pass ~90 %,
# not a handful of steps, while staying far above chance.
MAX_SHIFT = 4
NOISE = 0.6  # as in the studies: the last 20 % of the training split validates


# Models with one logit under sigmoid cross-entropy on a two-class dataset (the IMDb models);
# every adapter asks ``binary_head`` instead of naming them.
BINARY_MODELS = ("lstm", "transformer")


def binary_head(model: str, num_classes: int) -> bool:
    return num_classes == 2 and model in BINARY_MODELS


@dataclass(frozen=True)
class Shape:
    kind: str  # "image", "sequence" (one label each) or "tokens" (a next token per position)
    input_shape: tuple[int, ...]  # HWC for images, (maxlen,) for sequences, (S,) for tokens
    num_classes: int
    train_size: int
    test_size: int
    vocab_size: int = 0


def _shapes(synthetic: bool) -> dict[str, Shape]:
    """Shapes from the dataset manifest (adapters/datasets.json), shared with the app."""
    return {
        name: Shape(
            entry["kind"],
            tuple(entry["input_shape"]),
            entry["num_classes"],
            entry["train_size"],
            entry["test_size"],
            entry.get("vocab_size", 0),
        )
        for name, entry in real_files.MANIFEST.items()
        if entry["synthetic"] == synthetic
    }


SYNTHETIC_SHAPES = _shapes(synthetic=True)
REAL_SHAPES = _shapes(synthetic=False)  # the real datasets as published (adapters/datasets.py)


@dataclass
class Dataset:
    name: str
    shape: Shape
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    notes: dict = field(default_factory=dict)
    vocabulary: list[str] | None = None  # IMDb: the word of each id, when the word index is there

    @property
    def kind(self) -> str:
        return self.shape.kind


def _stream(*key: int) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence(list(key)))


def _uniform(bits: np.random.PCG64, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) float64 from the raw 64-bit stream: 53 high bits, exactly as numpy does."""
    count = int(np.prod(shape)) if shape else 1
    raw = bits.random_raw(count)
    return ((raw >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)).reshape(shape)


def _integers(bits: np.random.PCG64, high: int, shape: tuple[int, ...]) -> np.ndarray:
    # Modulo bias is below 1e-15 for the small ranges used here.
    count = int(np.prod(shape)) if shape else 1
    return (bits.random_raw(count) % np.uint64(high)).astype(np.int64).reshape(shape)


def _image_prototypes(shape: Shape, key: int) -> np.ndarray:
    """One smooth pattern per class: three soft discs at class-specific places and intensities."""
    h, w, c = shape.input_shape
    bits = _stream(DATA_SEED, key, 999_999)
    centres = _uniform(bits, (shape.num_classes, 3, 2)) * 0.6 + 0.2
    radii = _uniform(bits, (shape.num_classes, 3)) * 0.15 + 0.12
    colour = _uniform(bits, (shape.num_classes, 3, c)) * 0.7 + 0.3
    ys = (np.arange(h, dtype=np.float64) + 0.5) / h
    xs = (np.arange(w, dtype=np.float64) + 0.5) / w
    protos = np.zeros((shape.num_classes, h, w, c))
    for k in range(shape.num_classes):
        for b in range(3):
            d2 = (ys[:, None] - centres[k, b, 0]) ** 2 + (xs[None, :] - centres[k, b, 1]) ** 2
            disc = np.maximum(0.0, 1.0 - d2 / (radii[k, b] * radii[k, b]))
            protos[k] += disc[:, :, None] * colour[k, b][None, None, :]
    protos = np.minimum(protos, 1.0)
    # Every class pattern under every translation, so samples are gathered, not rolled one by one.
    span = range(-MAX_SHIFT, MAX_SHIFT + 1)
    return np.stack(
        [np.stack([np.roll(protos, (dy, dx), axis=(1, 2)) for dx in span], axis=1) for dy in span],
        axis=1,
    ).astype(np.float32)  # (classes, dy, dx, h, w, c)


def _image_chunk(shape: Shape, shifted: np.ndarray, split: int, chunk: int, n: int):
    bits = _stream(DATA_SEED, split, chunk)
    labels = _integers(bits, shape.num_classes, (n,))
    shifts = _integers(bits, 2 * MAX_SHIFT + 1, (n, 2))
    gain = (_uniform(bits, (n,)) * 0.7 + 0.3).astype(np.float32)
    # Triangular noise from two random bytes: integer work from the raw stream, 8 values per draw.
    count = n * int(np.prod(shape.input_shape))
    raw = bits.random_raw((2 * count + 7) // 8).view(np.uint8)
    noise = (raw[:count].astype(np.int16) + raw[count : 2 * count] - 255).reshape(
        (n,) + shape.input_shape
    )
    proto = shifted[labels, shifts[:, 0], shifts[:, 1]]
    pixel = proto * gain[:, None, None, None] + noise.astype(np.float32) * np.float32(NOISE / 255.0)
    pixel = np.clip(pixel, np.float32(0.0), np.float32(1.0)) * np.float32(255.0)
    return np.floor(pixel + np.float32(0.5)).astype(np.uint8), labels


def _sequence_chunk(shape: Shape, split: int, chunk: int, n: int):
    """IMDb-like: word ids ranked by frequency (0 pad, 1 start, 2 out-of-vocabulary, 3+ words),
    varying lengths pre-padded with 0, and a minority of class-indicative words."""
    (maxlen,) = shape.input_shape
    vocab = shape.vocab_size
    bits = _stream(DATA_SEED, split, chunk)
    labels = _integers(bits, 2, (n,))
    lengths = _integers(bits, maxlen - 40, (n,)) + 40
    u = _uniform(bits, (n, maxlen))
    # Frequency-ranked background words: u**3 puts most mass on low (frequent) ids.
    words = 3 + (u * u * u * (vocab - 3)).astype(np.int64)
    marked = _uniform(bits, (n, maxlen)) < 0.15
    cue = _integers(bits, 40, (n, maxlen)) + 20 + 40 * labels[:, None]  # ids 20-59 vs 60-99
    words = np.where(marked, cue, words)
    seqs = np.zeros((n, maxlen), dtype=np.int32)
    for i in range(n):
        length = int(lengths[i])
        seqs[i, maxlen - length] = 1
        seqs[i, maxlen - length + 1 :] = words[i, : length - 1]
    return seqs, labels


# -- synthetic-tokens: a random sparse Markov chain ----------------------------------------------
def successor_probabilities() -> tuple[float, ...]:
    """The probability of each token's k-th successor (the manifest's; dyadic, so the sampling
    thresholds below are exact in every numpy)."""
    return tuple(real_files.MANIFEST["synthetic-tokens"]["successor_probabilities"])


def entropy_rate() -> float:
    """The chain's entropy rate in nats per token: the lowest mean next-token loss any model can
    reach on synthetic-tokens. Every token has the same successor probabilities over distinct
    successors, so every row's entropy is -Σ p ln p and the rate is that, whatever the
    stationary distribution (1.75·ln 2 = 1.2130 nats for 1/2, 1/4, 1/8, 1/8)."""
    return float(-sum(p * np.log(p) for p in successor_probabilities()))


def token_chain(vocab: int) -> np.ndarray:
    """(vocab, k) int64: each token's k successors, distinct within a row, drawn once for the
    vocabulary size (the run's seed does not change the data)."""
    k = len(successor_probabilities())
    bits = _stream(DATA_SEED, 30, vocab)
    chosen = np.empty((vocab, k), dtype=np.int64)
    for j in range(k):
        # Draw from the vocab - j tokens not chosen yet: skip over each chosen one, smallest first.
        candidate = _integers(bits, vocab - j, (vocab,))
        for taken in np.sort(chosen[:, :j], axis=1).T:
            candidate += candidate >= taken
        chosen[:, j] = candidate
    return chosen


def _token_chunk(shape: Shape, table: np.ndarray, split: int, chunk: int, n: int):
    """n sequences of S + 1 tokens: a uniform first token, then each next token the current
    one's successor picked by one uniform draw against the cumulative probabilities."""
    (length,) = shape.input_shape
    bits = _stream(DATA_SEED, split, chunk)
    seqs = np.empty((n, length + 1), dtype=np.int32)
    current = _integers(bits, shape.vocab_size, (n,))
    seqs[:, 0] = current
    draws = _uniform(bits, (length, n))
    bounds = np.cumsum(successor_probabilities())[:-1]
    rows = np.arange(n)
    for position in range(length):
        column = (draws[position][:, None] >= bounds[None, :]).sum(axis=1)
        current = table[current, column]
        seqs[rows, position + 1] = current
    return seqs


def _synthetic_split(name: str, shape: Shape, split: int, n: int):
    shifted = _image_prototypes(shape, 1) if shape.kind == "image" else None
    table = token_chain(shape.vocab_size) if shape.kind == "tokens" else None
    xs, ys = [], []
    for chunk in range((n + CHUNK - 1) // CHUNK):
        size = min(CHUNK, n - chunk * CHUNK)
        if shape.kind == "image":
            x, y = _image_chunk(shape, shifted, split, chunk, size)
        elif shape.kind == "tokens":
            # Inputs are the first S tokens, targets the last S: views of one (n, S + 1) array.
            seqs = _token_chunk(shape, table, split, chunk, size)
            x, y = seqs[:, :-1], seqs[:, 1:]
        else:
            x, y = _sequence_chunk(shape, split, chunk, size)
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


def split_validation(x: np.ndarray, y: np.ndarray, fraction: float):
    """Keras' validation_split semantics: the last ``fraction`` of the data, before shuffling."""
    n_val = int(round(len(x) * fraction))
    cut = len(x) - n_val
    return x[:cut], y[:cut], x[cut:], y[cut:]


def finish(
    name: str,
    shape: Shape,
    x_train_raw: np.ndarray,
    y_train: np.ndarray,
    x_test_raw: np.ndarray,
    y_test: np.ndarray,
    validation_fraction: float,
    notes: dict | None = None,
) -> Dataset:
    """Common preprocessing: images to float32 in [0, 1] (x / 255), labels int64, validation split."""
    notes = dict(notes or {})
    notes["fingerprint"] = fingerprint(
        shape.kind, validation_fraction, x_train_raw, y_train, x_test_raw, y_test
    )
    if shape.kind == "image":
        # In place: the same bits as x / 255, without a second full-size float array.
        x_train = x_train_raw.astype(np.float32)
        x_train /= np.float32(255.0)
        x_test = x_test_raw.astype(np.float32)
        x_test /= np.float32(255.0)
    else:
        x_train, x_test = x_train_raw.astype(np.int32), x_test_raw.astype(np.int32)
    x_tr, y_tr, x_val, y_val = split_validation(
        x_train, y_train.astype(np.int64), validation_fraction
    )
    return Dataset(name, shape, x_tr, y_tr, x_val, y_val, x_test, y_test.astype(np.int64), notes)


def fingerprint(kind: str, validation_fraction: float, *arrays: np.ndarray) -> str:
    """sha256 (16 hex digits) of the raw arrays and the split: two runs with the same fingerprint
    trained and tested on the same bytes, whatever framework or numpy they used. The raw uint8 /
    word ids are hashed (4x less than the float32 they become, which x / 255 in float32 fixes
    exactly in every numpy)."""
    digest = hashlib.sha256(f"{kind} x/255 float32 val={validation_fraction}".encode())
    for array in arrays:
        contiguous = np.ascontiguousarray(array)
        digest.update(f"{contiguous.dtype.str}{contiguous.shape}".encode())
        digest.update(contiguous.data)
    return digest.hexdigest()[:16]


def synthetic(
    name: str,
    train_samples: int | None = None,
    test_samples: int | None = None,
    validation_fraction: float = VALIDATION_FRACTION,
    tokens: tuple[int, int] | None = None,
) -> Dataset:
    """A seeded, learnable dataset shaped like the real one. ``train_samples`` caps the training
    pool (the validation split is taken from its end); ``test_samples`` caps the test set.
    ``tokens``: (S, V), the context and vocabulary of the model a token dataset feeds (its
    manifest shape otherwise)."""
    shape = SYNTHETIC_SHAPES[name]
    if tokens is not None and shape.kind == "tokens":
        length, vocab = tokens
        shape = Shape("tokens", (length,), vocab, shape.train_size, shape.test_size, vocab)
    n_train = min(train_samples or shape.train_size, shape.train_size)
    n_test = min(test_samples or shape.test_size, shape.test_size)
    x_train, y_train = _synthetic_split(name, shape, 10 + _name_key(name), n_train)
    x_test, y_test = _synthetic_split(name, shape, 20 + _name_key(name), n_test)
    return finish(
        name, shape, x_train, y_train, x_test, y_test, validation_fraction, {"synthetic": True}
    )


def _name_key(name: str) -> int:
    return sorted(SYNTHETIC_SHAPES).index(name) * 100


def load(
    name: str,
    train_samples: int | None = None,
    test_samples: int | None = None,
    data_dir: str | None = None,
    validation_fraction: float = VALIDATION_FRACTION,
    tokens: tuple[int, int] | None = None,
) -> Dataset:
    """Load a dataset by catalog name. Real datasets are parsed from ``data_dir`` (or
    ``data_dir/name``); a missing or bad file raises ``datasets.DatasetError`` naming it.
    ``tokens``: (S, V) of the language model a token dataset is cut for."""
    if name in SYNTHETIC_SHAPES:
        return synthetic(name, train_samples, test_samples, validation_fraction, tokens)
    if name in REAL_SHAPES:
        return real(name, data_dir, train_samples, test_samples, validation_fraction, tokens)
    raise ValueError(f"unknown dataset {name!r}")


def real(
    name: str,
    data_dir: str | None,
    train_samples: int | None = None,
    test_samples: int | None = None,
    validation_fraction: float = VALIDATION_FRACTION,
    tokens: tuple[int, int] | None = None,
) -> Dataset:
    """A real dataset through the same preprocessing as the synthetic ones. Caps take the first
    N samples of the published order (Keras' order for IMDb; the text's order for a token
    dataset). ``tokens``: (S, V) of the language model a token dataset is cut for: sequences of
    its S, and a vocabulary V that must hold the dataset's tokens."""
    shape = REAL_SHAPES[name]
    if tokens is not None and shape.kind == "tokens":
        length, vocab = tokens
        if vocab < shape.vocab_size:
            raise real_files.DatasetError(
                f"dataset '{name}' has {shape.vocab_size} token ids; a vocabulary of {vocab} "
                f"cannot hold them (--vocab-size {shape.vocab_size})"
            )
        # as synthetic-tokens: the model predicts over its own V; the data's ids lie below it
        shape = Shape("tokens", (length,), vocab, 0, 0, vocab)
    raw = real_files.load_raw(
        name, data_dir, shape.input_shape[0] if shape.kind == "tokens" else None
    )
    if shape.kind == "image" and raw.x_train.shape[1:] != shape.input_shape:
        raise real_files.DatasetError(
            f"{raw.source}: {name} images are {raw.x_train.shape[1:]}, expected {shape.input_shape}"
        )
    n_train = len(raw.x_train) if train_samples is None else min(train_samples, len(raw.x_train))
    n_test = len(raw.x_test) if test_samples is None else min(test_samples, len(raw.x_test))
    # The shape records what was really loaded (a test file may hold fewer than the published).
    loaded = Shape(
        shape.kind, shape.input_shape, shape.num_classes, n_train, n_test, shape.vocab_size
    )
    notes = {"synthetic": False, "source": raw.source, "files": raw.files}
    if raw.class_names:
        notes["class_names"] = raw.class_names
    dataset = finish(
        name,
        loaded,
        raw.x_train[:n_train],
        raw.y_train[:n_train],
        raw.x_test[:n_test],
        raw.y_test[:n_test],
        validation_fraction,
        notes,
    )
    dataset.vocabulary = raw.vocabulary
    return dataset


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The shuffling order of one epoch: the same permutation in every framework and runtime."""
    keys = _uniform(_stream(seed, 7, epoch), (n,))
    return np.argsort(keys, kind="stable")


def batches(n: int, batch_size: int, seed: int, epoch: int, max_steps: int | None = None):
    """Index arrays of the full batches of one epoch (a partial last batch is dropped so every
    timed step does the same work)."""
    order = epoch_order(n, seed, epoch)
    steps = n // batch_size
    if max_steps is not None:
        steps = min(steps, max_steps)
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(steps)]
