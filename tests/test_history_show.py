"""``tui-bench history show ID`` reads as a summary (issue 48 item 8: it printed raw JSON);
``--json`` keeps the record as stored for machines. A gpt states its rate in tokens/s first
(item 4), through the metric registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from histories import fill, record

from tui_bench.engine.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]


def _show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tui_bench", "history", "show", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env=None,
    )  # fmt: skip


def _gpt_run() -> dict:
    run = record(1, 50.0, version="2.13.0")
    spec = RunSpec(model="gpt", size="tiny", threads=2, seed=1)
    run.update(spec=spec.to_dict(), label=spec.label())
    run["metrics"].update(samples_per_s=160.0, tokens_per_s=160.0 * 128, mfu=0.41)
    run["worker"]["settings"] = {"compile": "no (eager)", "precision": "fp32"}
    return run


def test_history_show_is_a_readable_summary_in_sections():
    run = _gpt_run()
    fill([run])
    out = _show(run["id"][:-1])  # a unique prefix, as before
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert not text.lstrip().startswith("{")  # not the raw record
    heads = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert heads[:1] == [f"run {run['id']}"]
    assert heads[1:] == [
        "configuration",
        "figures",
        "settings (read back from the framework)",
        "host",
        "versions",
        f"everything recorded: tui-bench history show {run['id']} --json",
    ]
    assert "  batch size             8" in text  # the gpt's own default batch, recorded
    assert "  size                   tiny" in text
    assert "  step ms median         50.0 (steady state, device-synchronised)" in text
    assert "  MFU %                  41.0 (of the measured matmul peak)" in text
    assert "  framework              torch 2.13.0" in text
    assert "  cpu                    Test CPU" in text
    assert "  compile                no (eager)" in text


def test_a_gpt_states_tokens_per_second_first_and_other_models_samples():
    gpt, cnn = _gpt_run(), record(2, 20.0)
    fill([gpt, cnn])
    figures = _show(gpt["id"]).stdout.split("\nfigures\n")[1].splitlines()
    assert (
        figures[0]
        == "  tokens/s               20,480 (steady state; samples/s × the gpt's context S)"
    )
    plain = _show(cnn["id"]).stdout.split("\nfigures\n")[1].splitlines()
    assert plain[0].startswith("  samples/s              6,400 (steady state)")
    assert "tokens/s" not in _show(cnn["id"]).stdout


def test_history_show_json_keeps_the_record_as_stored():
    run = _gpt_run()
    fill([run])
    out = _show(run["id"], "--json")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["id"] == run["id"] and shown["metrics"]["tokens_per_s"] == 20480.0
    assert shown["spec"] == run["spec"]


def test_history_show_of_an_unknown_run_is_one_line_and_exit_2():
    out = _show("no-such-run")
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
