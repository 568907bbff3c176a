"""A precompiled header for Theano's C modules: the same programs, compiled in less time.

Every module Theano generates starts with a block of ``#include`` lines (``<Python.h>``,
``<iostream>``, ``"theano_mod_helper.h"``, then its ops' headers: numpy's, ``<vector>``, ...), and
g++ spends about half of a module's compile parsing them. ``install`` wraps
``GCC_compiler.compile_str`` so that a module whose block starts with ``#include <Python.h>`` is
compiled with one more ``-I`` in front of Theano's own: a directory holding

- ``Python.h``: ``#include_next <Python.h>``, i.e. exactly what the module would include anyway;
- ``Python.h.gch``: that module's whole include block, precompiled with that module's own
  compiler, flags and include directories (built the second time the pair is seen, so a pair
  that one module uses costs nothing; kept per Theano compile directory).

g++ takes the ``.gch`` in place of the text header only when it is valid for the compile at hand
(same compiler, same code-generation and debug flags, macros that agree); otherwise it reads the
text, which includes the real ``Python.h``. Either way the translation unit is the one Theano
wrote: with the ``.gch`` the block's headers are read first, in the module's order, and the rest
of the module's own block then adds nothing (checked when the ``.gch`` is built: it must
preprocess to no tokens after the block; headers without include guards would fail this). The
shared libraries come out byte for byte the same (compared on this project's modules).

The ``.gch`` is rebuilt when a header it was made from changes (g++ itself does not check), and
anything that goes wrong here falls back to Theano's own compile: a cost in time, never an error.
Theano compiles under its compile-directory lock, so one process builds a header at a time; files
are written under temporary names and renamed into place.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

WRAPPER = "#include_next <Python.h>\n"
FIRST_INCLUDE = "#include <Python.h>"
# A token no header defines: everything the preprocessor prints after it comes from the
# block's second inclusion.
_SPLIT = "tui_bench_pch_second_inclusion"

# Per process: header directory by key (None: this pair does not use one).
_known: dict[str, Path | None] = {}


def include_block(src_code: str) -> str | None:
    """The leading ``#include`` lines of a module, when the first is ``<Python.h>``."""
    lines = []
    for line in src_code.splitlines(keepends=True):
        if not line.startswith("#include"):
            break
        lines.append(line if line.endswith("\n") else line + "\n")
    if not lines or lines[0].strip() != FIRST_INCLUDE:
        return None
    return "".join(lines)


def compile_flags(
    cmodule: Any, config: Any, preargs: list[str], include_dirs: list[str], hide_symbols: bool
) -> list[str]:
    """The flags ``GCC_compiler.compile_str`` gives g++ for a module, less the linker's."""
    flags = ["-g"]
    flags += (
        [p for p in preargs if not p.startswith("-O")]
        if config.cmodule.remove_gxx_opt
        else list(preargs)
    )
    # The linker's flags (a BLAS op's rpath) would make g++ link the header.
    flags = [p for p in flags if not p.startswith(("-Wl,", "-L", "-l"))]
    flags += [f"-I{d}" for d in [*(d for d in include_dirs if d), *cmodule.std_include_dirs()]]
    if hide_symbols and sys.platform != "win32":
        flags.append("-fvisibility=hidden")
    return flags


def header_dir(cmodule: Any, config: Any, block: str, flags: list[str]) -> Path | None:
    """The directory whose ``Python.h.gch`` holds ``block`` compiled with ``flags``: built the
    second time the pair is asked for (a header costs more than the one compile it speeds up) or
    when stale; None until then, or when it cannot be built."""
    cxx = config.cxx
    ident = json.dumps([cmodule.GCC_compiler.version_str(), cxx, flags, block])
    key = hashlib.sha256(ident.encode()).hexdigest()[:24]
    if key in _known:
        return _known[key]
    directory = Path(config.compiledir) / "precompiled_headers" / key
    try:
        if _fresh(directory):
            usable = True
        elif not (directory / "asked").exists():
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "asked").touch()
            return None
        else:
            usable = _build(directory, cxx, block, flags)
    except (OSError, subprocess.SubprocessError, UnicodeError):
        usable = False
    _known[key] = directory if usable else None
    return _known[key]


