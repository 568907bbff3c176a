"""``jsonlines.loads`` reads journal lines with orjson where that gives what ``json.loads`` gives, and
with json everywhere else: the same value, of the same type, or the same refusal, for any line."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui_bench.engine.results import jsonlines

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: orjson makes integers beyond 64 bits floats
    | st.floats(allow_nan=True, allow_infinity=True)  # json writes NaN and Infinity
    | st.text()  # lone surrogates included: json writes them escaped, orjson refuses them
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0 here) and NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans())
def test_loads_reads_what_json_reads(value: object, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert same(jsonlines.loads(raw), json.loads(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id":"r1","big":123456789012345678901234567890}',  # orjson: a float
        b'{"neg":-9223372036854775809}',  # 19 digits below int64
        b'{"x":1e400}',
        b'{"x":NaN,"y":-Infinity}',
        b'{"x":"\\ud800"}',
        b'\xef\xbb\xbf{"x":1}',  # a byte-order mark
        b'{"a":1,"a":2}',  # the last of a repeated key wins, in the first one's place
    ],
)
def test_lines_orjson_reads_otherwise_or_refuses_are_read_by_json(raw: bytes) -> None:
    assert same(jsonlines.loads(raw), json.loads(raw))


# (Nesting deeper than the interpreter's recursion limit: json raises RecursionError, and so does
# jsonlines.loads, after orjson refuses it; the limit differs between test processes, so it is left out.)
@pytest.mark.parametrize(
    "raw",
    [b'{"x":1,}', b'{"x":"\xff"}', b'{"x":1}x', b""],
    ids=["trailing comma", "not UTF-8", "text after", "empty"],
)
def test_what_json_refuses_is_refused_the_same_way(raw: bytes) -> None:
    with pytest.raises(Exception) as by_json:
        json.loads(raw)
    with pytest.raises(Exception) as by_store:
        jsonlines.loads(raw)
    assert type(by_store.value) is type(by_json.value)


# -- checked_object: the check that a stored line is a JSON object, before it is copied as is ------
@settings(max_examples=300, deadline=None)
@given(VALUES, st.booleans(), st.sampled_from(["", " ", "\n", "\ufeff", "x", ","]))
def test_checked_object_accepts_what_json_reads_as_an_object(
    value: object, ascii_only: bool, around: str
) -> None:
    raw = around + json.dumps(value, ensure_ascii=ascii_only) + around.replace("\ufeff", "")
    raw = raw.encode("utf-8", "surrogatepass")
    try:
        expected = isinstance(json.loads(raw), dict)
    except (ValueError, UnicodeDecodeError):
        expected = False
    assert (jsonlines.checked_object(raw) is not None) is expected


@pytest.mark.parametrize(
    "raw",
    [
        b'{"x":NaN}',
        b'{"x":"\\ud800"}',
        b'\xef\xbb\xbf{"x":1}',
        '{"x":1}'.encode("utf-16"),
        b'{"x":123456789012345678901234567890}',
    ],
    ids=["NaN", "lone surrogate", "byte-order mark", "UTF-16", "beyond 64 bits"],
)
def test_checked_object_accepts_objects_orjson_refuses(raw: bytes) -> None:
    assert isinstance(json.loads(raw), dict)
    assert jsonlines.checked_object(raw) is not None


@pytest.mark.parametrize(
    "raw",
    [b'{"x":1,}', b'{"x":"\xff"}', b'{"x":1}x', b"", b"[1]", b'"text"', b"[" * 100_000],
    ids=["trailing comma", "not UTF-8", "text after", "empty", "a list", "a string", "deep"],
)
def test_checked_object_refuses_what_is_not_a_json_object(raw: bytes) -> None:
    assert jsonlines.checked_object(raw) is None
