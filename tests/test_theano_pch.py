"""Theano's precompiled header (adapters/theano/pch.py): used by a cold compile in the real
runtime, the same shared library as without it, and a fallback to Theano's own compile when it
cannot be built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO, require_runtime

from tui_bench.engine.machine import runtimes

THEANO_BLOCK = (
    '#include <Python.h>\n#include <iostream>\n#include "theano_mod_helper.h"\n#include <math.h>\n'
    "#include <numpy/arrayobject.h>\n#include <numpy/arrayscalars.h>\n#include <vector>\n"
    "#include <algorithm>\n"
)


@pytest.fixture
def pch(adapters_on_path):
    from adapters.theano import pch as theano_pch

    theano_pch._known.clear()
    yield theano_pch
    theano_pch._known.clear()


def test_the_block_is_the_leading_includes_when_python_h_comes_first(pch) -> None:
    module = THEANO_BLOCK + "//////////////////////\n////  Support Code\n#include <cblas.h>\n"
    assert pch.include_block(module) == THEANO_BLOCK
    assert pch.include_block("#include <Python.h>") == "#include <Python.h>\n"
    assert pch.include_block("#include <iostream>\n#include <Python.h>\n") is None
    assert pch.include_block("// code\n" + THEANO_BLOCK) is None
    assert pch.include_block("") is None


def test_make_rule_prerequisites_keep_escaped_spaces(pch) -> None:
    rule = "Python.h.gch: /tmp/s/block.h /usr/include/stdio.h \\\n /opt/my\\ dir/a.h\n"
    assert pch._dependencies(rule) == ["/tmp/s/block.h", "/usr/include/stdio.h", "/opt/my dir/a.h"]


@pytest.mark.parametrize(
    "made_from",
    [
        b"",
        b"{not json",
        b"\xff\xfe\x00garbage",
        b"[1, 2]",
        b'{"/no/such/header.h": [1, 2]}',
        b'{"HERE": "not a stamp"}',
        b'{"HERE": null}',
    ],
)
def test_a_damaged_record_of_a_headers_sources_means_rebuild_never_a_traceback(
    pch, tmp_path: Path, made_from: bytes
) -> None:
    source = tmp_path / "a.h"
    source.write_text("#pragma once\n")
    (tmp_path / "Python.h.gch").write_bytes(b"header")
    (tmp_path / "made_from.json").write_bytes(made_from.replace(b"HERE", str(source).encode()))
    assert pch._fresh(tmp_path) is False
    # the record as the build writes it is fresh; a changed source makes it stale
    (tmp_path / "made_from.json").write_text(json.dumps({str(source): pch._stamp(str(source))}))
    assert pch._fresh(tmp_path) is True
    source.write_text("#pragma once\nint changed;\n")
    assert pch._fresh(tmp_path) is False


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_block_whose_second_reading_adds_code_gets_no_header(pch, tmp_path: Path) -> None:
    (tmp_path / "guarded.h").write_text("#ifndef GUARDED\n#define GUARDED\nint guarded;\n#endif\n")
    (tmp_path / "bare.h").write_text("int counted;\n")
    flags = [f"-I{tmp_path}"]
    guarded = '#include <Python.h>\n#include "guarded.h"\n'
    bare = '#include <Python.h>\n#include "bare.h"\n'
    (tmp_path / "Python.h").write_text("#pragma once\nint python;\n")
    assert pch._adds_nothing_again("g++", guarded, flags, str(tmp_path))
    assert not pch._adds_nothing_again("g++", bare, flags, str(tmp_path))


def _fake_theano(tmp_path: Path, cxx: str) -> tuple[SimpleNamespace, SimpleNamespace, list]:
    calls: list = []

    class GCCCompiler:
        @staticmethod
        def compile_str(*args):
            calls.append(args)
            return "module"

        @staticmethod
        def version_str():
            return f"{cxx} 12.2.0"

    cmodule = SimpleNamespace(GCC_compiler=GCCCompiler, std_include_dirs=lambda: [str(tmp_path)])
    config = SimpleNamespace(
        cxx=cxx,
        compiledir=str(tmp_path / "compiledir"),
        cmodule=SimpleNamespace(remove_gxx_opt=False),
    )
    return cmodule, config, calls


@pytest.mark.parametrize("cxx", ["false", "/no/such/g++"])
def test_a_header_that_cannot_be_built_leaves_theanos_compile_as_it_was(
    pch, tmp_path: Path, cxx: str
) -> None:
    cmodule, config, calls = _fake_theano(tmp_path, cxx)
    pch.install(cmodule, config)
    preargs = ["-O3", "-fPIC"]
    for name in ("m1", "m2", "m3"):  # the second asks for the header's build
        got = cmodule.GCC_compiler.compile_str(name, THEANO_BLOCK, "/loc", [], [], [], preargs)
        assert got == "module"
    assert calls == [
        (name, THEANO_BLOCK, "/loc", [], [], [], ["-O3", "-fPIC"], True, True)
        for name in ("m1", "m2", "m3")
    ]
    assert not list(Path(config.compiledir).glob("precompiled_headers/*/Python.h.gch"))


# -- the real runtime ------------------------------------------------------------------------------
# Compiles functions cold until a header is built, breaks the text fallback of every header
# built, compiles one more function, then compiles that module again without the header.
COLD_COMPILE = textwrap.dedent(
    """
    import json, subprocess
    from pathlib import Path

    import adapters.theano.common  # installs the precompiled header
    import theano
    import theano.tensor as T
    from theano.gof import cmodule

    x = T.fmatrix()
    headers = Path(theano.config.compiledir, "precompiled_headers")
    for expression in (T.tanh(x) * 2 + 1, T.sqrt(abs(x)) - 4, T.log1p(x * x) + 2):
        theano.function([x], expression)  # the second module of a kind builds its header
        built = sorted(headers.glob("*/Python.h.gch"))
        if built:
            break
    for gch in built:
        # g++ reads this only when it finds the .gch unusable for the compile at hand
        gch.with_name("Python.h").write_text('#error "the precompiled header was not used"\\n')

    commands = []
    run = cmodule.output_subprocess_Popen
    def recorded(command, **kwargs):
        commands.append(list(command))
        return run(command, **kwargs)
    cmodule.output_subprocess_Popen = recorded
    f = theano.function([x], T.exp(x) * 3 - x)
    value = f([[0.0, 1.0]]).tolist()

    command = next(c for c in commands if any("precompiled_headers" in a for a in c))
    header = next(a for a in command if "precompiled_headers" in a)
    plain = [a for a in command if a not in (header, "-Winvalid-pch")]
    library = plain[plain.index("-o") + 1]
    plain[plain.index("-o") + 1] = library + ".plain"
    subprocess.run(plain, check=True, capture_output=True)
    print(json.dumps({
        "built": [str(g.parent) for g in built],
        "used": header.removeprefix("-I"),
        "value": value,
        "same_bytes": Path(library).read_bytes() == Path(library + ".plain").read_bytes(),
    }))
    """
)


@pytest.mark.slow
@pytest.mark.xdist_group("theano-compiles")  # conftest's THEANO_GROUP: Theano runs share a core
def test_a_cold_theano_compile_uses_the_header_and_builds_the_same_library(tmp_path: Path) -> None:
    require_runtime("theano", "theano")
    python = runtimes.resolve("theano", "theano").python
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TUI_BENCH_WORKER_CACHE": str(tmp_path / "cold"),  # not the suite's warm cache
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
    }
    env.pop("KERAS_BACKEND", None)
    done = subprocess.run(
        [python, "-c", COLD_COMPILE], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["used"] in found["built"]  # built by the first compile, taken by the second
    assert found["same_bytes"]
    assert found["value"][0] == pytest.approx([3.0, 3 * 2.718281828 - 1], rel=1e-6)
