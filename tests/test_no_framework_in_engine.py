"""No engine, CLI or TUI file quotes a framework's name. A framework's facts (its APIs and what
they offer, its runtimes, its launcher, its card's languages, its probes) live in its package's
manifest (``adapters/<framework>/manifest.toml``, read through ``engine/frameworks.py``), so
adding or changing a framework touches no file here (issue 47). Docstrings and comments may name
one as an example; a string the program uses may not.

The exceptions, and why:
- ``engine/results/published.py``: figures published in papers, each cited with the framework
  the paper measured. A paper's figure belongs to the paper, not to a framework's package.
- ``engine/spec.py``'s default framework: a bare ``tui-bench run`` runs one framework, and the
  default spec has to name it.
"""

from __future__ import annotations

import ast
import re

from conftest import REPO

NAMES = ("torch", "tensorflow", "keras", "mxnet", "theano", "jax", "flax")
_WORD = re.compile(r"\b(" + "|".join(NAMES) + r")\b", re.IGNORECASE)
ROOTS = ("tui_bench/engine", "tui_bench/cli", "tui_bench/tui")
EXEMPT_FILES = {"tui_bench/engine/results/published.py": "papers' figures, cited"}
# (file, class, field): the one default that names a framework.
EXEMPT_DEFAULTS = {("tui_bench/engine/spec.py", "RunSpec", "framework"): "the default spec"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _exempt_defaults(tree: ast.AST, rel: str) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and (rel, node.name, statement.target.id) in EXEMPT_DEFAULTS
                and statement.value is not None
            ):
                found |= {id(n) for n in ast.walk(statement.value)}
    return found


def quoted_names(source: str, rel: str = "<source>") -> list[tuple[int, str]]:
    """(line, string) for each string literal (f-string parts included) that names a framework,
    docstrings and the exempt defaults left out."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _exempt_defaults(tree, rel)
    hits = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and _WORD.search(node.value)
        ):
            hits.append((node.lineno, node.value))
    return sorted(hits)


def test_the_scan_finds_a_quoted_name_and_skips_docstrings_and_comments() -> None:
    source = (
        '"""A module about torch."""\n'
        "# keras in a comment\n"
        "def f():\n"
        '    """jax in a docstring"""\n'
        '    return {"mxnet": f"run {1} on Theano"}\n'
    )
    assert [line for line, _ in quoted_names(source)] == [5, 5]


def test_no_engine_cli_or_tui_file_quotes_a_framework_name() -> None:
    offenders = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel in EXEMPT_FILES:
                continue
            offenders += [
                f"{rel}:{line}: {text!r}"
                for line, text in quoted_names(path.read_text(encoding="utf-8"), rel)
            ]
    assert offenders == [], "\n".join(offenders)


def test_the_exemptions_are_still_needed() -> None:
    """An exemption that no longer names a framework is stale: drop it."""
    for rel in EXEMPT_FILES:
        assert _WORD.search((REPO / rel).read_text(encoding="utf-8")), rel
    for rel, cls, name in EXEMPT_DEFAULTS:
        # read as any other file (no exemption applies to "<unexempted>"), it names one
        assert quoted_names((REPO / rel).read_text(encoding="utf-8"), "<unexempted>"), (cls, name)
