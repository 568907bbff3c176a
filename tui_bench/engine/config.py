"""User settings from ``config.toml`` (path: ``TUI_BENCH_CONFIG`` or the user config directory).

```toml
[runtimes.torch]
python = "/opt/conda/envs/torch-cuda/bin/python"   # use an interpreter you already have

[keys]
cancel_run = "ctrl+x"                               # remap a TUI binding by its id
```
"""

from __future__ import annotations

import tomllib
from typing import Any

from tui_bench.engine.errors import ConfigError
from tui_bench.engine.paths import config_file


def load_config() -> dict[str, Any]:
    path = config_file()
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
