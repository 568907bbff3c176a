from __future__ import annotations

import json

import pytest

from tui_bench.engine import protocol


def test_encode_decode_round_trip_and_non_finite_losses():
    line = protocol.encode(
        "steps", 1.5, epoch=1, first_step=0, losses=[0.5, float("nan"), float("inf")]
    )
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    event = protocol.decode(line)
    assert event["type"] == "steps" and event["v"] == protocol.SCHEMA_VERSION
    assert event["losses"] == [0.5, None, None]


def test_encode_refuses_unknown_types():
    with pytest.raises(ValueError):
        protocol.encode("progress", 0.0)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"", "empty line"),
        (b"I0000 tensorflow/core chatter", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"v": 99, "type": "steps"}', "schema version 99"),
        (b'{"v": 1, "type": "pwned"}', "unknown event type"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"v": 1, "type": "steps", "losses": [1, 2', "not JSON"),
    ],
)
def test_decode_rejects_with_a_reason(line, reason):
    with pytest.raises(protocol.DecodeError) as info:
        protocol.decode(line)
    assert reason in str(info.value)


def test_line_splitter_reassembles_lines_split_anywhere():
    events = [protocol.encode("epoch_started", i, epoch=i, epochs=3, steps=10) for i in range(3)]
    stream = b"".join(events)
    for cut in range(1, len(stream)):
        splitter = protocol.LineSplitter()
        lines = splitter.feed(stream[:cut]) + splitter.feed(stream[cut:])
        assert splitter.flush() == b""
        assert [json.loads(x)["epoch"] for x in lines] == [0, 1, 2]


def test_line_splitter_keeps_a_partial_tail_for_flush():
    splitter = protocol.LineSplitter()
    assert splitter.feed(b'{"v":1,"type":"heartbeat","t":0}\n{"v":1,"ty') == [
        b'{"v":1,"type":"heartbeat","t":0}'
    ]
    assert splitter.flush() == b'{"v":1,"ty'


def test_line_splitter_drops_runaway_lines():
    splitter = protocol.LineSplitter(max_line=100)
    assert splitter.feed(b"x" * 150) == [b"x" * 150]
    assert splitter.flush() == b""
