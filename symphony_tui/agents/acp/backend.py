"""The ``acp`` backend: a factory of :class:`AcpSession` (one agent process per session).

Environment of the child: the shared recipe (:mod:`symphony_tui.config.child_env`):
``os.environ`` overlaid by the constructor's ``env``, without the scheduler's secrets
(``unset`` and the workflow's ``tracker.secret_env_names``), overlaid by ``acp.env``.
Settings are read afresh for every new session (spec §6.2). A session whose host names a
worker host (``worker_host``) runs there over ssh (agents/remote_launch.py), with
``worker.hosts.<h>.commands.acp`` winning over ``acp.command`` on that host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from symphony_tui.agents.acp.session import AcpSession
from symphony_tui.agents.base import SessionHost
from symphony_tui.agents.remote_launch import RemoteLaunch
from symphony_tui.config.child_env import ChildEnv
from symphony_tui.config.settings import Settings
from symphony_tui.hosts.ssh import HostTargets

#: How long :meth:`AcpBackend.aclose` waits for its sessions' orderly close.
ACLOSE_S = 5.0


class AcpBackend:
    """:class:`~symphony_tui.agents.base.AgentBackend` for ACP agents on stdio.

    ``sent``: when given, every JSON-RPC message any session writes is appended to it
    (tests validate them against the protocol's schema)."""

    name = "acp"

    def __init__(
        self,
        settings: Callable[[], Settings],
        *,
        env: Mapping[str, str] | None = None,
        sent: list[dict[str, Any]] | None = None,
        unset: Iterable[str] = (),
    ) -> None:
        self._settings = settings
        self._env = dict(env or {})
        self._unset = frozenset(unset)
        self._sent = sent
        self._sessions: set[AcpSession] = set()
        self._targets = HostTargets(settings)

    def child_env(self, settings: Settings) -> dict[str, str]:
        """The environment a local agent is launched with; the scheduler's secrets never
        reach it."""
        recipe = ChildEnv(self._env, self._unset | set(settings.tracker.secret_env_names))
        return recipe.build(settings.acp.env)

    def remote_launch(self, settings: Settings, worker_host: str) -> RemoteLaunch:
        """The launch on ``worker_host``: ``acp.env`` then the host's ``env`` exported there,
        resolved here against the scrubbed environment."""
        recipe = ChildEnv(self._env, self._unset | set(settings.tracker.secret_env_names))
        env = recipe.overrides(settings.acp.env)
        env.update(recipe.overrides(settings.worker.env_for(worker_host)))
        return RemoteLaunch(self._targets(worker_host), env)

    async def start_session(self, host: SessionHost) -> AcpSession:
        """Launch the agent for ``host.workspace`` and open its ACP session. Raises
        ``AgentError`` (``launch_failed``, ``handshake_failed``, ``read_timeout``)."""
        settings = self._settings()
        cfg = settings.acp
        worker_host = host.worker_host
        remote = None
        if worker_host is not None:
            command = settings.worker.command_for(worker_host, "acp", cfg.command)
            cfg = cfg.model_copy(update={"command": command})
            remote = self.remote_launch(settings, worker_host)
        session = AcpSession(
            host,
            cfg,
            self.child_env(settings) if remote is None else {},
            turn_timeout_ms=settings.turn_timeout_ms,
            sent=self._sent,
            remote=remote,
            on_close=self._sessions.discard,
        )
        self._sessions.add(session)
        await session.open()  # closes itself (and leaves the set) on failure
        return session

    async def aclose(self) -> None:
        """Close every session this backend started and did not see closed, together,
        within :data:`ACLOSE_S`."""
        sessions = [asyncio.ensure_future(s.close()) for s in list(self._sessions)]
        if sessions:
            await asyncio.wait(sessions, timeout=ACLOSE_S)
