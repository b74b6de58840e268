"""symphony_tui: the Symphony scheduler for coding agents, with a Textual operator console."""

__version__ = "0.1.0"

import logging as _logging

# A library's loggers stay silent until the program configures logging (the run writes a
# log file; ``doctor`` prints its own report): without this, Python's last-resort handler
# would print bare warning messages, without their fields, on stderr.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())
