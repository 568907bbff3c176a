import sys

from tui_bench.cli import main

sys.exit(main())
