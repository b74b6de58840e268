"""``symphony-tui`` whose console fails on ``?`` (an unhandled error in the UI), for the
test that its scheduler and agents run on: ``python -m tests.console.failing_console ARGS``."""

import sys

from symphony_tui.cli import main
from symphony_tui.console.app import SymphonyApp


def fail(self) -> None:
    raise RuntimeError("a fault in the console")


if __name__ == "__main__":
    SymphonyApp.action_help = fail  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
