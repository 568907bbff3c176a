"""PyTorch for tui-bench: ``manifest.toml`` (what the engine knows of it, read by path) and
``adapter.py`` (``make_backend``, run by the worker). Importing this package imports no
framework."""