def _fresh(directory: Path) -> bool:
    """Whether the directory's header exists and every file it was made from is unchanged."""
    try:
        made_from = json.loads((directory / "made_from.json").read_text())
        if not (directory / "Python.h.gch").is_file():
            return False
        return all(_stamp(path) == stamp for path, stamp in made_from.items())
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def _stamp(path: str) -> list[int]:
    info = os.stat(path)
    return [info.st_mtime_ns, info.st_size]


def _build(directory: Path, cxx: str, block: str, flags: list[str]) -> bool:
    if (directory / "failed").exists():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    # The block is compiled from an empty scratch directory, so its quoted includes find what the
    # module's find (Theano's module directories hold no headers).
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        if not _adds_nothing_again(cxx, block, flags, scratch):
            (directory / "failed").write_text("the module's own copy of the block adds tokens\n")
            return False
        source = Path(scratch) / "block.h"
        source.write_text(block)
        gch = Path(scratch) / "Python.h.gch"
        deps = Path(scratch) / "deps.d"
        done = subprocess.run(
            [cxx, *flags, "-x", "c++-header", str(source), "-o", str(gch), "-MD", "-MF", str(deps)],
            capture_output=True,
            text=True,
            cwd=scratch,
        )
        if done.returncode != 0:
            (directory / "failed").write_text(done.stderr[-4000:])
            return False
        made_from = {
            path: _stamp(path) for path in _dependencies(deps.read_text()) if path != str(source)
        }
        _replace(directory / "Python.h", WRAPPER)
        _replace(directory / "made_from.json", json.dumps(made_from))
        os.replace(gch, directory / "Python.h.gch")
    return True


def _adds_nothing_again(cxx: str, block: str, flags: list[str], cwd: str) -> bool:
    """Whether the lines a module has after its ``#include <Python.h>`` (the rest of its block)
    preprocess to nothing once the whole block has been read: then the module compiled with the
    ``.gch`` in place of that first line is the module as written."""
    rest = block.partition("\n")[2]
    done = subprocess.run(
        [cxx, *flags, "-E", "-P", "-x", "c++", "-"],
        input=f"{block}{_SPLIT}\n{rest}",
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    if done.returncode != 0:
        return False
    head, found, tail = done.stdout.partition(_SPLIT)
    return bool(found) and not tail.strip()


def _dependencies(make_rule: str) -> list[str]:
    """The prerequisites of a ``-MD`` make rule (``target: a b \\`` lines; spaces escaped)."""
    body = make_rule.partition(": ")[2].replace("\\\n", " ")
    paths, current, escaped = [], "", False
    for char in body:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            escaped = True
        elif char.isspace():
            if current:
                paths.append(current)
            current = ""
        else:
            current += char
    if current:
        paths.append(current)
    return paths


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    os.replace(partial, path)


def install(cmodule: Any, config: Any) -> None:
    """Route Theano's g++ compiles through ``header_dir`` (``theano.gof.cmodule``, ``theano.config``)."""
    original: Callable[..., Any] = cmodule.GCC_compiler.compile_str

    def compile_str(
        module_name: str,
        src_code: str,
        location: str | None = None,
        include_dirs: list[str] | None = None,
        lib_dirs: list[str] | None = None,
        libs: list[str] | None = None,
        preargs: list[str] | None = None,
        py_module: bool = True,
        hide_symbols: bool = True,
    ) -> Any:
        preargs = list(preargs or [])
        block = include_block(src_code)
        found = None
        if block:
            try:
                flags = compile_flags(cmodule, config, preargs, include_dirs or [], hide_symbols)
                found = header_dir(cmodule, config, block, flags)
            except Exception:  # noqa: BLE001 - a header is only a saving; Theano compiles without
                found = None
        if found:
            preargs = [f"-I{found}", "-Winvalid-pch", *preargs]
        return original(
            module_name,
            src_code,
            location,
            include_dirs,
            lib_dirs,
            libs,
            preargs,
            py_module,
            hide_symbols,
        )

    cmodule.GCC_compiler.compile_str = staticmethod(compile_str)
