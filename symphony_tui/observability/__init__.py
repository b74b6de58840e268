"""Logging and secret redaction (spec §13). No Textual, no network."""

from symphony_tui.observability.logs import configure_logging, log_kv
from symphony_tui.observability.redact import Redactor, redact, register_secret

__all__ = ["Redactor", "configure_logging", "log_kv", "redact", "register_secret"]
