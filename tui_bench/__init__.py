"""tui-bench: compare deep-learning frameworks, APIs and settings on your own machine."""

__version__ = "0.1.0"
