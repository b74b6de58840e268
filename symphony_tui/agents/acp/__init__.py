"""The ``acp`` backend: any agent that speaks the Agent Client Protocol on stdio."""

from symphony_tui.agents.acp.backend import AcpBackend

__all__ = ["AcpBackend"]
