"""Shipped TOML presets. Installed as the data-only package ``tui_bench_presets`` so an installed
app finds them (``tui_bench.engine.runs.presets.shipped_dir``); never imported for code."""
