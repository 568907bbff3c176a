"""Key labels from the bindings, with the user's ``[keys]`` remapping applied.

Every place that names a key (the mode bar, the help text, the command palette, button labels)
asks here, so a key remapped in config.toml shows the same everywhere. The app owns the keymap
(it applies it with ``set_keymap``) and the list of bindings; screens reach both through
``key_labels(self.app)``, typed by the ``HasKeyLabels`` protocol rather than the app module."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.keys import format_key

_FUNCTION_KEY = re.compile(r"f\d+")
_SPELLED = {"enter", "space", "tab"}  # clearer spelled out than as a symbol


def key_text(key: str, compact: bool = False) -> str:
    """'f2' -> 'F2', 'ctrl+r' -> 'ctrl+r' ('^r' when ``compact``), 'question_mark' -> '?'."""
    *modifiers, name = key.strip().split("+")
    if _FUNCTION_KEY.fullmatch(name):
        shown = name.upper()
    elif name in _SPELLED:
        shown = name
    else:
        shown = format_key(name)
    if compact and "ctrl" in modifiers:
        modifiers.remove("ctrl")
        shown = "^" + shown
    return "+".join([*modifiers, shown])


class KeyLabels:
    """Binding id -> its keys as the user has them. ``owners`` lists the classes whose BINDINGS
    count (called when first needed, so screens imported lazily are not imported early)."""

    def __init__(self, keymap: Mapping[str, str], owners: Callable[[], Iterable[type]]) -> None:
        self.keymap = dict(keymap)
        self._owners = owners
        self._bindings: dict[str, Binding] | None = None

    @property
    def bindings(self) -> dict[str, Binding]:
        if self._bindings is None:
            found: dict[str, Binding] = {}
            for owner in self._owners():
                declared: Iterable[BindingType] = getattr(owner, "BINDINGS", ())
                for binding in Binding.make_bindings(declared):
                    if binding.id:
                        found.setdefault(binding.id, binding)
            self._bindings = found
        return self._bindings

    def keys(self, binding_id: str) -> list[str]:
        """The binding's keys, first the one to show."""
        keys = self.keymap.get(binding_id) or self.bindings[binding_id].key
        return [k.strip() for k in keys.split(",") if k.strip()]

    def label(self, binding_id: str, compact: bool = False, every: bool = False) -> str:
        """The key to name in text: the first one, or all of them joined with ' / '."""
        keys = self.keys(binding_id)
        return " / ".join(key_text(k, compact) for k in (keys if every else keys[:1]))

    def binding(self, binding_id: str) -> Binding:
        return self.bindings[binding_id]


@runtime_checkable
class HasKeyLabels(Protocol):
    key_labels: KeyLabels


def key_labels(node: DOMNode) -> KeyLabels:
    """The app's key labels; the defaults where the app keeps none (a screen tested alone)."""
    app = node.app
    if isinstance(app, HasKeyLabels):
        return app.key_labels
    return KeyLabels({}, lambda: [type(app), type(node)])
