"""Codex app-server backend (JSON-RPC lines on stdio; docs/protocols.md "Codex app-server")."""

from symphony_tui.agents.codex.backend import CodexBackend
from symphony_tui.agents.codex.session import CodexSession

__all__ = ["CodexBackend", "CodexSession"]
