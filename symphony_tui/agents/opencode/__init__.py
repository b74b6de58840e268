"""The OpenCode server backend (``agent.backend: opencode``; docs/protocols.md "OpenCode server").

Modules: ``client`` (REST), ``stream`` (SSE: readiness, watchdog, reconnect),
``normalize`` (message parts -> AgentEvent, once each; token usage), ``approvals``
(permissions and questions), ``server`` (managed local server), ``session`` (turns,
interrupt, reconcile), ``backend`` (factory).
"""

from symphony_tui.agents.opencode.backend import OpenCodeBackend
from symphony_tui.agents.opencode.session import OpenCodeSession

__all__ = ["OpenCodeBackend", "OpenCodeSession"]
