"""Backend construction by name (``agent.backend``). Imports are lazy so that a console
running codex never imports the OpenHands or OpenCode transports."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from symphony_tui.agents.base import AgentBackend
from symphony_tui.config.settings import Settings

BACKENDS = ("codex", "openhands", "opencode", "acp")


class UnknownBackendError(ValueError):
    pass


def create_backend(
    name: str,
    settings: Callable[[], Settings],
    *,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
) -> AgentBackend:
    """Build the backend ``name``. ``env`` is the agents' base environment; ``unset`` names
    are removed from whatever environment the agent gets (the scheduler's secrets).
    Raises :class:`UnknownBackendError` for other names."""
    if name == "codex":
        from symphony_tui.agents.codex import CodexBackend

        return CodexBackend(settings, env=env, unset=unset)
    if name == "openhands":
        from symphony_tui.agents.openhands import OpenHandsBackend

        return OpenHandsBackend(settings, env=env, unset=unset)
    if name == "opencode":
        from symphony_tui.agents.opencode import OpenCodeBackend

        return OpenCodeBackend(settings, env=env, unset=unset)
    if name == "acp":
        from symphony_tui.agents.acp import AcpBackend

        return AcpBackend(settings, env=env, unset=unset)
    raise UnknownBackendError(
        f"agent.backend {name!r} is not available (known: {', '.join(BACKENDS)})"
    )
