"""The OpenHands agent-server backend (``agent.backend: openhands``; docs/protocols.md).

Modules: ``client`` (REST), ``stream`` (event socket: readiness, reconnect, reconcile),
``reconcile`` (dedupe and ordering), ``translate`` (wire events -> AgentEvent),
``server`` (managed local server), ``session`` (turns, approvals), ``failure`` (why a run
failed), ``client_tools`` (the scheduler's tools on a conversation), ``backend`` (factory).
"""

from symphony_tui.agents.openhands.backend import OpenHandsBackend
from symphony_tui.agents.openhands.session import OpenHandsSession

__all__ = ["OpenHandsBackend", "OpenHandsSession"]
