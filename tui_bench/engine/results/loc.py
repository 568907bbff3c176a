"""Lines of code per framework × API × model: the "ease of coding" metric of the studies.

An adapter marks the code a user of that API would write with one marker grammar::

    # tui-bench:begin KIND [SCOPE ...]
    ...
    # tui-bench:end KIND

KIND is ``model`` or ``step``. Each SCOPE word is an API of the adapter's framework (``keras``,
``gluon``...) or a model of the catalog (``cnn``, ``mlp``, ``vgg16``, ``lstm``): API words
restrict the block to those APIs, model words to those models, and a block with both applies
where both hold. A block with no API word applies to every API, one with no model word to every
model.

So that a count is comparable with a study's (Nayak & Jain count the lines of *their* reference
CNN), each model's own lines sit in a block scoped to that model: the layers of ``cnn`` are
never counted for ``mlp``. What an API needs whatever the model (the signature of the function
that builds the model, the line that wraps the layers into a model, the optimizer, the loss,
the training step) is marked without a model and counted for every model, since a user of that
API writes it for any network. Dispatch between models (``if model == "cnn":``) and the error
for an unknown model sit outside any block: a user writing one network writes neither.

Code a user of the API writes may sit in another module that the adapter runs: one beside it in
its framework's package (Theano's two APIs), or one several frameworks share (the Keras builders
Keras 3 and tf.keras share, ``adapters/keras_models.py``). An adapter names each such module, by
its path relative to the adapter's own file, on a line of its own::

    # tui-bench:uses ../keras_models.py

and that module's marked blocks count for the adapter's APIs as if they were written in it, with
the same grammar (its scope words checked against the adapter's APIs). So moving code into a
shared module never changes what an API is credited with; a shared module names no other.

Counted: non-blank lines that are not only a comment. The source is read by path, never
imported (the app never imports a framework). Markers that do not nest, end a block they did
not begin, name an unknown kind, or scope to a word that is neither an API of the framework
nor a model are a ``MarkerError``: one line naming the file and line.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from tui_bench.engine import catalog

KINDS = ("model", "step")
_MARKER = re.compile(r"^#\s*tui-bench:(begin|end)\s+(\w+)((?:\s+[\w.-]+)*)\s*$")
_USES = re.compile(r"^#\s*tui-bench:uses\s+(\S+)\s*$")
# A module beside the adapter, or up and across the adapters tree: ``../keras_models.py``.
_SIBLING = re.compile(r"^(?:(?:\.\.|\w+)/)*\w+\.py$")


class MarkerError(ValueError):
    """Unbalanced or unknown markers in an adapter: one line naming the file and line."""


def _scope(
    words: tuple[str, ...],
    apis: Collection[str] | None,
    models: Collection[str],
    at: str,
) -> tuple[frozenset[str], frozenset[str]]:
    """(APIs, models) a begin marker's words restrict its block to; empty sets: no limit."""
    scoped_apis, scoped_models = set(), set()
    for word in words:
        is_model = word in models
        is_api = word in apis if apis is not None else not is_model
        if is_model and is_api:
            raise MarkerError(f"{at}: {word!r} is both an API and a model; cannot scope by it")
        if is_model:
            scoped_models.add(word)
        elif is_api:
            scoped_apis.add(word)
        else:
            raise MarkerError(
                f"{at}: {word!r} is neither an API ({', '.join(sorted(apis or ()))}) nor a "
                f"model ({', '.join(sorted(models))})"
            )
    return frozenset(scoped_apis), frozenset(scoped_models)


def count_lines(
    source: str,
    api: str,
    model: str | None = None,
    where: str = "<adapter>",
    apis: Collection[str] | None = None,
    models: Collection[str] | None = None,
) -> dict[str, int]:
    """{kind: lines} for one API (and one model; None: every model's blocks) of an adapter's
    source. ``apis`` are the framework's APIs, for checking the markers' words (None: any word
    that is not a model is taken for an API); ``models`` default to the catalog's."""
    known_models = catalog.MODELS if models is None else models
    counts = dict.fromkeys(KINDS, 0)
    open_blocks: list[tuple[str, frozenset[str], frozenset[str], int]] = []
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        marker = _MARKER.match(stripped)
        if marker:
            action, kind, words = marker.group(1), marker.group(2), tuple(marker.group(3).split())
            if kind not in KINDS:
                raise MarkerError(f"{where}:{number}: unknown marker kind {kind!r}")
            if action == "begin":
                if open_blocks:
                    raise MarkerError(f"{where}:{number}: nested tui-bench:begin")
                scoped_apis, scoped_models = _scope(words, apis, known_models, f"{where}:{number}")
                open_blocks.append((kind, scoped_apis, scoped_models, number))
            else:
                if not open_blocks or open_blocks[-1][0] != kind:
                    raise MarkerError(f"{where}:{number}: tui-bench:end {kind} without its begin")
                if words:
                    raise MarkerError(
                        f"{where}:{number}: tui-bench:end takes only the kind, not {words[0]!r}"
                    )
                open_blocks.pop()
            continue
        if not open_blocks or not stripped or stripped.startswith("#"):
            continue
        kind, scoped_apis, scoped_models, _ = open_blocks[-1]
        if scoped_apis and api not in scoped_apis:
            continue
        if scoped_models and model is not None and model not in scoped_models:
            continue
        counts[kind] += 1
    if open_blocks:
        raise MarkerError(f"{where}:{open_blocks[-1][3]}: tui-bench:begin never ended")
    return counts


def adapter_path(framework_name: str) -> Path:
    """The framework's adapter module, as its manifest names it."""
    path = catalog.framework(framework_name).adapter_file
    if path is None:
        raise FileNotFoundError(f"{framework_name} has no adapter (its manifest says unavailable)")
    return path


def uses(source: str, where: str = "<adapter>") -> list[str]:
    """The modules an adapter's ``tui-bench:uses`` lines name (paths relative to it), in order."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        match = _USES.match(line.strip())
        if not match:
            continue
        name = match.group(1)
        if not _SIBLING.match(name):
            raise MarkerError(
                f"{where}:{number}: tui-bench:uses names a .py path relative to the adapter, "
                f"not {name!r}"
            )
        found.append(name)
    return found


def counted_sources(framework_name: str) -> list[Path]:
    """The files whose marked lines count for a framework's APIs: its adapter, then each shared
    module the adapter uses."""
    path = adapter_path(framework_name)
    shared = uses(path.read_text(encoding="utf-8"), where=str(path))
    return [path, *((path.parent / name).resolve() for name in shared)]


def lines_of_code(framework_name: str, api: str, model: str | None = None) -> dict[str, int]:
    """``{"loc_model": n, "loc_step": n}`` for a framework × API × model, from its adapter's
    source: the model's own lines and what the API needs for any model (None: every model's
    lines, the whole adapter's code for that API)."""
    adapter, *shared = counted_sources(framework_name)
    totals = dict.fromkeys(KINDS, 0)
    for path in (adapter, *shared):
        source = path.read_text(encoding="utf-8")
        if path in shared and uses(source, where=str(path)):
            raise MarkerError(f"{path}: a shared module names no other (tui-bench:uses)")
        counts = count_lines(
            source, api, model, where=str(path), apis=catalog.framework(framework_name).apis
        )
        for kind, n in counts.items():
            totals[kind] += n
    return {f"loc_{kind}": n for kind, n in totals.items()}
