"""The help text shared by `tui-bench` and `tui-bench run`."""

from __future__ import annotations

EXAMPLES = """\
examples:
  tui-bench run                                  the offline default: PyTorch, reference CNN,
                                                 synthetic MNIST-shaped data, all CPU threads
  tui-bench run --threads 1 --epochs 1 --steps-per-epoch 50
  tui-bench run --model lstm --dataset synthetic-imdb --batch-size 500 --lr 1e-2
  tui-bench run --preset my-run.toml --json      a TOML file of spec fields; machine output
  tui-bench run --repeats auto --max-repeats 10  repeat until the median is known to +-2 %
  tui-bench presets list                         shipped study replications and quick variants
  tui-bench run --preset shatnawi-2018-quick     a sweep: configurations x repeats, interleaved
  tui-bench run --preset shatnawi-2018-quick --resume   finish an interrupted sweep
  tui-bench run --preset gpt-quick --only FRAMEWORK,FRAMEWORK/API   only these of its rows
  tui-bench compare SWEEP_ID --markdown out.md   statistics, speed-ups, significance
  tui-bench history list
  tui-bench history export --csv runs.csv
  tui-bench sysinfo

Figures are honest: device-synchronised step times, warm-up and compile time reported apart
from steady-state, effective thread count, versions and hardware recorded with every run.
"""
