"""The headless core: no Textual import, no DL framework import. The CLI, the TUI and tests share it."""
