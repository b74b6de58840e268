"""``python -m symphony_tui``: the same command line as ``symphony-tui`` (README)."""

import sys

from symphony_tui.cli import main

sys.exit(main())
