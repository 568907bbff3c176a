"""An example tui-bench framework: a numpy MLP (``manifest.toml`` for the engine, ``adapter.py``
for the worker). Importing this package imports nothing."""
